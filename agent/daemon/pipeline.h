// SPDX-License-Identifier: Apache-2.0
// One tick, start to end: node probes -> signals (smoothed) and endpoint
// probe -> finished endpoint signals, computed once into a Tick; then every
// publisher (agent/daemon/publisher_registry.h) reads that Tick. The daemon's loop
// (daemon.cc) only says when.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "agent/config/config.h"
#include "headroom/orca/clock.h"
#include "agent/signals/endpoint_sampler.h"
#include "agent/signals/normalize.h"
#include "agent/signals/sampler.h"
#include "publishers/publisher.h"

namespace headroom::agent {

// Everything that a configuration determines. A reload builds a new one next to
// the running one and swaps only when all of it could be built.
struct Pipeline {
  Config config;
  std::unique_ptr<NodeSampler> sampler;
  // [[endpoint]]s, eBPF. Null in a pipeline built for a reload that keeps
  // the running one's (same_endpoint_probe): Agent::replace moves it over.
  std::unique_ptr<EndpointSampler> endpoints;
  publishers::Publishers publishers;           // in the registry's order
  Smoother smoother{1.0};
};

struct BuildError {
  int exit_code = kExitConfig;  // kExitConfig or kExitCantCreat
  std::string message;
};
// `running`: the configuration in force, when this is a reload. Its endpoint
// probe is kept (maps, traced processes, in-flight requests, windows) when
// same_endpoint_probe says the new configuration would build the same one.
std::variant<Pipeline, BuildError> build_pipeline(Config config, const Config* running = nullptr);

// The eBPF probe of a pipeline, as far as a reload is concerned.
enum class ProbeState {
  none,      // no endpoints
  off,       // agent.ebpf = "off"
  attached,  // the probe runs (its reads may fail now and then)
  failed,    // wanted, and could not be attached
};
ProbeState probe_state(const EndpointSampler& endpoints);
// Whether a reload whose new pipeline's probe is `next` may replace the
// running one's, `running`. Pure. Refused only when the new probe failed
// while the running one is attached: putting it in force would turn working
// endpoint signals off. When the running probe failed too, the reload goes
// on (nothing that works is lost, the rest of the new file takes effect, and
// a reload is how an operator retries the attach).
bool reload_may_replace_probe(ProbeState running, ProbeState next);

class Agent;
// A reload (SIGHUP): build_pipeline with the running configuration, and a
// BuildError when the new endpoint probe could not be attached while the
// running one is (reload_may_replace_probe).
std::variant<Pipeline, BuildError> build_reload(Config config, const Agent& running);

// True when an EndpointSampler built for `next` would be the one built for
// `running`: the same endpoints in the same order, eBPF mode, window
// (interval and smoothing) and /proc and /sys roots.
bool same_endpoint_probe(const Config& running, const Config& next);

// True when a NodeSampler built for `next` reads what the running one reads
// (the same /proc and /sys roots, cgroup and signals): a reload keeps the
// running one and its previous readings.
bool same_node_sampler(const Config& running, const Config& next);

// Logs where the pipeline publishes, once it is in force.
void announce(const Pipeline& p);

class Agent {
 public:
  explicit Agent(Pipeline p) : p_(std::move(p)) { count_publishers(); }

  // One sampling step; publishes when the sample is complete enough (not on
  // the first call, which is the rates' baseline). True when the essential
  // publishers (node.orca) succeeded.
  bool tick();

  // Clean stop: the final tick, marked stopped, through every publisher's
  // stop() (node.orca marked stopped, the bridges' neutral values).
  void stop();

  // Takes the new pipeline's parts. The running samplers go on when they would
  // read the same (same_node_sampler, same_endpoint_probe); new ones start
  // from a baseline taken now. Publishers whose
  // target the new pipeline does not have retire (a bridge writes its neutral
  // value once); the new ones take over from the old configuration (endpoint
  // reports whose endpoint is gone are removed).
  void replace(Pipeline next);
  // A reload that was rejected: the running configuration stays, and the
  // agent's health says so until the next reload that succeeds.
  void reload_rejected();

  // A reload that failed or was rejected: why, for the status line (reason
  // and when). Cleared by the next reload that succeeds.
  void reload_failed(std::string reason);

  const Config& config() const { return p_.config; }
  const EndpointSampler& endpoints() const { return *p_.endpoints; }
  uint64_t published() const { return published_; }

  // A publisher whose last publish failed: since when (Unix ms) and the
  // first error of this failure.
  struct Failing {
    std::string name, target;
    int64_t since_ms = 0;
    std::string error;
  };
  const std::vector<Failing>& failing() const { return failing_; }
  const std::string& last_reload_error() const { return reload_error_; }
  int64_t last_reload_error_ms() const { return reload_error_ms_; }

 private:
  // Fills tick_'s metadata, node values and endpoint list from the samples.
  void prepare(bool stopped);
  // node.include_endpoints: each endpoint's composite as "endpoint.<name>".
  void add_endpoint_signals();
  void drop_endpoint_signals();
  // The health the publishers see (tick_.health).
  void note_published();
  void note_failure(std::string_view publisher);
  void note_result(const publishers::Publisher& pub, const Result<void>& r);
  // Every publisher of the pipeline has its failure count, 0 until it fails
  // (a counter exported from the start, as Prometheus wants).
  void count_publishers();

  Pipeline p_;
  publishers::Tick tick_;  // kept across ticks: its maps and vectors are refilled, not rebuilt
  std::vector<std::string> endpoint_keys_;  // "endpoint.<name>", per endpoint
  bool drop_endpoint_signals_ = false;  // after a reload: the old endpoints' are in tick_.node
  bool have_baseline_ = false;
  uint64_t seq_ = 0;
  uint64_t published_ = 0;
  std::vector<Failing> failing_;
  std::string reload_error_;
  int64_t reload_error_ms_ = 0;
};

// systemd's STATUS= line: where the reports go, the eBPF probe's state, and
// what is failing (a publisher since when and why, the last reload). It
// changes only when a state changes, not every tick: the daemon sends it
// again whenever it differs from the one it sent last.
std::string status_line(const Agent& agent);

using orca::monotonic_ns;

}  // namespace headroom::agent
