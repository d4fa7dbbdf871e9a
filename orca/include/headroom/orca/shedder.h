// SPDX-License-Identifier: Apache-2.0
// The reference prioritized load shedder: given the utilization headroom
// publishes and a request's priority, the probability with which a proxy should
// drop that request. docs/shedding.md explains the model and its defaults.
//
//   PRIORITY 1 IS THE MOST IMPORTANT, 100 THE LEAST IMPORTANT.
//
// Built for the request path: the probability functions are pure, noexcept,
// allocate nothing and take plain doubles and ints (a C ABI can wrap them
// as they are). Everything that allocates (configuration, validation, the CLI
// summary) happens once, off the request path.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "headroom/orca/report.h"
#include "headroom/orca/result.h"

namespace headroom::orca {

// Priority buckets, most important first. The values are stable (C ABI).
enum class Bucket : int {
  CRITICAL = 0,     // priorities 1-25: shed only past critical_start
  DEGRADED = 1,     // priorities 26-50
  BEST_EFFORT = 2,  // priorities 51-75
  BULK = 3,         // priorities 76-100: shed first
};
inline constexpr int kBucketCount = 4;

// Numeric priorities: 1 = most important, 100 = least important. Each bucket
// holds 25 consecutive levels.
inline constexpr int kMostImportantPriority = 1;
inline constexpr int kLeastImportantPriority = 100;
inline constexpr int kPrioritiesPerBucket = 25;

// Priorities outside 1..100 are clamped into it.
constexpr int clamp_priority(int priority) noexcept {
  return priority < kMostImportantPriority    ? kMostImportantPriority
         : priority > kLeastImportantPriority ? kLeastImportantPriority
                                              : priority;
}
// 1-25 CRITICAL, 26-50 DEGRADED, 51-75 BEST_EFFORT, 76-100 BULK (clamped first).
constexpr Bucket bucket_of_priority(int priority) noexcept {
  return static_cast<Bucket>((clamp_priority(priority) - 1) / kPrioritiesPerBucket);
}
struct PriorityRange {
  int first = 0;  // most important level of the bucket
  int last = 0;   // least important level
};
constexpr PriorityRange priority_range(Bucket bucket) noexcept {
  const int first = static_cast<int>(bucket) * kPrioritiesPerBucket + 1;
  return {first, first + kPrioritiesPerBucket - 1};
}

// "CRITICAL", "DEGRADED", "BEST_EFFORT", "BULK".
std::string_view bucket_name(Bucket bucket) noexcept;
// Case-insensitive; '-' is accepted for '_' ("best-effort").
std::optional<Bucket> parse_bucket(std::string_view name) noexcept;

// Utilization levels of one signal, as fractions (0.6 = 60 %).
//   [0, shed_start)                  nothing is shed
//   [shed_start, critical_start)     BULK, then BEST_EFFORT, then DEGRADED, each
//                                    in its own third, from 0 % to 100 %
//   [critical_start, all_shed)       CRITICAL, from 0 % to 100 %
//   [all_shed, +inf)                 everything is shed
// Valid when finite and 0 <= shed_start < critical_start < all_shed.
struct SignalThresholds {
  double shed_start = 0.6;      // non-critical shedding starts
  double critical_start = 0.8;  // CRITICAL shedding starts
  double all_shed = 1.0;        // everything dropped at or above

  bool operator==(const SignalThresholds&) const = default;
};

// The error names the offending field: "critical_start (0.5) must be greater
// than shed_start (0.6)".
Result<void> validate_thresholds(const SignalThresholds& thresholds);

// Signal names a configuration may use: the report's top-level fields and any
// utilization map key.
inline constexpr std::string_view kApplicationUtilization = "application_utilization";
inline constexpr std::string_view kCpuUtilization = "cpu_utilization";
inline constexpr std::string_view kMemUtilization = "mem_utilization";
inline constexpr std::string_view kUtilizationPrefix = "utilization.";  // + key, e.g. "utilization.io.pressure"

bool is_known_signal(std::string_view signal) noexcept;

// The defaults per signal: shed_start 0.6, critical_start 0.8, and all_shed
// 1.5 for the CPU signals (application_utilization, cpu_utilization,
// utilization.cpu: headroom's CPU figure counts demand beyond capacity, so 1.5
// means demand at 150 % of capacity) or 1.0 for bounded signals (memory,
// pressure, latency, concurrency).
SignalThresholds default_thresholds(std::string_view signal) noexcept;

// The value of a signal in a report. The top-level fields always have one (0
// when unset); a utilization key has one only when the map holds it. Unknown
// names have none. Allocates nothing.
std::optional<double> signal_value(const Report& report, std::string_view signal) noexcept;

// What to do when the report is stale (docs/orca-files.md, "Freshness").
// Whatever the policy, stale data never sheds CRITICAL traffic.
enum class StalePolicy : int {
  fail_open = 0,  // stale data sheds nothing (the default)
  use_last = 1,   // keep shedding on the last values, but never CRITICAL
};
std::string_view stale_policy_name(StalePolicy policy) noexcept;  // "fail_open", "use_last"
std::optional<StalePolicy> parse_stale_policy(std::string_view name) noexcept;  // also "fail-open"

struct ShedderConfig {
  // Signals to shed on, each with its thresholds; the drop probability is the
  // highest any of them gives. Names: "application_utilization",
  // "cpu_utilization", "mem_utilization", or "utilization.<key>".
  std::vector<std::pair<std::string, SignalThresholds>> signals = {
      {std::string(kApplicationUtilization), SignalThresholds{0.6, 0.8, 1.5}}};
  StalePolicy stale = StalePolicy::fail_open;
};

// At least one signal, each known and listed once, each with valid thresholds.
// The error names the entry: "signals[1] (utilization.cpu): all_shed ...".
Result<void> validate_config(const ShedderConfig& config);

// The utilization range over which a bucket or a numeric priority goes from 0 %
// to 100 % drop. Consecutive ranges share their edges exactly, the least
// important first; a priority's range is one 25th of its bucket's, the bucket's
// least important level first.
struct ShedWindow {
  double start = 0.0;  // probability is 0 at or below
  double end = 0.0;    // probability is 1 at or above
};
ShedWindow shed_window(Bucket bucket, const SignalThresholds& thresholds) noexcept;
ShedWindow shed_window(int priority, const SignalThresholds& thresholds) noexcept;

// Drop probability in [0, 1] for one signal's utilization: x^3, x the position
// of the utilization inside the window, clamped to [0, 1]. NaN and values at or
// below the window's start give 0, +inf gives 1; never NaN. Meant for
// thresholds that passed validate_thresholds.
double shed_probability(double utilization, Bucket bucket, const SignalThresholds& thresholds) noexcept;
// Same for a numeric priority, 1 (most important) to 100 (least); clamped.
double shed_probability(double utilization, int priority, const SignalThresholds& thresholds) noexcept;

// Drop probability for a report: the maximum over the configured signals
// (an absent signal contributes 0). When stale: 0 for CRITICAL always, 0 for
// everything under fail_open, the values as they are under use_last.
// Allocates nothing; meant for a validated config.
double shed_probability(const Report& report, Bucket bucket, const ShedderConfig& config, bool stale) noexcept;
double shed_probability(const Report& report, int priority, const ShedderConfig& config, bool stale) noexcept;

// Per-signal and per-bucket breakdown, for tools such as `headroomctl shed`.
struct SignalShed {
  std::string name;
  SignalThresholds thresholds;
  std::optional<double> value;  // empty when the report lacks the signal
  // Indexed by Bucket; what this signal alone gives, before the stale policy.
  std::array<double, kBucketCount> probability{};
};
struct ShedSummary {
  bool stale = false;
  StalePolicy policy = StalePolicy::fail_open;
  std::vector<SignalShed> signals;
  // Indexed by Bucket; the maximum over the signals, after the stale policy.
  std::array<double, kBucketCount> probability{};
};
ShedSummary summarize_shedding(const Report& report, const ShedderConfig& config, bool stale);

// A shedder for a proxy: update() once per new report (every interval, off the
// request path) precomputes the probability of every bucket and priority, so
// should_drop() is a table lookup. Not synchronized: give each thread its
// own, or publish updated ones through an atomic pointer.
class Shedder {
 public:
  // The default configuration. Sheds nothing until the first update().
  Shedder();
  // Fails with validate_config's message.
  static Result<Shedder> create(ShedderConfig config);

  // A new report; stale as decided by the caller (check_staleness).
  void update(const Report& report, bool stale) noexcept;
  // A new report, judged with check_staleness over kStaleIntervals intervals.
  void update_at(const Report& report, int64_t now_unix_ms);
  // The report could not be read again: apply the stale policy to the last values.
  void mark_stale() noexcept;

  double probability(Bucket bucket) const noexcept { return bucket_p_[index_of(bucket)]; }
  double probability(int priority) const noexcept { return priority_p_[clamp_priority(priority) - 1]; }

  // random01: uniform in [0, 1), e.g. from the proxy's own generator. True
  // when the request should be dropped; NaN never drops.
  bool should_drop(double random01, Bucket bucket) const noexcept { return random01 < probability(bucket); }
  bool should_drop(double random01, int priority) const noexcept { return random01 < probability(priority); }

  const ShedderConfig& config() const noexcept { return config_; }
  bool stale() const noexcept { return stale_; }

  static constexpr double kStaleIntervals = 3.0;

 private:
  explicit Shedder(ShedderConfig config);
  static std::size_t index_of(Bucket bucket) noexcept {
    const int i = static_cast<int>(bucket);
    return static_cast<std::size_t>(i < 0 ? 0 : i >= kBucketCount ? kBucketCount - 1 : i);
  }
  void recompute() noexcept;

  ShedderConfig config_;
  std::vector<double> values_;  // last value per configured signal, 0 when absent
  bool stale_ = false;
  std::array<double, kBucketCount> bucket_p_{};
  std::array<double, kLeastImportantPriority> priority_p_{};
};

}  // namespace headroom::orca
