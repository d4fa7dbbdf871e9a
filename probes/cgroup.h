// SPDX-License-Identifier: Apache-2.0
// A service's cgroup, v1 or v2, quota aware.
//
// v2 (unified): <sys_root>/fs/cgroup/<path>/{cpu.stat, cpu.max,
//   cpuset.cpus.effective, memory.current, memory.max, cpu.pressure,
//   memory.pressure, io.pressure}
// v1: <sys_root>/fs/cgroup/{cpuacct|cpu,cpuacct}/<path>/cpuacct.usage,
//   <sys_root>/fs/cgroup/{cpu|cpu,cpuacct}/<path>/{cpu.cfs_quota_us, cpu.cfs_period_us, cpu.stat},
//   <sys_root>/fs/cgroup/cpuset/<path>/cpuset.effective_cpus (optional),
//   <sys_root>/fs/cgroup/memory/<path>/{memory.usage_in_bytes, memory.limit_in_bytes}
// Each controller is read on its own: a cgroup without the memory controller
// (or not in the cpuacct hierarchy, or with a file of one that cannot be read)
// still gives the others, and the reading says why the missing one is missing.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "probes/parse.h"
#include "probes/proc_file.h"

namespace headroom::probes {

enum class CgroupVersion { automatic = 0, v1 = 1, v2 = 2 };

// "/system.slice//x.service/" -> "system.slice/x.service"; "" and "/" are the
// root cgroup. ".." is refused: the path comes from a configuration file and
// must not climb out of the cgroup mount. The configuration and the probe
// both use this, so what is validated is what is opened.
Result<std::string> normalize_cgroup_path(std::string_view path);

// Where a process's cgroup sits for each controller. Under v2 both are the
// one unified path; under v1 each hierarchy has its own (a process can be in
// /system.slice/x.service for cpu and in / for memory). The cpuset hierarchy
// is looked up at the cpu path.
struct CgroupPaths {
  std::string cpu;
  std::string memory;
};

class CgroupProbe {
 public:
  // Finds the cgroup. `path` is relative to the cgroup root ("system.slice/x.service";
  // a leading '/' is accepted). With CgroupVersion::automatic, v2 is chosen when
  // <sys_root>/fs/cgroup/cgroup.controllers exists, v1 otherwise. Fails with a
  // message naming the directories looked at when the cgroup does not exist
  // (v1: in none of the cpuacct, cpu and memory hierarchies).
  static Result<CgroupProbe> open(const std::string& sys_root, const std::string& path,
                                  CgroupVersion version = CgroupVersion::automatic);
  // The same with a path per controller (probes/instance.h's controller_path
  // gives them from /proc/PID/cgroup). Under v2 the two paths must name the
  // same cgroup: v2 has one hierarchy.
  static Result<CgroupProbe> open(const std::string& sys_root, const CgroupPaths& paths,
                                  CgroupVersion version = CgroupVersion::automatic);

  // Fails only when the cgroup is gone (no controller read, no directory
  // left); a controller missing or unreadable leaves its part of the reading
  // absent, with the reason.
  Result<CgroupReading> read();
  CgroupVersion version() const { return version_; }
  // The cgroup directory (v2) or the cpuacct directory (v1), for messages.
  // Under v1 it need not exist (the cgroup may be in other hierarchies only).
  const std::string& directory() const { return directory_; }
  // The directory the memory files are read from (the same as directory()
  // under v2), for messages about them.
  const std::string& memory_directory() const { return memory_directory_; }

 private:
  CgroupProbe() = default;
  CgroupReading read_v2();
  CgroupReading read_v1();
  Result<CgroupCpuReading> read_cpu_v2();
  Result<CgroupMemReading> read_memory_v2();
  Result<CgroupCpuReading> read_cpu_v1();
  Result<CgroupMemReading> read_memory_v1();
  bool gone() const;  // no directory of the cgroup left
  Error not_found_v1() const;
  CgroupVersion version_ = CgroupVersion::v2;
  std::string rel_;  // the cpu path, normalized, for messages
  std::string directory_;
  std::string cpu_directory_;  // v1: the cpu hierarchy's (quota, throttling)
  std::string memory_directory_;
  // v2: cpu.stat, cpu.max, cpuset.cpus.effective, memory.current, memory.max,
  //     cpu.pressure, memory.pressure, io.pressure
  // v1: cpuacct.usage, cpu.cfs_quota_us, cpu.cfs_period_us, cpu.stat,
  //     cpuset.effective_cpus, memory.usage_in_bytes, memory.limit_in_bytes
  std::vector<ProcFile> files_;
};

}  // namespace headroom::probes
