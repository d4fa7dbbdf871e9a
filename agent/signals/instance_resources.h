// SPDX-License-Identifier: Apache-2.0
// An endpoint instance's own resources: the CPU and memory of the cgroup
// its server process runs in (v1 or v2, quota aware, as node.cgroup is
// read), found from /proc/PID/cgroup. docs/endpoints.md, "Instances".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "probes/cgroup.h"
#include "probes/readings.h"

namespace headroom::agent {

struct ResourceRoots {
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  probes::CgroupVersion version = probes::CgroupVersion::automatic;
  unsigned host_ncpu = 0;             // the host's CPUs (a cgroup without a quota may use them all)
  uint64_t host_memory_bytes = 0;     // MemTotal: what a cgroup without a memory limit is measured against
  double alpha = 1;                   // the EWMA the node's signals get (agent.smoothing); 1: none
  pid_t self = 0;  // this process, as the kernel numbers it (probes/own_pid.h); 0: not known
};

class InstanceResources {
 public:
  // Follows the cgroup of `pid`, a server process of the instance whose
  // network namespace is `netns`: a pid that is gone or now in another
  // namespace (reused) leaves the cgroup unread, and says why. The same pid
  // is looked at again every kRecheckNs (a process moved to another
  // cgroup after it started listening is followed there).
  void follow(const ResourceRoots& roots, pid_t pid, uint32_t netns, int64_t now_ns);
  static constexpr int64_t kRecheckNs = 5'000'000'000;
  // Reads the cgroup at now_ns: cpu() is the usage since the previous read
  // over the cgroup's capacity, smoothed as the node's cpu signal is
  // (nullopt on the first read and while it cannot be read); memory() its
  // memory over its limit.
  void sample(const ResourceRoots& roots, int64_t now_ns);

  std::optional<double> cpu() const { return cpu_; }
  std::optional<double> memory() const { return memory_; }
  // Why the cgroup is not read ("" when it is).
  const std::string& unavailable() const { return why_; }
  // Why the cgroup is read but not its CPU ("" when it is): the cgroup is not
  // in the cpuacct hierarchy, or a file of its CPU cannot be read.
  const std::string& cpu_unavailable() const { return cpu_why_; }
  // The cgroup's path (relative to the cgroup root), for messages; "" before one is found.
  const std::string& path() const { return path_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = 0;
  int64_t followed_ns_ = 0;
  std::string path_;
  std::unique_ptr<probes::CgroupProbe> probe_;  // (a pointer: the instance table moves its rows)
  std::optional<probes::CgroupCpuReading> prev_;
  int64_t prev_ns_ = 0;
  std::optional<double> cpu_, memory_;
  std::string why_ = "no server process known yet";
  std::string cpu_why_;
};

}  // namespace headroom::agent
