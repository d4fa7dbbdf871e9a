// SPDX-License-Identifier: Apache-2.0
#include "headroom/orca/dependency_gate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace headroom::orca {
namespace {

constexpr int64_t kNsPerMs = 1'000'000;
constexpr int64_t kMaxOpenForMs = 3'600'000;  // an hour: longer is a configuration mistake
constexpr double kMaxProbesPerSecond = 1e6;
// until_ns lives in the upper 61 bits of a bucket's word.
constexpr int64_t kMaxWordTime = std::numeric_limits<int64_t>::max() >> 3;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

double value_or_zero(const google::protobuf::Map<std::string, double>& m, std::string_view key) {
  const auto it = m.find(std::string(key));
  return it == m.end() ? 0.0 : it->second;
}

std::string field(int bucket, const char* name) {
  return "buckets[" + std::string(bucket_name(static_cast<Bucket>(bucket))) + "]." + name;
}

Result<void> check_bucket(const GateOptions& o, int b) {
  const GateBucketLimits& l = o.buckets[static_cast<std::size_t>(b)];
  const std::pair<const char*, double> all[] = {{"errors_open", l.errors_open},
                                                {"errors_close", l.errors_close},
                                                {"late_open", l.late_open},
                                                {"late_close", l.late_close},
                                                {"concurrency", l.concurrency}};
  for (const auto& [name, v] : all)
    if (!std::isfinite(v) || v < 0.0) return logic_error(field(b, name) + " (" + num(v) + ") must be finite and >= 0");
  if (!(l.errors_close < l.errors_open))
    return logic_error(field(b, "errors_close") + " (" + num(l.errors_close) + ") must be less than errors_open (" +
                       num(l.errors_open) + "): the breaker needs a gap to close in");
  if (!(l.late_close < l.late_open))
    return logic_error(field(b, "late_close") + " (" + num(l.late_close) + ") must be less than late_open (" +
                       num(l.late_open) + "): the breaker needs a gap to close in");
  if (!(l.concurrency > 0.0))
    return logic_error(field(b, "concurrency") + " must be greater than 0: a bulkhead at 0 never lets a call through");
  if (b == 0) return {};
  // A less important bucket must trip no later than the one before it.
  const GateBucketLimits& m = o.buckets[static_cast<std::size_t>(b - 1)];
  const std::pair<const char*, std::pair<double, double>> order[] = {{"errors_open", {l.errors_open, m.errors_open}},
                                                                    {"late_open", {l.late_open, m.late_open}},
                                                                    {"concurrency", {l.concurrency, m.concurrency}}};
  for (const auto& [name, v] : order)
    if (v.first > v.second)
      return logic_error(field(b, name) + " (" + num(v.first) + ") must be at most " + field(b - 1, name) + " (" +
                         num(v.second) + "): a less important bucket fails fast first");
  return {};
}

// Clock arithmetic that saturates: a C caller may pass any int64_t as the
// time, and signed overflow must not decide anything.
int64_t sat_add(int64_t a, int64_t b) noexcept {
  int64_t r = 0;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}
int64_t sat_sub(int64_t a, int64_t b) noexcept {
  int64_t r = 0;
  if (!__builtin_sub_overflow(a, b, &r)) return r;
  return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

int64_t clamp_word_time(int64_t t) noexcept { return t < 0 ? 0 : t > kMaxWordTime ? kMaxWordTime : t; }

}  // namespace

Result<DependencyFigures> figures_of(const Report& report) {
  auto md = metadata_of(report);
  if (!md) return logic_error("not a headroom report: " + md.error().message);
  const auto& u = report.utilization();
  const auto& nm = report.named_metrics();
  DependencyFigures f;
  f.errors = value_or_zero(u, kSignalErrors);
  f.slo_target = value_or_zero(u, kSignalSloTarget);
  f.slo_max = value_or_zero(u, kSignalSloMax);
  f.concurrency = value_or_zero(u, kSignalConcurrency);
  f.window_calls = value_or_zero(nm, kMetricWindowRequests);
  f.inflight = value_or_zero(nm, kMetricInflight);
  f.window_seconds = value_or_zero(nm, kMetricWindowSeconds);
  f.timestamp_ms = md->timestamp_ms;
  f.interval_ms = md->interval_ms;
  f.seq = md->seq;
  f.stopped = md->stopped;
  return f;
}

std::array<GateBucketLimits, kBucketCount> default_gate_limits() noexcept {
  return {GateBucketLimits{0.5, 0.2, 0.5, 0.2, 1.0}, GateBucketLimits{0.4, 0.15, 0.4, 0.15, 0.9},
          GateBucketLimits{0.3, 0.1, 0.3, 0.1, 0.8}, GateBucketLimits{0.2, 0.1, 0.2, 0.1, 0.7}};
}

Result<void> validate_gate_options(const GateOptions& o) {
  for (int b = 0; b < kBucketCount; ++b)
    if (auto r = check_bucket(o, b); !r) return r;
  if (o.late != LateShare::slo_max && o.late != LateShare::slo_target)
    return logic_error("late is not a LateShare (" + std::to_string(static_cast<int>(o.late)) + ")");
  if (!std::isfinite(o.min_calls) || o.min_calls < 1)
    return logic_error("min_calls (" + num(o.min_calls) + ") must be at least 1");
  if (!std::isfinite(o.min_probe_calls) || o.min_probe_calls < 1)
    return logic_error("min_probe_calls (" + num(o.min_probe_calls) + ") must be at least 1");
  if (o.open_for_ms < 1 || o.open_for_ms > kMaxOpenForMs)
    return logic_error("open_for_ms (" + std::to_string(o.open_for_ms) + ") must be 1 to " +
                       std::to_string(kMaxOpenForMs) + " (an hour)");
  if (!std::isfinite(o.probes_per_second) || !(o.probes_per_second > 0) || o.probes_per_second > kMaxProbesPerSecond)
    return logic_error("probes_per_second (" + num(o.probes_per_second) +
                       ") must be greater than 0 and at most 1e6: half-open needs a trickle to see recovery");
  if (!std::isfinite(o.stale_intervals) || !(o.stale_intervals > 0))
    return logic_error("stale_intervals (" + num(o.stale_intervals) + ") must be finite and greater than 0");
  if (o.min_stale_ms < 0) return logic_error("min_stale_ms (" + std::to_string(o.min_stale_ms) + ") must be >= 0");
  return {};
}

std::string_view breaker_phase_name(BreakerPhase phase) noexcept {
  switch (phase) {
    case BreakerPhase::closed: return "closed";
    case BreakerPhase::open: return "open";
    case BreakerPhase::half_open: return "half_open";
  }
  return "closed";
}

std::string_view gate_decision_name(GateDecision d) noexcept {
  switch (d) {
    case GateDecision::call: return "call";
    case GateDecision::call_no_data: return "call_no_data";
    case GateDecision::call_probe: return "call_probe";
    case GateDecision::fail_fast_breaker: return "fail_fast_breaker";
    case GateDecision::fail_fast_bulkhead: return "fail_fast_bulkhead";
  }
  return "call";
}

std::string_view gate_state_name(GateState s) noexcept {
  switch (s) {
    case GateState::closed: return "closed";
    case GateState::open: return "open";
    case GateState::half_open: return "half_open";
    case GateState::no_data: return "no_data";
  }
  return "no_data";
}

BreakerState step_breaker(const BreakerState& state, const BreakerEvidence& e, const GateBucketLimits& limits,
                          const GateOptions& options, int64_t now_ns) noexcept {
  // Comparisons are written so that a NaN share neither opens nor closes.
  const bool trips = e.errors >= limits.errors_open || e.late >= limits.late_open;
  const BreakerState opened{BreakerPhase::open, now_ns, sat_add(now_ns, options.open_for_ms * kNsPerMs)};
  BreakerState s = state;
  switch (s.phase) {
    case BreakerPhase::closed:
      return e.calls >= options.min_calls && trips ? opened : s;
    case BreakerPhase::open:
      if (now_ns < s.until_ns) return s;
      s = BreakerState{BreakerPhase::half_open, s.until_ns, 0};
      break;
    case BreakerPhase::half_open:
      break;
  }
  // Half-open: only a window that began after the trickle did says how the
  // trickle fared; an older one still holds the calls that opened it.
  if (sat_sub(e.sample_ns, e.window_ns) < s.since_ns) return s;
  if (!(e.calls >= options.min_probe_calls)) return s;
  if (trips) return opened;
  if (e.errors <= limits.errors_close && e.late <= limits.late_close) return BreakerState{};
  return s;
}

int64_t trickle_tolerance_ns(Bucket bucket, int64_t period_ns) noexcept {
  return static_cast<int64_t>(static_cast<int>(Bucket::BULK) - static_cast<int>(bucket)) * period_ns;
}

bool trickle_admits(int64_t tat, int64_t now_ns, Bucket bucket, int64_t period_ns) noexcept {
  return sat_sub(tat, now_ns) <= trickle_tolerance_ns(bucket, period_ns);
}

// ---------------------------------------------------------------- DependencyGate

DependencyGate::DependencyGate() : DependencyGate(GateOptions{}) {}

DependencyGate::DependencyGate(const GateOptions& options) : options_(options) {
  const double pps = options_.probes_per_second > 0 ? options_.probes_per_second : 1.0;
  period_ns_ = std::max<int64_t>(1, static_cast<int64_t>(1e9 / pps));
  for (auto& w : words_) w.store(0, std::memory_order_relaxed);
}

Result<std::unique_ptr<DependencyGate>> DependencyGate::create(const GateOptions& options) {
  if (auto r = validate_gate_options(options); !r) return r.error();
  return std::make_unique<DependencyGate>(options);
}

void DependencyGate::update(const DependencyFigures& f, int64_t now_unix_ms, int64_t now_ns) noexcept {
  const std::lock_guard<std::mutex> lock(mu_);
  // A gap in the reports (fresh_until passed) forgets the breakers: the
  // figures before it say nothing about the dependency now.
  if (now_ns >= fresh_until_ns_.load(std::memory_order_relaxed)) breakers_ = {};
  const double threshold = std::max(options_.stale_intervals * static_cast<double>(f.interval_ms),
                                    static_cast<double>(options_.min_stale_ms));
  const int64_t threshold_ms = static_cast<int64_t>(std::min(threshold, 1e12));
  int64_t age_ms = 0;
  const bool overflow = __builtin_sub_overflow(now_unix_ms, f.timestamp_ms, &age_ms);
  if (overflow || f.stopped || f.interval_ms <= 0 || age_ms > threshold_ms || age_ms < -threshold_ms) {
    breakers_ = {};
    publish_locked({});
    fresh_until_ns_.store(std::numeric_limits<int64_t>::min(), std::memory_order_relaxed);
    return;
  }
  BreakerEvidence e;
  e.errors = f.errors;
  e.late = options_.late == LateShare::slo_target ? f.slo_target : f.slo_max;
  e.calls = f.window_calls + f.inflight;
  e.sample_ns = sat_sub(now_ns, age_ms * kNsPerMs);
  e.window_ns = f.window_seconds > 0 ? static_cast<int64_t>(std::min(f.window_seconds, 1e6) * 1e9)
                                     : std::min(f.interval_ms, kMaxOpenForMs) * kNsPerMs;
  std::array<bool, kBucketCount> full{};
  for (std::size_t b = 0; b < kBucketCount; ++b) {
    breakers_[b] = step_breaker(breakers_[b], e, options_.buckets[b], options_, now_ns);
    full[b] = f.concurrency >= options_.buckets[b].concurrency;
  }
  publish_locked(full);
  fresh_until_ns_.store(sat_add(now_ns, (threshold_ms - age_ms) * kNsPerMs), std::memory_order_relaxed);
}

void DependencyGate::update(const Report& report, int64_t now_unix_ms, int64_t now_ns) noexcept {
  try {
    auto f = figures_of(report);
    if (f) {
      update(*f, now_unix_ms, now_ns);
      return;
    }
  } catch (...) {
    // Out of memory building a message: no evidence, so fail open below.
  }
  mark_stale();
}

void DependencyGate::mark_stale() noexcept {
  const std::lock_guard<std::mutex> lock(mu_);
  fresh_until_ns_.store(std::numeric_limits<int64_t>::min(), std::memory_order_relaxed);
  breakers_ = {};
  publish_locked({});
}

void DependencyGate::publish_locked(const std::array<bool, kBucketCount>& full) noexcept {
  for (std::size_t b = 0; b < kBucketCount; ++b) {
    const BreakerState& s = breakers_[b];
    const int64_t until = s.phase == BreakerPhase::open ? clamp_word_time(s.until_ns) : 0;
    const uint64_t word = (static_cast<uint64_t>(until) << kUntilShift) | (full[b] ? kBulkheadBit : 0) |
                          static_cast<uint64_t>(s.phase);
    words_[b].store(word, std::memory_order_relaxed);
  }
}

GateDecision DependencyGate::decide_bucket(Bucket bucket, int64_t now_ns) const noexcept {
  // Each word is self-contained, so relaxed loads suffice: a racing update
  // shows this call the bucket's old or new state, both valid.
  if (now_ns >= fresh_until_ns_.load(std::memory_order_relaxed)) return GateDecision::call_no_data;
  const uint64_t w = words_[static_cast<std::size_t>(bucket)].load(std::memory_order_relaxed);
  if ((w & kBulkheadBit) != 0) return GateDecision::fail_fast_bulkhead;
  const auto phase = static_cast<BreakerPhase>(w & kPhaseMask);
  if (phase == BreakerPhase::closed) return GateDecision::call;
  if (phase == BreakerPhase::open && now_ns < static_cast<int64_t>(w >> kUntilShift))
    return GateDecision::fail_fast_breaker;
  int64_t tat = tat_.load(std::memory_order_relaxed);
  for (;;) {
    if (!trickle_admits(tat, now_ns, bucket, period_ns_)) return GateDecision::fail_fast_breaker;
    if (tat_.compare_exchange_weak(tat, sat_add(std::max(tat, now_ns), period_ns_), std::memory_order_relaxed))
      return GateDecision::call_probe;
  }
}

GateState DependencyGate::state(Bucket bucket, int64_t now_ns) const noexcept {
  const int i = static_cast<int>(bucket);
  const auto b = static_cast<std::size_t>(i < 0 ? 0 : i >= kBucketCount ? kBucketCount - 1 : i);
  if (now_ns >= fresh_until_ns_.load(std::memory_order_relaxed)) return GateState::no_data;
  const uint64_t w = words_[b].load(std::memory_order_relaxed);
  switch (static_cast<BreakerPhase>(w & kPhaseMask)) {
    case BreakerPhase::closed: return GateState::closed;
    case BreakerPhase::open:
      return now_ns < static_cast<int64_t>(w >> kUntilShift) ? GateState::open : GateState::half_open;
    case BreakerPhase::half_open: return GateState::half_open;
  }
  return GateState::closed;
}

bool DependencyGate::bulkhead_full(Bucket bucket, int64_t now_ns) const noexcept {
  const int i = static_cast<int>(bucket);
  const auto b = static_cast<std::size_t>(i < 0 ? 0 : i >= kBucketCount ? kBucketCount - 1 : i);
  if (now_ns >= fresh_until_ns_.load(std::memory_order_relaxed)) return false;
  return (words_[b].load(std::memory_order_relaxed) & kBulkheadBit) != 0;
}

}  // namespace headroom::orca
