// SPDX-License-Identifier: Apache-2.0
// The endpoint sampler's bookkeeping across failed reads of the eBPF maps,
// with snapshots from the test instead of a probe: a failed read leaves that
// tick's endpoints unavailable and keeps the probe; the first good read after
// it adds one interval from the last good snapshot, so nothing is lost; the
// failure is logged once and its end once; the in-flight table's fill is
// said once when full and once when it drains. And the reload rule for a
// probe that cannot attach (reload_may_replace_probe), as a table.
#include "agent/signals/endpoint_sampler.h"

#include <spdlog/spdlog.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "agent/signals/endpoint_scopes.h"
#include "captured_log.h"

namespace headroom::agent {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

using testing::CapturedLog;

Config one_endpoint() {
  Config c;
  c.interval = 100ms;
  c.smoothing = 1s;  // a window of 10 intervals
  EndpointConfig e;
  e.name = "api";
  e.port = 8080;
  e.target = 10ms;
  e.max = 100ms;
  c.endpoints = {e};
  return c;
}

// The kernel's side, scripted: cumulative counters the test advances, and
// whether the next read fails.
struct FakeKernel {
  int64_t now_ns = 1'000'000'000;
  uint64_t completed = 0;
  uint64_t used = 0, size = 0;  // the in-flight table
  bool fail = false;
  int reads = 0;

  Result<void> read(probes::EndpointSnapshot& s) {
    ++reads;
    if (fail) return Error{EIO, "cannot read the eBPF stats map: Input/output error"};
    s.at_ns = now_ns;
    s.endpoints.resize(1);
    s.endpoints[0].stats.completed = completed;
    s.table_used = used;
    s.table_size = size;
    return {};
  }
  // One interval of `seconds` with `requests` completed.
  void advance(double seconds, uint64_t requests) {
    now_ns += static_cast<int64_t>(seconds * 1e9);
    completed += requests;
  }
};

EndpointSampler fake_sampler(FakeKernel& k) {
  return EndpointSampler(one_endpoint(), [&k](probes::EndpointSnapshot& s) { return k.read(s); });
}

TEST(EndpointSamplerReads, AFailedReadMakesThatTickUnavailableAndKeepsTheProbe) {
  CapturedLog log;
  FakeKernel k;
  EndpointSampler s = fake_sampler(k);
  s.sample(0);  // baseline
  k.advance(0.1, 10);
  s.sample(0);
  ASSERT_TRUE(s.endpoints()[0].signals);
  EXPECT_TRUE(s.endpoints()[0].counted);
  EXPECT_DOUBLE_EQ(s.endpoints()[0].signals->rps, 100.0);

  k.fail = true;
  k.advance(0.1, 10);
  s.sample(0);
  EXPECT_FALSE(s.endpoints()[0].signals) << "no stale signals published as fresh";
  EXPECT_FALSE(s.endpoints()[0].counted);
  EXPECT_TRUE(s.running()) << "the probe stays";
  EXPECT_TRUE(s.read_failing());
  EXPECT_THAT(s.status(), HasSubstr("reading its maps failing since"));
  EXPECT_THAT(s.status(), HasSubstr("Input/output error"));
  // Retried every tick, not given up.
  for (int i = 0; i < 5; ++i) {
    k.advance(0.1, 10);
    s.sample(0);
  }
  EXPECT_EQ(k.reads, 2 + 1 + 5);
  EXPECT_FALSE(s.endpoints()[0].signals);
  EXPECT_EQ(log.count("reading the eBPF maps failed"), 1) << log.text();
  EXPECT_EQ(log.count("works again"), 0);
}

TEST(EndpointSamplerReads, RecoveryCountsTheGapAsOneIntervalFromTheLastGoodSnapshot) {
  CapturedLog log;
  FakeKernel k;
  EndpointSampler s = fake_sampler(k);
  s.sample(0);
  k.advance(0.1, 10);
  s.sample(0);  // 10 requests in 0.1 s

  k.fail = true;
  for (int i = 0; i < 3; ++i) {
    k.advance(0.1, 20);
    s.sample(0);
  }
  k.fail = false;
  k.advance(0.1, 20);
  s.sample(0);
  ASSERT_TRUE(s.endpoints()[0].signals);
  EXPECT_FALSE(s.read_failing());
  const EndpointInterval* newest = s.endpoints()[0].window.newest();
  ASSERT_NE(newest, nullptr);
  // Everything since the last good read, over the time it took: 80 requests
  // in 0.4 s. Not 20 in 0.1 s (the gap lost), not 80 in 0.1 s (a spike).
  EXPECT_EQ(newest->completed, 80u);
  EXPECT_NEAR(newest->seconds, 0.4, 1e-9);
  // The window: 10 + 80 requests over 0.5 s.
  EXPECT_EQ(s.endpoints()[0].signals->window_requests, 90u);
  EXPECT_NEAR(s.endpoints()[0].signals->rps, 180.0, 1e-6);
  EXPECT_THAT(s.status(), ::testing::Not(HasSubstr("failing")));
  EXPECT_EQ(log.count("reading the eBPF maps failed"), 1) << log.text();
  EXPECT_EQ(log.count("reading the eBPF maps works again after 3 failed read(s)"), 1) << log.text();

  // A second failure is logged again, once.
  k.fail = true;
  k.advance(0.1, 1);
  s.sample(0);
  s.sample(0);
  EXPECT_EQ(log.count("reading the eBPF maps failed"), 2) << log.text();
}

TEST(EndpointSamplerReads, AFailureBeforeTheBaselineStillStartsFromTheFirstGoodRead) {
  FakeKernel k;
  EndpointSampler s = fake_sampler(k);
  k.fail = true;
  s.sample(0);
  s.sample(0);
  k.fail = false;
  s.sample(0);  // the baseline
  EXPECT_FALSE(s.endpoints()[0].signals);
  k.advance(0.1, 5);
  s.sample(0);
  ASSERT_TRUE(s.endpoints()[0].signals);
  EXPECT_EQ(s.endpoints()[0].window.newest()->completed, 5u);
}

TEST(EndpointSamplerReads, AFullInFlightTableIsSaidOnceAndItsEndOnce) {
  CapturedLog log;
  FakeKernel k;
  k.size = 16384;
  EndpointSampler s = fake_sampler(k);
  struct Step {
    uint64_t used;
    bool full;
  };
  // Full from 7/8 (14336); room again only below 3/4 (12288).
  const Step steps[] = {{0, false},     {14335, false}, {14336, true},  {16384, true}, {15000, true},
                        {12288, true},  {12287, false}, {14000, false}, {15178, true}, {0, false}};
  for (const auto& step : steps) {
    k.used = step.used;
    k.advance(0.1, 1);
    s.sample(0);
    EXPECT_EQ(s.table_full(), step.full) << step.used;
    EXPECT_EQ(s.status().find("in-flight table full") != std::string::npos, step.full) << s.status();
  }
  EXPECT_EQ(log.count("the eBPF in-flight table is full"), 2) << log.text();
  EXPECT_EQ(log.count("has room again"), 2) << log.text();
}

// ---------------------------------------------------------------------------
// A reload whose new probe cannot attach

TEST(ReloadProbeRule, RefusedOnlyWhenItWouldTurnAWorkingProbeOff) {
  using P = ProbeState;
  struct Row {
    P running, next;
    bool allowed;
  };
  const Row rows[] = {
      {P::attached, P::failed, false},  // the case: keep the working probe
      {P::attached, P::attached, true}, {P::attached, P::off, true},  {P::attached, P::none, true},
      {P::failed, P::failed, true},  // nothing that works is lost; the rest of the file applies
      {P::failed, P::attached, true},   {P::off, P::failed, true},    {P::none, P::failed, true},
      {P::off, P::attached, true},      {P::none, P::none, true},
  };
  for (const auto& r : rows)
    EXPECT_EQ(reload_may_replace_probe(r.running, r.next), r.allowed)
        << static_cast<int>(r.running) << " -> " << static_cast<int>(r.next);
}

TEST(ReloadProbeRule, ProbeStateOfEachKindOfSampler) {
  FakeKernel k;
  EXPECT_EQ(probe_state(fake_sampler(k)), ProbeState::attached);
  Config none;
  EXPECT_EQ(probe_state(EndpointSampler(none)), ProbeState::none);
  Config off = one_endpoint();
  off.ebpf = EbpfMode::off;
  EXPECT_EQ(probe_state(EndpointSampler(off)), ProbeState::off);
  // No BTF under this sys_root: the probe cannot load, whoever runs this.
  Config no_btf = one_endpoint();
  no_btf.sys_root = "/nonexistent-sys";
  const EndpointSampler failed(no_btf);
  EXPECT_EQ(probe_state(failed), ProbeState::failed);
  EXPECT_THAT(failed.unavailable(), HasSubstr("BTF"));
}

}  // namespace
}  // namespace headroom::agent
