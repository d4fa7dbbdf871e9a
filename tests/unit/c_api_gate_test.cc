// SPDX-License-Identifier: Apache-2.0
// The fail-fast gate through headroom_orca.h: options and their errors,
// feeding it from a file and from a reader, decisions and states, failing
// open on stale, stopped, missing and broken reports, NULL arguments.
#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "headroom/orca/headroom_orca.h"
#include "headroom/orca/clock.h"
#include "headroom/orca/names.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_writer.h"
#include "temp_dir.h"

namespace headroom::orca {
namespace {

using headroom::testing::TempDir;

int64_t mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Report dependency(double errors, double late, double concurrency, double calls, int64_t ts_ms = unix_now_ms(),
                  bool stopped = false) {
  Report r;
  auto& u = *r.mutable_utilization();
  u[std::string(kSignalErrors)] = errors;
  u[std::string(kSignalSloMax)] = late;
  u[std::string(kSignalConcurrency)] = concurrency;
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(kTimestampMsKey)] = static_cast<double>(ts_ms);
  nm[std::string(kSeqKey)] = 1;
  nm[std::string(kIntervalMsKey)] = 100;
  nm[std::string(kMetricWindowRequests)] = calls;
  nm[std::string(kMetricWindowSeconds)] = 0.5;
  if (stopped) nm[std::string(kStoppedKey)] = 1;
  return r;
}

struct GateDeleter {
  void operator()(headroom_gate* g) const { headroom_gate_destroy(g); }
};
using GatePtr = std::unique_ptr<headroom_gate, GateDeleter>;
struct ReaderDeleter {
  void operator()(headroom_reader* r) const { headroom_reader_close(r); }
};
using ReaderPtr = std::unique_ptr<headroom_reader, ReaderDeleter>;

class CGate : public ::testing::Test {
 protected:
  void SetUp() override {
    auto w = ReportFileWriter::open(tmp_.path());
    ASSERT_TRUE(w) << w.error().message;
    writer_.emplace(std::move(*w));
  }
  std::string path() const { return tmp_ / "dependency.payments.orca"; }
  void publish(const Report& r) { ASSERT_TRUE(writer_->write("dependency.payments.orca", r)); }

  TempDir tmp_;
  std::optional<ReportFileWriter> writer_;
};

TEST_F(CGate, OptionsAndTheirErrors) {
  char err[256];
  GatePtr defaults(headroom_gate_create(nullptr, err, sizeof err));
  ASSERT_TRUE(defaults) << err;

  headroom_gate_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  GatePtr zeroed(headroom_gate_create(&o, err, sizeof err));
  EXPECT_TRUE(zeroed) << "zero is every default: " << err;

  o.set_buckets = 1;  // all-zero buckets: the close thresholds are not below the open ones
  EXPECT_EQ(headroom_gate_create(&o, err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("buckets[CRITICAL].errors_close (0) must be less than errors_open (0)"),
            std::string::npos)
      << err;

  const headroom_gate_bucket_limits ordered[4] = {
      {0.5, 0.2, 0.5, 0.2, 1.0}, {0.4, 0.1, 0.4, 0.1, 0.9}, {0.3, 0.1, 0.3, 0.1, 0.8}, {0.6, 0.1, 0.2, 0.1, 0.7}};
  std::memcpy(o.buckets, ordered, sizeof ordered);
  EXPECT_EQ(headroom_gate_create(&o, err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("buckets[BULK].errors_open (0.6) must be at most buckets[BEST_EFFORT].errors_open"),
            std::string::npos)
      << err;
  o.buckets[3].errors_open = 0.2;
  GatePtr custom(headroom_gate_create(&o, err, sizeof err));
  EXPECT_TRUE(custom) << err;

  o.late_share = 5;
  EXPECT_EQ(headroom_gate_create(&o, err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("LateShare"), std::string::npos) << err;

  o.struct_size = 8;
  EXPECT_EQ(headroom_gate_create(&o, err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("struct_size"), std::string::npos) << err;
}

TEST_F(CGate, FromAFile) {
  char err[256];
  GatePtr g(headroom_gate_create(nullptr, err, sizeof err));
  ASSERT_TRUE(g) << err;
  const int64_t now = mono_ns();
  EXPECT_EQ(headroom_gate_decide(g.get(), 1, now), HEADROOM_GATE_CALL_NO_DATA);
  EXPECT_EQ(headroom_gate_state(g.get(), 1, now), HEADROOM_GATE_STATE_NO_DATA);

  publish(dependency(0, 0, 0.1, 100));
  ASSERT_EQ(headroom_gate_update_from_file(g.get(), path().c_str(), now, err, sizeof err), 0) << err;
  EXPECT_STREQ(err, "");
  EXPECT_EQ(headroom_gate_decide(g.get(), 1, now), HEADROOM_GATE_CALL);
  EXPECT_EQ(headroom_gate_state(g.get(), 100, now), HEADROOM_GATE_STATE_CLOSED);

  // Errors at 0.35: BULK and BEST_EFFORT open, DEGRADED and CRITICAL call.
  publish(dependency(0.35, 0, 0.1, 100));
  ASSERT_EQ(headroom_gate_update_from_file(g.get(), path().c_str(), now, err, sizeof err), 0) << err;
  EXPECT_EQ(headroom_gate_decide(g.get(), 1, now), HEADROOM_GATE_CALL);
  EXPECT_EQ(headroom_gate_decide(g.get(), 50, now), HEADROOM_GATE_CALL);
  EXPECT_EQ(headroom_gate_decide(g.get(), 51, now), HEADROOM_GATE_FAIL_FAST_BREAKER);
  EXPECT_EQ(headroom_gate_state(g.get(), 100, now), HEADROOM_GATE_STATE_OPEN);
  EXPECT_FALSE(HEADROOM_GATE_SHOULD_CALL(headroom_gate_decide(g.get(), 100, now)));
  // The breaker turns half-open after open_for (5 s) on the caller's clock.
  EXPECT_EQ(headroom_gate_state(g.get(), 100, now + 5'000'000'000), HEADROOM_GATE_STATE_NO_DATA)
      << "no report for 5 s: fail open";

  // The bulkhead.
  publish(dependency(0, 0, 0.95, 100));
  ASSERT_EQ(headroom_gate_update_from_file(g.get(), path().c_str(), now, err, sizeof err), 0) << err;
  EXPECT_EQ(headroom_gate_decide(g.get(), 30, now), HEADROOM_GATE_FAIL_FAST_BULKHEAD);
  EXPECT_EQ(headroom_gate_decide(g.get(), 1, now), HEADROOM_GATE_CALL);

  // A stopped agent, a stale report, a broken file, a missing file: fail open.
  publish(dependency(1, 1, 1, 100, unix_now_ms(), true));
  EXPECT_EQ(headroom_gate_update_from_file(g.get(), path().c_str(), now, err, sizeof err), 1);
  EXPECT_NE(std::string(err).find("stopped"), std::string::npos) << err;
  EXPECT_EQ(headroom_gate_decide(g.get(), 1, now), HEADROOM_GATE_CALL_NO_DATA);

  publish(dependency(1, 1, 1, 100, unix_now_ms() - 60'000));
  EXPECT_EQ(headroom_gate_update_from_file(g.get(), path().c_str(), now, err, sizeof err), 1);
  EXPECT_EQ(headroom_gate_decide(g.get(), 1, now), HEADROOM_GATE_CALL_NO_DATA);

  publish(dependency(1, 1, 1, 100));
  ASSERT_EQ(headroom_gate_update_from_file(g.get(), path().c_str(), now, err, sizeof err), 0) << err;
  ASSERT_EQ(headroom_gate_decide(g.get(), 1, now), HEADROOM_GATE_FAIL_FAST_BULKHEAD);
  ASSERT_TRUE(writer_->write_bytes("dependency.payments.orca", "not a report"));
  EXPECT_EQ(headroom_gate_update_from_file(g.get(), path().c_str(), now, err, sizeof err), -EBADMSG);
  EXPECT_NE(std::string(err).find("dependency.payments.orca"), std::string::npos) << err;
  EXPECT_EQ(headroom_gate_decide(g.get(), 1, now), HEADROOM_GATE_CALL_NO_DATA);

  const std::string missing = tmp_ / "dependency.nope.orca";
  EXPECT_EQ(headroom_gate_update_from_file(g.get(), missing.c_str(), now, err, sizeof err), -ENOENT);
  EXPECT_NE(std::string(err).find("dependency.nope.orca"), std::string::npos) << err;
  EXPECT_EQ(headroom_gate_decide(g.get(), 1, now), HEADROOM_GATE_CALL_NO_DATA);
}

TEST_F(CGate, FromAReader) {
  char err[256];
  GatePtr g(headroom_gate_create(nullptr, err, sizeof err));
  ASSERT_TRUE(g) << err;
  ReaderPtr r(headroom_reader_open(tmp_.path().c_str(), 0, err, sizeof err));
  ASSERT_TRUE(r) << err;
  const int64_t now = mono_ns();

  EXPECT_EQ(headroom_gate_update_from_reader(g.get(), r.get(), "dependency.payments", now, err, sizeof err), -ENOENT);
  EXPECT_NE(std::string(err).find("dependency.payments"), std::string::npos) << err;
  EXPECT_EQ(headroom_gate_decide(g.get(), 1, now), HEADROOM_GATE_CALL_NO_DATA);

  publish(dependency(0, 0.9, 0, 100));
  ASSERT_EQ(headroom_reader_wait(r.get(), 2000), 1);
  ASSERT_EQ(headroom_gate_update_from_reader(g.get(), r.get(), "dependency.payments", now, err, sizeof err), 0)
      << err;
  EXPECT_EQ(headroom_gate_decide(g.get(), 1, now), HEADROOM_GATE_FAIL_FAST_BREAKER);
  EXPECT_EQ(headroom_gate_state(g.get(), 1, now), HEADROOM_GATE_STATE_OPEN);

  // The file goes away: the reader calls the scope stale, the gate fails open.
  std::filesystem::remove(path());
  ASSERT_EQ(headroom_reader_wait(r.get(), 2000), 1);
  EXPECT_EQ(headroom_gate_update_from_reader(g.get(), r.get(), "dependency.payments", now, err, sizeof err), 1);
  EXPECT_STRNE(err, "");
  EXPECT_EQ(headroom_gate_decide(g.get(), 1, now), HEADROOM_GATE_CALL_NO_DATA);
}

TEST_F(CGate, NullArguments) {
  char err[128];
  GatePtr g(headroom_gate_create(nullptr, nullptr, 0));
  ASSERT_TRUE(g);
  EXPECT_EQ(headroom_gate_decide(nullptr, 1, 0), HEADROOM_GATE_CALL_NO_DATA) << "no gate: fail open";
  EXPECT_EQ(headroom_gate_state(nullptr, 1, 0), -EINVAL);
  EXPECT_EQ(headroom_gate_update_from_file(nullptr, "x", 0, err, sizeof err), -EINVAL);
  EXPECT_EQ(headroom_gate_update_from_file(g.get(), nullptr, 0, err, sizeof err), -EINVAL);
  EXPECT_NE(std::string(err).find("NULL"), std::string::npos) << err;
  EXPECT_EQ(headroom_gate_update_from_reader(g.get(), nullptr, "s", 0, nullptr, 0), -EINVAL);
  headroom_gate_destroy(nullptr);
}

}  // namespace
}  // namespace headroom::orca
