// SPDX-License-Identifier: Apache-2.0
// Where a tick's signals go. Each publisher takes the typed figures of one
// sampling step (Tick) and writes them its own way: node.orca and the
// endpoint reports, an Envoy bridge file, ... The pipeline publishes every
// tick through all of them, in the order of the registry (registry.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/endpoint_signals.h"
#include "agent/signals/report_builder.h"
#include "agent/signals/signals.h"
#include "headroom/orca/result.h"

namespace headroom::publishers {

struct EndpointTick {
  const agent::EndpointConfig* config = nullptr;
  const agent::EndpointSignals* signals = nullptr;  // null: latency signals unavailable
  // What the kernel counted since the previous tick (for counters kept since
  // start); null when nothing was measured this tick (no probe, a baseline).
  const agent::EndpointInterval* interval = nullptr;
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

// One sampling step's results, computed once and read by every publisher.
struct Tick {
  agent::ReportMeta meta;  // timestamp, seq, interval; stopped on the final tick
  // Available node signals by key (smoothed; "endpoint.<name>" with
  // node.include_endpoints) and the raw figures.
  agent::NodeSample node;
  agent::NodeValues values;  // what node.orca carries: utilization, composite, cpu, mem
  std::vector<EndpointTick> endpoints;  // in configuration order
  AgentHealth health;
};

class Publisher {
 public:
  virtual ~Publisher() = default;

  // Publishes one tick. A failure is logged by the publisher, once per change;
  // the error tells the pipeline (an essential publisher holds up READY=1 and
  // --once's exit status).
  virtual Result<void> publish(const Tick& tick) = 0;
  // Clean stop: writes the final state (`final` is marked stopped) or a
  // neutral value, whatever leaves readers right once nobody updates it.
  virtual void stop(const Tick& final) = 0;

  // A reload built this publisher to replace the running ones: it cleans up
  // what only the previous configuration had (e.g. reports of endpoints that
  // are gone).
  virtual void take_over(const agent::Config& previous) { (void)previous; }
  // A reload no longer configures what this publisher writes (no publisher of
  // the new configuration has its target): leave it in a state nobody needs
  // to update.
  virtual void retire() {}
  // Logs where it publishes, once the configuration it belongs to is in force.
  virtual void announce() const {}

  virtual std::string_view name() const = 0;  // the registry's name: "orca_dir", "envoy"
  // What it writes (a directory, a file): a reload keeps a target and
  // retires the others.
  virtual const std::string& target() const = 0;
  // Whether its failure means the tick was not published (node.orca's).
  virtual bool essential() const { return false; }
};

// Why a publisher could not be built: the configuration is wrong (exit 78),
// or the place it writes to is unusable (exit 73).
struct BuildError {
  bool configuration = false;
  std::string message;
};
using Publishers = std::vector<std::unique_ptr<Publisher>>;

}  // namespace headroom::publishers
