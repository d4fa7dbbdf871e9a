// SPDX-License-Identifier: Apache-2.0
// The node scope's sampler: opens the probes of the signals the configuration
// enables (agent/signals/signals.h, one row each), keeps the previous readings, and
// turns each new reading into signals through the pure functions of
// normalize.h. The clock is passed in.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/signals.h"
#include "headroom/orca/result.h"
#include "probes/cgroup.h"

namespace headroom::agent {

class NodeSampler {
 public:
  // Opens the probes. Fails only when the configured cgroup does not exist;
  // a missing host file makes its signal unavailable instead.
  static Result<std::unique_ptr<NodeSampler>> create(const Config& config);

  // Reads every probe. The first call only records a baseline for the rates.
  NodeSample sample(int64_t monotonic_ns);
  // The same into a sample kept across ticks: its entries are overwritten in
  // place and those not available this time removed; other signals in it
  // ("endpoint.<name>") are left alone.
  void sample(int64_t monotonic_ns, NodeSample& out);

  // Signals currently unavailable, with the reason (the first error seen).
  const std::map<std::string, std::string, std::less<>>& unavailable() const { return availability_.reasons(); }

 private:
  explicit NodeSampler(const Config& config);

  std::vector<std::unique_ptr<SignalProbe>> signals_;  // the enabled rows, in table order
  std::unique_ptr<probes::CgroupProbe> cgroup_;
  std::optional<probes::CgroupReading> cgroup_reading_;
  FailureLatch cgroup_latch_;
  Availability availability_;
};

}  // namespace headroom::agent
