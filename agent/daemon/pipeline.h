// SPDX-License-Identifier: Apache-2.0
// One tick, start to end: the node's probes -> signals (smoothed), and each
// row of the sampler table (the endpoints' eBPF probe) -> its scopes'
// signals; then every scope's report is built and serialized once into a
// Tick (publishers/tick.h) that every publisher reads. The daemon's loop
// (daemon.cc) only says when.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/normalize.h"
#include "agent/signals/report_builder.h"
#include "agent/signals/sampler.h"
#include "agent/signals/scope_sampler.h"
#include "headroom/orca/clock.h"
#include "publishers/publisher.h"

namespace headroom::agent {

using orca::monotonic_ns;

// The two clocks of a tick, read once by the caller: the samplers' rates
// and request ages run on the monotonic one, the reports are stamped with
// Unix time. Tests pass both.
struct TickTime {
  int64_t monotonic_ns = 0;
  int64_t unix_ms = 0;
  static TickTime now() { return {orca::monotonic_ns(), orca::unix_now_ms()}; }
};

// A source of scopes beside the node, one row each: a new probe set adds a
// row (and a ScopeSampler), nothing else here.
struct SamplerRow {
  std::string_view name;         // "endpoints"
  std::string_view description;
  std::string_view report_noun;  // what its reports are, for the status line: "endpoint"
  // Its sampler for a configuration; null when the configuration has nothing for it.
  std::unique_ptr<ScopeSampler> (*build)(const Config& config);
  // Whether the sampler built for `next` would be the one built for
  // `running`: a reload keeps the running one (its probe, its windows).
  bool (*same)(const Config& running, const Config& next);
  // The report scopes a configuration gives it, in report order.
  std::vector<std::string> (*scopes)(const Config& config);
};
std::span<const SamplerRow> sampler_rows();

// Every report scope a configuration publishes: "node", then each row's.
std::vector<std::string> report_scopes(const Config& config);

// Everything that a configuration determines. A reload builds a new one next to
// the running one and swaps only when all of it could be built.
struct Pipeline {
  Config config;
  std::unique_ptr<NodeSampler> node;
  // One entry per row of sampler_rows(): its sampler, or null when the
  // configuration has nothing for it. `keep[i]`: built for a reload that
  // keeps the running pipeline's sampler of row i (Agent::replace moves it over).
  std::vector<std::unique_ptr<ScopeSampler>> samplers;
  std::vector<bool> keep;
  publishers::Publishers publishers;  // in the publisher table's order
  Smoother smoother{1.0};
};

// `running`: the configuration in force, when this is a reload. Its
// samplers are kept when their rows say the new configuration would build
// the same ones (SamplerRow::same). An error with an errno (`code`) means a
// place that cannot be used (headroomd exits 73), one without a
// configuration that cannot run (78): exit_status().
Result<Pipeline> build_pipeline(Config config, const Config* running = nullptr);
int exit_status(const Error& build_error);

class Agent;
// A reload (SIGHUP): build_pipeline with the running configuration, and an
// error when a new probe could not be attached while the running one is
// (reload_may_replace_probe).
Result<Pipeline> build_reload(Config config, const Agent& running);

// True when a NodeSampler built for `next` reads what the running one reads
// (the same /proc and /sys roots, cgroup and signals): a reload keeps the
// running one and its previous readings.
bool same_node_sampler(const Config& running, const Config& next);

// Logs where the pipeline publishes, once it is in force.
void announce(const Pipeline& p);

class Agent {
 public:
  explicit Agent(Pipeline p);

  // One sampling step at `now`; publishes when the sample is complete enough
  // (not on the first call, which is the rates' baseline). True when the
  // essential publishers (node.orca) succeeded.
  bool tick(const TickTime& now);

  // Clean stop: the final tick, marked stopped, through every publisher's
  // stop() (node.orca marked stopped, the bridges' neutral values).
  void stop(const TickTime& now);

  // Takes the new pipeline's parts. The running samplers go on when they would
  // read the same (same_node_sampler, SamplerRow::same); new ones start from
  // a baseline taken at `now`. Publishers whose target the new pipeline does
  // not have retire (a bridge writes its neutral value once); the new ones
  // take over from the old configuration's scopes (reports of endpoints that
  // are gone are removed).
  void replace(Pipeline next, const TickTime& now);

  // A reload that failed or was rejected: why, for the status line (reason
  // and when), and the agent's health says so until the next reload that
  // succeeds.
  void reload_failed(std::string reason, int64_t unix_ms = orca::unix_now_ms());

  const Config& config() const { return p_.config; }
  // Row i's sampler of sampler_rows(), or null.
  const ScopeSampler* sampler(std::size_t row) const { return p_.samplers[row].get(); }
  uint64_t published() const { return published_; }
  // The last tick's reports and figures, as the publishers saw them.
  const publishers::Tick& last_tick() const { return tick_; }

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
  void sample(int64_t now_ns);
  // Builds every scope's report of this tick into tick_ and serializes it once.
  void prepare(const TickTime& now, bool stopped);
  void publish_all();
  // The health the publishers see (tick_.health).
  void note_published();
  void note_result(const publishers::Publisher& pub, const Result<void>& r);
  // Every publisher of the pipeline has its failure count, 0 until it fails
  // (a counter exported from the start, as Prometheus wants).
  void count_publishers();

  Pipeline p_;
  publishers::Tick tick_;  // kept across ticks: its reports and vectors are refilled, not rebuilt
  NodeSample node_;        // likewise
  NodeValues values_;
  std::vector<std::string> scopes_;  // the last tick's scopes (node, then each sampler's), the order of tick_.reports
  bool drop_endpoint_signals_ = false;  // after a reload: the old endpoints' are in node_
  bool have_baseline_ = false;
  uint64_t seq_ = 0;
  uint64_t published_ = 0;
  std::vector<Failing> failing_;
  std::string reload_error_;
  int64_t reload_error_ms_ = 0;
};

// systemd's STATUS= line: where the reports go, the probes' state, and
// what is failing (a publisher since when and why, the last reload). It
// changes only when a state changes, not every tick: the daemon sends it
// again whenever it differs from the one it sent last.
std::string status_line(const Agent& agent);

}  // namespace headroom::agent
