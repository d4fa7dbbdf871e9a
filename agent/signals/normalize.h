// SPDX-License-Identifier: Apache-2.0
// Normalization: raw readings -> utilization fractions. Pure functions over plain
// structs, no I/O, no clocks: elapsed time is passed in. Every function here is
// monotonic in offered load; see docs/orca-files.md for what each signal means.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/config/config.h"  // CompositeMethod
#include "probes/readings.h"

namespace headroom::agent {

// Share of CPU time spent busy between two /proc/stat readings.
// busy = user + nice + system + irq + softirq + steal: steal is time the
// hypervisor gave to someone else, capacity this machine did not get, so it
// counts as used. iowait counts as idle: the CPU was free to run other work and
// the I/O stall shows up in io.pressure instead.
// nullopt when no time passed or a counter went backwards (CPU hot-unplug).
std::optional<double> cpu_busy_fraction(const probes::CpuTimes& prev, const probes::CpuTimes& cur);

// Demand beyond capacity from the run queue, in units of capacity: tasks that
// are runnable but not running, divided by the number of CPUs. The reader itself
// is runnable while it reads /proc/stat and is not counted.
// 2 CPUs: 3 busy threads -> 0.5, 4 -> 1.0, 8 -> 3.0.
double runnable_excess(uint32_t procs_running, unsigned ncpu);

// Demand beyond capacity from /proc/schedstat: run-queue wait time accumulated
// in the window, per CPU and per unit of wall time. Same unit as runnable_excess,
// but measured continuously instead of sampled. nullopt on a bad window.
std::optional<double> run_delay_excess(const probes::SchedStatReading& prev, const probes::SchedStatReading& cur,
                                       int64_t elapsed_ns);

// Rate of a cumulative stall counter (PSI "total", microseconds) over the
// window, as a share of wall time in [0, 1].
std::optional<double> pressure_fraction(uint64_t prev_total_us, uint64_t cur_total_us, int64_t elapsed_ns);

// 1 - MemAvailable / MemTotal.
std::optional<double> memory_fraction(const probes::MemInfoReading& m);

// CPUs a cgroup may use: the smallest of the host's CPUs, its quota and its cpuset.
double cgroup_cpu_capacity(unsigned host_ncpu, std::optional<double> quota_cpus, unsigned cpuset_cpus);

// CPU time used by a cgroup in the window divided by what its capacity allows:
// 50 % of a 2-CPU quota is 0.5, whatever the host's size.
std::optional<double> cgroup_cpu_fraction(uint64_t prev_usage_usec, uint64_t cur_usage_usec, int64_t elapsed_ns,
                                          double capacity_cpus);

// Share of the window during which the cgroup was throttled by its quota.
std::optional<double> throttled_fraction(uint64_t prev_usec, uint64_t cur_usec, int64_t elapsed_ns);

// memory.current over memory.max, or over the host's MemTotal when unlimited.
std::optional<double> cgroup_memory_fraction(const probes::CgroupMemReading& m, uint64_t host_total_bytes);

double clamp01(double v);

// Exponentially weighted moving average with time constant `tau_ns`, sampled
// every `interval_ns`: alpha = 1 - exp(-interval / tau). tau 0 disables smoothing.
double ewma_alpha(int64_t interval_ns, int64_t tau_ns);

// Smooths named signals; a signal that goes missing forgets its history.
class Smoother {
 public:
  explicit Smoother(double alpha) : alpha_(alpha) {}
  double update(const std::string& key, double sample);
  void forget(const std::string& key) { state_.erase(key); }

 private:
  double alpha_;
  std::map<std::string, double, std::less<>> state_;
};

// Combines (value, weight) pairs: max of weight*value, or the weighted mean.
// nullopt when there is nothing to combine.
std::optional<double> composite(const std::vector<std::pair<double, double>>& values_and_weights, CompositeMethod kind);

}  // namespace headroom::agent
