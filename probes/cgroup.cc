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
  probe.rel_ = *rel;
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
    probe.directory_ = probe.cpu_directory_ = probe.memory_directory_ = dir;
    for (const char* name : {"cpu.stat", "cpu.max", "cpuset.cpus.effective", "memory.current", "memory.max",
                             "cpu.pressure", "memory.pressure", "io.pressure"}) {
      probe.files_.emplace_back(dir + "/" + name);
    }
    return probe;
  }

  // Each controller's hierarchy is mounted on its own (cpu, cpuacct) or
  // together (cpu,cpuacct); the cgroup may be in some of them only. It is
  // refused only when it is in none: each missing one makes its own signals
  // unavailable when read.
  const std::string cpuacct_root = first_dir({root + "/cpuacct", root + "/cpu,cpuacct"}).value_or(root + "/cpuacct");
  const std::string cpu_root = first_dir({root + "/cpu", root + "/cpu,cpuacct"}).value_or(root + "/cpu");
  probe.directory_ = join(cpuacct_root, *rel);
  probe.cpu_directory_ = join(cpu_root, *rel);
  probe.memory_directory_ = join(root + "/memory", *mem_rel);
  if (probe.gone()) return probe.not_found_v1();
  const std::string cpuset = join(root + "/cpuset", *rel);
  probe.files_.emplace_back(probe.directory_ + "/cpuacct.usage");
  probe.files_.emplace_back(probe.cpu_directory_ + "/cpu.cfs_quota_us");
  probe.files_.emplace_back(probe.cpu_directory_ + "/cpu.cfs_period_us");
  probe.files_.emplace_back(probe.cpu_directory_ + "/cpu.stat");
  probe.files_.emplace_back(cpuset + "/cpuset.effective_cpus");
  probe.files_.emplace_back(probe.memory_directory_ + "/memory.usage_in_bytes");
  probe.files_.emplace_back(probe.memory_directory_ + "/memory.limit_in_bytes");
  return probe;
}

bool CgroupProbe::gone() const {
  if (version_ == CgroupVersion::v2) return dir_error(directory_) != 0;
  return dir_error(directory_) != 0 && dir_error(cpu_directory_) != 0 && dir_error(memory_directory_) != 0;
}

Error CgroupProbe::not_found_v1() const {
  if (cpu_directory_ == directory_) return not_found(rel_, "v1", {directory_, memory_directory_});
  return not_found(rel_, "v1", {directory_, cpu_directory_, memory_directory_});
}

Result<CgroupReading> CgroupProbe::read() {
  CgroupReading r = version_ == CgroupVersion::v2 ? read_v2() : read_v1();
  // Neither controller read and the directories gone: the cgroup was
  // removed, one error for all of it rather than one per controller.
  if (!r.cpu && !r.memory && gone()) {
    if (version_ == CgroupVersion::v2) return not_found(rel_, "v2", {directory_});
    return not_found_v1();
  }
  return r;
}

namespace {

// Why a controller's part of the reading is missing, and what to do.
Error part_error(const Error& e, const std::string& dir, std::string_view controller, std::string_view file,
                 std::string_view fix) {
  std::string msg;
  if (e.code == ENOENT && dir_error(dir) != 0) {
    msg = "the cgroup is not in the " + std::string(controller) + " hierarchy (no directory " + dir + ")";
  } else if (e.code == ENOENT) {
    msg = "the cgroup " + dir + " has no " + std::string(controller) + " controller (no " + std::string(file) + ")";
  } else {
    msg = e.message;
  }
  msg += "; its ";
  msg += controller == "memory" ? "memory" : "CPU";
  msg += " is unavailable until it can be read; ";
  msg += fix;
  return Error{e.code, std::move(msg)};
}

constexpr std::string_view kCpuFix =
    "run the service in a cgroup with the cpu and cpuacct controllers (systemd: CPUAccounting=yes) or point "
    "[node] cgroup at one";
constexpr std::string_view kMemoryFix =
    "enable the memory controller for the cgroup (v2: \"+memory\" in its parent's cgroup.subtree_control; "
    "systemd: MemoryAccounting=yes) or point [node] cgroup at one that has it";

// A CPU file whose value cannot be used.
Error invalid(const ProcFile& file, const char* what) {
  return part_error(with_path(file, logic_error(what)), "", "cpu", "", kCpuFix);
}

}  // namespace

Result<CgroupCpuReading> CgroupProbe::read_cpu_v2() {
  CgroupCpuReading cpu;
  // usage_usec is there whether or not the cpu controller is enabled; cpu.max
  // only with it (no quota without it).
  auto stat = read_parsed(files_[v2::cpu_stat], parse_cgroup2_cpu_stat);
  if (!stat) return part_error(stat.error(), directory_, "cpu", "cpu.stat", kCpuFix);
  cpu.usage_usec = stat->usage_usec;
  cpu.throttled_usec = stat->throttled_usec;
  cpu.nr_throttled = stat->nr_throttled;
  auto max = parse_optional<std::optional<double>>(files_[v2::cpu_max], parse_cgroup2_cpu_max);
  if (!max) return part_error(max.error(), directory_, "cpu", "cpu.max", kCpuFix);
  if (*max) cpu.quota_cpus = **max;
  auto cpus = parse_optional<unsigned>(files_[v2::cpuset], parse_cpu_list_count);
  if (!cpus) return part_error(cpus.error(), directory_, "cpuset", "cpuset.cpus.effective", kCpuFix);
  cpu.cpuset_cpus = cpus->value_or(0);
  return cpu;
}

Result<CgroupMemReading> CgroupProbe::read_memory_v2() {
  auto current = read_parsed(files_[v2::mem_current], parse_u64);
  if (!current) return part_error(current.error(), memory_directory_, "memory", "memory.current", kMemoryFix);
  CgroupMemReading mem;
  mem.current_bytes = *current;
  auto limit = parse_optional<std::optional<uint64_t>>(files_[v2::mem_max], parse_cgroup2_memory_max);
  if (!limit) return part_error(limit.error(), memory_directory_, "memory", "memory.max", kMemoryFix);
  if (*limit) mem.limit_bytes = **limit;
  return mem;
}

Result<CgroupCpuReading> CgroupProbe::read_cpu_v1() {
  CgroupCpuReading cpu;
  auto usage = read_parsed(files_[v1::usage], parse_u64);
  if (!usage) return part_error(usage.error(), directory_, "cpuacct", "cpuacct.usage", kCpuFix);
  cpu.usage_usec = *usage / 1000;  // cpuacct.usage is in ns

  // Without the cpu hierarchy the quota is unknown: none is assumed.
  auto quota = parse_optional<int64_t>(files_[v1::quota], parse_i64);
  if (!quota) return part_error(quota.error(), cpu_directory_, "cpu", "cpu.cfs_quota_us", kCpuFix);
  // -1 is "no quota"; the kernel stores any negative write as -1.
  if (*quota && **quota >= 0) {
    auto period = read_parsed(files_[v1::period], parse_u64);
    if (!period) return part_error(period.error(), cpu_directory_, "cpu", "cpu.cfs_period_us", kCpuFix);
    if (*period == 0) return invalid(files_[v1::period], "period is 0");
    if (**quota == 0) return invalid(files_[v1::quota], "quota is 0");
    cpu.quota_cpus = static_cast<double>(**quota) / static_cast<double>(*period);
  }

  auto stat = parse_optional<CpuStatV1>(files_[v1::cpu_stat], parse_cgroup1_cpu_stat);
  if (!stat) return part_error(stat.error(), cpu_directory_, "cpu", "cpu.stat", kCpuFix);
  if (*stat) {
    cpu.nr_throttled = (*stat)->nr_throttled;
    cpu.throttled_usec = (*stat)->throttled_time_ns / 1000;
  }

  auto cpus = parse_optional<unsigned>(files_[v1::cpuset], parse_cpu_list_count);
  if (!cpus) return part_error(cpus.error(), directory_, "cpuset", "cpuset.effective_cpus", kCpuFix);
  cpu.cpuset_cpus = cpus->value_or(0);
  return cpu;
}

Result<CgroupMemReading> CgroupProbe::read_memory_v1() {
  auto current = read_parsed(files_[v1::mem_usage], parse_u64);
  if (!current) return part_error(current.error(), memory_directory_, "memory", "memory.usage_in_bytes", kMemoryFix);
  // Where memory.usage_in_bytes is, memory.limit_in_bytes is too.
  auto limit = read_parsed(files_[v1::mem_limit], parse_u64);
  if (!limit) return part_error(limit.error(), memory_directory_, "memory", "memory.limit_in_bytes", kMemoryFix);
  CgroupMemReading mem;
  mem.current_bytes = *current;
  if (*limit < kV1Unlimited) mem.limit_bytes = *limit;
  return mem;
}

namespace {

template <class T>
void put_part(Result<T>&& part, std::optional<T>& value, std::optional<Error>& error) {
  if (part)
    value = std::move(*part);
  else
    error = std::move(part.error());
}

}  // namespace

CgroupReading CgroupProbe::read_v2() {
  CgroupReading r;
  put_part(read_cpu_v2(), r.cpu, r.cpu_error);
  put_part(read_memory_v2(), r.memory, r.memory_error);
  std::optional<PressureReading>* const pressures[] = {&r.cpu_pressure, &r.memory_pressure, &r.io_pressure};
  std::optional<Error>* const errors[] = {&r.cpu_pressure_error, &r.memory_pressure_error, &r.io_pressure_error};
  for (size_t i = 0; i < std::size(pressures); ++i) {
    auto p = parse_optional<PressureReading>(files_[v2::cpu_pressure + i], parse_pressure);
    if (p)
      *pressures[i] = std::move(*p);
    else
      *errors[i] = std::move(p.error());
  }
  return r;
}

CgroupReading CgroupProbe::read_v1() {
  CgroupReading r;
  put_part(read_cpu_v1(), r.cpu, r.cpu_error);
  put_part(read_memory_v1(), r.memory, r.memory_error);
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
