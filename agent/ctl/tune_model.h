// SPDX-License-Identifier: Apache-2.0
// `headroomctl tune recommend`, without I/O: an endpoint's history (per query
// step: its request rate, the report's window percentiles and their weights,
// the latency histogram's increases, its signals; or, from /metrics alone, one
// cumulative histogram and the signals' current values) -> a target, a max and
// the shedder's thresholds per signal. docs/tuning.md states each rule.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "headroom/orca/shedder.h"

namespace headroom::ctl::tune {

// ---------------------------------------------------------------- arithmetic

// The steps at peak: those whose rate is at least `share` of the highest
// step's rate (NaN steps never are). Empty when no step has a rate > 0.
std::vector<std::size_t> peak_steps(const std::vector<double>& rate, double share);

// sum(value * weight) / sum(weight) over the pairs with a finite value and a
// weight > 0; nullopt when there is none.
struct Weighted {
  double value = 0;
  double weight = 0;
};
std::optional<double> weighted_mean(const std::vector<Weighted>& values);

// A latency histogram: ascending upper bounds in seconds (the last may be
// +Inf) and the requests at or below each (cumulative, as Prometheus' `le`).
struct Histogram {
  std::vector<double> le;
  std::vector<double> cumulative;
  double count() const { return cumulative.empty() ? 0 : cumulative.back(); }
};
// The q-quantile (0 < q < 1) as Prometheus' histogram_quantile() gives it:
// linear inside the bucket that holds it, the first bucket from 0, and the
// last finite bound when it falls in +Inf. nullopt without requests.
std::optional<double> histogram_quantile(const Histogram& h, double q);

// The q-quantile of plain values (NaN left out), interpolated between the
// closest ranks; nullopt when there is none.
std::optional<double> value_quantile(std::vector<double> values, double q);

// The shedder's thresholds for a signal whose expected level at peak is
// `level` (clamped to [0, 0.95]): shedding starts at L + 0.2 (1 - L), CRITICAL
// at L + 0.6 (1 - L), all is shed at the signal's default (orca).
orca::SignalThresholds thresholds_for_level(double level, std::string_view signal);

// The level of a latency share whose expected value is `share` (1 - the
// SLO's quantile), as windows of `window_requests` requests show it: the
// share plus 2.326 binomial standard deviations, the value one window in a
// hundred reaches. Fewer than one request: the share itself.
double latency_share_level(double share, double window_requests);

// A duration in the configuration's form with 3 significant digits, in the
// largest unit it is at least 1 of: "37.9ms", "1.25s", "850us", "12ns".
// agent::parse_duration reads every value it writes. Rounds up below 1 ns.
std::string format_duration_3(double seconds);

// --since and --step: the step asked for, or 5 min beyond a day and 15 s
// within; never so small that a series has more than kMaxPointsPerSeries
// points (Prometheus' limit is 11 000), never below 1 s.
inline constexpr double kMaxPointsPerSeries = 11'000;
std::chrono::seconds choose_step(std::chrono::seconds since, std::optional<std::chrono::seconds> asked);

// ---------------------------------------------------------------- the rules

struct Options {
  double target_quantile = 0.9;
  double max_quantile = 0.99;
  double max_margin = 1.5;  // max = the max_quantile at peak times this
  double peak_share = 0.8;
  double autoscale_cpu = 0.5;
  double min_samples = 1000;
};

// The signals an endpoint's [[endpoint.shed]] names, as the shedder names them.
inline constexpr std::string_view kShedCpu = "cpu_utilization";
inline constexpr std::string_view kShedSloTarget = "utilization.latency.slo_target";
inline constexpr std::string_view kShedSloMax = "utilization.latency.slo_max";
inline constexpr std::string_view kShedConcurrency = "utilization.concurrency";

// One endpoint's history over the same steps as its rate. From /metrics it
// has one step: `cumulative` is set, `histogram_steps` has the histogram
// since headroomd started and the signals their current values.
struct EndpointHistory {
  std::string name;
  bool cumulative = false;     // from /metrics: one reading, not steps
  double step_seconds = 0;     // the query's step
  std::vector<double> rate;    // requests per second, per step (NaN: no data)
  // The report's window percentiles (seconds) per quantile (0.5, 0.9, 0.99)
  // and per step, and the requests of the windows behind them.
  std::map<double, std::vector<double>> window_quantiles;
  std::vector<double> window_requests;
  // Per step: the histogram's increase over the step (or the whole
  // cumulative histogram); empty when not fetched.
  std::vector<Histogram> histogram_steps;
  // Per signal, as the shedder names it (kShedSloTarget...), per step.
  std::map<std::string, std::vector<double>> signals;
};

// What an expected range says: the signal's p50 and p99 over the peak
// steps (from /metrics: both the current value).
struct SignalPlan {
  std::string signal;
  std::optional<double> p50, p99;
  double level = 0;  // the expected level L the thresholds are set from
  std::string level_from;  // "--autoscale-cpu", "1 - target quantile 0.9, + its spread ...", "its p99 at peak"
  orca::SignalThresholds thresholds;
};

struct Recommendation {
  std::string endpoint;
  bool ok = false;
  std::string note;             // why there is none, when !ok
  std::size_t peak_steps = 0;
  double peak_rate = 0;         // the highest step's requests per second
  double requests_at_peak = 0;  // the samples behind the quantiles
  std::string method;           // "window percentiles" or "histogram"
  double target_seconds = 0, max_seconds = 0;
  std::string target, max;      // format_duration_3 of each
  std::vector<SignalPlan> signals;
};

// `node_cpu`: cpu_utilization per step (same steps), or empty.
// `max_concurrency`: whether the endpoint declares one (concurrency signal).
Recommendation recommend(const EndpointHistory& h, const std::vector<double>& node_cpu, bool max_concurrency,
                         const Options& o);

}  // namespace headroom::ctl::tune
