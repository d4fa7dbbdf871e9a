// SPDX-License-Identifier: Apache-2.0
// "My instance of endpoint E" (own_instance.h): instance files written with
// the project's writer, a fake /proc whose self/ns/net names the namespace.
#include "headroom/orca/own_instance.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "headroom/orca/names.h"
#include "headroom/orca/report_writer.h"
#include "temp_dir.h"

namespace headroom::orca {
namespace {

using headroom::testing::TempDir;
namespace fs = std::filesystem;

constexpr uint64_t kOwnNetns = 4026532000;

struct InstanceSpec {
  std::optional<uint64_t> netns;
  bool gone = false;
  double app = 0.5;
  int64_t ts = unix_now_ms();
};

Report instance_report(const InstanceSpec& spec, uint64_t seq = 1) {
  Report r;
  r.set_cpu_utilization(0.25);
  r.set_application_utilization(spec.app);
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(kTimestampMsKey)] = static_cast<double>(spec.ts);
  nm[std::string(kSeqKey)] = static_cast<double>(seq);
  nm[std::string(kIntervalMsKey)] = 100;
  if (spec.netns) nm[std::string(kMetricInstanceNetns)] = static_cast<double>(*spec.netns);
  if (spec.gone) {
    nm[std::string(kStoppedKey)] = 1;
    nm[std::string(kMetricInstanceGone)] = 1;
  }
  return r;
}

class OwnInstance : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::create_directory(dir()));
    auto w = ReportFileWriter::open(dir());
    ASSERT_TRUE(w) << w.error().message;
    writer_.emplace(std::move(*w));
    set_netns_link("net:[" + std::to_string(kOwnNetns) + "]");
  }
  std::string dir() const { return tmp_ / "orca"; }
  std::string proc_root() const { return tmp_ / "proc"; }
  // <proc>/self/ns/net as the kernel shows it: a symlink to "net:[inode]".
  void set_netns_link(const std::string& target) {
    fs::create_directories(proc_root() + "/self/ns");
    std::error_code ec;
    fs::remove(proc_root() + "/self/ns/net", ec);
    fs::create_symlink(target, proc_root() + "/self/ns/net");
  }
  OwnInstanceOptions options() const {
    OwnInstanceOptions o;
    o.proc_root = proc_root();
    return o;
  }
  void publish(const std::string& scope, const Report& r) {
    ASSERT_TRUE(writer_->write(report_file_name(scope), r));
  }
  void publish_bytes(const std::string& scope, std::string_view bytes) {
    ASSERT_TRUE(writer_->write_bytes(report_file_name(scope), bytes));
  }

  TempDir tmp_;
  std::optional<ReportFileWriter> writer_;
};

TEST(OwnInstanceRules, ParseNetnsLink) {
  EXPECT_EQ(parse_netns_link("net:[4026532000]"), 4026532000u);
  EXPECT_EQ(parse_netns_link("net:[1]"), 1u);
  EXPECT_EQ(parse_netns_link("net:[18446744073709551615]"), std::nullopt);  // 20 digits
  EXPECT_EQ(parse_netns_link("mnt:[4026531840]"), std::nullopt);
  EXPECT_EQ(parse_netns_link("net:[]"), std::nullopt);
  EXPECT_EQ(parse_netns_link("net:[12a]"), std::nullopt);
  EXPECT_EQ(parse_netns_link("net:[12"), std::nullopt);
  EXPECT_EQ(parse_netns_link(""), std::nullopt);
}

TEST(OwnInstanceRules, InstanceOfAScope) {
  EXPECT_EQ(instance_of("endpoint.api@pod-1", "api"), "pod-1");
  EXPECT_EQ(instance_of("endpoint.api@host", "api"), "host");
  EXPECT_EQ(instance_of("endpoint.api", "api"), "");       // the aggregate
  EXPECT_EQ(instance_of("endpoint.api2@host", "api"), "");  // another endpoint
  EXPECT_EQ(instance_of("endpoint.ap@host", "api"), "");
  EXPECT_EQ(instance_of("node", "api"), "");
}

TEST(OwnInstanceRules, InstanceNetnsMustBeAnInode) {
  EXPECT_EQ(instance_netns(instance_report({.netns = kOwnNetns})), kOwnNetns);
  EXPECT_EQ(instance_netns(instance_report({.netns = std::nullopt})), std::nullopt);
  Report r = instance_report({});
  (*r.mutable_named_metrics())[std::string(kMetricInstanceNetns)] = 12.5;
  EXPECT_EQ(instance_netns(r), std::nullopt);
  (*r.mutable_named_metrics())[std::string(kMetricInstanceNetns)] = 0;
  EXPECT_EQ(instance_netns(r), std::nullopt);
}

TEST(OwnInstanceRules, PickPrefersValidThenServingThenNewest) {
  auto state = [](std::string scope, InstanceSpec spec, std::string error = "", bool removed = false) {
    ScopeState st;
    st.scope = std::move(scope);
    st.report = instance_report(spec);
    st.error = std::move(error);
    st.removed = removed;
    return st;
  };
  const int64_t t = 1'700'000'000'000;
  struct Case {
    const char* name;
    std::vector<ScopeState> candidates;
    std::optional<std::size_t> want;
  } cases[] = {
      {"none", {}, std::nullopt},
      {"another namespace only", {state("endpoint.a@x", {.netns = 7})}, std::nullopt},
      {"the one in ours", {state("endpoint.a@x", {.netns = 7}), state("endpoint.a@y", {.netns = kOwnNetns})}, 1},
      {"removed is not there", {state("endpoint.a@y", {.netns = kOwnNetns}, "", true)}, std::nullopt},
      {"valid before rejected",
       {state("endpoint.a@x", {.netns = kOwnNetns, .ts = t + 5}, "broken"),
        state("endpoint.a@y", {.netns = kOwnNetns, .ts = t})},
       1},
      {"serving before gone",
       {state("endpoint.a@x", {.netns = kOwnNetns, .gone = false, .ts = t}),
        state("endpoint.a@y", {.netns = kOwnNetns, .gone = true, .ts = t + 5})},
       0},
      {"newest of equals",
       {state("endpoint.a@x", {.netns = kOwnNetns, .ts = t}), state("endpoint.a@y", {.netns = kOwnNetns, .ts = t + 5})},
       1},
      {"a gone one is still ours", {state("endpoint.a@x", {.netns = kOwnNetns, .gone = true})}, 0},
  };
  for (const auto& c : cases) EXPECT_EQ(pick_instance(c.candidates, kOwnNetns), c.want) << c.name;
}

TEST_F(OwnInstance, PicksItsNamespacesInstanceAmongSeveralAndAGarbledFile) {
  publish("endpoint.api", instance_report({.netns = std::nullopt}));  // the aggregate
  publish("endpoint.api@pod-a", instance_report({.netns = kOwnNetns + 1}));
  publish("endpoint.api@pod-b", instance_report({.netns = kOwnNetns}));
  publish("endpoint.web@host", instance_report({.netns = kOwnNetns}));
  publish_bytes("endpoint.api@garbled", "\xff\xff\xff not a report");
  auto scope = own_instance_scope(dir(), "api", options());
  ASSERT_TRUE(scope) << scope.error().message;
  EXPECT_EQ(*scope, "endpoint.api@pod-b");
  // Two endpoints of one namespace: the name picks.
  auto web = own_instance_scope(dir(), "web", options());
  ASSERT_TRUE(web) << web.error().message;
  EXPECT_EQ(*web, "endpoint.web@host");
}

TEST_F(OwnInstance, NoneMatchingSaysWhatWasLookedForAndWhatIsThere) {
  publish("endpoint.api@pod-a", instance_report({.netns = kOwnNetns + 1}));
  publish_bytes("endpoint.api@garbled", "\xff\xff\xff not a report");
  publish("endpoint.web@host", instance_report({.netns = kOwnNetns}));
  auto scope = own_instance_scope(dir(), "api", options());
  ASSERT_FALSE(scope);
  const std::string& m = scope.error().message;
  EXPECT_EQ(scope.error().code, ENOENT);
  EXPECT_NE(m.find("net:[4026532000]"), std::string::npos) << m;
  EXPECT_NE(m.find("endpoint.api@pod-a.orca (net:[4026532001])"), std::string::npos) << m;
  EXPECT_NE(m.find("endpoint.api@garbled.orca (rejected: "), std::string::npos) << m;
  EXPECT_EQ(m.find("endpoint.web@host"), std::string::npos) << m;
  EXPECT_NE(m.find("has not seen a server of api"), std::string::npos) << m;
  EXPECT_NE(m.find("mount the host's /run/orca"), std::string::npos) << m;
}

TEST_F(OwnInstance, NoInstanceFileAtAll) {
  publish("endpoint.api", instance_report({.netns = std::nullopt}));
  auto scope = own_instance_scope(dir(), "api", options());
  ASSERT_FALSE(scope);
  EXPECT_NE(scope.error().message.find("there is no instance file (endpoint.api@*.orca) at all"), std::string::npos)
      << scope.error().message;
}

TEST_F(OwnInstance, ErrorsNameTheDirectoryTheLinkAndTheName) {
  auto missing = own_instance_scope(tmp_ / "absent", "api", options());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_NE(missing.error().message.find(tmp_ / "absent"), std::string::npos) << missing.error().message;
  EXPECT_NE(missing.error().message.find("mounted"), std::string::npos) << missing.error().message;

  auto bad_name = own_instance_scope(dir(), "a/b", options());
  ASSERT_FALSE(bad_name);
  EXPECT_NE(bad_name.error().message.find("is not an endpoint name"), std::string::npos);

  set_netns_link("mnt:[4026531840]");
  auto not_net = own_instance_scope(dir(), "api", options());
  ASSERT_FALSE(not_net);
  EXPECT_NE(not_net.error().message.find("not net:[<inode>]"), std::string::npos) << not_net.error().message;

  OwnInstanceOptions no_proc;
  no_proc.proc_root = tmp_ / "no-proc";
  auto no_link = own_instance_scope(dir(), "api", no_proc);
  ASSERT_FALSE(no_link);
  EXPECT_EQ(no_link.error().code, ENOENT);
  EXPECT_NE(no_link.error().message.find(tmp_ / "no-proc/self/ns/net"), std::string::npos);
}

TEST_F(OwnInstance, AStoppedInstanceIsStillFoundAndReadsAsStoppedServing) {
  publish("endpoint.api@pod-b", instance_report({.netns = kOwnNetns, .gone = true}));
  auto scope = own_instance_scope(dir(), "api", options());
  ASSERT_TRUE(scope) << scope.error().message;
  EXPECT_EQ(*scope, "endpoint.api@pod-b");
  auto reader = OwnInstanceReader::open(dir(), "api", options());
  ASSERT_TRUE(reader) << reader.error().message;
  auto st = reader->get();
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_TRUE(st->staleness.stale);
  EXPECT_EQ(st->staleness.reason, "the instance stopped serving");
  // The agent's own stop keeps its reason.
  Report agent_stopped = instance_report({.netns = kOwnNetns});
  (*agent_stopped.mutable_named_metrics())[std::string(kStoppedKey)] = 1;
  EXPECT_EQ(check_staleness(agent_stopped, unix_now_ms()).reason, "the agent stopped");
}

// Processes changes until `pred` holds, up to 2 s.
template <class Pred>
bool wait_until(OwnInstanceReader& reader, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    (void)reader.wait(50);
  }
  return true;
}

TEST_F(OwnInstance, ReaderPicksUpALateFileAndReResolvesWhenItsFileGoes) {
  auto reader = OwnInstanceReader::open(dir(), "api", options());
  ASSERT_TRUE(reader) << reader.error().message;
  EXPECT_EQ(reader->netns(), kOwnNetns);
  EXPECT_EQ(reader->scope(), "");
  auto none = reader->get();
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("no instance file"), std::string::npos) << none.error().message;

  publish("endpoint.api@other", instance_report({.netns = kOwnNetns + 1}));
  publish("endpoint.api@pod-b", instance_report({.netns = kOwnNetns, .app = 0.75}));
  ASSERT_TRUE(wait_until(*reader, [&] { return reader->scope() == "endpoint.api@pod-b"; })) << reader->scope();
  auto st = reader->get();
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_DOUBLE_EQ(st->report->application_utilization(), 0.75);
  EXPECT_FALSE(st->staleness.stale) << st->staleness.reason;

  // A new report of the same instance: process_events() says so.
  publish("endpoint.api@pod-b", instance_report({.netns = kOwnNetns, .app = 0.5}, 2));
  ASSERT_TRUE(wait_until(*reader, [&] {
    auto s = reader->get();
    return s && s->report && s->report->application_utilization() == 0.5;
  }));

  // Its file goes and another instance of this namespace appears: followed.
  ASSERT_TRUE(fs::remove(dir() + "/endpoint.api@pod-b.orca"));
  publish("endpoint.api@pod-c", instance_report({.netns = kOwnNetns, .app = 0.25}));
  ASSERT_TRUE(wait_until(*reader, [&] { return reader->scope() == "endpoint.api@pod-c"; })) << reader->scope();

  // Gone with no successor: nothing is followed, and get() says why.
  ASSERT_TRUE(fs::remove(dir() + "/endpoint.api@pod-c.orca"));
  ASSERT_TRUE(wait_until(*reader, [&] { return reader->scope().empty(); })) << reader->scope();
  auto after = reader->get();
  ASSERT_FALSE(after);
  EXPECT_NE(after.error().message.find("endpoint.api@other.orca (net:[4026532001])"), std::string::npos)
      << after.error().message;
}

TEST_F(OwnInstance, ReaderRefusesABadNameOrAnUnreadableNamespace) {
  EXPECT_FALSE(OwnInstanceReader::open(dir(), "", options()));
  OwnInstanceOptions no_proc;
  no_proc.proc_root = tmp_ / "no-proc";
  auto r = OwnInstanceReader::open(dir(), "api", no_proc);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("self/ns/net"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace headroom::orca
