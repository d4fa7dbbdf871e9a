// SPDX-License-Identifier: Apache-2.0
#include "agent/pipeline.h"

#include <spdlog/spdlog.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <utility>

#include "agent/report_builder.h"
#include "headroom/orca/report_reader.h"  // unix_now_ms
#include "publishers/registry.h"

namespace headroom::agent {
namespace {

int64_t to_ms(std::chrono::nanoseconds d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

}  // namespace

int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool same_endpoint_probe(const Config& running, const Config& next) {
  return running.endpoints == next.endpoints && running.ebpf == next.ebpf && running.interval == next.interval &&
         running.smoothing == next.smoothing && running.proc_root == next.proc_root &&
         running.sys_root == next.sys_root;
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

void announce(const Pipeline& p) {
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
    if (!pub->publish(tick_)) {
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

void Agent::reload_rejected() { tick_.health.last_reload_ok = false; }

void Agent::prepare(bool stopped) {
  tick_.meta = ReportMeta{orca::unix_now_ms(), ++seq_, to_ms(p_.config.interval), stopped};
  node_values(tick_.node, p_.config, tick_.values);
  tick_.endpoints.clear();
  for (const auto& e : p_.endpoints->endpoints()) {
    const bool available = p_.endpoints->running() && e.signals;
    tick_.endpoints.push_back(
        {&e.config, available ? &*e.signals : nullptr, available && e.counted && !stopped ? e.window.newest() : nullptr});
  }
  tick_.health.ebpf_running = p_.endpoints->running();
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
  // The baselines. Until the next tick the last sample stands (a stop right
  // now reports it); that tick drops the old endpoints' signals.
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
}

std::string status_line(const Agent& a) {
  const auto& c = a.config();
  std::string s = "STATUS=publishing node.orca";
  if (!c.endpoints.empty())
    s += " and " + std::to_string(c.endpoints.size()) + " endpoint report(s) (" + a.endpoints().status() + ")";
  return s + " to " + c.orca_dir + " every " + format_duration(c.interval) +
         (c.cgroup.empty() ? std::string(" (host)") : " (cgroup " + c.cgroup + ")");
}

}  // namespace headroom::agent
