// SPDX-License-Identifier: Apache-2.0
// The [[endpoint]]s as a row of the pipeline's sampler table: the eBPF
// endpoint sampler, and each endpoint's report (endpoint.<name>.orca) and
// kernel counts for the tick.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/endpoint_sampler.h"
#include "agent/signals/scope_sampler.h"

namespace headroom::agent {

// The endpoint sampler's probe, as far as a reload is concerned.
ProbeState probe_state(const EndpointSampler& sampler);

class EndpointScopes final : public ScopeSampler {
 public:
  explicit EndpointScopes(std::unique_ptr<EndpointSampler> sampler);
  // The row's build: null when the configuration declares no endpoint.
  static std::unique_ptr<ScopeSampler> build(const Config& config);
  // True when the sampler built for `next` would be the one built for
  // `running`: the same endpoints in the same order, eBPF mode, window
  // (interval and smoothing) and /proc and /sys roots. A reload keeps it
  // (maps, traced processes, in-flight requests, windows).
  static bool same(const Config& running, const Config& next);

  // Samples, and renews the scopes: the instances come and go.
  void sample(int64_t now_ns) override;
  const std::vector<std::string>& scopes() const override { return scopes_; }
  void add_node_signals(NodeSample& node) const override;
  void report(const NodeFigures& node, const publishers::ReportMeta& meta, std::span<publishers::ScopeReport> out,
              publishers::Tick& tick) const override;
  ProbeState state() const override { return probe_state(*sampler_); }
  bool measuring() const override { return sampler_->running() && !sampler_->read_failing(); }
  std::string unavailable() const override { return sampler_->unavailable(); }
  std::string status() const override { return sampler_->status(); }
  void announce() const override { sampler_->announce(); }

  const EndpointSampler& sampler() const { return *sampler_; }

 private:
  std::unique_ptr<EndpointSampler> sampler_;
  void report_instances(const NodeFigures& node, const publishers::ReportMeta& meta,
                        std::span<publishers::ScopeReport> out, std::size_t first, publishers::Tick& tick) const;

  // "endpoint.<name>" in configuration order, then "endpoint.<name>@<id>"
  // for each instance (the sampler's order).
  std::vector<std::string> scopes_;
  std::size_t aggregates_ = 0;
};

}  // namespace headroom::agent
