// SPDX-License-Identifier: Apache-2.0
// Parsers for the kernel's text formats: pure functions from file contents to
// readings, tested with tables of literal file contents.
#pragma once

#include <string_view>

#include "headroom/orca/result.h"
#include "probes/readings.h"

namespace headroom::probes {

Result<HostCpuReading> parse_proc_stat(std::string_view text);
Result<SchedStatReading> parse_schedstat(std::string_view text);
Result<MemInfoReading> parse_meminfo(std::string_view text);
Result<PressureReading> parse_pressure(std::string_view text);

// cgroup v2
struct CpuStatV2 {
  uint64_t usage_usec = 0, throttled_usec = 0, nr_throttled = 0;
};
Result<CpuStatV2> parse_cgroup2_cpu_stat(std::string_view text);
// "max 100000" or "<quota> <period>" -> CPUs (nullopt when unlimited)
Result<std::optional<double>> parse_cgroup2_cpu_max(std::string_view text);
// "0-3,8,10-11" -> 7
Result<unsigned> parse_cpu_list_count(std::string_view text);
// "max" -> nullopt, else bytes
Result<std::optional<uint64_t>> parse_cgroup2_memory_max(std::string_view text);

// cgroup v1 and shared helpers
Result<uint64_t> parse_u64(std::string_view text);  // one unsigned number, surrounding whitespace ignored
Result<int64_t> parse_i64(std::string_view text);   // one signed number (cpu.cfs_quota_us may be -1)
struct CpuStatV1 {
  uint64_t nr_throttled = 0, throttled_time_ns = 0;
};
Result<CpuStatV1> parse_cgroup1_cpu_stat(std::string_view text);

}  // namespace headroom::probes
