// SPDX-License-Identifier: Apache-2.0
// Every key headroom writes into a report, in one place: the utilization
// signals' keys and the named_metrics keys. The agent that writes reports,
// headroomctl, the reader library and the tests use these constants;
// docs/orca-files.md and docs/endpoints.md describe what each one means.
#pragma once

#include <string>
#include <string_view>

namespace headroom::orca {

// --- named_metrics: metadata every report carries (docs/orca-files.md) ---
inline constexpr std::string_view kTimestampMsKey = "headroom.timestamp_ms";
inline constexpr std::string_view kSeqKey = "headroom.seq";
inline constexpr std::string_view kIntervalMsKey = "headroom.interval_ms";
inline constexpr std::string_view kStoppedKey = "headroom.stopped";

// --- utilization keys of node.orca ---
inline constexpr std::string_view kSignalCpu = "cpu";
inline constexpr std::string_view kSignalMemory = "memory";
inline constexpr std::string_view kSignalCpuPressure = "cpu.pressure";
inline constexpr std::string_view kSignalMemoryPressure = "memory.pressure";
inline constexpr std::string_view kSignalIoPressure = "io.pressure";
// Every node signal, in the order headroom lists them (the node signal
// table, agent/signals/signals.h, has one row for each, in this order).
inline constexpr std::string_view kNodeSignalKeys[] = {kSignalCpu, kSignalMemory, kSignalCpuPressure,
                                                      kSignalMemoryPressure, kSignalIoPressure};
// node.include_endpoints: "endpoint.<name>" joins the node's signals.
inline constexpr std::string_view kEndpointSignalPrefix = "endpoint.";
// An [[endpoint]]'s scope (its report is <scope>.orca), and its signal's key
// under node.include_endpoints: "endpoint.<name>".
inline std::string endpoint_scope(std::string_view name) {
  std::string scope(kEndpointSignalPrefix);
  scope += name;
  return scope;
}

// --- named_metrics of node.orca: the raw figures behind the signals ---
inline constexpr std::string_view kMetricCpuBusy = "headroom.cpu.busy";
inline constexpr std::string_view kMetricCpuSaturation = "headroom.cpu.saturation";
inline constexpr std::string_view kMetricCpuCapacity = "headroom.cpu.capacity";
inline constexpr std::string_view kMetricProcsRunning = "headroom.procs_running";
inline constexpr std::string_view kMetricProcsBlocked = "headroom.procs_blocked";
inline constexpr std::string_view kMetricMemoryUsedBytes = "headroom.memory.used_bytes";

// --- utilization keys of endpoint.<name>.orca ---
inline constexpr std::string_view kSignalSloTarget = "latency.slo_target";
inline constexpr std::string_view kSignalSloMax = "latency.slo_max";
inline constexpr std::string_view kSignalConcurrency = "concurrency";

// --- named_metrics of endpoint.<name>.orca (docs/endpoints.md) ---
inline constexpr std::string_view kMetricEbpfUnavailable = "headroom.ebpf.unavailable";
inline constexpr std::string_view kMetricInflight = "headroom.inflight";
inline constexpr std::string_view kMetricInflightAvg = "headroom.inflight.avg";
inline constexpr std::string_view kMetricPending = "headroom.pending";
inline constexpr std::string_view kMetricConcurrency = "headroom.concurrency";
inline constexpr std::string_view kMetricLatencyP50Ms = "headroom.latency.p50_ms";
inline constexpr std::string_view kMetricLatencyP90Ms = "headroom.latency.p90_ms";
inline constexpr std::string_view kMetricLatencyP99Ms = "headroom.latency.p99_ms";
inline constexpr std::string_view kMetricWindowRequests = "headroom.window.requests";
inline constexpr std::string_view kMetricWindowSeconds = "headroom.window.seconds";
inline constexpr std::string_view kMetricSloTargetMs = "headroom.slo.target_ms";
inline constexpr std::string_view kMetricSloMaxMs = "headroom.slo.max_ms";

}  // namespace headroom::orca
