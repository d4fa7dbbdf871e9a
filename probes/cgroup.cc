// SPDX-License-Identifier: Apache-2.0
#include "probes/cgroup.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <utility>
#include <string_view>

namespace headroom::probes {
namespace {

// Indexes into CgroupProbe::files_, one list per version.
namespace v2 {
enum : size_t { cpu_stat, cpu_max, cpuset, mem_current, mem_max, cpu_pressure, mem_pressure, io_pressure };
}
namespace v1 {
enum : size_t { usage, quota, period, cpu_stat, cpuset, mem_usage, mem_limit };
}

// v1 reports "no limit" as LONG_MAX rounded down to a page (9223372036854771712
// with 4 KiB pages); no machine has 2^62 bytes, so anything above is no limit.
constexpr uint64_t kV1Unlimited = uint64_t{1} << 62;

constexpr const char* kHowToFix =
    "check [node] cgroup in the config; `systemctl status <unit>` or /proc/<pid>/cgroup shows a service's cgroup";

// 0 when `path` is a directory, else the errno that says why not.
int dir_error(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string join(const std::string& dir, const std::string& rel) { return rel.empty() ? dir : dir + "/" + rel; }

Error not_found(const std::string& rel, const char* version, std::initializer_list<std::string> looked_at) {
  std::string msg = "cgroup \"/" + rel + "\" not found (cgroup " + version + "); looked at ";
  bool first = true;
  for (const std::string& dir : looked_at) {
    if (!first) msg += ", ";
    first = false;
    msg += dir + " (" + std::strerror(dir_error(dir)) + ")";
  }
  msg += "; ";
  msg += kHowToFix;
  return Error{ENOENT, std::move(msg)};
}

// The first of `candidates` that is a directory, else nullopt.
std::optional<std::string> first_dir(std::initializer_list<std::string> candidates) {
  for (const std::string& c : candidates) {
    if (dir_error(c) == 0) return c;
  }
  return std::nullopt;
}

Error with_path(const ProcFile& file, const Error& e) { return Error{e.code, file.path() + ": " + e.message}; }

// The file parsed, or nullopt when reading it fails with one of `absent`.
template <class T, class Parse>
Result<std::optional<T>> parse_unless(ProcFile& file, Parse parse, std::initializer_list<int> absent) {
  auto text = file.read();
  if (!text) {
    if (std::find(absent.begin(), absent.end(), text.error().code) != absent.end()) return std::optional<T>();
    return text.error();
  }
  auto value = parse(*text);
  if (!value) return with_path(file, value.error());
  return std::optional<T>(std::in_place, std::move(*value));
}

// A file the cgroup may lack: a disabled controller (cpu.max, memory.max),
// the root cgroup (cpu.max), PSI off (ENOENT, or EOPNOTSUPP on older kernels).
template <class T, class Parse>
Result<std::optional<T>> parse_optional(ProcFile& file, Parse parse) {
  return parse_unless<T>(file, parse, {ENOENT, EOPNOTSUPP});
}

// A controller's file: absent only when it does not exist (the controller is
// not enabled for the cgroup); one that exists but cannot be read or parsed
// is an error.
template <class T, class Parse>
Result<std::optional<T>> parse_if_exists(ProcFile& file, Parse parse) {
  return parse_unless<T>(file, parse, {ENOENT});
}

}  // namespace

Result<CgroupProbe> CgroupProbe::open(const std::string& sys_root, const std::string& path, CgroupVersion version) {
  return open(sys_root, CgroupPaths{path, path}, version);
}

Result<CgroupProbe> CgroupProbe::open(const std::string& sys_root, const CgroupPaths& paths, CgroupVersion version) {
  auto rel = normalize_cgroup_path(paths.cpu);
  if (!rel) return rel.error();
  auto mem_rel = normalize_cgroup_path(paths.memory);
  if (!mem_rel) return mem_rel.error();
  const std::string root = sys_root + "/fs/cgroup";
  if (version == CgroupVersion::automatic) {
    version = exists(root + "/cgroup.controllers") ? CgroupVersion::v2 : CgroupVersion::v1;
  }

  CgroupProbe probe;
  probe.version_ = version;
  if (version == CgroupVersion::v2) {
    if (*mem_rel != *rel) {
      return logic_error("cgroup v2 has one hierarchy, but the cpu path \"/" + *rel + "\" and the memory path \"/" +
                         *mem_rel + "\" differ; give the one path of the process's \"0::\" line in /proc/<pid>/cgroup");
    }
    const std::string dir = join(root, *rel);
    if (dir_error(dir) != 0) return not_found(*rel, "v2", {dir});
    // cpu.stat is in every v2 cgroup whatever the controllers: without it this
    // is not a cgroup directory.
    if (!exists(dir + "/cpu.stat")) {
      return Error{ENOENT, "cgroup \"/" + *rel + "\": " + dir + " has no cpu.stat, so it is not a cgroup v2 directory; " +
                               kHowToFix};
    }
    probe.directory_ = dir;
    probe.memory_directory_ = dir;
    for (const char* name : {"cpu.stat", "cpu.max", "cpuset.cpus.effective", "memory.current", "memory.max",
                             "cpu.pressure", "memory.pressure", "io.pressure"}) {
      probe.files_.emplace_back(dir + "/" + name);
    }
    return probe;
  }

  const std::string cpuacct_a = join(root + "/cpuacct", *rel), cpuacct_b = join(root + "/cpu,cpuacct", *rel);
  const auto cpuacct = first_dir({cpuacct_a, cpuacct_b});
  if (!cpuacct) return not_found(*rel, "v1", {cpuacct_a, cpuacct_b});
  if (!exists(*cpuacct + "/cpuacct.usage")) {
    return Error{ENOENT, "cgroup \"/" + *rel + "\": " + *cpuacct + " has no cpuacct.usage, so it is not a cpuacct cgroup; " +
                             kHowToFix};
  }
  // The quota lives in the cpu hierarchy; without it the quota is unknown
  // (read() reports none), so default to a path that simply will not exist.
  const std::string cpu_a = join(root + "/cpu", *rel);
  const std::string cpu = first_dir({cpu_a, join(root + "/cpu,cpuacct", *rel)}).value_or(cpu_a);
  const std::string cpuset = join(root + "/cpuset", *rel), memory = join(root + "/memory", *mem_rel);

  probe.directory_ = *cpuacct;
  probe.memory_directory_ = memory;
  probe.files_.emplace_back(*cpuacct + "/cpuacct.usage");
  probe.files_.emplace_back(cpu + "/cpu.cfs_quota_us");
  probe.files_.emplace_back(cpu + "/cpu.cfs_period_us");
  probe.files_.emplace_back(cpu + "/cpu.stat");
  probe.files_.emplace_back(cpuset + "/cpuset.effective_cpus");
  probe.files_.emplace_back(memory + "/memory.usage_in_bytes");
  probe.files_.emplace_back(memory + "/memory.limit_in_bytes");
  return probe;
}

Result<CgroupReading> CgroupProbe::read() { return version_ == CgroupVersion::v2 ? read_v2() : read_v1(); }

Result<CgroupReading> CgroupProbe::read_v2() {
  CgroupReading r;
  auto stat = read_parsed(files_[v2::cpu_stat], parse_cgroup2_cpu_stat);
  if (!stat) return stat.error();
  r.cpu.usage_usec = stat->usage_usec;
  r.cpu.throttled_usec = stat->throttled_usec;
  r.cpu.nr_throttled = stat->nr_throttled;

  auto max = parse_optional<std::optional<double>>(files_[v2::cpu_max], parse_cgroup2_cpu_max);
  if (!max) return max.error();
  if (*max) r.cpu.quota_cpus = **max;

  auto cpus = parse_optional<unsigned>(files_[v2::cpuset], parse_cpu_list_count);
  if (!cpus) return cpus.error();
  r.cpu.cpuset_cpus = cpus->value_or(0);

  auto current = parse_if_exists<uint64_t>(files_[v2::mem_current], parse_u64);
  if (!current) return current.error();
  if (*current) {
    r.memory.emplace().current_bytes = **current;
    auto limit = parse_optional<std::optional<uint64_t>>(files_[v2::mem_max], parse_cgroup2_memory_max);
    if (!limit) return limit.error();
    if (*limit) r.memory->limit_bytes = **limit;
  }

  std::optional<PressureReading>* const pressures[] = {&r.cpu_pressure, &r.memory_pressure, &r.io_pressure};
  for (size_t i = 0; i < std::size(pressures); ++i) {
    auto p = parse_optional<PressureReading>(files_[v2::cpu_pressure + i], parse_pressure);
    if (!p) return p.error();
    *pressures[i] = std::move(*p);
  }
  return r;
}

Result<CgroupReading> CgroupProbe::read_v1() {
  CgroupReading r;
  auto usage = read_parsed(files_[v1::usage], parse_u64);
  if (!usage) return usage.error();
  r.cpu.usage_usec = *usage / 1000;  // cpuacct.usage is in ns

  auto quota = parse_optional<int64_t>(files_[v1::quota], parse_i64);
  if (!quota) return quota.error();
  // -1 is "no quota"; the kernel stores any negative write as -1.
  if (*quota && **quota >= 0) {
    auto period = read_parsed(files_[v1::period], parse_u64);
    if (!period) return period.error();
    if (*period == 0) return with_path(files_[v1::period], logic_error("period is 0"));
    if (**quota == 0) return with_path(files_[v1::quota], logic_error("quota is 0"));
    r.cpu.quota_cpus = static_cast<double>(**quota) / static_cast<double>(*period);
  }

  auto stat = parse_optional<CpuStatV1>(files_[v1::cpu_stat], parse_cgroup1_cpu_stat);
  if (!stat) return stat.error();
  if (*stat) {
    r.cpu.nr_throttled = (*stat)->nr_throttled;
    r.cpu.throttled_usec = (*stat)->throttled_time_ns / 1000;
  }

  auto cpus = parse_optional<unsigned>(files_[v1::cpuset], parse_cpu_list_count);
  if (!cpus) return cpus.error();
  r.cpu.cpuset_cpus = cpus->value_or(0);

  auto current = parse_if_exists<uint64_t>(files_[v1::mem_usage], parse_u64);
  if (!current) return current.error();
  if (*current) {
    // Where memory.usage_in_bytes is, memory.limit_in_bytes is too.
    auto limit = read_parsed(files_[v1::mem_limit], parse_u64);
    if (!limit) return limit.error();
    r.memory.emplace().current_bytes = **current;
    if (*limit < kV1Unlimited) r.memory->limit_bytes = *limit;
  }
  return r;
}

Result<std::string> normalize_cgroup_path(std::string_view path) {
  std::string out;
  std::string_view rest = path;
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    const std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") return logic_error("cgroup path \"" + std::string(path) + "\" must not contain \"..\"");
    if (!out.empty()) out += '/';
    out += part;
  }
  return out;
}

}  // namespace headroom::probes
