// SPDX-License-Identifier: Apache-2.0
// A source of report scopes beside the node: one row of the pipeline's
// sampler table (agent/daemon/pipeline.cc). The endpoints' eBPF probe is
// one (EndpointScopes), the dependencies' another (DependencyScopes); a new
// probe set adds a row and such a class, and the pipeline, the reload and
// the publishers stay as they are.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "agent/signals/signals.h"
#include "publishers/tick.h"

namespace headroom::agent {

// The eBPF probe of a sampler, as far as a reload is concerned.
enum class ProbeState {
  none,      // nothing configured for it
  off,       // agent.ebpf = "off"
  attached,  // the probe runs (its reads may fail now and then)
  failed,    // wanted, and could not be attached
};

// What the node's report says that a scope's report may carry too.
struct NodeFigures {
  std::optional<double> cpu_utilization;  // node.orca's, when it publishes the cpu signal
};

class ScopeSampler {
 public:
  virtual ~ScopeSampler() = default;

  // Reads its probe at `now_ns` (CLOCK_MONOTONIC); the first call is a baseline.
  virtual void sample(int64_t now_ns) = 0;
  // Its report scopes ("endpoint.<name>"), in the order report() fills them.
  virtual const std::vector<std::string>& scopes() const = 0;
  // node.include_endpoints: its scopes' composites as node signals
  // ("endpoint.<name>"); the others of that prefix are left alone.
  virtual void add_node_signals(NodeSample& node) const { (void)node; }
  // This tick's reports of its scopes into `out` (one per scope, refilled in
  // place), and what else the tick carries of them (tick.endpoints).
  virtual void report(const NodeFigures& node, const publishers::ReportMeta& meta, std::span<publishers::ScopeReport> out,
                      publishers::Tick& tick) const = 0;

  virtual ProbeState state() const = 0;
  // The probe runs and its last read worked (agent health).
  virtual bool measuring() const = 0;
  // Why it cannot measure ("" when it can or is off).
  virtual std::string unavailable() const = 0;
  // For systemd's STATUS= line.
  virtual std::string status() const = 0;
  // Once the sampler is in force: what it measures, or why it cannot.
  virtual void announce() const = 0;
};

// Whether a reload whose new sampler's probe is `next` may replace the
// running one's, `running`. Pure. Refused only when the new probe failed
// while the running one is attached: putting it in force would turn working
// signals off. When the running probe failed too, the reload goes on
// (nothing that works is lost, the rest of the new file takes effect, and a
// reload is how an operator retries the attach).
constexpr bool reload_may_replace_probe(ProbeState running, ProbeState next) {
  return !(next == ProbeState::failed && running == ProbeState::attached);
}

}  // namespace headroom::agent
