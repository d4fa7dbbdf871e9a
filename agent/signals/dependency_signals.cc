// SPDX-License-Identifier: Apache-2.0
#include "agent/signals/dependency_signals.h"

#include <algorithm>
#include <utility>

namespace headroom::agent {

DependencyInterval dependency_interval(const probes::DependencyTotals& prev, int64_t prev_ns,
                                       const probes::DependencyTotals& cur, int64_t cur_ns) {
  DependencyInterval iv;
  iv.calls = interval_between(prev.calls, prev_ns, cur.calls, cur_ns);
  iv.connect_failures = cur.connect_failures - prev.connect_failures;
  iv.resets = cur.resets - prev.resets;
  return iv;
}

void DependencyWindow::add(DependencyInterval interval, const probes::DependencyTotals& now) {
  const auto& c = interval.calls;
  slots_.push_back({c.completed + c.aborted, c.errors, interval.connect_failures, interval.resets});
  while (slots_.size() > capacity_) slots_.pop_front();
  uint64_t ended = 0, errors = 0;
  for (const auto& s : slots_) {
    ended += s.ended;
    errors += s.errors;
  }
  // errors counts ended calls only (an error answer, a reset, a failed
  // connect), so the share is at most 1; min() guards counters read apart.
  if (ended > 0) error_share_ = std::min(1.0, static_cast<double>(errors) / static_cast<double>(ended));
  // The callers' calls wait on the dependency: none is "pending" at a server.
  calls_.add(interval.calls, now.calls.inflight, now.calls.inflight_over_target, now.calls.inflight_over_max);
  newest_ = std::move(interval);
}

DependencySignals DependencyWindow::signals(const DependencyConfig& dependency) const {
  // The endpoint window reads target, max and max_concurrency of its config.
  EndpointConfig as_endpoint;
  as_endpoint.target = dependency.target;
  as_endpoint.max = dependency.max;
  as_endpoint.max_concurrency = dependency.max_concurrency;
  DependencySignals s;
  s.calls = calls_.signals(as_endpoint);
  s.error_share = error_share_;
  for (const auto& slot : slots_) {
    s.window_connect_failures += slot.connect_failures;
    s.window_resets += slot.resets;
  }
  return s;
}

std::optional<double> dependency_composite(const DependencySignals& s) {
  std::optional<double> out = endpoint_composite(s.calls);
  if (s.error_share) out = out ? std::max(*out, *s.error_share) : *s.error_share;
  return out;
}

}  // namespace headroom::agent
