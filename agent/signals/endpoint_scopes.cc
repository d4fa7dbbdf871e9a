// SPDX-License-Identifier: Apache-2.0
#include "agent/signals/endpoint_scopes.h"

#include "agent/signals/report_builder.h"
#include "headroom/orca/names.h"

#include <algorithm>
#include <chrono>

namespace headroom::agent {

EndpointScopes::EndpointScopes(std::unique_ptr<EndpointSampler> sampler) : sampler_(std::move(sampler)) {
  for (const auto& e : sampler_->endpoints()) scopes_.push_back(orca::endpoint_scope(e.config.name));
  aggregates_ = scopes_.size();
}

void EndpointScopes::sample(int64_t now_ns) {
  sampler_->sample(now_ns);
  const auto& endpoints = sampler_->endpoints();
  const auto& instances = sampler_->instances();
  scopes_.resize(aggregates_ + instances.size());
  for (std::size_t i = 0; i < instances.size(); ++i) {
    std::string scope = orca::instance_scope(endpoints[instances[i].endpoint].config.name, instances[i].id);
    if (scopes_[aggregates_ + i] != scope) scopes_[aggregates_ + i] = std::move(scope);
  }
}

std::unique_ptr<ScopeSampler> EndpointScopes::build(const Config& config) {
  if (config.endpoints.empty()) return nullptr;
  return std::make_unique<EndpointScopes>(std::make_unique<EndpointSampler>(config));
}

namespace {
// [[endpoint.shed]] is the shedder's, not the sampler's: a change there alone
// keeps the probe and its windows.
bool same_sampled_endpoints(const std::vector<EndpointConfig>& a, const std::vector<EndpointConfig>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](EndpointConfig x, EndpointConfig y) {
    x.shed.clear();
    y.shed.clear();
    return x == y;
  });
}
}  // namespace

bool EndpointScopes::same(const Config& running, const Config& next) {
  return same_sampled_endpoints(running.endpoints, next.endpoints) && running.ebpf == next.ebpf && running.interval == next.interval &&
         running.smoothing == next.smoothing && running.proc_root == next.proc_root &&
         running.sys_root == next.sys_root && running.endpoint_instances == next.endpoint_instances &&
         running.instance_grace == next.instance_grace && running.cgroup_version == next.cgroup_version;
}

ProbeState probe_state(const EndpointSampler& s) {
  if (s.endpoints().empty()) return ProbeState::none;
  if (s.running()) return ProbeState::attached;
  return s.failed() ? ProbeState::failed : ProbeState::off;
}

void EndpointScopes::add_node_signals(NodeSample& node) const {
  const auto& endpoints = sampler_->endpoints();
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    std::optional<double> v;
    if (sampler_->running() && endpoints[i].signals) v = endpoint_composite(*endpoints[i].signals);
    const std::string& key = scopes_[i];  // "endpoint.<name>" is also the signal's key
    auto it = node.signals.find(key);
    if (!v) {
      if (it != node.signals.end()) node.signals.erase(it);
    } else if (it != node.signals.end()) {
      it->second = *v;
    } else {
      node.signals.emplace(key, *v);
    }
  }
}

namespace {

double seconds(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e9; }

void count_into(const EndpointInterval& iv, publishers::EndpointCounts& out) {
  out.completed = iv.completed;
  out.errors = iv.errors;
  out.aborted = iv.aborted;
  out.over_target = iv.over_target;
  out.over_max = iv.over_max;
  out.latencies.clear();
  for (const auto& [bucket, n] : iv.hist) out.latencies.emplace_back(histogram_bucket_midpoint_ns(bucket) / 1e9, n);
}

}  // namespace

void EndpointScopes::report(const NodeFigures& node, const publishers::ReportMeta& meta,
                            std::span<publishers::ScopeReport> out, publishers::Tick& tick) const {
  const auto& endpoints = sampler_->endpoints();
  const auto first = static_cast<std::size_t>(out.data() - tick.reports.data());  // out is a part of tick.reports
  // The only row with endpoints: their entries are refilled in place.
  const std::size_t n = std::min(endpoints.size(), out.size());
  tick.endpoints.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& e = endpoints[i];
    const bool available = sampler_->running() && e.signals;
    build_endpoint_report_into(e.config, available ? &*e.signals : nullptr, meta, out[i].report,
                               node.cpu_utilization);
    auto& t = tick.endpoints[i];
    t.name.assign(e.config.name);
    t.report = first + i;
    t.target_seconds = seconds(e.config.target);
    t.max_seconds = seconds(e.config.max);
    t.measured = available;
    t.instance.clear();
    const EndpointInterval* newest = e.window.newest();
    t.counted = available && e.counted && !meta.stopped && newest != nullptr;
    if (t.counted) count_into(*newest, t.counts);
    out[i].instance.clear();
  }
  if (out.size() > n) report_instances(node, meta, out.subspan(n), first + n, tick);
}

void EndpointScopes::report_instances(const NodeFigures& node, const publishers::ReportMeta& meta,
                                      std::span<publishers::ScopeReport> out, std::size_t first,
                                      publishers::Tick& tick) const {
  const auto& endpoints = sampler_->endpoints();
  const auto& instances = sampler_->instances();
  const std::size_t n = std::min(instances.size(), out.size());
  for (std::size_t k = 0; k < n; ++k) {
    const EndpointInstance& i = instances[k];
    const auto& e = endpoints[i.endpoint];
    const bool available = sampler_->running() && i.signals;
    InstanceFigures f;
    f.netns = i.netns;
    f.serving = i.serving;
    f.memory = i.resources.memory();
    f.cpu = i.resources.cpu();
    if (!i.resources.unavailable().empty() || !i.resources.cpu_unavailable().empty()) {
      // Without its cgroup (or its cgroup's CPU), the node's CPU (the best
      // figure at hand; the floor keeps it from reading idle).
      f.cgroup_unavailable = true;
      f.cpu = node.cpu_utilization;
    }
    if (!f.cpu) f.cpu = 0.0;  // the first read of its cgroup: the floor stands in
    auto& r = out[k];
    build_instance_report_into(e.config, available ? &*i.signals : nullptr, f, meta, r.report);
    r.instance.assign(i.id);
    r.netns = i.netns;
    r.server_pid = i.resources.pid();
    r.serving = i.serving;
    auto& t = tick.endpoints.emplace_back();
    t.name.assign(e.config.name);
    t.instance.assign(i.id);
    t.report = first + k;
    t.target_seconds = seconds(e.config.target);
    t.max_seconds = seconds(e.config.max);
    t.measured = available;
    const EndpointInterval* newest = i.window.newest();
    t.counted = available && i.counted && !meta.stopped && newest != nullptr;
    if (t.counted) count_into(*newest, t.counts);
  }
}

}  // namespace headroom::agent
