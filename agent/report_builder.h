// Signals -> the ORCA message. Pure: the caller supplies time and sequence.
#pragma once

#include <cstdint>

#include "agent/config.h"
#include "agent/endpoint_signals.h"
#include "agent/normalize.h"
#include "agent/sampler.h"
#include "headroom/orca/report.h"

namespace headroom::agent {

struct ReportMeta {
  int64_t timestamp_ms = 0;
  uint64_t seq = 0;
  int64_t interval_ms = 0;
  bool stopped = false;
};

// Replaces each signal by its smoothed value; signals that are absent forget
// their history so a probe that comes back starts fresh.
void smooth(Smoother& smoother, NodeSample& sample);

// cpu_utilization = the cpu signal (demand over capacity, may exceed 1);
// mem_utilization = the memory signal; utilization[key] = each available signal
// clamped to [0, 1]; application_utilization = the configured composite of the
// enabled, available signals (cpu unclamped); named_metrics = metadata + raw.
// node.include_endpoints adds "endpoint.<name>" signals to the sample, and
// they join the composite like the node's own.
orca::Report build_node_report(const NodeSample& sample, const Config& config, const ReportMeta& meta);

// endpoint.<name>.orca. With signals: utilization[latency.slo_target,
// latency.slo_max, concurrency (when max_concurrency is declared)],
// rps_fractional, eps, application_utilization = the largest of those, and
// the raw figures in named_metrics (docs/endpoints.md). Without (no eBPF):
// only the metadata and headroom.ebpf.unavailable = 1.
orca::Report build_endpoint_report(const EndpointConfig& endpoint, const EndpointSignals* signals,
                                   const ReportMeta& meta);

// Named metric keys of endpoint reports.
inline constexpr std::string_view kEbpfUnavailableKey = orca::kMetricEbpfUnavailable;

}  // namespace headroom::agent
