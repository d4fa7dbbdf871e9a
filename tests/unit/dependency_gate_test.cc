// SPDX-License-Identifier: Apache-2.0
// The fail-fast gate: its options, the breaker's transitions (table), the
// half-open trickle, the bulkhead per priority, failing open, threads, and
// a latent dependency's reports written and read back as headroomd's are.
#include "headroom/orca/dependency_gate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "headroom/orca/names.h"
#include "headroom/orca/report_writer.h"
#include "temp_dir.h"

namespace headroom::orca {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kUnixBase = 1'700'000'000'000;  // the reports' clock, ms
constexpr int64_t kMonoBase = 50 * kS;             // the caller's monotonic clock
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr Bucket kBuckets[] = {Bucket::CRITICAL, Bucket::DEGRADED, Bucket::BEST_EFFORT, Bucket::BULK};

// ---------------------------------------------------------------- options

TEST(GateOptions, DefaultsAreValidAndOrdered) {
  const GateOptions o;
  ASSERT_TRUE(validate_gate_options(o));
  const auto l = default_gate_limits();
  for (int b = 1; b < kBucketCount; ++b) {
    EXPECT_LT(l[b].errors_open, l[b - 1].errors_open) << "less important opens first";
    EXPECT_LT(l[b].concurrency, l[b - 1].concurrency) << "less important bulkhead fills first";
  }
  EXPECT_EQ(o.late, LateShare::slo_max);
}

TEST(GateOptions, ErrorsNameTheField) {
  struct Case {
    void (*edit)(GateOptions&);
    const char* expect;
  };
  const Case cases[] = {
      {[](GateOptions& o) { o.buckets[3].errors_open = 0.35; }, "buckets[BULK].errors_open (0.35) must be at most "
                                                                "buckets[BEST_EFFORT].errors_open (0.3)"},
      {[](GateOptions& o) { o.buckets[0].errors_close = 0.5; }, "buckets[CRITICAL].errors_close (0.5) must be less"},
      {[](GateOptions& o) { o.buckets[1].late_close = 0.45; }, "buckets[DEGRADED].late_close"},
      {[](GateOptions& o) { o.buckets[2].concurrency = 0.95; }, "buckets[BEST_EFFORT].concurrency (0.95) must be at most"},
      {[](GateOptions& o) { o.buckets[0].late_open = kNaN; }, "buckets[CRITICAL].late_open (nan) must be finite"},
      {[](GateOptions& o) { o.min_calls = 0; }, "min_calls (0) must be at least 1"},
      {[](GateOptions& o) { o.min_probe_calls = 0.5; }, "min_probe_calls (0.5)"},
      {[](GateOptions& o) { o.open_for_ms = 0; }, "open_for_ms (0)"},
      {[](GateOptions& o) { o.probes_per_second = 0; }, "probes_per_second (0)"},
      {[](GateOptions& o) { o.stale_intervals = -1; }, "stale_intervals (-1)"},
      {[](GateOptions& o) { o.min_stale_ms = -1; }, "min_stale_ms (-1)"},
      {[](GateOptions& o) { o.late = static_cast<LateShare>(7); }, "late is not a LateShare (7)"},
  };
  for (const Case& c : cases) {
    GateOptions o;
    c.edit(o);
    auto r = validate_gate_options(o);
    ASSERT_FALSE(r) << c.expect;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos) << r.error().message;
    EXPECT_FALSE(DependencyGate::create(o));
  }
  // A threshold above 1 is valid: it never trips.
  GateOptions never;
  for (auto& b : never.buckets) b.late_open = 2.0;
  EXPECT_TRUE(validate_gate_options(never));
}

// ---------------------------------------------------------------- figures

Report dependency_report(int64_t ts_ms, uint64_t seq, double errors, double late, double concurrency, double calls,
                         double inflight = 0) {
  Report r;
  auto& u = *r.mutable_utilization();
  u[std::string(kSignalErrors)] = errors;
  u[std::string(kSignalSloMax)] = late;
  u[std::string(kSignalSloTarget)] = std::max(late, 0.0);
  u[std::string(kSignalConcurrency)] = concurrency;
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(kTimestampMsKey)] = static_cast<double>(ts_ms);
  nm[std::string(kSeqKey)] = static_cast<double>(seq);
  nm[std::string(kIntervalMsKey)] = 100;
  nm[std::string(kMetricWindowRequests)] = calls;
  nm[std::string(kMetricInflight)] = inflight;
  nm[std::string(kMetricWindowSeconds)] = 0.5;
  return r;
}

TEST(GateFigures, FromAReport) {
  Report r = dependency_report(kUnixBase, 7, 0.25, 0.5, 0.75, 40, 3);
  (*r.mutable_utilization())[std::string(kSignalSloTarget)] = 0.6;
  auto f = figures_of(r);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_DOUBLE_EQ(f->errors, 0.25);
  EXPECT_DOUBLE_EQ(f->slo_max, 0.5);
  EXPECT_DOUBLE_EQ(f->slo_target, 0.6);
  EXPECT_DOUBLE_EQ(f->concurrency, 0.75);
  EXPECT_DOUBLE_EQ(f->window_calls, 40);
  EXPECT_DOUBLE_EQ(f->inflight, 3);
  EXPECT_DOUBLE_EQ(f->window_seconds, 0.5);
  EXPECT_EQ(f->timestamp_ms, kUnixBase);
  EXPECT_EQ(f->interval_ms, 100);
  EXPECT_EQ(f->seq, 7u);
  EXPECT_FALSE(f->stopped);

  Report bare;  // absent shares read 0; absent metadata is no evidence
  (*bare.mutable_utilization())[std::string(kSignalErrors)] = 1.0;
  auto none = figures_of(bare);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("headroom.timestamp_ms"), std::string::npos) << none.error().message;
}

// ---------------------------------------------------------------- the breaker, a table

TEST(Breaker, Transitions) {
  const GateOptions o;  // min_calls 10, min_probe_calls 3, open_for 5 s
  const GateBucketLimits l = default_gate_limits()[0];  // CRITICAL: open 0.5, close 0.2
  const int64_t now = 100 * kS;
  const int64_t open_for = o.open_for_ms * kMs;
  const BreakerState closed{};
  const BreakerState open{BreakerPhase::open, now - kS, now - kS + open_for};
  const BreakerState open_due{BreakerPhase::open, now - open_for - kS, now - kS};  // half-open since now - 1 s
  const BreakerState half{BreakerPhase::half_open, now - kS, 0};
  const BreakerState reopened{BreakerPhase::open, now, now + open_for};
  // A window that began after the half-open one did (now - 1 s), and one that did not.
  auto fresh = [&](double errors, double late, double calls) {
    return BreakerEvidence{errors, late, calls, now, 500 * kMs};
  };
  auto old_window = [&](double errors, double late, double calls) {
    return BreakerEvidence{errors, late, calls, now, 2 * kS};
  };
  struct Row {
    const char* name;
    BreakerState in;
    BreakerEvidence e;
    BreakerState out;
  };
  const Row rows[] = {
      {"closed, healthy", closed, fresh(0, 0, 100), closed},
      {"closed -> open by errors", closed, fresh(0.6, 0, 20), reopened},
      {"closed -> open by lateness, at the threshold", closed, fresh(0, 0.5, 20), reopened},
      {"closed, just under both", closed, fresh(0.49, 0.49, 1000), closed},
      {"closed, one failure of two calls", closed, fresh(1.0, 1.0, 2), closed},
      {"closed, 9 calls all failing", closed, fresh(1.0, 0, 9), closed},
      {"closed -> open at min_calls", closed, fresh(1.0, 0, 10), reopened},
      {"closed, NaN shares", closed, fresh(kNaN, kNaN, 100), closed},
      {"open, before open_for", open, fresh(0, 0, 100), open},
      {"open, before open_for, still failing", open, fresh(1, 1, 100), open},
      {"open -> half-open -> closed on a fresh window", open_due, fresh(0, 0, 5), closed},
      {"open -> half-open, window older than half-open", open_due, old_window(0, 0, 100), half},
      {"open -> half-open -> open, trickle still failing", open_due, fresh(0, 1.0, 5), reopened},
      {"half-open, window older than half-open", half, old_window(1, 1, 100), half},
      {"half-open, too few fresh calls", half, fresh(0, 0, 2), half},
      {"half-open -> closed at the close thresholds", half, fresh(0.2, 0.2, 3), closed},
      {"half-open, between close and open (hysteresis)", half, fresh(0.3, 0, 50), half},
      {"half-open, late between close and open", half, fresh(0, 0.21, 50), half},
      {"half-open -> open by errors", half, fresh(0.9, 0, 3), reopened},
      {"half-open -> open by lateness", half, fresh(0, 0.5, 3), reopened},
      {"half-open, NaN shares", half, fresh(kNaN, kNaN, 50), half},
  };
  for (const Row& r : rows) {
    const BreakerState got = step_breaker(r.in, r.e, l, o, now);
    EXPECT_EQ(got.phase, r.out.phase) << r.name << ": " << breaker_phase_name(got.phase);
    EXPECT_EQ(got.since_ns, r.out.since_ns) << r.name;
    EXPECT_EQ(got.until_ns, r.out.until_ns) << r.name;
  }
}

TEST(Breaker, ThresholdsArePerBucket) {
  const GateOptions o;
  const auto limits = default_gate_limits();
  // errors 0.25: BULK (0.2) opens, BEST_EFFORT (0.3) and above stay closed.
  const BreakerEvidence e{0.25, 0, 100, 0, 500 * kMs};
  EXPECT_EQ(step_breaker({}, e, limits[3], o, 0).phase, BreakerPhase::open);
  EXPECT_EQ(step_breaker({}, e, limits[2], o, 0).phase, BreakerPhase::closed);
  EXPECT_EQ(step_breaker({}, e, limits[0], o, 0).phase, BreakerPhase::closed);
}

TEST(Trickle, ToleranceFavoursImportantCalls) {
  const int64_t p = 100 * kMs;
  EXPECT_EQ(trickle_tolerance_ns(Bucket::CRITICAL, p), 3 * p);
  EXPECT_EQ(trickle_tolerance_ns(Bucket::DEGRADED, p), 2 * p);
  EXPECT_EQ(trickle_tolerance_ns(Bucket::BEST_EFFORT, p), p);
  EXPECT_EQ(trickle_tolerance_ns(Bucket::BULK, p), 0);
  struct Row {
    int64_t tat_ahead;  // tat - now
    bool admits[kBucketCount];
  };
  const Row rows[] = {
      {-kS, {true, true, true, true}},  // idle
      {0, {true, true, true, true}},
      {1, {true, true, true, false}},  // busy: BULK waits
      {p, {true, true, true, false}},
      {p + 1, {true, true, false, false}},
      {2 * p + 1, {true, false, false, false}},
      {3 * p, {true, false, false, false}},
      {3 * p + 1, {false, false, false, false}},
  };
  const int64_t now = 10 * kS;
  for (const Row& r : rows)
    for (int b = 0; b < kBucketCount; ++b)
      EXPECT_EQ(trickle_admits(now + r.tat_ahead, now, kBuckets[b], p), r.admits[b])
          << "tat - now = " << r.tat_ahead << ", " << bucket_name(kBuckets[b]);
}

// ---------------------------------------------------------------- the gate

// Reports at the caller's clock: a report sampled at mono_ns was stamped
// kUnixBase + (mono_ns - kMonoBase) / 1 ms, and is read at once.
int64_t unix_at(int64_t mono_ns) { return kUnixBase + (mono_ns - kMonoBase) / kMs; }

DependencyFigures figures(double errors, double late, double concurrency, double calls, double inflight = 0) {
  DependencyFigures f;
  f.errors = errors;
  f.slo_max = late;
  f.concurrency = concurrency;
  f.window_calls = calls;
  f.inflight = inflight;
  f.window_seconds = 0.5;
  f.interval_ms = 100;
  return f;
}

void feed(DependencyGate& g, DependencyFigures f, int64_t now_ns) {
  f.timestamp_ms = unix_at(now_ns);
  g.update(f, unix_at(now_ns), now_ns);
}

// Feeds the same figures every 100 ms in [from, to), as an agent publishes.
void feed_every(DependencyGate& g, const DependencyFigures& f, int64_t from, int64_t to) {
  for (int64_t t = from; t < to; t += 100 * kMs) feed(g, f, t);
}

TEST(Gate, NoReportCallsEverything) {
  DependencyGate g;
  for (int p : {1, 30, 60, 100}) {
    EXPECT_EQ(g.decide(p, kMonoBase), GateDecision::call_no_data);
    EXPECT_EQ(g.state(p, kMonoBase), GateState::no_data);
  }
  EXPECT_TRUE(should_call(GateDecision::call_no_data));
  EXPECT_TRUE(should_call(GateDecision::call_probe));
  EXPECT_FALSE(should_call(GateDecision::fail_fast_breaker));
  EXPECT_FALSE(should_call(GateDecision::fail_fast_bulkhead));
}

TEST(Gate, ErrorsOpenLessImportantBucketsFirst) {
  DependencyGate g;
  int64_t t = kMonoBase;
  feed(g, figures(0, 0, 0.1, 100), t);
  for (Bucket b : kBuckets) EXPECT_EQ(g.decide(b, t), GateDecision::call);
  struct Step {
    double errors;
    GateState want[kBucketCount];  // CRITICAL .. BULK
  };
  const Step steps[] = {
      {0.25, {GateState::closed, GateState::closed, GateState::closed, GateState::open}},
      {0.35, {GateState::closed, GateState::closed, GateState::open, GateState::open}},
      {0.45, {GateState::closed, GateState::open, GateState::open, GateState::open}},
      {0.55, {GateState::open, GateState::open, GateState::open, GateState::open}},
  };
  for (const Step& s : steps) {
    t += 100 * kMs;
    feed(g, figures(s.errors, 0, 0.1, 100), t);
    for (int b = 0; b < kBucketCount; ++b) {
      EXPECT_EQ(g.state(kBuckets[b], t), s.want[b]) << "errors " << s.errors << " " << bucket_name(kBuckets[b]);
      EXPECT_EQ(g.decide(kBuckets[b], t),
                s.want[b] == GateState::open ? GateDecision::fail_fast_breaker : GateDecision::call);
    }
  }
  // Priorities map onto the buckets: 25 is CRITICAL, 26 DEGRADED; out of range is clamped.
  EXPECT_EQ(g.state(0, t), GateState::open);
  EXPECT_EQ(g.state(101, t), GateState::open);
}

TEST(Gate, MinCallsAndLateShares) {
  int64_t t = kMonoBase;
  DependencyGate g;
  feed(g, figures(1.0, 1.0, 0, 1, 1), t);  // one failed, one late in flight: 2 calls
  EXPECT_EQ(g.state(Bucket::BULK, t), GateState::closed);
  t += 100 * kMs;
  feed(g, figures(0, 1.0, 0, 0, 10), t);  // a hung dependency: nothing ended, 10 late in flight
  EXPECT_EQ(g.state(Bucket::CRITICAL, t), GateState::open) << "calls in flight count";

  // slo_target alone opens nothing by default; with LateShare::slo_target it does.
  DependencyFigures slow = figures(0, 0, 0, 100);
  slow.slo_target = 1.0;
  DependencyGate by_max;
  feed(by_max, slow, t);
  EXPECT_EQ(by_max.state(Bucket::BULK, t), GateState::closed);
  GateOptions o;
  o.late = LateShare::slo_target;
  auto by_target = DependencyGate::create(o);
  ASSERT_TRUE(by_target);
  feed(**by_target, slow, t);
  EXPECT_EQ((*by_target)->state(Bucket::CRITICAL, t), GateState::open);
}

TEST(Gate, BulkheadPerPriority) {
  DependencyGate g;
  const int64_t t = kMonoBase;
  struct Row {
    double concurrency;
    bool full[kBucketCount];
  };
  const Row rows[] = {
      {0.0, {false, false, false, false}}, {0.69, {false, false, false, false}},
      {0.7, {false, false, false, true}},  {0.85, {false, false, true, true}},
      {0.9, {false, true, true, true}},    {0.99, {false, true, true, true}},
      {1.0, {true, true, true, true}},
  };
  for (const Row& r : rows) {
    feed(g, figures(0, 0, r.concurrency, 100), t);
    for (int b = 0; b < kBucketCount; ++b) {
      EXPECT_EQ(g.bulkhead_full(kBuckets[b], t), r.full[b]) << r.concurrency << " " << bucket_name(kBuckets[b]);
      EXPECT_EQ(g.decide(kBuckets[b], t), r.full[b] ? GateDecision::fail_fast_bulkhead : GateDecision::call)
          << r.concurrency << " " << bucket_name(kBuckets[b]);
      EXPECT_EQ(g.state(kBuckets[b], t), GateState::closed) << "the bulkhead is not the breaker";
    }
  }
}

TEST(Gate, HalfOpenTrickleIsBoundedAndPrioritized) {
  GateOptions o;  // 10 probes/s, open 5 s
  DependencyGate g(o);
  const int64_t t = kMonoBase;
  const int64_t half_open_at = t + o.open_for_ms * kMs;
  feed_every(g, figures(1.0, 1.0, 0, 100), t, half_open_at);
  EXPECT_EQ(g.decide(1, half_open_at - 1), GateDecision::fail_fast_breaker);
  EXPECT_EQ(g.state(1, half_open_at - 1), GateState::open);
  EXPECT_EQ(g.state(1, half_open_at), GateState::half_open);

  // Keep the reports coming (still failing, but from windows older than the
  // half-open phase: no evidence), and offer a CRITICAL and a BULK call every ms for 2 s.
  std::map<Bucket, int> probes;
  for (int64_t ms = 0; ms < 2000; ++ms) {
    const int64_t now = half_open_at + ms * kMs;
    if (ms % 100 == 0) {
      DependencyFigures f = figures(1.0, 1.0, 0, 100);
      f.window_seconds = 10;  // a long window: all of it before half-open
      feed(g, f, now);
    }
    for (Bucket b : {Bucket::CRITICAL, Bucket::BULK}) {
      const GateDecision d = g.decide(b, now);
      ASSERT_TRUE(d == GateDecision::call_probe || d == GateDecision::fail_fast_breaker) << gate_decision_name(d);
      if (d == GateDecision::call_probe) ++probes[b];
    }
  }
  // 10/s for 2 s, plus CRITICAL's burst of 4.
  EXPECT_GE(probes[Bucket::CRITICAL], 20);
  EXPECT_LE(probes[Bucket::CRITICAL], 24);
  EXPECT_EQ(probes[Bucket::BULK], 0) << "BULK waits while CRITICAL calls keep the trickle busy";

  // BULK alone gets the trickle, once CRITICAL's burst has passed.
  int bulk = 0;
  const int64_t later = half_open_at + 2500 * kMs;
  for (int64_t ms = 0; ms < 1000; ++ms) {
    const int64_t now = later + ms * kMs;
    if (ms % 100 == 0) {
      DependencyFigures f = figures(1.0, 1.0, 0, 100);
      f.window_seconds = 10;
      feed(g, f, now);
    }
    if (g.decide(Bucket::BULK, now) == GateDecision::call_probe) ++bulk;
  }
  EXPECT_GE(bulk, 9);
  EXPECT_LE(bulk, 11);
}

TEST(Gate, HalfOpenClosesOnRecoveryAndReopensOnFailure) {
  GateOptions o;
  DependencyGate g(o);
  const int64_t open_for = o.open_for_ms * kMs;
  const int64_t t = kMonoBase;
  feed_every(g, figures(0, 1.0, 0, 50), t, t + open_for);
  EXPECT_EQ(g.state(1, t + open_for - kMs), GateState::open);
  const int64_t half = t + open_for;
  // Up to 0.4 s into half-open, the 0.5 s window reaches back before it: no evidence.
  feed_every(g, figures(0, 0, 0, 5), half, half + 500 * kMs);
  EXPECT_EQ(g.state(1, half + 400 * kMs), GateState::half_open);
  // 0.6 s in, the window holds only the trickle's calls, and they still fail: open again.
  feed(g, figures(0, 0.8, 0, 5), half + 600 * kMs);
  EXPECT_EQ(g.state(1, half + 600 * kMs), GateState::open);
  EXPECT_EQ(g.decide(1, half + 601 * kMs), GateDecision::fail_fast_breaker);
  const int64_t half2 = half + 600 * kMs + open_for;
  feed_every(g, figures(0, 0.8, 0, 0), half + 700 * kMs, half2 + 600 * kMs);
  EXPECT_EQ(g.state(1, half2), GateState::half_open);
  // Late 0.3: between CRITICAL's and DEGRADED's thresholds they stay
  // half-open (hysteresis); it is BEST_EFFORT's and BULK's open threshold.
  feed(g, figures(0, 0.3, 0, 5), half2 + 600 * kMs);
  const GateState at_03[] = {GateState::half_open, GateState::half_open, GateState::open, GateState::open};
  for (int b = 0; b < kBucketCount; ++b)
    EXPECT_EQ(g.state(kBuckets[b], half2 + 600 * kMs), at_03[b]) << bucket_name(kBuckets[b]);
  // Recovered: CRITICAL and DEGRADED close; BEST_EFFORT and BULK after their open_for.
  const DependencyFigures healthy = figures(0, 0.05, 0, 5);
  feed(g, healthy, half2 + 700 * kMs);
  const GateState recovered[] = {GateState::closed, GateState::closed, GateState::open, GateState::open};
  for (int b = 0; b < kBucketCount; ++b)
    EXPECT_EQ(g.state(kBuckets[b], half2 + 700 * kMs), recovered[b]) << bucket_name(kBuckets[b]);
  EXPECT_EQ(g.decide(1, half2 + 700 * kMs), GateDecision::call);
  EXPECT_EQ(g.decide(100, half2 + 700 * kMs), GateDecision::fail_fast_breaker);
  const int64_t half3 = half2 + 600 * kMs + open_for;
  feed_every(g, healthy, half2 + 800 * kMs, half3 + 600 * kMs);
  for (Bucket b : kBuckets) {
    EXPECT_EQ(g.state(b, half3 + 500 * kMs), GateState::closed) << bucket_name(b);
    EXPECT_EQ(g.decide(b, half3 + 500 * kMs), GateDecision::call);
  }
}

TEST(Gate, StaleStoppedOrMissingReportsFailOpen) {
  const int64_t t = kMonoBase;
  const DependencyFigures failing = figures(1.0, 1.0, 1.0, 100);

  DependencyGate g;
  feed(g, failing, t);
  EXPECT_EQ(g.decide(1, t), GateDecision::fail_fast_bulkhead);
  // No new report: fresh for max(3 x 100 ms, 1 s) after the sample, then calls go.
  EXPECT_EQ(g.decide(1, t + 999 * kMs), GateDecision::fail_fast_bulkhead);
  EXPECT_EQ(g.decide(1, t + 1000 * kMs), GateDecision::call_no_data);
  EXPECT_EQ(g.state(1, t + 1000 * kMs), GateState::no_data);
  EXPECT_FALSE(g.bulkhead_full(Bucket::CRITICAL, t + 1000 * kMs));

  // A report already old when read.
  DependencyGate old;
  DependencyFigures f = failing;
  f.timestamp_ms = unix_at(t) - 1001;
  old.update(f, unix_at(t), t);
  EXPECT_EQ(old.decide(1, t), GateDecision::call_no_data);
  f.timestamp_ms = unix_at(t) - 900;  // 0.9 s old: fresh for 0.1 s more
  old.update(f, unix_at(t), t);
  EXPECT_EQ(old.decide(100, t + 99 * kMs), GateDecision::fail_fast_bulkhead);
  EXPECT_EQ(old.decide(100, t + 100 * kMs), GateDecision::call_no_data);
  f.timestamp_ms = unix_at(t) + 1001;  // from the future: the clock was stepped
  old.update(f, unix_at(t), t);
  EXPECT_EQ(old.decide(1, t), GateDecision::call_no_data);

  // A stopped agent.
  DependencyGate stopped;
  f = failing;
  f.stopped = true;
  feed(stopped, f, t);
  EXPECT_EQ(stopped.decide(1, t), GateDecision::call_no_data);

  // A report without headroom's metadata, and mark_stale().
  DependencyGate bare;
  feed(bare, failing, t);
  ASSERT_EQ(bare.state(1, t), GateState::open);
  Report no_metadata;
  (*no_metadata.mutable_utilization())[std::string(kSignalErrors)] = 1.0;
  bare.update(no_metadata, unix_at(t), t);
  EXPECT_EQ(bare.decide(1, t), GateDecision::call_no_data);
  feed(bare, failing, t);
  ASSERT_EQ(bare.state(1, t), GateState::open);
  bare.mark_stale();
  EXPECT_EQ(bare.decide(1, t), GateDecision::call_no_data);
}

TEST(Gate, AGapForgetsTheBreakers) {
  DependencyGate g;
  int64_t t = kMonoBase;
  feed(g, figures(1.0, 0, 0, 100), t);
  ASSERT_EQ(g.state(1, t), GateState::open);
  // The agent was gone for 2 s; it is back, and the window is empty (the
  // shares it keeps are the last ones, but no call backs them).
  t += 2 * kS;
  feed(g, figures(1.0, 0, 0, 0), t);
  EXPECT_EQ(g.state(1, t), GateState::closed);
  EXPECT_EQ(g.decide(1, t), GateDecision::call);
  // Without a gap, the same report keeps it open.
  DependencyGate h;
  feed(h, figures(1.0, 0, 0, 100), kMonoBase);
  feed(h, figures(1.0, 0, 0, 0), kMonoBase + 900 * kMs);
  EXPECT_EQ(h.state(1, kMonoBase + 900 * kMs), GateState::open);
}

TEST(Gate, AnyTimeIsSafe) {
  // A C caller may pass any int64_t: nothing overflows into a wrong answer.
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  DependencyGate g;
  feed_every(g, figures(1.0, 1.0, 0, 100), kMonoBase, kMonoBase + 5 * kS + 100 * kMs);  // half-open now
  ASSERT_EQ(g.state(1, kMonoBase + 5 * kS), GateState::half_open);
  EXPECT_EQ(g.decide(1, kMonoBase + 5 * kS), GateDecision::call_probe);
  EXPECT_EQ(g.decide(1, kMax), GateDecision::call_no_data) << "far past the last report";
  EXPECT_EQ(g.decide(1, kMin), GateDecision::fail_fast_breaker) << "before the trickle's time: no probe";
  DependencyFigures f = figures(1.0, 1.0, 0, 100);
  f.timestamp_ms = kMin;
  g.update(f, kMax, kMonoBase);
  EXPECT_EQ(g.decide(1, kMonoBase), GateDecision::call_no_data) << "an age that overflows is stale";
  // The latest time the gate keeps exactly: 2^60 ns, 36 years of a monotonic clock.
  const int64_t late = (int64_t{1} << 60) - 10 * kS;
  feed(g, figures(1.0, 1.0, 0, 100), late);
  EXPECT_EQ(g.state(1, late), GateState::open);
  EXPECT_EQ(g.decide(1, late + 999 * kMs), GateDecision::fail_fast_breaker);
}

TEST(Gate, DecideFromManyThreadsWhileUpdating) {
  DependencyGate g;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> now{kMonoBase};
  std::atomic<long> probes{0}, decisions{0};
  std::thread updater([&] {
    while (decisions.load() < 3000) std::this_thread::yield();  // the deciders are running
    for (int i = 0; i < 2000; ++i) {
      const int64_t t = now.fetch_add(10 * kMs) + 10 * kMs;  // 20 s of reports, 10 ms apart
      const bool failing = (i / 200) % 2 == 0;
      feed(g, figures(failing ? 1.0 : 0.0, 0, i % 7 == 0 ? 0.8 : 0.1, 100), t);
    }
    stop = true;
  });
  std::vector<std::thread> deciders;
  for (int k = 0; k < 3; ++k)
    deciders.emplace_back([&, k] {
      int p = 1 + k * 33;
      long mine = 0;
      while (!stop || mine < 1000) {
        ++mine;
        const GateDecision d = g.decide(p, now.load());
        ASSERT_GE(static_cast<int>(d), 0);
        ASSERT_LE(static_cast<int>(d), static_cast<int>(GateDecision::fail_fast_bulkhead));
        if (d == GateDecision::call_probe) ++probes;
        ++decisions;
        p = p % 100 + 1;
      }
    });
  updater.join();
  for (auto& d : deciders) d.join();
  EXPECT_GE(decisions.load(), 3000);
  // At most 10/s over 20 s of the callers' clock, plus the burst.
  EXPECT_LE(probes.load(), 20 * 10 + 4);
}

// ---------------------------------------------------------------- real reports

// A dependency driven by the gate's own calls: each call let through ends
// after 1 ms while healthy; while latent it hangs until the client gives up
// at 1 s (an error, and late past max = 250 ms). Every 100 ms the figures of
// the last 500 ms are written as headroomd writes them (ReportFileWriter),
// read back from the file, and fed to the gate.
class LatentDependency {
 public:
  struct Call {
    int64_t start, end;
    bool error;
  };
  void call(int64_t now, bool latent) {
    calls_.push_back(latent ? Call{now, now + kS, true} : Call{now, now + kMs, false});
  }
  Report report(int64_t now, uint64_t seq) {
    constexpr int64_t kWindow = 500 * kMs, kMax = 250 * kMs;
    double ended = 0, failed = 0, late_ended = 0, inflight = 0, late_inflight = 0;
    for (const Call& c : calls_) {
      if (c.start > now) continue;
      if (c.end <= now) {
        if (c.end <= now - kWindow) continue;
        ++ended;
        failed += c.error ? 1 : 0;
        late_ended += c.end - c.start > kMax ? 1 : 0;
      } else {
        ++inflight;
        late_inflight += now - c.start > kMax ? 1 : 0;
      }
    }
    // As the agent does: an empty window keeps the last shares.
    if (ended + late_inflight > 0) late_ = (late_ended + late_inflight) / (ended + late_inflight);
    if (ended > 0) errors_ = failed / ended;
    while (!calls_.empty() && calls_.front().end <= now - kWindow) calls_.pop_front();
    return dependency_report(unix_at(now), seq, errors_, late_, std::min(1.0, inflight / 50.0), ended, inflight);
  }

 private:
  std::deque<Call> calls_;
  double late_ = 0, errors_ = 0;
};

TEST(GateRealReports, LatentDependencyOpensProbesAndCloses) {
  headroom::testing::TempDir tmp;
  auto writer = ReportFileWriter::open(tmp.path());
  ASSERT_TRUE(writer) << writer.error().message;
  const std::string name = report_file_name(dependency_scope("payments"));
  const std::string path = tmp / name;

  DependencyGate gate;
  LatentDependency dep;
  const int64_t latent_from = kMonoBase + 2 * kS, recovered_at = kMonoBase + 10 * kS, end = kMonoBase + 20 * kS;
  struct Phase {
    int64_t offered = 0, through = 0, probes = 0;
  };
  std::map<std::string, std::map<Bucket, Phase>> phases;
  std::map<GateState, int> latent_states;
  int64_t closed_again = 0;
  uint64_t seq = 0;
  const int priorities[] = {1, 30, 60, 90};
  for (int64_t now = kMonoBase; now < end; now += kMs) {
    const bool latent = now >= latent_from && now < recovered_at;
    if ((now - kMonoBase) % (100 * kMs) == 0) {
      ASSERT_TRUE(writer->write(name, dep.report(now, ++seq)));
      auto report = read_report_file(path);
      ASSERT_TRUE(report) << report.error().message;
      gate.update(*report, unix_at(now), now);
      if (latent) ++latent_states[gate.state(1, now)];
      const bool all_closed = std::all_of(std::begin(kBuckets), std::end(kBuckets),
                                          [&](Bucket b) { return gate.state(b, now) == GateState::closed; });
      if (now >= recovered_at && closed_again == 0 && all_closed) closed_again = now;
    }
    const int priority = priorities[(now / kMs) % 4];
    const GateDecision d = gate.decide(priority, now);
    const std::string phase = now < latent_from ? "healthy" : latent ? "latent" : closed_again ? "closed again"
                                                                                               : "recovering";
    Phase& p = phases[phase][bucket_of_priority(priority)];
    ++p.offered;
    if (should_call(d)) {
      ++p.through;
      dep.call(now, latent);
    }
    if (d == GateDecision::call_probe) ++p.probes;
  }
  for (const auto& [phase, buckets] : phases)
    for (const auto& [b, p] : buckets)
      std::printf("%-13s %-12s %5ld of %5ld called (%5.1f %%), %ld probes\n", phase.c_str(),
                  std::string(bucket_name(b)).c_str(), static_cast<long>(p.through), static_cast<long>(p.offered),
                  100.0 * static_cast<double>(p.through) / static_cast<double>(p.offered), static_cast<long>(p.probes));
  std::printf("closed again %ld ms after the dependency recovered\n", static_cast<long>((closed_again - recovered_at) / kMs));
  for (Bucket b : kBuckets) {
    const Phase& healthy = phases["healthy"][b];
    EXPECT_EQ(healthy.through, healthy.offered) << bucket_name(b) << ": healthy, every call goes";
    const Phase& latent = phases["latent"][b];
    // Until the first report shows it (up to 100 ms of 8 s) calls pile up;
    // then the bulkhead and the breaker fail them fast, but for the trickle.
    EXPECT_LT(static_cast<double>(latent.through) / static_cast<double>(latent.offered), 0.03)
        << bucket_name(b) << ": " << latent.through << " of " << latent.offered;
    const Phase& after = phases["closed again"][b];
    EXPECT_GT(after.offered, 1000) << bucket_name(b);
    EXPECT_EQ(after.through, after.offered) << bucket_name(b) << ": closed again, every call goes";
  }
  // The trickle went to the most important calls first.
  const auto probes = [&](Bucket b) { return phases["latent"][b].probes + phases["recovering"][b].probes; };
  EXPECT_GT(probes(Bucket::CRITICAL), 0);
  EXPECT_GE(probes(Bucket::CRITICAL), probes(Bucket::BULK));
  // While latent the breaker was open, half-open (probing), and open again.
  EXPECT_GT(latent_states[GateState::open], 40);
  EXPECT_GT(latent_states[GateState::half_open], 0);
  EXPECT_EQ(latent_states[GateState::no_data], 0);
  // Closed within open_for (5 s) plus a window and a few reports of the recovery.
  ASSERT_NE(closed_again, 0) << "never closed";
  EXPECT_LE(closed_again - recovered_at, 5 * kS + 1500 * kMs) << (closed_again - recovered_at) / kMs << " ms";
}

}  // namespace
}  // namespace headroom::orca
