// SPDX-License-Identifier: Apache-2.0
// Dependency counters -> dependency signals. Pure. A dependency's calls are
// measured as an endpoint's requests are (endpoint_signals.h: the interval,
// the window, the late in-flight calls, percentiles, the concurrency share);
// on top of them the window's error share, connect failures and resets.
//
// A dependency that stops answering: its calls in flight age past target and
// max and count as late, so the latency shares reach 1.0 within
// max(threshold, window); calls it refuses count as errors. With nothing in
// the window the last shares stay: a dependency the callers gave up on does
// not look healthy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

#include "agent/config/config.h"
#include "agent/signals/endpoint_signals.h"
#include "probes/dependency_probe.h"

namespace headroom::agent {

// What happened between two snapshots of one dependency.
struct DependencyInterval {
  EndpointInterval calls;
  uint64_t connect_failures = 0, resets = 0;
};

// Counters are cumulative and wrap; differences are taken modulo 2^64.
DependencyInterval dependency_interval(const probes::DependencyTotals& prev, int64_t prev_ns,
                                       const probes::DependencyTotals& cur, int64_t cur_ns);

struct DependencySignals {
  // rps: calls answered per second; eps: failed calls per second; the
  // latency shares, concurrency (when max_concurrency is declared),
  // percentiles and window counts as an endpoint's.
  EndpointSignals calls;
  // errors / (completed + aborted) over the window; absent until a call ended.
  std::optional<double> error_share;
  uint64_t window_connect_failures = 0, window_resets = 0;
};

class DependencyWindow {
 public:
  explicit DependencyWindow(std::size_t intervals) : calls_(intervals), capacity_(intervals < 1 ? 1 : intervals) {}

  // Adds an interval; `now` is the snapshot taken at its end (its calls in flight).
  void add(DependencyInterval interval, const probes::DependencyTotals& now);
  DependencySignals signals(const DependencyConfig& dependency) const;
  // The interval added last; null before the first.
  const DependencyInterval* newest() const { return slots_.empty() ? nullptr : &newest_; }

 private:
  struct Counts {
    uint64_t ended = 0, errors = 0, connect_failures = 0, resets = 0;
  };
  EndpointWindow calls_;
  std::size_t capacity_;
  std::deque<Counts> slots_;
  DependencyInterval newest_;
  std::optional<double> error_share_;  // the last known, kept through an empty window
};

// The dependency's composite: the largest of its shares (latency, concurrency, errors).
std::optional<double> dependency_composite(const DependencySignals& s);

}  // namespace headroom::agent
