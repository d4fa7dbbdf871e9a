// SPDX-License-Identifier: Apache-2.0
#include "agent/signals/dependency_scopes.h"

#include <algorithm>
#include <chrono>

#include "agent/signals/report_builder.h"
#include "headroom/orca/names.h"

namespace headroom::agent {

DependencyScopes::DependencyScopes(std::unique_ptr<DependencySampler> sampler) : sampler_(std::move(sampler)) {
  for (const auto& d : sampler_->dependencies()) scopes_.push_back(orca::dependency_scope(d.config.name));
}

std::unique_ptr<ScopeSampler> DependencyScopes::build(const Config& config) {
  if (config.dependencies.empty()) return nullptr;
  return std::make_unique<DependencyScopes>(std::make_unique<DependencySampler>(config));
}

bool DependencyScopes::same(const Config& running, const Config& next) {
  return running.dependencies == next.dependencies && running.ebpf == next.ebpf &&
         running.interval == next.interval && running.smoothing == next.smoothing &&
         running.proc_root == next.proc_root && running.sys_root == next.sys_root;
}

ProbeState DependencyScopes::state() const {
  if (sampler_->dependencies().empty()) return ProbeState::none;
  if (sampler_->running()) return ProbeState::attached;
  return sampler_->failed() ? ProbeState::failed : ProbeState::off;
}

namespace {

double seconds(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e9; }

void count_into(const DependencyInterval& iv, publishers::DependencyTick& out) {
  const EndpointInterval& c = iv.calls;
  out.counts.completed = c.completed;
  out.counts.errors = c.errors;
  out.counts.aborted = c.aborted;
  out.counts.over_target = c.over_target;
  out.counts.over_max = c.over_max;
  out.counts.latencies.clear();
  for (const auto& [bucket, n] : c.hist)
    out.counts.latencies.emplace_back(histogram_bucket_midpoint_ns(bucket) / 1e9, n);
  out.connect_failures = iv.connect_failures;
  out.resets = iv.resets;
}

}  // namespace

void DependencyScopes::report(const NodeFigures& node, const publishers::ReportMeta& meta,
                              std::span<publishers::ScopeReport> out, publishers::Tick& tick) const {
  (void)node;  // a dependency's report carries no figure of this node
  const auto& deps = sampler_->dependencies();
  const auto first = static_cast<std::size_t>(out.data() - tick.reports.data());  // out is a part of tick.reports
  const std::size_t n = std::min(deps.size(), out.size());
  tick.dependencies.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& d = deps[i];
    const bool available = sampler_->running() && d.signals;
    build_dependency_report_into(d.config, available ? &*d.signals : nullptr, meta, out[i].report);
    out[i].instance.clear();
    auto& t = tick.dependencies[i];
    t.name.assign(d.config.name);
    t.report = first + i;
    t.target_seconds = seconds(d.config.target);
    t.max_seconds = seconds(d.config.max);
    t.measured = available;
    const DependencyInterval* newest = d.window.newest();
    t.counted = available && d.counted && !meta.stopped && newest != nullptr;
    if (t.counted) count_into(*newest, t);
  }
}

}  // namespace headroom::agent
