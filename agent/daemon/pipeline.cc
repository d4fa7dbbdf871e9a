// SPDX-License-Identifier: Apache-2.0
#include "agent/daemon/pipeline.h"

#include <spdlog/spdlog.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <utility>

#include "agent/signals/report_builder.h"
#include "publishers/failure_latch.h"
#include "headroom/orca/report_reader.h"  // unix_now_ms
#include "agent/daemon/publisher_registry.h"

namespace headroom::agent {
namespace {

int64_t to_ms(std::chrono::nanoseconds d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

}  // namespace

bool same_endpoint_probe(const Config& running, const Config& next) {
  return running.endpoints == next.endpoints && running.ebpf == next.ebpf && running.interval == next.interval &&
         running.smoothing == next.smoothing && running.proc_root == next.proc_root &&
         running.sys_root == next.sys_root;
}

bool same_node_sampler(const Config& running, const Config& next) {
  return running.proc_root == next.proc_root && running.sys_root == next.sys_root && running.cgroup == next.cgroup &&
         running.cgroup_version == next.cgroup_version && running.signals == next.signals;
}

std::variant<Pipeline, BuildError> build_pipeline(Config config, const Config* running) {
  Pipeline p;
  auto sampler = NodeSampler::create(config);
  if (!sampler) return BuildError{kExitConfig, "node.cgroup: " + sampler.error().message};
  p.sampler = std::move(sampler.value());
  if (running == nullptr || !same_endpoint_probe(*running, config)) p.endpoints = std::make_unique<EndpointSampler>(config);
  p.smoother = Smoother(ewma_alpha(config.interval.count(), config.smoothing.count()));
  auto built = publishers::build_publishers(config);
  if (auto* e = std::get_if<publishers::BuildError>(&built))
    return BuildError{e->configuration ? kExitConfig : kExitCantCreat, std::move(e->message)};
  p.publishers = std::get<publishers::Publishers>(std::move(built));
  p.config = std::move(config);
  return p;
}

ProbeState probe_state(const EndpointSampler& e) {
  if (e.endpoints().empty()) return ProbeState::none;
  if (e.running()) return ProbeState::attached;
  return e.failed() ? ProbeState::failed : ProbeState::off;
}

bool reload_may_replace_probe(ProbeState running, ProbeState next) {
  return !(next == ProbeState::failed && running == ProbeState::attached);
}

std::variant<Pipeline, BuildError> build_reload(Config config, const Agent& running) {
  auto built = build_pipeline(std::move(config), &running.config());
  auto* p = std::get_if<Pipeline>(&built);
  if (p == nullptr || p->endpoints == nullptr) return built;  // an error, or the running probe kept
  if (!reload_may_replace_probe(probe_state(running.endpoints()), probe_state(*p->endpoints)))
    return BuildError{kExitConfig, "the new endpoints' eBPF probe cannot be attached (" + p->endpoints->unavailable() +
                                       "); the running probe stays attached and its endpoint signals go on. Fix "
                                       "the cause and reload again, or set agent.ebpf = \"off\" to do without"};
  return built;
}

void announce(const Pipeline& p) {
  if (p.endpoints) p.endpoints->announce();
  for (const auto& pub : p.publishers) pub->announce();
}

void Agent::drop_endpoint_signals() {
  auto& signals = tick_.node.signals;
  for (auto it = signals.begin(); it != signals.end();)
    it = it->first.starts_with(orca::kEndpointSignalPrefix) ? signals.erase(it) : std::next(it);
  endpoint_keys_.clear();
}

void Agent::add_endpoint_signals() {
  auto& signals = tick_.node.signals;
  const auto& endpoints = p_.endpoints->endpoints();
  if (endpoint_keys_.size() != endpoints.size()) {
    endpoint_keys_.clear();
    for (const auto& e : endpoints) endpoint_keys_.push_back(std::string(orca::kEndpointSignalPrefix) + e.config.name);
  }
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    std::optional<double> v;
    if (p_.endpoints->running() && endpoints[i].signals) v = endpoint_composite(*endpoints[i].signals);
    auto it = signals.find(endpoint_keys_[i]);
    if (!v) {
      if (it != signals.end()) signals.erase(it);
    } else if (it != signals.end()) {
      it->second = *v;
    } else {
      signals.emplace(endpoint_keys_[i], *v);
    }
  }
}

bool Agent::tick() {
  const int64_t now = monotonic_ns();
  p_.sampler->sample(now, tick_.node);
  smooth(p_.smoother, tick_.node);
  p_.endpoints->sample(now);
  if (std::exchange(drop_endpoint_signals_, false)) drop_endpoint_signals();
  if (p_.config.include_endpoints) add_endpoint_signals();
  if (!have_baseline_) {
    have_baseline_ = true;
    return false;
  }
  prepare(/*stopped=*/false);
  // Essential publishers come first in the table; once they have run, the
  // tick counts as published for those after them (health.ticks).
  bool ok = true, counted = false;
  for (auto& pub : p_.publishers) {
    if (!pub->essential() && !counted) {
      counted = true;
      if (ok) note_published();
    }
    const auto r = pub->publish(tick_);
    note_result(*pub, r);
    if (!r) {
      note_failure(pub->name());
      if (pub->essential()) ok = false;
    }
  }
  if (!counted && ok) note_published();
  return ok;
}

void Agent::note_published() {
  ++published_;
  tick_.health.ticks = published_;
  tick_.health.last_publish_ms = tick_.meta.timestamp_ms;
}

namespace {
uint64_t& failures_of(std::vector<std::pair<std::string, uint64_t>>& failures, std::string_view publisher) {
  auto it = std::find_if(failures.begin(), failures.end(), [&](const auto& f) { return f.first == publisher; });
  if (it == failures.end()) return failures.emplace_back(std::string(publisher), 0).second;
  return it->second;
}
}  // namespace

void Agent::note_failure(std::string_view publisher) { ++failures_of(tick_.health.publish_failures, publisher); }

void Agent::count_publishers() {
  for (const auto& pub : p_.publishers) (void)failures_of(tick_.health.publish_failures, pub->name());
}

void Agent::note_result(const publishers::Publisher& pub, const Result<void>& r) {
  auto it = std::find_if(failing_.begin(), failing_.end(),
                         [&](const Failing& f) { return f.name == pub.name() && f.target == pub.target(); });
  if (r) {
    if (it != failing_.end()) failing_.erase(it);
  } else if (it == failing_.end()) {
    failing_.push_back({std::string(pub.name()), pub.target(), orca::unix_now_ms(), r.error().message});
  }
}

void Agent::reload_rejected() { tick_.health.last_reload_ok = false; }

void Agent::reload_failed(std::string reason) {
  tick_.health.last_reload_ok = false;
  reload_error_ = std::move(reason);
  reload_error_ms_ = orca::unix_now_ms();
}

void Agent::prepare(bool stopped) {
  tick_.meta = ReportMeta{orca::unix_now_ms(), ++seq_, to_ms(p_.config.interval), stopped};
  node_values(tick_.node, p_.config, tick_.values);
  tick_.endpoints.clear();
  for (const auto& e : p_.endpoints->endpoints()) {
    const bool available = p_.endpoints->running() && e.signals;
    tick_.endpoints.push_back(
        {&e.config, available ? &*e.signals : nullptr, available && e.counted && !stopped ? e.window.newest() : nullptr});
  }
  // Attached and read this tick: while its reads fail the endpoint signals
  // are unavailable, which is what the gauge is for.
  tick_.health.ebpf_running = p_.endpoints->running() && !p_.endpoints->read_failing();
}

void Agent::stop() {
  // No new sample: the final report repeats the last one, marked stopped.
  prepare(/*stopped=*/true);
  for (auto& pub : p_.publishers) pub->stop(tick_);
}

void Agent::replace(Pipeline next) {
  for (auto& old : p_.publishers) {
    const bool kept = std::any_of(next.publishers.begin(), next.publishers.end(), [&](const auto& n) {
      return n->name() == old->name() && n->target() == old->target();
    });
    if (!kept) old->retire();
  }
  for (auto& pub : next.publishers) pub->take_over(p_.config);
  // The node's readings: the running sampler goes on when the new one would
  // read the same files, so the next tick's rates span a whole interval (a
  // fresh baseline taken just before a tick would leave cpu out of that
  // report: no clock tick elapsed). Otherwise a fresh baseline. Until the
  // next tick the last sample stands (a stop right now reports it); that
  // tick drops the old endpoints' signals.
  if (same_node_sampler(p_.config, next.config))
    next.sampler = std::move(p_.sampler);
  else
    next.sampler->sample(monotonic_ns());
  if (next.endpoints) {
    next.endpoints->sample(monotonic_ns());
  } else {
    // The same endpoints: the running probe goes on, with its windows.
    next.endpoints = std::move(p_.endpoints);
  }
  drop_endpoint_signals_ = true;  // re-added on the next tick if node.include_endpoints says so
  const bool same_smoothing =
      next.config.interval == p_.config.interval && next.config.smoothing == p_.config.smoothing;
  if (same_smoothing) next.smoother = std::move(p_.smoother);
  p_ = std::move(next);
  count_publishers();
  ++tick_.health.config_generation;
  tick_.health.last_reload_ok = true;
  reload_error_.clear();
  // A publisher the new pipeline no longer has no longer fails.
  std::erase_if(failing_, [&](const Failing& f) {
    return std::none_of(p_.publishers.begin(), p_.publishers.end(),
                        [&](const auto& pub) { return pub->name() == f.name && pub->target() == f.target; });
  });
}

std::string status_line(const Agent& a) {
  const auto& c = a.config();
  std::string s = "STATUS=publishing node.orca";
  if (!c.endpoints.empty())
    s += " and " + std::to_string(c.endpoints.size()) + " endpoint report(s) (" + a.endpoints().status() + ")";
  s += " to " + c.orca_dir + " every " + format_duration(c.interval) +
       (c.cgroup.empty() ? std::string(" (host)") : " (cgroup " + c.cgroup + ")");
  for (const auto& f : a.failing())
    s += "; " + f.name + " " + f.target + " failing since " + utc_time(f.since_ms) + ": " + f.error;
  if (!a.last_reload_error().empty())
    s += "; last reload failed at " + utc_time(a.last_reload_error_ms()) + ": " + a.last_reload_error();
  std::replace(s.begin(), s.end(), '\n', ' ');  // one line, as systemd shows it
  return s;
}

}  // namespace headroom::agent
