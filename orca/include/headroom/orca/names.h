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

// An endpoint's instance (docs/endpoints.md, "Instances"): the servers of
// one network namespace. Its report is endpoint.<name>@<instance>.orca;
// endpoint.<name>.orca stays the node's aggregate of them all.
inline constexpr char kInstanceSeparator = '@';
inline std::string instance_scope(std::string_view endpoint, std::string_view instance) {
  std::string scope = endpoint_scope(endpoint);
  scope += kInstanceSeparator;
  scope += instance;
  return scope;
}

// --- named_metrics of node.orca: the raw figures behind the signals ---
inline constexpr std::string_view kMetricCpuBusy = "headroom.cpu.busy";
inline constexpr std::string_view kMetricCpuSaturation = "headroom.cpu.saturation";
inline constexpr std::string_view kMetricCpuCapacity = "headroom.cpu.capacity";
inline constexpr std::string_view kMetricProcsRunning = "headroom.procs_running";
inline constexpr std::string_view kMetricProcsBlocked = "headroom.procs_blocked";
inline constexpr std::string_view kMetricMemoryUsedBytes = "headroom.memory.used_bytes";
// 1: node.cgroup's CPU (memory) cannot be read right now: the cpu (memory)
// signal is absent and cpu_utilization (mem_utilization) is 0 without
// meaning an idle cgroup. Absent otherwise.
inline constexpr std::string_view kMetricCgroupCpuUnavailable = "headroom.cgroup.cpu_unavailable";
inline constexpr std::string_view kMetricCgroupMemoryUnavailable = "headroom.cgroup.memory_unavailable";

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

// --- dependency.<name>.orca: a [[dependency]], outbound calls seen from the
// calling side (docs/dependencies.md). Utilization keys: kSignalSloTarget,
// kSignalSloMax, kSignalConcurrency (calls in flight / max_concurrency: the
// bulkhead's fill) and kSignalErrors; named_metrics as an endpoint's plus
// the two below. ---
inline constexpr std::string_view kDependencyScopePrefix = "dependency.";
inline std::string dependency_scope(std::string_view name) {
  std::string scope(kDependencyScopePrefix);
  scope += name;
  return scope;
}
// Share of the window's calls that failed (error answers, resets, connect
// failures) among those that ended, 0..1; a call still in flight counts in
// the latency shares once late, not here.
inline constexpr std::string_view kSignalErrors = "errors";
inline constexpr std::string_view kMetricConnectFailures = "headroom.window.connect_failures";
inline constexpr std::string_view kMetricResets = "headroom.window.resets";

// --- named_metrics of endpoint.<name>@<instance>.orca (docs/endpoints.md, "Instances") ---
// The inode of the instance's network namespace (readlink /proc/PID/ns/net
// shows "net:[inode]"): how a reader finds its own instance's report.
inline constexpr std::string_view kMetricInstanceNetns = "headroom.instance.netns";
// 1: the instance's cgroup (or its CPU) could not be read; cpu_utilization is
// the fallback figure (docs/endpoints.md), and mem_utilization is absent when
// the whole cgroup could not be read.
inline constexpr std::string_view kMetricInstanceCgroupUnavailable = "headroom.instance.cgroup_unavailable";
// 1: no server of the instance listens any more (headroom.stopped is 1 too);
// the report is removed after endpoint_instance_grace.
inline constexpr std::string_view kMetricInstanceGone = "headroom.instance.gone";

}  // namespace headroom::orca
