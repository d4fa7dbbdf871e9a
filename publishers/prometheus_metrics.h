// SPDX-License-Identifier: Apache-2.0
// A tick -> the figures Prometheus is shown (docs/metrics.md). Pure: no
// sockets, no files, no clock. MetricsState keeps what a scrape needs between
// ticks: the last tick's gauges, and counters summed from each tick's kernel
// counts, so they rise monotonically since start whatever reloads or eBPF
// probe restarts happen. families() turns a copy of it into prometheus-cpp's
// MetricFamily list, which its serializer writes as the text exposition.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <prometheus/metric_family.h>

#include "publishers/publisher.h"

namespace headroom::publishers::prom {

// The latency histogram's upper bounds in seconds; +Inf follows them.
inline constexpr std::array<double, 14> kLatencyBucketsSeconds = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
inline constexpr std::size_t kLatencyBuckets = kLatencyBucketsSeconds.size() + 1;  // with +Inf

// Which `le` bucket a latency counts under: the first upper bound at or
// above it; the last index (+Inf) past 10 s. The tick gives each kernel
// histogram bucket's requests at the bucket's midpoint (publishers/tick.h),
// which is also what `_sum` adds for each of them.
std::size_t le_bucket_of(double seconds);

// One endpoint's counts since start.
struct EndpointTotals {
  uint64_t requests = 0, errors = 0, aborted = 0, over_target = 0, over_max = 0;
  std::array<uint64_t, kLatencyBuckets> latency{};  // per bucket, not cumulative
  double latency_sum_seconds = 0;

  void add(const publishers::EndpointCounts& interval);
};

struct EndpointState {
  std::string name;
  std::string instance;  // "": the endpoint's aggregate; else one instance's id (label endpoint_instance)
  double target_seconds = 0, max_seconds = 0;
  EndpointTotals counts;
  bool measured = false;  // the eBPF probe gave this tick's signals
  std::vector<std::pair<std::string, double>> utilization;
  double application_utilization = 0;
  double in_flight = 0, pending = 0;
  // The report's window percentiles in seconds (p50, p90, p99), each absent
  // when the window has no completed request, and the requests it counted.
  std::array<std::optional<double>, 3> latency_quantiles{};
  double window_requests = 0;
};

// The `percentile` label of latency_quantiles, in its order. Not
// `quantile`: Prometheus keeps that label for summaries (promtool's lint
// rejects it on a gauge).
inline constexpr std::array<std::string_view, 3> kLatencyPercentileLabels = {"50", "90", "99"};

// One dependency's: its calls counted as an endpoint's requests, plus the
// connect failures and resets (docs/dependencies.md).
struct DependencyState {
  std::string name;
  double target_seconds = 0, max_seconds = 0;
  EndpointTotals counts;
  uint64_t connect_failures = 0, resets = 0;
  bool measured = false;
  std::vector<std::pair<std::string, double>> utilization;
  double application_utilization = 0;
  double in_flight = 0;
};

class MetricsState {
 public:
  // Takes one tick: its gauges replace the last ones, its endpoint intervals
  // add to the counters. Endpoints no longer configured, and instances the
  // tick no longer has, are dropped; new ones start from 0.
  void update(const Tick& tick);

  // The exposition, in a fixed order: utilization, then endpoints, then the
  // agent's own health. `version` goes into headroom_build_info.
  std::vector<prometheus::MetricFamily> families(const std::string& version) const;

  // The aggregates in configuration order, then the instances (the tick's order).
  const std::vector<EndpointState>& endpoints() const { return endpoints_; }
  // In configuration order.
  const std::vector<DependencyState>& dependencies() const { return dependencies_; }

 private:
  EndpointState& endpoint(std::size_t index, const std::string& name, const std::string& instance);
  void families_of_utilization(std::vector<prometheus::MetricFamily>& out) const;
  void families_of_endpoints(std::vector<prometheus::MetricFamily>& out) const;
  void update_dependencies(const Tick& tick);
  void families_of_dependencies(std::vector<prometheus::MetricFamily>& out) const;
  void families_of_agent(std::vector<prometheus::MetricFamily>& out, const std::string& version) const;

  bool have_tick_ = false;
  std::vector<std::pair<std::string, double>> node_utilization_;
  double node_application_ = 0, node_cpu_ = 0, node_memory_ = 0;
  bool node_has_cpu_ = false, node_has_memory_ = false;
  std::vector<EndpointState> endpoints_;  // as the tick lists them
  std::vector<DependencyState> dependencies_;
  AgentHealth health_;
  int64_t interval_ms_ = 0;
};

}  // namespace headroom::publishers::prom
