// SPDX-License-Identifier: Apache-2.0
#include "headroom/orca/shedder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace headroom::orca {
namespace {

// The non-critical band holds three buckets of 25 levels each.
constexpr int kNonCriticalLevels = 3 * kPrioritiesPerBucket;

Bucket clamp_bucket(Bucket bucket) noexcept {
  const int i = static_cast<int>(bucket);  // a C caller may pass any int
  return static_cast<Bucket>(i < 0 ? 0 : i >= kBucketCount ? kBucketCount - 1 : i);
}

// Edge k of n equal steps from lo to hi. std::lerp is exact at both ends and
// monotonic in t, so neighbouring windows share their edge bit for bit and the
// last edge is exactly hi: a lower priority reaches 1 exactly where the next
// one starts to leave 0.
double edge(double lo, double hi, int k, int n) noexcept {
  return std::lerp(lo, hi, static_cast<double>(k) / static_cast<double>(n));
}

double cubic_in(double u, ShedWindow w) noexcept {
  // Written so that NaN falls into "0" and the division only happens strictly
  // inside a non-empty window: never NaN, never a division by zero.
  if (!(u > w.start)) return 0.0;
  if (!(u < w.end)) return 1.0;
  const double x = (u - w.start) / (w.end - w.start);
  // x is in (0, 1] for valid thresholds; an infinite edge (thresholds that
  // skipped validation) can make it NaN, which must not escape.
  if (!(x < 1.0)) return x >= 1.0 ? 1.0 : 0.0;
  return x * x * x;
}

// `a` spells the priority name `b` (upper case, "_"): any case, "-" for "_".
bool names_priority(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (c == '-') c = '_';
    if (c != b[i]) return false;
  }
  return true;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

bool is_cpu_signal(std::string_view signal) noexcept {
  return signal == kApplicationUtilization || signal == kCpuUtilization || signal == "utilization.cpu";
}

// Applies the stale policy: CRITICAL is never shed on stale data.
bool stale_suppresses(bool stale, StalePolicy policy, Bucket bucket) noexcept {
  return stale && (policy == StalePolicy::fail_open || bucket == Bucket::CRITICAL);
}

template <class Level>
double report_probability(const Report& report, Level level, Bucket bucket, const ShedderConfig& config,
                          bool stale) noexcept {
  if (stale_suppresses(stale, config.stale, bucket)) return 0.0;
  double p = 0.0;
  for (const auto& [name, thresholds] : config.signals) {
    const auto v = signal_value(report, name);
    if (v) p = std::max(p, shed_probability(*v, level, thresholds));
  }
  return p;
}

}  // namespace

std::string_view bucket_name(Bucket bucket) noexcept {
  switch (clamp_bucket(bucket)) {
    case Bucket::CRITICAL: return "CRITICAL";
    case Bucket::DEGRADED: return "DEGRADED";
    case Bucket::BEST_EFFORT: return "BEST_EFFORT";
    case Bucket::BULK: return "BULK";
  }
  return "BULK";
}

std::optional<Bucket> parse_bucket(std::string_view name) noexcept {
  for (int i = 0; i < kBucketCount; ++i) {
    const auto b = static_cast<Bucket>(i);
    if (names_priority(name, bucket_name(b))) return b;
  }
  return std::nullopt;
}

Result<void> validate_thresholds(const SignalThresholds& t) {
  if (!std::isfinite(t.shed_start) || t.shed_start < 0.0)
    return logic_error("shed_start (" + num(t.shed_start) + ") must be finite and >= 0");
  if (!std::isfinite(t.critical_start) || !(t.critical_start > t.shed_start))
    return logic_error("critical_start (" + num(t.critical_start) + ") must be finite and greater than shed_start (" +
                       num(t.shed_start) + ")");
  if (!std::isfinite(t.all_shed) || !(t.all_shed > t.critical_start))
    return logic_error("all_shed (" + num(t.all_shed) + ") must be finite and greater than critical_start (" +
                       num(t.critical_start) + ")");
  return {};
}

bool is_known_signal(std::string_view signal) noexcept {
  if (signal == kApplicationUtilization || signal == kCpuUtilization || signal == kMemUtilization) return true;
  return signal.size() > kUtilizationPrefix.size() && signal.substr(0, kUtilizationPrefix.size()) == kUtilizationPrefix;
}

SignalThresholds default_thresholds(std::string_view signal) noexcept {
  return SignalThresholds{0.6, 0.8, is_cpu_signal(signal) ? 1.5 : 1.0};
}

std::optional<double> signal_value(const Report& report, std::string_view signal) noexcept {
  if (signal == kApplicationUtilization) return report.application_utilization();
  if (signal == kCpuUtilization) return report.cpu_utilization();
  if (signal == kMemUtilization) return report.mem_utilization();
  if (!is_known_signal(signal)) return std::nullopt;
  const std::string_view key = signal.substr(kUtilizationPrefix.size());
  // A linear scan: the map holds a handful of keys, and looking one up by
  // string_view would need a std::string (an allocation) with this protobuf.
  for (const auto& [k, v] : report.utilization())
    if (k == key) return v;
  return std::nullopt;
}

std::string_view stale_policy_name(StalePolicy policy) noexcept {
  return policy == StalePolicy::use_last ? "use_last" : "fail_open";
}

std::optional<StalePolicy> parse_stale_policy(std::string_view name) noexcept {
  if (names_priority(name, "FAIL_OPEN")) return StalePolicy::fail_open;
  if (names_priority(name, "USE_LAST")) return StalePolicy::use_last;
  return std::nullopt;
}

Result<void> validate_config(const ShedderConfig& config) {
  if (config.signals.empty()) return logic_error("signals is empty: there is nothing to shed on");
  if (config.stale != StalePolicy::fail_open && config.stale != StalePolicy::use_last)
    return logic_error("stale is not a StalePolicy (" + std::to_string(static_cast<int>(config.stale)) + ")");
  for (std::size_t i = 0; i < config.signals.size(); ++i) {
    const auto& [name, thresholds] = config.signals[i];
    const std::string where = "signals[" + std::to_string(i) + "] (" + name + ")";
    if (!is_known_signal(name))
      return logic_error(where +
                         ": unknown signal; expected application_utilization, cpu_utilization, mem_utilization "
                         "or utilization.<key>");
    for (std::size_t j = 0; j < i; ++j)
      if (config.signals[j].first == name)
        return logic_error(where + ": listed twice (also signals[" + std::to_string(j) + "])");
    if (auto r = validate_thresholds(thresholds); !r) return logic_error(where + ": " + r.error().message);
  }
  return {};
}

ShedWindow shed_window(Bucket bucket, const SignalThresholds& t) noexcept {
  bucket = clamp_bucket(bucket);
  if (bucket == Bucket::CRITICAL) return {t.critical_start, t.all_shed};
  // BULK is the first third of the band, DEGRADED the last.
  const int third = static_cast<int>(Bucket::BULK) - static_cast<int>(bucket);
  return {edge(t.shed_start, t.critical_start, third * kPrioritiesPerBucket, kNonCriticalLevels),
          edge(t.shed_start, t.critical_start, (third + 1) * kPrioritiesPerBucket, kNonCriticalLevels)};
}

ShedWindow shed_window(int priority, const SignalThresholds& t) noexcept {
  priority = clamp_priority(priority);
  // Step 0 is the least important level of the range, so 25 -> first CRITICAL
  // step, 100 -> first non-critical step; the bucket windows above use the
  // same edges, so a bucket's window is the union of its levels' windows.
  if (priority <= kPrioritiesPerBucket) {
    const int step = kPrioritiesPerBucket - priority;
    return {edge(t.critical_start, t.all_shed, step, kPrioritiesPerBucket),
            edge(t.critical_start, t.all_shed, step + 1, kPrioritiesPerBucket)};
  }
  const int step = kLeastImportantPriority - priority;
  return {edge(t.shed_start, t.critical_start, step, kNonCriticalLevels),
          edge(t.shed_start, t.critical_start, step + 1, kNonCriticalLevels)};
}

double shed_probability(double utilization, Bucket bucket, const SignalThresholds& thresholds) noexcept {
  return cubic_in(utilization, shed_window(bucket, thresholds));
}

double shed_probability(double utilization, int priority, const SignalThresholds& thresholds) noexcept {
  return cubic_in(utilization, shed_window(priority, thresholds));
}

double shed_probability(const Report& report, Bucket bucket, const ShedderConfig& config, bool stale) noexcept {
  return report_probability(report, bucket, clamp_bucket(bucket), config, stale);
}

double shed_probability(const Report& report, int priority, const ShedderConfig& config, bool stale) noexcept {
  return report_probability(report, priority, bucket_of_priority(priority), config, stale);
}

ShedSummary summarize_shedding(const Report& report, const ShedderConfig& config, bool stale) {
  ShedSummary s;
  s.stale = stale;
  s.policy = config.stale;
  for (const auto& [name, thresholds] : config.signals) {
    SignalShed sig;
    sig.name = name;
    sig.thresholds = thresholds;
    sig.value = signal_value(report, name);
    for (int b = 0; b < kBucketCount; ++b) {
      const auto bucket = static_cast<Bucket>(b);
      const auto i = static_cast<std::size_t>(b);
      sig.probability[i] = sig.value ? shed_probability(*sig.value, bucket, thresholds) : 0.0;
      if (!stale_suppresses(stale, config.stale, bucket)) s.probability[i] = std::max(s.probability[i], sig.probability[i]);
    }
    s.signals.push_back(std::move(sig));
  }
  return s;
}

// ---------------------------------------------------------------- Shedder

Shedder::Shedder() : Shedder(ShedderConfig{}) {}

Shedder::Shedder(ShedderConfig config) : config_(std::move(config)), values_(config_.signals.size(), 0.0) {}

Result<Shedder> Shedder::create(ShedderConfig config) {
  if (auto r = validate_config(config); !r) return r.error();
  return Shedder(std::move(config));
}

void Shedder::update(const Report& report, bool stale) noexcept {
  for (std::size_t i = 0; i < values_.size(); ++i) values_[i] = signal_value(report, config_.signals[i].first).value_or(0.0);
  stale_ = stale;
  recompute();
}

void Shedder::update_at(const Report& report, int64_t now_unix_ms) {
  update(report, check_staleness(report, now_unix_ms, kStaleIntervals).stale);
}

void Shedder::mark_stale() noexcept {
  stale_ = true;
  recompute();
}

void Shedder::recompute() noexcept {
  bucket_p_.fill(0.0);
  priority_p_.fill(0.0);
  for (std::size_t i = 0; i < values_.size(); ++i) {
    const auto& thresholds = config_.signals[i].second;
    for (int b = 0; b < kBucketCount; ++b) {
      if (stale_suppresses(stale_, config_.stale, static_cast<Bucket>(b))) continue;
      auto& p = bucket_p_[static_cast<std::size_t>(b)];
      p = std::max(p, shed_probability(values_[i], static_cast<Bucket>(b), thresholds));
    }
    for (int prio = kMostImportantPriority; prio <= kLeastImportantPriority; ++prio) {
      if (stale_suppresses(stale_, config_.stale, bucket_of_priority(prio))) continue;
      auto& p = priority_p_[static_cast<std::size_t>(prio - 1)];
      p = std::max(p, shed_probability(values_[i], prio, thresholds));
    }
  }
}

}  // namespace headroom::orca
