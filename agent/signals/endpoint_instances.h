// SPDX-License-Identifier: Apache-2.0
// The instances of the endpoints (docs/endpoints.md, "Instances"): the
// servers of one network namespace that serve an endpoint's port. The probe
// counts each (endpoint, namespace) apart; this table turns its snapshots
// into each instance's window and signals, names the instance, follows its
// server's cgroup, and says when it stops serving and when it is forgotten.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/endpoint_signals.h"
#include "agent/signals/instance_resources.h"
#include "probes/endpoint_probe.h"

namespace headroom::agent {

struct EndpointInstance {
  std::size_t endpoint = 0;  // index into the configuration's endpoints
  uint32_t netns = 0;        // the network namespace's inode
  std::string id;            // endpoint.<name>@<id>.orca
  EndpointWindow window{1};
  std::optional<EndpointSignals> signals;
  bool counted = false;      // the last sample added an interval to the window
  bool serving = true;       // a server listens (or, without a listener known, answered)
  int64_t gone_ns = 0;       // when it stopped serving (CLOCK_MONOTONIC); 0 while it serves
  int64_t added_ns = 0;      // when it became an instance: its counts before are not its own
  InstanceResources resources;
};

class InstanceTable {
 public:
  InstanceTable(const Config& config, ResourceRoots roots);

  // One sample: prev and cur are the probe's snapshots a tick apart (have
  // prev: false on the baseline). forget(endpoint, netns) removes a gone
  // instance's entry from the probe once its grace period is over.
  void sample(const probes::EndpointSnapshot* prev, const probes::EndpointSnapshot& cur, int64_t now_ns,
              const std::function<void(uint32_t, uint32_t)>& forget);
  // The instances' signals stop (a failing read); their windows stay.
  void unavailable();

  // By endpoint (configuration order), then id.
  const std::vector<EndpointInstance>& instances() const { return instances_; }
  // How many instances were refused by agent.endpoint_instances (since start).
  uint64_t refused() const { return refused_; }
  const ResourceRoots& roots() const { return roots_; }

 private:
  EndpointInstance* find(std::size_t endpoint, uint32_t netns);
  void add(std::size_t endpoint, uint32_t netns, pid_t pid, int64_t now_ns);
  std::string unique_id(std::size_t endpoint, std::string id, uint32_t netns) const;

  std::vector<EndpointConfig> endpoints_;
  std::size_t window_ = 1;
  uint32_t bound_ = 0;
  std::chrono::nanoseconds grace_{};
  ResourceRoots roots_;
  uint32_t own_netns_ = 0;  // the agent's network namespace: its instance is "host"
  std::vector<EndpointInstance> instances_;
  std::vector<bool> warned_full_;  // per endpoint: the bound was logged
  uint64_t refused_ = 0;
};

}  // namespace headroom::agent
