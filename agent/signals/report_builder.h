// SPDX-License-Identifier: Apache-2.0
// Signals -> the ORCA message. Pure: the caller supplies time and sequence.
// The *_into forms refill a report kept across ticks: the map entries of the
// previous tick are overwritten in place and only those not written again
// are dropped, so a steady tick allocates nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/dependency_signals.h"
#include "agent/signals/endpoint_signals.h"
#include "agent/signals/normalize.h"
#include "agent/signals/signals.h"
#include "headroom/orca/report.h"
#include "publishers/tick.h"

namespace headroom::agent {

using publishers::ReportMeta;

// Replaces each signal by its smoothed value; signals that are absent forget
// their history so a probe that comes back starts fresh.
void smooth(Smoother& smoother, NodeSample& sample);

// The numbers node.orca carries, computed once per tick from the sample, so
// that every publisher gives the same figures without reading a message back.
// Defaults are what a proto3 report holds for a field it does not set.
struct NodeValues {
  // Each published signal clamped to [0, 1], in key order. The keys view the
  // NodeSample's: valid while that sample is not changed.
  std::vector<std::pair<std::string_view, double>> utilization;
  double application_utilization = 0;  // the composite; set when utilization is not empty
  double cpu_utilization = 0;          // the cpu signal, unclamped; set alongside utilization["cpu"]
  double mem_utilization = 0;          // set alongside utilization["memory"]

  const double* find(std::string_view key) const;  // in utilization

  std::vector<std::pair<double, double>> parts;  // the composite's (value, weight) pairs, a reused buffer
};

// cpu_utilization = the cpu signal (demand over capacity, may exceed 1);
// mem_utilization = the memory signal; utilization[key] = each available signal
// clamped to [0, 1]; application_utilization = the configured composite of the
// enabled, available signals (cpu unclamped). node.include_endpoints adds
// "endpoint.<name>" signals to the sample, and they join the composite like
// the node's own. `out` is refilled (its vector keeps its capacity).
void node_values(const NodeSample& sample, const Config& config, NodeValues& out);

// node.orca: the values, and named_metrics = metadata + the sample's raw figures.
void build_node_report_into(const NodeValues& values, const NodeSample& sample, const ReportMeta& meta,
                            orca::Report& out);
orca::Report build_node_report(const NodeSample& sample, const Config& config, const ReportMeta& meta);

// An endpoint report's utilization entries: latency.slo_target,
// latency.slo_max and concurrency, each when known, clamped to [0, 1].
// Returns how many of `out` were filled.
struct KeyedValue {
  std::string_view key;
  double value = 0;
};
std::size_t endpoint_utilization(const EndpointSignals& signals, std::array<KeyedValue, 3>& out);

// The node's CPU utilization as node.orca's cpu_utilization gives it
// (unclamped), when the node publishes the cpu signal.
std::optional<double> node_cpu(const NodeValues& values);

// An endpoint report's application_utilization: the largest of its shares
// (endpoint_composite) and the node's CPU utilization, when known.
double endpoint_application_utilization(const EndpointSignals& signals, std::optional<double> node_cpu_utilization);

struct InstanceFigures;

// endpoint.<name>.orca. With signals: utilization[latency.slo_target,
// latency.slo_max, concurrency (when max_concurrency is declared)],
// rps_fractional, eps, cpu_utilization = the node's (when known),
// application_utilization = the largest of those shares and the node's CPU
// utilization (one scale for a balancer's weights, docs/oob.md), and the raw
// figures in named_metrics (docs/endpoints.md). Without (no eBPF): only the
// metadata and headroom.ebpf.unavailable = 1.
void build_endpoint_report_into(const EndpointConfig& endpoint, const EndpointSignals* signals,
                                const ReportMeta& meta, orca::Report& out,
                                std::optional<double> node_cpu_utilization = std::nullopt,
                                const InstanceFigures* instance = nullptr);
orca::Report build_endpoint_report(const EndpointConfig& endpoint, const EndpointSignals* signals,
                                   const ReportMeta& meta, std::optional<double> node_cpu_utilization = std::nullopt);

// What an instance's report (endpoint.<name>@<instance>.orca) carries
// beside its endpoint signals: its own cgroup's figures (docs/endpoints.md,
// "Instances").
struct InstanceFigures {
  uint32_t netns = 0;                     // headroom.instance.netns
  std::optional<double> cpu;              // its cgroup's CPU utilization (demand over its capacity)
  std::optional<double> memory;           // its cgroup's memory over its limit
  bool cgroup_unavailable = false;        // cpu is the fallback figure (the node's), memory absent
  bool serving = true;                    // false: gone (headroom.stopped, headroom.instance.gone)
};

// The least application_utilization and cpu_utilization an instance that
// serves publishes: a weighted round robin client drops a backend whose
// utilization is 0, and an idle one's CPU reads as noise near 0.
inline constexpr double kInstanceUtilizationFloor = 0.01;

// An instance's report: the endpoint report of its own signals, with
// cpu_utilization = its cgroup's CPU (or the fallback) and never less than
// the floor, mem_utilization = its cgroup's memory, application_utilization
// = the largest of its shares and that CPU, and the instance's named metrics.
void build_instance_report_into(const EndpointConfig& endpoint, const EndpointSignals* signals,
                                const InstanceFigures& figures, const ReportMeta& meta, orca::Report& out);

// dependency.<name>.orca (docs/dependencies.md). With signals:
// utilization[latency.slo_target, latency.slo_max, concurrency (when
// max_concurrency is declared), errors], rps_fractional (calls answered per
// second), eps (failed calls per second), application_utilization = the
// largest of those shares (not the node's CPU: the dependency's load is
// elsewhere), and the raw figures in named_metrics as an endpoint's plus the
// window's connect failures and resets. Without (no eBPF): only the metadata
// and headroom.ebpf.unavailable = 1.
void build_dependency_report_into(const DependencyConfig& dependency, const DependencySignals* signals,
                                  const ReportMeta& meta, orca::Report& out);

// Named metric keys of endpoint reports.
inline constexpr std::string_view kEbpfUnavailableKey = orca::kMetricEbpfUnavailable;

}  // namespace headroom::agent
