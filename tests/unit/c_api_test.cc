// SPDX-License-Identifier: Apache-2.0
// The C interface: the reader's basics through headroom_orca.h, struct_size
// for forward compatibility, and the error codes.
#include "headroom/orca/headroom_orca.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "headroom/orca/report.h"
#include "headroom/orca/report_reader.h"
#include "headroom/orca/report_writer.h"
#include "temp_dir.h"

namespace headroom::orca {
namespace {

using headroom::testing::TempDir;

Report make_report(uint64_t seq, int64_t ts = unix_now_ms(), bool stopped = false) {
  Report r;
  r.set_cpu_utilization(1.5);
  r.set_mem_utilization(0.25);
  r.set_application_utilization(1.5);
  r.set_rps_fractional(12.5);
  r.set_eps(0.5);
  (*r.mutable_utilization())["cpu"] = 1.0;
  (*r.mutable_utilization())["memory"] = 0.25;
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(kTimestampMsKey)] = static_cast<double>(ts);
  nm[std::string(kSeqKey)] = static_cast<double>(seq);
  nm[std::string(kIntervalMsKey)] = 100;
  nm["headroom.cpu.capacity"] = 4;
  if (stopped) nm[std::string(kStoppedKey)] = 1;
  return r;
}

struct ReaderDeleter {
  void operator()(headroom_reader* r) const { headroom_reader_close(r); }
};
using ReaderPtr = std::unique_ptr<headroom_reader, ReaderDeleter>;

class CApi : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directory(dir());
    auto w = ReportFileWriter::open(dir());
    ASSERT_TRUE(w) << w.error().message;
    writer_.emplace(std::move(*w));
  }
  std::string dir() const { return tmp_ / "orca"; }
  ReaderPtr open(double stale_intervals = 0) {
    char err[256];
    ReaderPtr r(headroom_reader_open(dir().c_str(), stale_intervals, err, sizeof err));
    EXPECT_TRUE(r) << err;
    return r;
  }
  void publish(const std::string& scope, const Report& r) { ASSERT_TRUE(writer_->write(scope + ".orca", r)); }

  TempDir tmp_;
  std::optional<ReportFileWriter> writer_;
};

headroom_report blank() {
  headroom_report rep;
  std::memset(&rep, 0xAB, sizeof rep);
  rep.struct_size = sizeof rep;
  return rep;
}

TEST_F(CApi, VersionIsSet) {
  ASSERT_NE(headroom_orca_version(), nullptr);
  EXPECT_GT(std::strlen(headroom_orca_version()), 0u);
}

TEST_F(CApi, OpenErrors) {
  char err[128] = "x";
  EXPECT_EQ(headroom_reader_open(nullptr, 3, err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("NULL"), std::string::npos) << err;
  // A file where the directory should be is waited out, not an error; an
  // empty path is.
  EXPECT_EQ(headroom_reader_open("", 3, err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("empty path"), std::string::npos) << err;
  EXPECT_EQ(headroom_reader_open("", 3, nullptr, 0), nullptr) << "no buffer is fine";
  char tiny[4];
  EXPECT_EQ(headroom_reader_open("", 3, tiny, sizeof tiny), nullptr);
  EXPECT_EQ(std::strlen(tiny), 3u) << "truncated and terminated";
  headroom_reader_close(nullptr);
}

TEST_F(CApi, NullArgumentsAreEinval) {
  auto r = open();
  headroom_report rep = blank();
  double v = 0;
  char buf[8];
  EXPECT_EQ(headroom_reader_fd(nullptr), -EINVAL);
  EXPECT_EQ(headroom_reader_process(nullptr), -EINVAL);
  EXPECT_EQ(headroom_reader_wait(nullptr, 0), -EINVAL);
  EXPECT_EQ(headroom_reader_get(nullptr, "node", &rep, nullptr, 0), -EINVAL);
  EXPECT_EQ(headroom_reader_get(r.get(), nullptr, &rep, nullptr, 0), -EINVAL);
  EXPECT_EQ(headroom_reader_get(r.get(), "node", nullptr, nullptr, 0), -EINVAL);
  EXPECT_EQ(headroom_reader_utilization(r.get(), "node", nullptr, &v), -EINVAL);
  EXPECT_EQ(headroom_reader_utilization(r.get(), "node", "cpu", nullptr), -EINVAL);
  EXPECT_EQ(headroom_reader_named_metric(nullptr, "node", "cpu", &v), -EINVAL);
  EXPECT_EQ(headroom_reader_scope_count(nullptr), -EINVAL);
  EXPECT_EQ(headroom_reader_scope_name(nullptr, 0, buf, sizeof buf), -EINVAL);
  EXPECT_EQ(headroom_reader_scope_name(r.get(), 0, nullptr, 4), -EINVAL);
  EXPECT_EQ(headroom_reader_set_callback(nullptr, nullptr, nullptr), -EINVAL);
}

TEST_F(CApi, FollowsPublishesAndFillsTheReport) {
  auto r = open();
  ASSERT_GE(headroom_reader_fd(r.get()), 0);
  EXPECT_EQ(headroom_reader_process(r.get()), 0);
  EXPECT_EQ(headroom_reader_wait(r.get(), 10), 0) << "timeout";
  headroom_report rep = blank();
  char err[256];
  EXPECT_EQ(headroom_reader_get(r.get(), "node", &rep, err, sizeof err), -ENOENT);
  EXPECT_NE(std::string(err).find("\"node\""), std::string::npos) << err;

  for (uint64_t seq = 1; seq <= 3; ++seq) {
    publish("node", make_report(seq));
    ASSERT_EQ(headroom_reader_wait(r.get(), 1000), 1);
    rep = blank();
    ASSERT_EQ(headroom_reader_get(r.get(), "node", &rep, err, sizeof err), 0) << err;
    EXPECT_STREQ(err, "") << "fresh: no reason";
    EXPECT_EQ(rep.seq, seq);
  }
  EXPECT_EQ(rep.struct_size, sizeof rep);
  EXPECT_EQ(rep.stale, 0);
  EXPECT_DOUBLE_EQ(rep.cpu_utilization, 1.5);
  EXPECT_DOUBLE_EQ(rep.mem_utilization, 0.25);
  EXPECT_DOUBLE_EQ(rep.application_utilization, 1.5);
  EXPECT_DOUBLE_EQ(rep.rps_fractional, 12.5);
  EXPECT_DOUBLE_EQ(rep.eps, 0.5);
  EXPECT_EQ(rep.interval_ms, 100);
  EXPECT_NEAR(static_cast<double>(rep.timestamp_ms), static_cast<double>(unix_now_ms()), 5000);
  EXPECT_GE(rep.age_ms, -5);
  EXPECT_LT(rep.age_ms, 1000);
  EXPECT_EQ(rep.stopped, 0);
  EXPECT_EQ(rep.rejected, 0);

  double v = -1;
  EXPECT_EQ(headroom_reader_utilization(r.get(), "node", "cpu", &v), 0);
  EXPECT_DOUBLE_EQ(v, 1.0);
  EXPECT_EQ(headroom_reader_utilization(r.get(), "node", "io.pressure", &v), -ENOENT);
  EXPECT_EQ(headroom_reader_utilization(r.get(), "nope", "cpu", &v), -ENOENT);
  EXPECT_EQ(headroom_reader_named_metric(r.get(), "node", "headroom.cpu.capacity", &v), 0);
  EXPECT_DOUBLE_EQ(v, 4.0);
  EXPECT_EQ(headroom_reader_named_metric(r.get(), "node", "headroom.seq", &v), 0);
  EXPECT_DOUBLE_EQ(v, 3.0);
}

TEST_F(CApi, StructSizeBoundsWhatIsWritten) {
  publish("node", make_report(2));
  auto r = open();
  // An older caller whose struct ends after `cpu_utilization`.
  const uint32_t old_size = offsetof(headroom_report, cpu_utilization) + sizeof(double);
  headroom_report rep = blank();
  rep.struct_size = old_size;
  ASSERT_EQ(headroom_reader_get(r.get(), "node", &rep, nullptr, 0), 0);
  EXPECT_EQ(rep.struct_size, old_size);
  EXPECT_DOUBLE_EQ(rep.cpu_utilization, 1.5);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&rep);
  for (std::size_t i = old_size; i < sizeof rep; ++i) ASSERT_EQ(bytes[i], 0xAB) << "byte " << i << " written";

  // A newer caller with a longer struct: only what this library knows is written.
  struct Newer {
    headroom_report base;
    double future_field;
  } newer;
  std::memset(&newer, 0xAB, sizeof newer);
  newer.base.struct_size = sizeof newer;
  ASSERT_EQ(headroom_reader_get(r.get(), "node", &newer.base, nullptr, 0), 0);
  EXPECT_EQ(newer.base.struct_size, sizeof(headroom_report));
  EXPECT_EQ(newer.base.seq, 2u);
  const auto* nb = reinterpret_cast<const unsigned char*>(&newer.future_field);
  for (std::size_t i = 0; i < sizeof newer.future_field; ++i) ASSERT_EQ(nb[i], 0xAB);

  // Too small to hold even struct_size and stale.
  char err[128];
  rep = blank();
  rep.struct_size = 4;
  EXPECT_EQ(headroom_reader_get(r.get(), "node", &rep, err, sizeof err), -EINVAL);
  EXPECT_NE(std::string(err).find("struct_size"), std::string::npos) << err;
  rep.struct_size = 0;
  EXPECT_EQ(headroom_reader_get(r.get(), "node", &rep, nullptr, 0), -EINVAL);
}

TEST_F(CApi, StaleReturnsOneWithTheReason) {
  const int64_t now = unix_now_ms();
  publish("old", make_report(1, now - 1500));
  publish("stopped", make_report(1, now, /*stopped=*/true));
  {
    auto r = open();  // default: 3 intervals, at least 1 s
    headroom_report rep = blank();
    char err[256];
    EXPECT_EQ(headroom_reader_get(r.get(), "old", &rep, err, sizeof err), 1);
    EXPECT_EQ(rep.stale, 1);
    EXPECT_GE(rep.age_ms, 1500);
    EXPECT_NE(std::string(err).find("older than"), std::string::npos) << err;
    double v = 0;
    EXPECT_EQ(headroom_reader_utilization(r.get(), "old", "cpu", &v), 1) << "stale, still filled";
    EXPECT_DOUBLE_EQ(v, 1.0);

    rep = blank();
    EXPECT_EQ(headroom_reader_get(r.get(), "stopped", &rep, err, sizeof err), 1);
    EXPECT_EQ(rep.stopped, 1);
    EXPECT_STREQ(err, "the agent stopped");
  }
  auto r = open(/*stale_intervals=*/50);  // 5 s at 100 ms
  headroom_report rep = blank();
  EXPECT_EQ(headroom_reader_get(r.get(), "old", &rep, nullptr, 0), 0);
}

TEST_F(CApi, BrokenFilesAreRejectedAndReported) {
  auto r = open();
  publish("node", make_report(6));
  ASSERT_EQ(headroom_reader_wait(r.get(), 1000), 1);
  ASSERT_TRUE(writer_->write_bytes("node.orca", "\xff\xff garbage"));
  ASSERT_EQ(headroom_reader_wait(r.get(), 1000), 1);
  headroom_report rep = blank();
  char err[512];
  EXPECT_EQ(headroom_reader_get(r.get(), "node", &rep, err, sizeof err), 1);
  EXPECT_EQ(rep.rejected, 1);
  EXPECT_EQ(rep.seq, 6u) << "the last valid report";
  EXPECT_NE(std::string(err).find("rejected"), std::string::npos) << err;
  EXPECT_NE(std::string(err).find("node.orca"), std::string::npos) << err;

  // A scope whose file never held a valid report.
  ASSERT_EQ(::symlink("/dev/zero", (dir() + "/zero.orca").c_str()), 0);
  ASSERT_EQ(headroom_reader_wait(r.get(), 1000), 1);
  EXPECT_EQ(headroom_reader_get(r.get(), "zero", &rep, err, sizeof err), -ENODATA);
  EXPECT_NE(std::string(err).find("not a regular file"), std::string::npos) << err;
  double v = 0;
  EXPECT_EQ(headroom_reader_utilization(r.get(), "zero", "cpu", &v), -ENODATA);
}

TEST_F(CApi, EnumeratesScopes) {
  publish("node", make_report(1));
  publish("endpoint.api", make_report(1));
  auto r = open();
  ASSERT_EQ(headroom_reader_scope_count(r.get()), 2);
  char buf[64];
  EXPECT_EQ(headroom_reader_scope_name(r.get(), 0, buf, sizeof buf), 12);
  EXPECT_STREQ(buf, "endpoint.api");
  EXPECT_EQ(headroom_reader_scope_name(r.get(), 1, buf, sizeof buf), 4);
  EXPECT_STREQ(buf, "node");
  EXPECT_EQ(headroom_reader_scope_name(r.get(), 2, buf, sizeof buf), -ENOENT);
  char small[5];
  EXPECT_EQ(headroom_reader_scope_name(r.get(), 0, small, sizeof small), 12) << "snprintf-like";
  EXPECT_STREQ(small, "endp");
  EXPECT_EQ(headroom_reader_scope_name(r.get(), 0, nullptr, 0), 12) << "length only";

  publish("endpoint.web", make_report(1));
  ASSERT_EQ(headroom_reader_wait(r.get(), 1000), 1);
  EXPECT_EQ(headroom_reader_scope_count(r.get()), 3);
}

TEST_F(CApi, CallbackRunsPerChangedScope) {
  auto r = open();
  struct Seen {
    headroom_reader* reader;
    std::vector<std::string> scopes;
    std::vector<int> counts;
  } seen{r.get(), {}, {}};
  auto cb = [](void* user, const char* scope) {
    auto* s = static_cast<Seen*>(user);
    s->scopes.emplace_back(scope);
    s->counts.push_back(headroom_reader_scope_count(s->reader));
  };
  ASSERT_EQ(headroom_reader_set_callback(r.get(), cb, &seen), 0);
  publish("node", make_report(1));
  publish("endpoint.api", make_report(1));
  EXPECT_EQ(headroom_reader_wait(r.get(), 1000), 1);
  (void)headroom_reader_process(r.get());
  EXPECT_EQ(seen.scopes, (std::vector<std::string>{"endpoint.api", "node"}));
  EXPECT_EQ(seen.counts, (std::vector<int>{2, 2})) << "the enumeration is current inside the callback";
  ASSERT_EQ(headroom_reader_set_callback(r.get(), nullptr, nullptr), 0);
  publish("node", make_report(2));
  EXPECT_EQ(headroom_reader_wait(r.get(), 1000), 1);
  EXPECT_EQ(seen.scopes.size(), 2u);
}

TEST_F(CApi, MissingDirectoryIsPickedUp) {
  char err[256];
  const std::string later = tmp_ / "later";
  ReaderPtr r(headroom_reader_open(later.c_str(), 3, err, sizeof err));
  ASSERT_TRUE(r) << err;
  std::filesystem::create_directory(later);
  auto w = ReportFileWriter::open(later);
  ASSERT_TRUE(w && w->write("node.orca", make_report(1)));
  headroom_report rep = blank();
  for (int i = 0; i < 20 && headroom_reader_get(r.get(), "node", &rep, nullptr, 0) != 0; ++i)
    (void)headroom_reader_wait(r.get(), 50);
  EXPECT_EQ(headroom_reader_get(r.get(), "node", &rep, nullptr, 0), 0);
  EXPECT_EQ(rep.seq, 1u);
}

TEST_F(CApi, OpenWithAnOwnerTrustsOnlyThatUsersFiles) {
  publish("node", make_report(7));
  char err[512];
  headroom_reader_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.require_owner = 1;
  o.owner_uid = ::geteuid();
  ReaderPtr mine(headroom_reader_open_with(dir().c_str(), &o, err, sizeof err));
  ASSERT_TRUE(mine) << err;
  headroom_report rep = blank();
  EXPECT_EQ(headroom_reader_get(mine.get(), "node", &rep, err, sizeof err), 0) << err;
  EXPECT_EQ(rep.seq, 7u);

  o.owner_uid = ::geteuid() + 1;
  ReaderPtr theirs(headroom_reader_open_with(dir().c_str(), &o, err, sizeof err));
  ASSERT_TRUE(theirs) << err;
  EXPECT_EQ(headroom_reader_get(theirs.get(), "node", &rep, err, sizeof err), -ENODATA);
  EXPECT_NE(std::string(err).find("owned by uid " + std::to_string(::geteuid())), std::string::npos) << err;

  // require_owner = 0 trusts any valid file, like headroom_reader_open.
  o.require_owner = 0;
  ReaderPtr any(headroom_reader_open_with(dir().c_str(), &o, err, sizeof err));
  ASSERT_TRUE(any) << err;
  EXPECT_EQ(headroom_reader_get(any.get(), "node", &rep, err, sizeof err), 0) << err;

  // A caller built against only the first fields: stale_intervals defaults.
  o.struct_size = offsetof(headroom_reader_options, owner_uid) + sizeof o.owner_uid;
  ReaderPtr short_struct(headroom_reader_open_with(dir().c_str(), &o, err, sizeof err));
  EXPECT_TRUE(short_struct) << err;
}

TEST_F(CApi, OpenWithRefusesMissingOrShortOptions) {
  char err[512];
  EXPECT_EQ(headroom_reader_open_with(dir().c_str(), nullptr, err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("options is NULL"), std::string::npos) << err;
  headroom_reader_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = 4;
  EXPECT_EQ(headroom_reader_open_with(dir().c_str(), &o, err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("struct_size is 4"), std::string::npos) << err;
  o.struct_size = sizeof o;
  EXPECT_EQ(headroom_reader_open_with(nullptr, &o, err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("dir is NULL"), std::string::npos) << err;
}

// An instance report of this process's own network namespace, or another.
Report instance_report(uint64_t netns, uint64_t seq = 1, bool gone = false) {
  Report r = make_report(seq);
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(kMetricInstanceNetns)] = static_cast<double>(netns);
  if (gone) {
    nm[std::string(kStoppedKey)] = 1;
    nm[std::string(kMetricInstanceGone)] = 1;
  }
  return r;
}

uint64_t own_netns_inode() {
  struct stat st{};
  EXPECT_EQ(::stat("/proc/self/ns/net", &st), 0);
  return static_cast<uint64_t>(st.st_ino);
}

TEST_F(CApi, OwnInstanceScopeNamesThisProcesssNamespace) {
  const uint64_t own = own_netns_inode();
  publish("endpoint.api@other", instance_report(own + 1));
  publish("endpoint.api@host", instance_report(own));
  publish("endpoint.web@host", instance_report(own));
  char buf[64], err[1024];
  EXPECT_EQ(headroom_orca_own_instance_scope(dir().c_str(), "api", buf, sizeof buf, err, sizeof err), 17) << err;
  EXPECT_STREQ(buf, "endpoint.api@host");
  EXPECT_EQ(headroom_orca_own_instance_scope(dir().c_str(), "web", buf, sizeof buf, err, sizeof err), 17) << err;
  EXPECT_STREQ(buf, "endpoint.web@host");
  // Like snprintf: the length even when truncated.
  char small[5];
  EXPECT_EQ(headroom_orca_own_instance_scope(dir().c_str(), "api", small, sizeof small, err, sizeof err), 17);
  EXPECT_STREQ(small, "endp");

  EXPECT_EQ(headroom_orca_own_instance_scope(dir().c_str(), "db", buf, sizeof buf, err, sizeof err), -ENOENT);
  EXPECT_NE(std::string(err).find("net:[" + std::to_string(own) + "]"), std::string::npos) << err;
  EXPECT_NE(std::string(err).find("no instance file (endpoint.db@*.orca)"), std::string::npos) << err;
  EXPECT_EQ(headroom_orca_own_instance_scope((tmp_ / "absent").c_str(), "api", buf, sizeof buf, err, sizeof err),
            -ENOENT);
  EXPECT_NE(std::string(err).find("mounted"), std::string::npos) << err;
  EXPECT_EQ(headroom_orca_own_instance_scope(dir().c_str(), "a/b", buf, sizeof buf, err, sizeof err), -EINVAL);
  EXPECT_NE(std::string(err).find("is not an endpoint name"), std::string::npos) << err;
  EXPECT_EQ(headroom_orca_own_instance_scope(nullptr, "api", buf, sizeof buf, err, sizeof err), -EINVAL);
  EXPECT_EQ(headroom_orca_own_instance_scope(dir().c_str(), nullptr, buf, sizeof buf, err, sizeof err), -EINVAL);
}

TEST_F(CApi, ReaderFollowsItsOwnInstanceAsItAppearsAndStops) {
  const uint64_t own = own_netns_inode();
  auto r = open();
  char buf[64], err[1024];
  EXPECT_EQ(headroom_reader_own_instance(r.get(), "api", buf, sizeof buf, err, sizeof err), -ENOENT);
  EXPECT_NE(std::string(err).find("has not seen a server of api"), std::string::npos) << err;
  EXPECT_EQ(headroom_reader_own_instance(nullptr, "api", buf, sizeof buf, err, sizeof err), -EINVAL);

  publish("endpoint.api@other", instance_report(own + 1));
  publish("endpoint.api@host", instance_report(own));
  int rc = -ENOENT;
  for (int i = 0; i < 40 && rc < 0; ++i) {
    (void)headroom_reader_wait(r.get(), 50);
    rc = headroom_reader_own_instance(r.get(), "api", buf, sizeof buf, err, sizeof err);
  }
  ASSERT_EQ(rc, 17) << err;
  EXPECT_STREQ(buf, "endpoint.api@host");
  headroom_report rep = blank();
  EXPECT_EQ(headroom_reader_get(r.get(), buf, &rep, err, sizeof err), 0) << err;

  // Its servers stopped: still named, read as stale for that reason.
  publish("endpoint.api@host", instance_report(own, 2, /*gone=*/true));
  for (int i = 0; i < 40 && rep.seq != 2; ++i) {
    (void)headroom_reader_wait(r.get(), 50);
    rep = blank();
    (void)headroom_reader_get(r.get(), "endpoint.api@host", &rep, err, sizeof err);
  }
  EXPECT_EQ(headroom_reader_own_instance(r.get(), "api", buf, sizeof buf, err, sizeof err), 17) << err;
  rep = blank();
  EXPECT_EQ(headroom_reader_get(r.get(), buf, &rep, err, sizeof err), 1);
  EXPECT_EQ(rep.stopped, 1);
  EXPECT_STREQ(err, "the instance stopped serving");
}

}  // namespace
}  // namespace headroom::orca
