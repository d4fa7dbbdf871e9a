// SPDX-License-Identifier: Apache-2.0
#include "agent/daemon/pipeline.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <utility>

#include "agent/daemon/publisher_registry.h"
#include "agent/signals/dependency_scopes.h"
#include "agent/signals/endpoint_scopes.h"
#include "headroom/orca/names.h"
#include "publishers/failure_latch.h"  // utc_time

namespace headroom::agent {
namespace {

int64_t to_ms(std::chrono::nanoseconds d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

std::vector<std::string> endpoint_scopes(const Config& c) {
  std::vector<std::string> out;
  for (const auto& e : c.endpoints) out.push_back(orca::endpoint_scope(e.name));
  return out;
}

std::vector<std::string> dependency_scopes(const Config& c) {
  std::vector<std::string> out;
  for (const auto& d : c.dependencies) out.push_back(orca::dependency_scope(d.name));
  return out;
}

constexpr SamplerRow kSamplerRows[] = {
    {"endpoints", "[[endpoint]]: requests in flight and latency SLO misses per port (and path), eBPF", "endpoint",
     &EndpointScopes::build, &EndpointScopes::same, &endpoint_scopes},
    {"dependencies", "[[dependency]]: outbound calls in flight, latency SLO misses and errors per remote service, "
     "seen from the callers, eBPF", "dependency", &DependencyScopes::build, &DependencyScopes::same,
     &dependency_scopes},
};

}  // namespace

std::span<const SamplerRow> sampler_rows() { return kSamplerRows; }

std::vector<std::string> report_scopes(const Config& config) {
  std::vector<std::string> out{std::string(orca::kNodeScope)};
  for (const auto& row : kSamplerRows)
    for (auto& s : row.scopes(config)) out.push_back(std::move(s));
  return out;
}

bool same_node_sampler(const Config& running, const Config& next) {
  return running.proc_root == next.proc_root && running.sys_root == next.sys_root && running.cgroup == next.cgroup &&
         running.cgroup_version == next.cgroup_version && running.signals == next.signals;
}

int exit_status(const Error& e) { return e.code != 0 ? kExitCantCreat : kExitConfig; }

Result<Pipeline> build_pipeline(Config config, const Config* running) {
  Pipeline p;
  auto node = NodeSampler::create(config);
  if (!node) return Error{0, "node.cgroup: " + node.error().message};  // the configuration names it: exit 78
  p.node = std::move(node.value());
  for (const auto& row : kSamplerRows) {
    const bool keep = running != nullptr && row.same(*running, config);
    p.keep.push_back(keep);
    p.samplers.push_back(keep ? nullptr : row.build(config));
  }
  p.smoother = Smoother(ewma_alpha(config.interval.count(), config.smoothing.count()));
  auto built = build_publishers(config, report_scopes(config));
  if (!built) return std::move(built).error();
  p.publishers = std::move(built.value());
  p.config = std::move(config);
  return p;
}

Result<Pipeline> build_reload(Config config, const Agent& running) {
  auto built = build_pipeline(std::move(config), &running.config());
  if (!built) return built;
  for (std::size_t i = 0; i < std::size(kSamplerRows); ++i) {
    const ScopeSampler* next = built->samplers[i].get();
    if (next == nullptr) continue;  // kept, or nothing configured
    const ScopeSampler* now = running.sampler(i);
    const ProbeState running_state = now != nullptr ? now->state() : ProbeState::none;
    if (!reload_may_replace_probe(running_state, next->state()))
      return Error{0, "the new " + std::string(kSamplerRows[i].name) + "' eBPF probe cannot be attached (" +
                          next->unavailable() + "); the running probe stays attached and its " +
                          std::string(kSamplerRows[i].report_noun) +
                          " signals go on. Fix the cause and reload again, or set agent.ebpf = \"off\" to do without"};
  }
  return built;
}

void announce(const Pipeline& p) {
  for (const auto& s : p.samplers)
    if (s) s->announce();
  for (const auto& pub : p.publishers) pub->announce();
}

Agent::Agent(Pipeline p) : p_(std::move(p)), scopes_(report_scopes(p_.config)) { count_publishers(); }

void Agent::sample(int64_t now_ns) {
  p_.node->sample(now_ns, node_);
  smooth(p_.smoother, node_);
  for (auto& s : p_.samplers)
    if (s) s->sample(now_ns);
  if (std::exchange(drop_endpoint_signals_, false))
    std::erase_if(node_.signals, [](const auto& kv) { return kv.first.starts_with(orca::kEndpointSignalPrefix); });
  if (p_.config.include_endpoints)
    for (const auto& s : p_.samplers)
      if (s) s->add_node_signals(node_);
}

bool Agent::tick(const TickTime& now) {
  sample(now.monotonic_ns);
  if (!have_baseline_) {
    have_baseline_ = true;
    return false;
  }
  prepare(now, /*stopped=*/false);
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
    if (!r && pub->essential()) ok = false;
  }
  if (!counted && ok) note_published();
  return ok;
}

void Agent::prepare(const TickTime& now, bool stopped) {
  tick_.meta = ReportMeta{now.unix_ms, ++seq_, to_ms(p_.config.interval), stopped};
  node_values(node_, p_.config, values_);
  // The scopes of this tick: a sampler's may change (instances come and go).
  std::size_t count = 1;
  for (const auto& s : p_.samplers)
    if (s) count += s->scopes().size();
  scopes_.resize(count);
  std::size_t k = 1;
  for (const auto& s : p_.samplers)
    if (s)
      for (const auto& scope : s->scopes())
        if (scopes_[k++] != scope) scopes_[k - 1] = scope;
  tick_.reports.resize(scopes_.size());
  for (std::size_t i = 0; i < scopes_.size(); ++i)
    if (tick_.reports[i].scope != scopes_[i]) tick_.reports[i].scope = scopes_[i];
  build_node_report_into(values_, node_, tick_.meta, tick_.reports[0].report);
  const NodeFigures figures{node_cpu(values_)};
  std::size_t next = 1;
  tick_.endpoints.clear();
  tick_.dependencies.clear();
  bool measuring = false;
  for (const auto& s : p_.samplers) {
    if (!s) continue;
    const std::size_t n = s->scopes().size();
    s->report(figures, tick_.meta, std::span(tick_.reports).subspan(next, n), tick_);
    next += n;
    measuring = measuring || s->measuring();
  }
  for (auto& r : tick_.reports) r.report.SerializeToString(&r.bytes);
  // Attached and read this tick: while its reads fail the endpoint signals
  // are unavailable, which is what the gauge is for.
  tick_.health.ebpf_running = measuring;
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

void Agent::count_publishers() {
  for (const auto& pub : p_.publishers) (void)failures_of(tick_.health.publish_failures, pub->name());
}

void Agent::note_result(const publishers::Publisher& pub, const Result<void>& r) {
  if (!r) ++failures_of(tick_.health.publish_failures, pub.name());
  auto it = std::find_if(failing_.begin(), failing_.end(),
                         [&](const Failing& f) { return f.name == pub.name() && f.target == pub.target(); });
  if (r) {
    if (it != failing_.end()) failing_.erase(it);
  } else if (it == failing_.end()) {
    failing_.push_back({std::string(pub.name()), pub.target(), orca::unix_now_ms(), r.error().message});
  }
}

void Agent::reload_failed(std::string reason, int64_t unix_ms) {
  tick_.health.last_reload_ok = false;
  reload_error_ = std::move(reason);
  reload_error_ms_ = unix_ms;
}

void Agent::stop(const TickTime& now) {
  // No new sample: the final report repeats the last one, marked stopped.
  prepare(now, /*stopped=*/true);
  for (auto& pub : p_.publishers) pub->stop(tick_);
}

void Agent::replace(Pipeline next, const TickTime& now) {
  for (auto& old : p_.publishers) {
    const bool kept = std::any_of(next.publishers.begin(), next.publishers.end(), [&](const auto& n) {
      return n->name() == old->name() && n->target() == old->target();
    });
    if (!kept) old->retire();
  }
  for (auto& pub : next.publishers) pub->take_over(scopes_);
  // The node's readings: the running sampler goes on when the new one would
  // read the same files, so the next tick's rates span a whole interval (a
  // fresh baseline taken just before a tick would leave cpu out of that
  // report: no clock tick elapsed). Otherwise a fresh baseline. Until the
  // next tick the last sample stands (a stop right now reports it); that
  // tick drops the old endpoints' signals.
  if (same_node_sampler(p_.config, next.config))
    next.node = std::move(p_.node);
  else
    next.node->sample(now.monotonic_ns);
  for (std::size_t i = 0; i < next.samplers.size(); ++i) {
    if (next.keep[i])
      next.samplers[i] = std::move(p_.samplers[i]);  // the running probe goes on, with its windows
    else if (next.samplers[i])
      next.samplers[i]->sample(now.monotonic_ns);
  }
  drop_endpoint_signals_ = true;  // re-added on the next tick if node.include_endpoints says so
  const bool same_smoothing =
      next.config.interval == p_.config.interval && next.config.smoothing == p_.config.smoothing;
  if (same_smoothing) next.smoother = std::move(p_.smoother);
  p_ = std::move(next);
  scopes_ = report_scopes(p_.config);
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
  for (std::size_t i = 0; i < std::size(kSamplerRows); ++i)
    if (const ScopeSampler* sampler = a.sampler(i); sampler != nullptr && !sampler->scopes().empty())
      s += " and " + std::to_string(sampler->scopes().size()) + " " + std::string(kSamplerRows[i].report_noun) +
           " report(s) (" + sampler->status() + ")";
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
