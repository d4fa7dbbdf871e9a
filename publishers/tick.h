// SPDX-License-Identifier: Apache-2.0
// What one tick hands every publisher: each scope's report, built and
// serialized once by the pipeline (agent/daemon/pipeline.h), the figures of
// each endpoint that its report does not carry (what the kernel counted
// since the previous tick, for counters since start), and the agent's own
// health. Plain data over the ORCA message: a publisher reads it and never
// calls back into the agent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "headroom/orca/report.h"

namespace headroom::publishers {

struct ReportMeta {
  int64_t timestamp_ms = 0;
  uint64_t seq = 0;
  int64_t interval_ms = 0;
  bool stopped = false;
};

// One scope's report of this tick.
struct ScopeReport {
  std::string scope;    // "node", "endpoint.<name>": the file is <scope>.orca
  orca::Report report;  // refilled in place every tick
  std::string bytes;    // report, serialized once per tick
  // An endpoint instance's report ("endpoint.<name>@<instance>"): its id,
  // the inode of its network namespace and a server process in it (whose
  // /proc/PID/ns/net enters it), and whether a server still listens.
  // Empty instance: the node's report or an endpoint's aggregate.
  std::string instance;
  uint32_t netns = 0;
  int32_t server_pid = 0;
  bool serving = true;
};

// What the kernel counted for one endpoint since the previous tick.
struct EndpointCounts {
  uint64_t completed = 0, errors = 0, aborted = 0;
  uint64_t over_target = 0, over_max = 0;  // of the completed and aborted
  // Completed requests by latency: (seconds, count), one entry per non-empty
  // histogram bucket, the bucket's midpoint (its lower bound for the open top
  // bucket) standing for its requests.
  std::vector<std::pair<double, uint64_t>> latencies;
};

struct EndpointTick {
  std::string name;                 // the [[endpoint]]'s name
  std::string instance;             // "" for the endpoint's aggregate; else its instance's id
  std::size_t report = 0;           // its report: Tick::reports[report], "endpoint.<name>"
  double target_seconds = 0, max_seconds = 0;
  bool measured = false;            // its report carries the eBPF signals (else "unavailable")
  bool counted = false;             // `counts` is this tick's (not on a baseline, a stop, without a probe)
  EndpointCounts counts;
};

// One [[dependency]] (docs/dependencies.md): what its report does not carry.
struct DependencyTick {
  std::string name;        // the [[dependency]]'s name
  std::size_t report = 0;  // its report: Tick::reports[report], "dependency.<name>"
  double target_seconds = 0, max_seconds = 0;
  bool measured = false;   // its report carries the eBPF signals (else "unavailable")
  bool counted = false;    // `counts` and the two below are this tick's
  EndpointCounts counts;   // its calls: errors are failed calls, aborted those without an answer
  uint64_t connect_failures = 0, resets = 0;
};

// The agent's own state, kept by the pipeline across reloads: what the
// Prometheus publisher reports about headroomd itself. Publishers run in
// table order and this is updated after each one, so a publisher sees the
// results of those before it on the same tick.
struct AgentHealth {
  uint64_t config_generation = 1;  // +1 for each configuration a reload put in force
  bool last_reload_ok = true;      // false after a rejected or failed reload, until the next good one
  uint64_t ticks = 0;              // ticks whose essential publishers succeeded
  int64_t last_publish_ms = 0;     // Unix ms of the last such tick; 0: none yet
  bool ebpf_running = false;       // the eBPF endpoint probe is attached and its maps were read this tick
  // Failed publishes since start, by publisher name: every publisher the
  // agent has run, 0 until it fails.
  std::vector<std::pair<std::string, uint64_t>> publish_failures;
};

struct Tick {
  ReportMeta meta;  // timestamp, seq, interval; stopped on the final tick
  // reports[0] is node.orca; then each sampler's scopes in the pipeline's
  // table order (the endpoints' aggregates in configuration order, then
  // their instances). The set of scopes may change from tick to tick as
  // instances come and go.
  std::vector<ScopeReport> reports;
  // Every endpoint's aggregate (instance ""), in configuration order; then
  // the instances, by endpoint in configuration order and by id.
  std::vector<EndpointTick> endpoints;
  // Every dependency, in configuration order.
  std::vector<DependencyTick> dependencies;
  AgentHealth health;

  const ScopeReport& node() const { return reports.front(); }
  const orca::Report& report_of(const EndpointTick& e) const { return reports[e.report].report; }
};

}  // namespace headroom::publishers
