// SPDX-License-Identifier: Apache-2.0
// The reader against the real agent: every publish is seen within about one
// interval, a killed agent turns stale by age, a stopped one at once.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>

#include <gtest/gtest.h>

#include "headroom/orca/report.h"
#include "headroom/orca/report_reader.h"
#include "process.h"
#include "temp_dir.h"

namespace headroom {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::Process;
using testing::TempDir;

constexpr auto kInterval = 100ms;
// Scheduling on a shared, busy machine: how late past one interval an update
// may be seen before the test calls it a miss.
constexpr auto kSlack = 150ms;
// The same for noticing staleness after a kill: polled every 10 ms by a test
// thread that may itself wait for a CPU.
constexpr auto kStaleSlack = 250ms;

uint64_t seq_of(const orca::ScopeState& st) { return st.report ? orca::metadata_of(*st.report)->seq : 0; }

class ReaderAgent : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = tmp_.write("headroom.toml", "[agent]\ninterval = \"100ms\"\n");
    // Opened before the agent creates the directory: picked up when it appears.
    auto r = orca::ReportDirectory::open(tmp_ / "orca", {.stale_intervals = 3.0, .min_stale_ms = 0});
    ASSERT_TRUE(r) << r.error().message;
    reader_.emplace(std::move(*r));
    agent_.emplace(std::vector<std::string>{HEADROOMD_PATH, "--config", config_, "--orca-dir", tmp_ / "orca"}, tmp_);
  }

  // Waits for the node report to change (a new seq), up to `timeout`.
  std::optional<orca::ScopeState> next_update(uint64_t after_seq, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      (void)reader_->wait(static_cast<int>(std::max<int64_t>(left.count(), 1)));
      auto st = reader_->get("node");
      if (st && st->report && seq_of(*st) != after_seq) return st;
    }
    return std::nullopt;
  }

  // Waits for the first report (the agent needs two readings, and the
  // directory appears with it), then returns it.
  orca::ScopeState first_report() {
    auto st = next_update(0, 5s);
    EXPECT_TRUE(st) << "no report from headroomd within 5 s; stderr:\n" << agent_->err();
    return st.value_or(orca::ScopeState{});
  }

  TempDir tmp_;
  std::string config_;
  std::optional<orca::ReportDirectory> reader_;
  std::optional<Process> agent_;
};

TEST_F(ReaderAgent, SeesEachPublishWithinAboutOneInterval) {
  auto st = first_report();
  ASSERT_TRUE(st.report);
  EXPECT_TRUE(reader_->watching());
  uint64_t seq = seq_of(st);
  auto last_seen = Clock::now();
  int updates = 0;
  std::chrono::milliseconds worst{0};
  while (updates < 8) {
    auto next = next_update(seq, kInterval + kSlack + 500ms);
    ASSERT_TRUE(next) << "no update after seq " << seq << "; stderr:\n" << agent_->err();
    const auto now = Clock::now();
    const auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_seen);
    worst = std::max(worst, gap);
    EXPECT_LE(gap, kInterval + kSlack) << "seq " << seq_of(*next) << " seen " << gap.count() << " ms after seq " << seq;
    EXPECT_GT(seq_of(*next), seq);
    EXPECT_FALSE(next->staleness.stale) << next->staleness.reason;
    EXPECT_TRUE(next->error.empty()) << next->error;
    seq = seq_of(*next);
    last_seen = now;
    ++updates;
  }
  std::cout << "[ reader ] " << updates << " updates, worst gap " << worst.count() << " ms\n";
}

TEST_F(ReaderAgent, KilledAgentTurnsStaleByAge) {
  auto st = first_report();
  ASSERT_TRUE(st.report);
  ASSERT_TRUE(next_update(seq_of(st), 1s)) << "a second publish";
  ASSERT_FALSE(reader_->get("node")->staleness.stale);
  agent_->signal(SIGKILL);
  ASSERT_EQ(agent_->wait(5s), 128 + SIGKILL);
  const auto killed = Clock::now();
  (void)reader_->process_events();  // a publish that raced the kill
  const int64_t last_ts = orca::metadata_of(*reader_->get("node")->report)->timestamp_ms;

  // Stale once older than 3 intervals; polled with the real time.
  std::optional<orca::ScopeState> now;
  while (Clock::now() - killed < 3 * kInterval + kStaleSlack + 2s) {
    (void)reader_->wait(10);
    now = reader_->get("node");
    if (now->staleness.stale) break;
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed);
  ASSERT_TRUE(now && now->staleness.stale);
  EXPECT_LE(took, 3 * kInterval + kStaleSlack) << "stale only " << took.count() << " ms after the kill";
  EXPECT_GE(now->staleness.age_ms, 3 * kInterval.count()) << "not before 3 intervals";
  EXPECT_EQ(orca::metadata_of(*now->report)->timestamp_ms, last_ts) << "no publish after the kill";
  EXPECT_NE(now->staleness.reason.find("older than 300 ms"), std::string::npos) << now->staleness.reason;
  EXPECT_FALSE(now->removed) << "the file stays";
}

TEST_F(ReaderAgent, StoppedAgentIsStaleAtOnce) {
  auto st = first_report();
  ASSERT_TRUE(st.report);
  const uint64_t before = seq_of(st);
  agent_->signal(SIGTERM);
  ASSERT_EQ(agent_->wait(5s), 0) << agent_->err();
  // The last report is published before the agent exits.
  auto last = next_update(before, 2s);
  while (last && !orca::metadata_of(*last->report)->stopped)
    last = next_update(seq_of(*last), 1s);
  ASSERT_TRUE(last) << "no report with headroom.stopped";
  EXPECT_TRUE(orca::metadata_of(*last->report)->stopped);
  auto now = reader_->get("node");  // the real time: seconds fresher than any age limit
  EXPECT_TRUE(now->staleness.stale);
  EXPECT_EQ(now->staleness.reason, "the agent stopped");
  EXPECT_LT(now->staleness.age_ms, 3 * kInterval.count());
}

}  // namespace
}  // namespace headroom
