// SPDX-License-Identifier: Apache-2.0
// The fail-fast gate for a dependency: given headroom's report of a remote
// service the node calls (dependency.<name>.orca, docs/dependencies.md), decide
// per call "call it" or "fail fast". Two rules, both per priority bucket:
//
//  - circuit breaker: open when the report's error share or late share reaches
//    a threshold over enough calls; fail fast for open_for; then half-open, a
//    bounded trickle of calls goes through so that headroom's kernel
//    measurement sees whether the dependency recovered (the gate never sees
//    a call's result); closed when the report shows the shares under a lower
//    threshold, open again when they are still high;
//  - bulkhead: fail fast while the report's concurrency (calls in flight /
//    max_concurrency) is at or past the bucket's threshold.
//
//   PRIORITY 1 IS THE MOST IMPORTANT, 100 THE LEAST IMPORTANT (as shedder.h).
//
// FAIL OPEN: no report, a report without headroom's metadata, a stopped agent
// or a stale report (older than max(stale_intervals x interval, min_stale_ms))
// makes every decision "call": a crashed agent must not take the dependency
// down. The breakers forget their state across such a gap.
//
// The arithmetic is pure (figures_of, step_breaker, trickle_admits); the gate
// precomputes on update() what decide() reads, so decide() is a few atomic
// loads, at most one compare-and-swap (half-open), no allocation, no system
// call and no clock read: the caller passes the time.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>

#include "headroom/orca/report.h"
#include "headroom/orca/result.h"
#include "headroom/orca/shedder.h"  // Bucket, bucket_of_priority

namespace headroom::orca {

// What a report says about a dependency, as plain values: the input of the
// gate's arithmetic. Shares are fractions (0.5 = 50 %).
struct DependencyFigures {
  double errors = 0.0;          // utilization["errors"]: failed share of the window's ended calls
  double slo_target = 0.0;      // utilization["latency.slo_target"]
  double slo_max = 0.0;         // utilization["latency.slo_max"]
  double concurrency = 0.0;     // utilization["concurrency"]: the bulkhead's fill
  double window_calls = 0.0;    // headroom.window.requests: calls that ended in the window
  double inflight = 0.0;        // headroom.inflight: calls in flight at the sample
  double window_seconds = 0.0;  // headroom.window.seconds; 0 when absent
  int64_t timestamp_ms = 0;     // headroom.timestamp_ms (Unix time of the sample)
  int64_t interval_ms = 0;      // headroom.interval_ms
  uint64_t seq = 0;             // headroom.seq
  bool stopped = false;         // headroom.stopped
};

// The figures of a report. An absent share or count reads 0. Fails (naming
// the key) when the report lacks headroom's metadata: such a report is no
// evidence, and the gate treats it as no report at all.
Result<DependencyFigures> figures_of(const Report& report);

// Which latency share counts as "late" for the breaker.
enum class LateShare : int {
  slo_max = 0,     // calls past `max` (default): what callers give up on, as failed as an error
  slo_target = 1,  // calls past `target`: trips on mere slowness; the bulkhead's job, usually
};

// One bucket's thresholds. The breaker opens at errors >= errors_open or
// late >= late_open, and closes from half-open at errors <= errors_close and
// late <= late_close (hysteresis). The bulkhead fails fast at concurrency >=
// concurrency. A threshold above 1 never trips (shares are at most 1).
struct GateBucketLimits {
  double errors_open = 0.5;
  double errors_close = 0.2;
  double late_open = 0.5;
  double late_close = 0.2;
  double concurrency = 1.0;
};

// The defaults, indexed by Bucket: less important buckets fail fast first.
//   CRITICAL     0.5 / 0.2   bulkhead 1.0
//   DEGRADED     0.4 / 0.15  bulkhead 0.9
//   BEST_EFFORT  0.3 / 0.1   bulkhead 0.8
//   BULK         0.2 / 0.1   bulkhead 0.7
std::array<GateBucketLimits, kBucketCount> default_gate_limits() noexcept;

struct GateOptions {
  std::array<GateBucketLimits, kBucketCount> buckets = default_gate_limits();
  LateShare late = LateShare::slo_max;
  // Calls (ended in the window + in flight) a report must cover before a
  // closed breaker may open: one failure out of two calls opens nothing.
  double min_calls = 10;
  // Calls a half-open breaker's evidence must cover before it closes or opens again.
  double min_probe_calls = 3;
  int64_t open_for_ms = 5000;      // open this long before half-open
  double probes_per_second = 10;   // half-open trickle: the rate, shared by all buckets
  double stale_intervals = 3.0;    // a report older than this many intervals is stale...
  int64_t min_stale_ms = 1000;     // ...but never sooner than this (as ReaderOptions)
};

// Every field in range, and ordered so that a less important bucket never
// fails fast later than a more important one. The error names the field:
// "buckets[BULK].errors_open (0.6) must be at most buckets[BEST_EFFORT].errors_open (0.3) ...".
Result<void> validate_gate_options(const GateOptions& options);

// ---------------------------------------------------------------- pure parts

enum class BreakerPhase : int { closed = 0, open = 1, half_open = 2 };
std::string_view breaker_phase_name(BreakerPhase phase) noexcept;  // "closed", "open", "half_open"

struct BreakerState {
  BreakerPhase phase = BreakerPhase::closed;
  int64_t since_ns = 0;  // when the phase began (open, half-open)
  int64_t until_ns = 0;  // open: when it turns half-open
};

// A report as the breaker judges it; times on the caller's monotonic clock.
struct BreakerEvidence {
  double errors = 0.0;
  double late = 0.0;          // the LateShare chosen
  double calls = 0.0;         // window_calls + inflight
  int64_t sample_ns = 0;      // when the report was sampled
  int64_t window_ns = 0;      // how far back its window reaches
};

// One step of a bucket's breaker for a fresh report at now_ns:
//   closed    -> open       calls >= min_calls and (errors >= errors_open or late >= late_open)
//   open      -> half_open  now >= until (since = until), then judged as half-open
//   half_open -> closed     a window begun after since, calls >= min_probe_calls,
//                           errors <= errors_close and late <= late_close
//   half_open -> open       the same window and calls, errors >= errors_open or late >= late_open
// A half-open breaker judges only a window that began after it did: older
// windows hold the calls that opened it.
BreakerState step_breaker(const BreakerState& state, const BreakerEvidence& evidence, const GateBucketLimits& limits,
                          const GateOptions& options, int64_t now_ns) noexcept;

// The half-open trickle, a rate limiter over one number: `tat`, the time at
// which the trickle is again fully idle. A call of `bucket` at now goes
// through when tat - now <= tolerance(bucket), and then tat = max(tat, now) +
// period. CRITICAL's tolerance is 3 periods, DEGRADED 2, BEST_EFFORT 1,
// BULK 0: while important calls keep the trickle busy, less important ones
// wait; when none come, the less important get the probes.
int64_t trickle_tolerance_ns(Bucket bucket, int64_t period_ns) noexcept;
bool trickle_admits(int64_t tat, int64_t now_ns, Bucket bucket, int64_t period_ns) noexcept;

// ---------------------------------------------------------------- the gate

// What decide() says. The first three call the dependency, the last two fail fast.
enum class GateDecision : int {
  call = 0,                // closed
  call_no_data = 1,        // no fresh report: fail open
  call_probe = 2,          // half-open: this call is part of the trickle
  fail_fast_breaker = 3,   // open, or half-open beyond the trickle
  fail_fast_bulkhead = 4,  // concurrency at or past the bucket's threshold
};
constexpr bool should_call(GateDecision d) noexcept { return d < GateDecision::fail_fast_breaker; }
std::string_view gate_decision_name(GateDecision d) noexcept;

// What state() says about a bucket.
enum class GateState : int { closed = 0, open = 1, half_open = 2, no_data = 3 };
std::string_view gate_state_name(GateState s) noexcept;  // "closed", "open", "half_open", "no_data"

// Thread safety: decide() and state() may be called from any number of
// threads at once, concurrently with update()/mark_stale(); those serialize
// on a mutex (one updater is the usual case: the thread that reads the
// report). A decide() racing an update() sees the bucket's old or new state.
// Not movable: keep it where it was built (create() hands out a unique_ptr).
class DependencyGate {
 public:
  // The default options. Calls everything until the first fresh report.
  DependencyGate();
  explicit DependencyGate(const GateOptions& options);  // options must be valid
  // Fails with validate_gate_options' message.
  static Result<std::unique_ptr<DependencyGate>> create(const GateOptions& options);

  DependencyGate(const DependencyGate&) = delete;
  DependencyGate& operator=(const DependencyGate&) = delete;

  // A new report (off the request path, e.g. once per interval). now_unix_ms
  // judges its age (the report's clock); now_ns is the caller's monotonic
  // clock, the one decide() gets. A stale or stopped report fails open.
  void update(const DependencyFigures& figures, int64_t now_unix_ms, int64_t now_ns) noexcept;
  // The same from a report; one without headroom's metadata is mark_stale().
  void update(const Report& report, int64_t now_unix_ms, int64_t now_ns) noexcept;
  // The report is gone or unreadable: fail open from now on until a fresh one.
  void mark_stale() noexcept;

  // Per call. priority 1..100 (clamped); now_ns the caller's monotonic clock
  // (below 2^60, 36 years: an open breaker's end is kept in 61 bits; any
  // value is safe, later ones read an open breaker as half-open).
  GateDecision decide(int priority, int64_t now_ns) const noexcept {
    return decide_bucket(bucket_of_priority(priority), now_ns);
  }
  GateDecision decide(Bucket bucket, int64_t now_ns) const noexcept {
    const int i = static_cast<int>(bucket);
    return decide_bucket(static_cast<Bucket>(i < 0 ? 0 : i >= kBucketCount ? kBucketCount - 1 : i), now_ns);
  }

  // The breaker's state of the bucket at now_ns (an open breaker past its
  // open_for reads half_open); no_data when decide() would fail open.
  GateState state(Bucket bucket, int64_t now_ns) const noexcept;
  GateState state(int priority, int64_t now_ns) const noexcept { return state(bucket_of_priority(priority), now_ns); }
  // Whether the bucket's bulkhead is full (fresh report only).
  bool bulkhead_full(Bucket bucket, int64_t now_ns) const noexcept;

  const GateOptions& options() const noexcept { return options_; }

 private:
  GateDecision decide_bucket(Bucket bucket, int64_t now_ns) const noexcept;
  void publish_locked(const std::array<bool, kBucketCount>& full) noexcept;

  // What decide() reads, one word per bucket: until_ns << 3 | bulkhead << 2 | phase.
  static constexpr uint64_t kPhaseMask = 3;
  static constexpr uint64_t kBulkheadBit = 4;
  static constexpr int kUntilShift = 3;

  GateOptions options_;
  int64_t period_ns_ = 0;  // the trickle's period
  std::array<std::atomic<uint64_t>, kBucketCount> words_{};
  std::atomic<int64_t> fresh_until_ns_{0};  // decide() fails open from this time on
  // Written by deciders in half-open: a cache line of its own.
  alignas(64) mutable std::atomic<int64_t> tat_{0};
  // The updater's side.
  alignas(64) std::mutex mu_;
  std::array<BreakerState, kBucketCount> breakers_{};
};

}  // namespace headroom::orca
