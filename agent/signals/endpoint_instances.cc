// SPDX-License-Identifier: Apache-2.0
#include "agent/signals/endpoint_instances.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "probes/instance.h"

namespace headroom::agent {

namespace {

const probes::InstanceTotals* totals_of(const probes::EndpointSnapshot& s, std::size_t endpoint, uint32_t netns) {
  auto it = std::lower_bound(s.instances.begin(), s.instances.end(), std::pair(endpoint, netns),
                             [](const probes::InstanceTotals& t, const std::pair<std::size_t, uint32_t>& k) {
                               return std::pair<std::size_t, uint32_t>(t.endpoint, t.netns) < k;
                             });
  if (it == s.instances.end() || it->endpoint != endpoint || it->netns != netns) return nullptr;
  return &*it;
}

const probes::ListenerState* listener_of(const probes::EndpointSnapshot& s, uint32_t netns, uint16_t port) {
  for (const auto& l : s.listeners)
    if (l.netns == netns && l.port == port) return &l;
  return nullptr;
}

// The id from the server's cgroup path (probes/instance.h); without a
// readable one, from the namespace alone.
std::string name_instance(const ResourceRoots& roots, pid_t pid, uint32_t netns, bool host) {
  std::string path;
  if (pid > 0) {
    std::ifstream in(roots.proc_root + "/" + std::to_string(pid) + "/cgroup");
    std::ostringstream text;
    text << in.rdbuf();
    if (auto groups = probes::parse_proc_cgroup(text.str()); groups) {
      const auto version = roots.version;
      path = probes::controller_path(*groups, version, "cpu").value_or(std::string());
    }
  }
  return probes::instance_id(path, netns, host);
}

}  // namespace

InstanceTable::InstanceTable(const Config& config, ResourceRoots roots)
    : endpoints_(config.endpoints),
      window_(window_intervals(config.interval, config.smoothing)),
      bound_(config.endpoint_instances),
      grace_(config.instance_grace),
      roots_(std::move(roots)),
      warned_full_(config.endpoints.size(), false) {
  // roots_.self, not getpid(): in a PID namespace of its own getpid() names
  // another process of proc_root (PID 1 of the node, say).
  if (roots_.self > 0)
    if (auto ns = probes::netns_of(roots_.proc_root, roots_.self); ns) own_netns_ = *ns;
}

EndpointInstance* InstanceTable::find(std::size_t endpoint, uint32_t netns) {
  for (auto& i : instances_)
    if (i.endpoint == endpoint && i.netns == netns) return &i;
  return nullptr;
}

std::string InstanceTable::unique_id(std::size_t endpoint, std::string id, uint32_t netns) const {
  const bool taken = std::any_of(instances_.begin(), instances_.end(),
                                 [&](const EndpointInstance& i) { return i.endpoint == endpoint && i.id == id; });
  return taken ? id + "-" + std::to_string(netns) : id;
}

void InstanceTable::add(std::size_t endpoint, uint32_t netns, pid_t pid, int64_t now_ns) {
  const auto n = static_cast<std::size_t>(
      std::count_if(instances_.begin(), instances_.end(), [&](const auto& i) { return i.endpoint == endpoint; }));
  if (n >= bound_) {
    ++refused_;
    if (!warned_full_[endpoint]) {
      warned_full_[endpoint] = true;
      spdlog::warn("endpoint \"{}\" has more than agent.endpoint_instances = {} instances: the requests of those "
                   "past it count in endpoint.{}.orca only, without a report of their own; raise "
                   "agent.endpoint_instances if the node really runs that many",
                   endpoints_[endpoint].name, bound_, endpoints_[endpoint].name);
    }
    return;
  }
  EndpointInstance i;
  i.endpoint = endpoint;
  i.netns = netns;
  i.id = unique_id(endpoint, name_instance(roots_, pid, netns, netns == own_netns_), netns);
  i.window = EndpointWindow(window_);
  i.added_ns = now_ns;
  i.resources.follow(roots_, pid, netns, now_ns);
  i.resources.sample(roots_, now_ns);
  if (!i.resources.unavailable().empty())
    spdlog::warn("endpoint \"{}\" instance \"{}\": its cgroup cannot be read ({}); its report carries "
                 "headroom.instance.cgroup_unavailable = 1 and the node's CPU instead",
                 endpoints_[endpoint].name, i.id, i.resources.unavailable());
  else if (!i.resources.cpu_unavailable().empty())
    spdlog::warn("endpoint \"{}\" instance \"{}\": its cgroup's CPU cannot be read ({}); its report carries "
                 "headroom.instance.cgroup_unavailable = 1 and the node's CPU instead",
                 endpoints_[endpoint].name, i.id, i.resources.cpu_unavailable());
  else
    spdlog::info("endpoint \"{}\": instance \"{}\" (network namespace {}, process {}, cgroup {})",
                 endpoints_[endpoint].name, i.id, netns, pid, i.resources.path());
  auto at = std::upper_bound(instances_.begin(), instances_.end(), i, [](const auto& a, const auto& b) {
    return std::tie(a.endpoint, a.id) < std::tie(b.endpoint, b.id);
  });
  instances_.insert(at, std::move(i));
}

void InstanceTable::unavailable() {
  for (auto& i : instances_) {
    i.signals.reset();
    i.counted = false;
  }
}

void InstanceTable::sample(const probes::EndpointSnapshot* prev, const probes::EndpointSnapshot& cur, int64_t now_ns,
                           const std::function<void(uint32_t, uint32_t)>& forget) {
  // New instances: a namespace where a server listens on an endpoint's
  // port, or whose requests the probe counted.
  for (const auto& l : cur.listeners) {
    if (l.listeners <= 0) continue;
    for (std::size_t e = 0; e < endpoints_.size(); ++e)
      if (endpoints_[e].port == l.port && find(e, l.netns) == nullptr) add(e, l.netns, l.pid, now_ns);
  }
  for (const auto& t : cur.instances) {
    if (t.netns == HR_INSTANCE_OVERFLOW || t.endpoint >= endpoints_.size() || find(t.endpoint, t.netns)) continue;
    const auto* l = listener_of(cur, t.netns, endpoints_[t.endpoint].port);
    add(t.endpoint, t.netns, l ? l->pid : 0, now_ns);
  }
  static const probes::EndpointTotals kNone{};
  for (auto& i : instances_) {
    const auto* now = totals_of(cur, i.endpoint, i.netns);
    // A new instance's counts start at zero: an entry of the same namespace
    // in prev was a forgotten instance's.
    const auto* before = prev && i.added_ns != now_ns ? totals_of(*prev, i.endpoint, i.netns) : nullptr;
    const auto& b = now ? now->totals : kNone;
    const auto& a = before ? before->totals : kNone;
    const auto* l = listener_of(cur, i.netns, endpoints_[i.endpoint].port);
    const bool answered = b.stats.completed != a.stats.completed;
    const bool serving = l ? l->listeners > 0 : (answered || b.inflight > 0);
    if (serving && !i.serving)
      spdlog::info("endpoint \"{}\" instance \"{}\" serves again", endpoints_[i.endpoint].name, i.id);
    if (!serving && i.serving)
      spdlog::info("endpoint \"{}\" instance \"{}\" stopped serving: its report says so (headroom.instance.gone) "
                   "and is removed after agent.instance_grace",
                   endpoints_[i.endpoint].name, i.id);
    i.serving = serving;
    i.gone_ns = serving ? 0 : (i.gone_ns != 0 ? i.gone_ns : now_ns);
    if (serving && l && l->pid > 0) i.resources.follow(roots_, l->pid, i.netns, now_ns);
    const bool was_read = i.resources.unavailable().empty();
    i.resources.sample(roots_, now_ns);
    if (was_read && !i.resources.unavailable().empty())
      spdlog::warn("endpoint \"{}\" instance \"{}\": its cgroup can no longer be read ({}); its report carries "
                   "headroom.instance.cgroup_unavailable = 1 and the node's CPU until the server's cgroup is found "
                   "again",
                   endpoints_[i.endpoint].name, i.id, i.resources.unavailable());
    i.counted = false;
    if (prev != nullptr) {
      i.window.add(interval_between(a, prev->at_ns, b, cur.at_ns), b.inflight,
                   b.inflight_over_target + b.pending_over_target, b.inflight_over_max + b.pending_over_max,
                   b.pending);
      i.signals = i.window.signals(endpoints_[i.endpoint]);
      i.counted = true;
    }
  }
  // Gone for longer than the grace period: forgotten, its report removed.
  std::erase_if(instances_, [&](const EndpointInstance& i) {
    if (i.serving || now_ns - i.gone_ns < grace_.count()) return false;
    spdlog::info("endpoint \"{}\" instance \"{}\" forgotten ({} after it stopped serving)",
                 endpoints_[i.endpoint].name, i.id, format_duration(grace_));
    forget(static_cast<uint32_t>(i.endpoint), i.netns);
    return true;
  });
}

}  // namespace headroom::agent
