// SPDX-License-Identifier: Apache-2.0
// Raw readings, exactly as the kernel reports them. No arithmetic beyond unit
// conversion happens here: turning two readings into a fraction is the job of
// agent/signals/normalize.h.
#pragma once

#include <cstdint>
#include <optional>

#include "headroom/orca/result.h"

namespace headroom::probes {

// /proc/stat "cpu" line, in USER_HZ ticks. guest and guest_nice are already
// included in user and nice by the kernel and are therefore not kept.
struct CpuTimes {
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
};

struct HostCpuReading {
  CpuTimes total;              // aggregate "cpu" line
  unsigned ncpu = 0;           // number of "cpuN" lines
  uint32_t procs_running = 0;  // runnable tasks right now, the reader included
  uint32_t procs_blocked = 0;  // tasks in uninterruptible sleep (I/O) right now
};

// /proc/schedstat: run-queue delay summed over CPUs (needs CONFIG_SCHEDSTATS).
struct SchedStatReading {
  uint64_t run_delay_ns = 0;  // time tasks spent runnable but waiting for a CPU
  unsigned ncpu = 0;
};

// /proc/meminfo
struct MemInfoReading {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;
};

// One line of a pressure file ("some" or "full").
struct PressureLine {
  double avg10 = 0;        // percent, as printed by the kernel
  double avg60 = 0;
  double avg300 = 0;
  uint64_t total_us = 0;   // cumulative stall time, microseconds
};

// /proc/pressure/{cpu,memory,io} or a cgroup v2 {cpu,memory,io}.pressure file.
struct PressureReading {
  PressureLine some;
  std::optional<PressureLine> full;  // absent in cpu pressure before Linux 5.13
};

// CPU of one cgroup. Usage is converted to microseconds for v1 (cpuacct.usage is ns).
struct CgroupCpuReading {
  uint64_t usage_usec = 0;
  std::optional<double> quota_cpus;  // quota / period; nullopt when unlimited
  unsigned cpuset_cpus = 0;          // CPUs in cpuset.cpus.effective; 0 when unknown
  uint64_t throttled_usec = 0;       // time the cgroup was throttled by its quota
  uint64_t nr_throttled = 0;
};

// Memory of one cgroup.
struct CgroupMemReading {
  uint64_t current_bytes = 0;
  std::optional<uint64_t> limit_bytes;  // nullopt when unlimited ("max", or v1's huge value)
};

struct CgroupReading {
  // Each controller is read on its own: a part that is missing leaves the
  // others. cpu is nullopt when its files cannot be read (v1: the cgroup is
  // not in the cpuacct hierarchy; a file that exists but cannot be read or
  // parsed), memory when the cgroup has no memory controller (v1: no
  // memory.usage_in_bytes in the memory hierarchy; v2: no memory.current) or
  // its files cannot be read. cpu_error and memory_error say why.
  std::optional<CgroupCpuReading> cpu;
  std::optional<CgroupMemReading> memory;
  std::optional<Error> cpu_error, memory_error;
  // cgroup v2 only; v1 has no per-cgroup pressure. A pressure file that is
  // absent (PSI off) leaves its reading nullopt and no error; one that exists
  // but cannot be read or parsed sets its error.
  std::optional<PressureReading> cpu_pressure, memory_pressure, io_pressure;
  std::optional<Error> cpu_pressure_error, memory_pressure_error, io_pressure_error;
};

}  // namespace headroom::probes
