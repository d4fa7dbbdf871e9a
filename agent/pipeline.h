// SPDX-License-Identifier: Apache-2.0
// One tick, start to end: node probes -> signals (smoothed) and endpoint
// probe -> finished endpoint signals, computed once into a Tick; then every
// publisher (publishers/registry.h) reads that Tick. The daemon's loop
// (daemon.cc) only says when.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "agent/config.h"
#include "agent/endpoint_sampler.h"
#include "agent/normalize.h"
#include "agent/sampler.h"
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

// True when an EndpointSampler built for `next` would be the one built for
// `running`: the same endpoints in the same order, eBPF mode, window
// (interval and smoothing) and /proc and /sys roots.
bool same_endpoint_probe(const Config& running, const Config& next);

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

  // Takes the new pipeline's parts. The samplers start from a fresh baseline
  // taken now, so the next tick publishes a complete report. Publishers whose
  // target the new pipeline does not have retire (a bridge writes its neutral
  // value once); the new ones take over from the old configuration (endpoint
  // reports whose endpoint is gone are removed).
  void replace(Pipeline next);
  // A reload that was rejected: the running configuration stays, and the
  // agent's health says so until the next reload that succeeds.
  void reload_rejected();

  const Config& config() const { return p_.config; }
  const EndpointSampler& endpoints() const { return *p_.endpoints; }
  uint64_t published() const { return published_; }

 private:
  // Fills tick_'s metadata, node values and endpoint list from the samples.
  void prepare(bool stopped);
  // node.include_endpoints: each endpoint's composite as "endpoint.<name>".
  void add_endpoint_signals();
  void drop_endpoint_signals();
  // The health the publishers see (tick_.health).
  void note_published();
  void note_failure(std::string_view publisher);
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
};

// systemd's STATUS= line.
std::string status_line(const Agent& agent);

int64_t monotonic_ns();

}  // namespace headroom::agent
