// SPDX-License-Identifier: Apache-2.0
// The [[dependency]]s as a row of the pipeline's sampler table: the eBPF
// dependency sampler, and each dependency's report (dependency.<name>.orca)
// and kernel counts for the tick. A dependency's signals do not join the
// node's (node.include_endpoints takes endpoints only): a latent dependency
// is not this node's load.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/dependency_sampler.h"
#include "agent/signals/scope_sampler.h"

namespace headroom::agent {

class DependencyScopes final : public ScopeSampler {
 public:
  explicit DependencyScopes(std::unique_ptr<DependencySampler> sampler);
  // The row's build: null when the configuration declares no dependency.
  static std::unique_ptr<ScopeSampler> build(const Config& config);
  // True when the sampler built for `next` would be the one built for
  // `running`: the same dependencies in the same order, eBPF mode, window
  // (interval and smoothing) and /proc and /sys roots. A reload keeps it.
  static bool same(const Config& running, const Config& next);

  void sample(int64_t now_ns) override { sampler_->sample(now_ns); }
  const std::vector<std::string>& scopes() const override { return scopes_; }
  void report(const NodeFigures& node, const publishers::ReportMeta& meta, std::span<publishers::ScopeReport> out,
              publishers::Tick& tick) const override;
  ProbeState state() const override;
  bool measuring() const override { return sampler_->running() && !sampler_->read_failing(); }
  std::string unavailable() const override { return sampler_->unavailable(); }
  std::string status() const override { return sampler_->status(); }
  void announce() const override { sampler_->announce(); }

  const DependencySampler& sampler() const { return *sampler_; }

 private:
  std::unique_ptr<DependencySampler> sampler_;
  std::vector<std::string> scopes_;  // "dependency.<name>" in configuration order
};

}  // namespace headroom::agent
