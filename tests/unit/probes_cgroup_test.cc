// SPDX-License-Identifier: Apache-2.0
// CgroupProbe on the v2 and v1 fixture trees (tests/fixtures/sys-cgroup{2,1})
// and on temporary trees for the layouts and failures the fixtures lack.
#include <gtest/gtest.h>

#include "temp_dir.h"
#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "probes/cgroup.h"

namespace headroom::probes {
namespace {

const std::string kV2 = std::string(HEADROOM_FIXTURES) + "/sys-cgroup2";
const std::string kV1 = std::string(HEADROOM_FIXTURES) + "/sys-cgroup1";

using headroom::testing::TempDir;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A minimal v2 service cgroup under <root>/fs/cgroup/<rel>.
void write_v2_service(const TempDir& dir, const std::string& rel) {
  dir.write("fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
  dir.write("fs/cgroup/" + rel + "/cpu.stat", "usage_usec 1000\nuser_usec 600\nsystem_usec 400\n");
  dir.write("fs/cgroup/" + rel + "/memory.current", "4096\n");
}

// ----------------------------------------------------------------------- v2

TEST(CgroupV2, FixtureServiceWithQuota) {
  auto probe = CgroupProbe::open(kV2, "system.slice/api.service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  EXPECT_EQ(probe->version(), CgroupVersion::v2);
  EXPECT_EQ(probe->directory(), kV2 + "/fs/cgroup/system.slice/api.service");

  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->cpu->usage_usec, 8123456789u);
  ASSERT_TRUE(r->cpu->quota_cpus.has_value());
  EXPECT_EQ(*r->cpu->quota_cpus, 2.0);
  EXPECT_EQ(r->cpu->cpuset_cpus, 32u);
  EXPECT_EQ(r->cpu->throttled_usec, 456789012u);
  EXPECT_EQ(r->cpu->nr_throttled, 7890u);
  ASSERT_TRUE(r->memory.has_value());
  EXPECT_EQ(r->memory->current_bytes, 1288490188u);
  EXPECT_EQ(r->memory->limit_bytes, std::optional<uint64_t>(4294967296u));

  ASSERT_TRUE(r->cpu_pressure.has_value());
  EXPECT_DOUBLE_EQ(r->cpu_pressure->some.avg10, 5.42);
  EXPECT_EQ(r->cpu_pressure->some.total_us, 98765432u);
  ASSERT_TRUE(r->cpu_pressure->full.has_value());
  EXPECT_EQ(r->cpu_pressure->full->total_us, 87654321u);
  ASSERT_TRUE(r->memory_pressure.has_value());
  EXPECT_EQ(r->memory_pressure->some.total_us, 3456789u);
  ASSERT_TRUE(r->io_pressure.has_value());
  EXPECT_DOUBLE_EQ(r->io_pressure->full->avg10, 0.29);

  // Kept files are read again on the next tick with the same result.
  auto again = probe->read();
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->cpu->usage_usec, r->cpu->usage_usec);
}

TEST(CgroupV2, UnlimitedServiceWithoutOptionalFiles) {
  auto probe = CgroupProbe::open(kV2, "system.slice/batch.service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->cpu->usage_usec, 5000000u);
  EXPECT_FALSE(r->cpu->quota_cpus.has_value());  // "max 100000"
  EXPECT_EQ(r->cpu->cpuset_cpus, 0u);             // no cpuset.cpus.effective
  ASSERT_TRUE(r->memory.has_value());
  EXPECT_EQ(r->memory->current_bytes, 52428800u);
  EXPECT_FALSE(r->memory->limit_bytes.has_value());  // "max"
  EXPECT_FALSE(r->cpu_pressure.has_value());        // PSI off
  EXPECT_FALSE(r->memory_pressure.has_value());
  EXPECT_FALSE(r->io_pressure.has_value());
}

TEST(CgroupV2, PathIsNormalized) {
  for (const char* path : {"/system.slice/api.service", "system.slice//api.service/", "./system.slice/api.service"}) {
    auto probe = CgroupProbe::open(kV2, path);
    ASSERT_TRUE(probe.ok()) << path << ": " << probe.error().message;
    EXPECT_EQ(probe->directory(), kV2 + "/fs/cgroup/system.slice/api.service") << path;
  }
}

TEST(CgroupV2, RootCgroupOpens) {
  for (const char* path : {"", "/"}) {
    auto probe = CgroupProbe::open(kV2, path);
    ASSERT_TRUE(probe.ok()) << probe.error().message;
    EXPECT_EQ(probe->directory(), kV2 + "/fs/cgroup");
  }
}

TEST(CgroupV2, MissingCgroupNamesItAndSaysWhatToDo) {
  auto probe = CgroupProbe::open(kV2, "system.slice/nope.service");
  ASSERT_FALSE(probe.ok());
  const Error& e = probe.error();
  EXPECT_EQ(e.code, ENOENT);
  EXPECT_TRUE(contains(e.message, "\"/system.slice/nope.service\"")) << e.message;
  EXPECT_TRUE(contains(e.message, kV2 + "/fs/cgroup/system.slice/nope.service")) << e.message;
  EXPECT_TRUE(contains(e.message, "cgroup v2")) << e.message;
  EXPECT_TRUE(contains(e.message, "check [node] cgroup in the config")) << e.message;
}

TEST(CgroupV2, DirectoryWithoutCpuStatIsNotACgroup) {
  TempDir dir;
  dir.write("fs/cgroup/cgroup.controllers", "cpu memory\n");
  dir.mkdir("fs/cgroup/system.slice/plain");
  auto probe = CgroupProbe::open(dir.path(), "system.slice/plain");
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.error().code, ENOENT);
  EXPECT_TRUE(contains(probe.error().message, "has no cpu.stat")) << probe.error().message;
}

TEST(CgroupV2, FixtureCgroupWithoutMemoryControllerStillGivesItsCpu) {
  auto probe = CgroupProbe::open(kV2, "system.slice/cpuonly.service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  EXPECT_EQ(probe->memory_directory(), kV2 + "/fs/cgroup/system.slice/cpuonly.service");
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->memory.has_value());
  EXPECT_EQ(r->cpu->usage_usec, 3000000u);
  EXPECT_EQ(r->cpu->quota_cpus, std::optional<double>(1.0));
  EXPECT_EQ(r->cpu->throttled_usec, 250000u);
}

TEST(CgroupV2, MemoryCurrentAppearingLaterIsRead) {
  TempDir dir;
  write_v2_service(dir, "x.service");
  std::filesystem::remove(dir.path() + "/fs/cgroup/x.service/memory.current");
  auto probe = CgroupProbe::open(dir.path(), "x.service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->memory.has_value());

  // The memory controller enabled in the parent's cgroup.subtree_control.
  dir.write("fs/cgroup/x.service/memory.current", "8192\n");
  dir.write("fs/cgroup/x.service/memory.max", "16384\n");
  auto later = probe->read();
  ASSERT_TRUE(later.ok()) << later.error().message;
  ASSERT_TRUE(later->memory.has_value());
  EXPECT_EQ(later->memory->current_bytes, 8192u);
  EXPECT_EQ(later->memory->limit_bytes, std::optional<uint64_t>(16384u));
}

TEST(CgroupV2, GarbledMemoryCurrentMakesMemoryAloneUnavailableNamingTheFile) {
  TempDir dir;
  write_v2_service(dir, "x.service");
  const std::string current = dir.write("fs/cgroup/x.service/memory.current", "lots\n");
  auto probe = CgroupProbe::open(dir.path(), "x.service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->cpu.has_value()) << "the CPU is read all the same";
  EXPECT_FALSE(r->memory.has_value());
  ASSERT_TRUE(r->memory_error.has_value());
  EXPECT_TRUE(contains(r->memory_error->message, current + ": ")) << r->memory_error->message;
}

TEST(CgroupV2, UnreadableMemoryCurrentMakesMemoryAloneUnavailable) {
  TempDir dir;
  write_v2_service(dir, "x.service");
  // A directory where the file should be: it exists, and read(2) fails (EISDIR).
  std::filesystem::remove(dir.path() + "/fs/cgroup/x.service/memory.current");
  dir.mkdir("fs/cgroup/x.service/memory.current");
  auto probe = CgroupProbe::open(dir.path(), "x.service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->cpu->usage_usec, 1000u);
  ASSERT_TRUE(r->memory_error.has_value());
  EXPECT_EQ(r->memory_error->code, EISDIR) << r->memory_error->message;
  EXPECT_TRUE(contains(r->memory_error->message, "x.service/memory.current")) << r->memory_error->message;
  EXPECT_TRUE(contains(r->memory_error->message, "MemoryAccounting=yes")) << r->memory_error->message;
}

TEST(CgroupV2, PathsPerControllerMustAgree) {
  auto same = CgroupProbe::open(kV2, CgroupPaths{"/system.slice/api.service", "system.slice/api.service/"});
  ASSERT_TRUE(same.ok()) << same.error().message;
  EXPECT_EQ(same->directory(), kV2 + "/fs/cgroup/system.slice/api.service");

  auto apart = CgroupProbe::open(kV2, CgroupPaths{"system.slice/api.service", "system.slice/batch.service"});
  ASSERT_FALSE(apart.ok());
  EXPECT_TRUE(contains(apart.error().message, "cgroup v2 has one hierarchy")) << apart.error().message;
  EXPECT_TRUE(contains(apart.error().message, "\"/system.slice/batch.service\"")) << apart.error().message;
}

TEST(CgroupV2, MinimalServiceAndFilesAppearingLater) {
  TempDir dir;
  write_v2_service(dir, "x.service");
  auto probe = CgroupProbe::open(dir.path(), "x.service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->cpu->usage_usec, 1000u);
  EXPECT_FALSE(r->cpu->quota_cpus.has_value());
  ASSERT_TRUE(r->memory.has_value());
  EXPECT_FALSE(r->memory->limit_bytes.has_value());

  // `systemctl set-property x.service CPUQuota=150%` enables the cpu controller.
  dir.write("fs/cgroup/x.service/cpu.max", "150000 100000\n");
  auto later = probe->read();
  ASSERT_TRUE(later.ok()) << later.error().message;
  EXPECT_EQ(later->cpu->quota_cpus, std::optional<double>(1.5));
}

TEST(CgroupV2, ParseErrorIsPrefixedWithTheFileAndLeavesTheOtherControllers) {
  TempDir dir;
  write_v2_service(dir, "x.service");
  const std::string cpu_max = dir.write("fs/cgroup/x.service/cpu.max", "200000 0\n");
  auto probe = CgroupProbe::open(dir.path(), "x.service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->cpu.has_value()) << "a quota that cannot be read would overstate the capacity";
  ASSERT_TRUE(r->cpu_error.has_value());
  EXPECT_TRUE(r->cpu_error->message.starts_with(cpu_max + ": period is 0; ")) << r->cpu_error->message;
  EXPECT_TRUE(r->memory.has_value());

  dir.write("fs/cgroup/x.service/cpu.max", "max 100000\n");
  const std::string psi = dir.write("fs/cgroup/x.service/io.pressure", "some avg10=oops\n");
  auto r2 = probe->read();
  ASSERT_TRUE(r2.ok()) << r2.error().message;
  EXPECT_TRUE(r2->cpu.has_value());
  EXPECT_FALSE(r2->io_pressure.has_value());
  ASSERT_TRUE(r2->io_pressure_error.has_value());
  EXPECT_TRUE(contains(r2->io_pressure_error->message, psi + ": ")) << r2->io_pressure_error->message;
  EXPECT_TRUE(contains(r2->io_pressure_error->message, "avg10=oops")) << r2->io_pressure_error->message;
  EXPECT_FALSE(r2->cpu_pressure_error.has_value());  // absent: PSI off, not an error
}

TEST(CgroupV2, EmptyCpusetMakesTheCpuUnavailable) {
  TempDir dir;
  write_v2_service(dir, "x.service");
  dir.write("fs/cgroup/x.service/cpuset.cpus.effective", "\n");
  auto probe = CgroupProbe::open(dir.path(), "x.service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->cpu.has_value());
  EXPECT_TRUE(contains(r->cpu_error->message, "cpuset.cpus.effective: empty CPU list")) << r->cpu_error->message;
  EXPECT_TRUE(r->memory.has_value());
}

// ----------------------------------------------------------------------- v1

TEST(CgroupV1, FixtureServiceWithQuota) {
  auto probe = CgroupProbe::open(kV1, "/system.slice/api.service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  EXPECT_EQ(probe->version(), CgroupVersion::v1);
  EXPECT_EQ(probe->directory(), kV1 + "/fs/cgroup/cpu,cpuacct/system.slice/api.service");

  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->cpu->usage_usec, 8123456789u);  // 8123456789012 ns
  ASSERT_TRUE(r->cpu->quota_cpus.has_value());
  EXPECT_EQ(*r->cpu->quota_cpus, 2.0);
  EXPECT_EQ(r->cpu->cpuset_cpus, 32u);
  EXPECT_EQ(r->cpu->nr_throttled, 7890u);
  EXPECT_EQ(r->cpu->throttled_usec, 456789012u);  // 456789012345 ns
  ASSERT_TRUE(r->memory.has_value());
  EXPECT_EQ(r->memory->current_bytes, 1288490188u);
  EXPECT_EQ(r->memory->limit_bytes, std::optional<uint64_t>(4294967296u));
  EXPECT_FALSE(r->cpu_pressure.has_value());  // v1 has no per-cgroup PSI
  EXPECT_FALSE(r->memory_pressure.has_value());
  EXPECT_FALSE(r->io_pressure.has_value());
}

TEST(CgroupV1, UnlimitedService) {
  auto probe = CgroupProbe::open(kV1, "system.slice/batch.service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->cpu->usage_usec, 5000000u);
  EXPECT_FALSE(r->cpu->quota_cpus.has_value());      // cfs_quota_us -1
  EXPECT_EQ(r->cpu->cpuset_cpus, 0u);                 // not in the cpuset hierarchy
  ASSERT_TRUE(r->memory.has_value());
  EXPECT_FALSE(r->memory->limit_bytes.has_value());  // 9223372036854771712
  EXPECT_EQ(r->memory->current_bytes, 52428800u);
}

TEST(CgroupV1, MissingCgroupListsEveryDirectoryLookedAt) {
  auto probe = CgroupProbe::open(kV1, "system.slice/nope.service");
  ASSERT_FALSE(probe.ok());
  const Error& e = probe.error();
  EXPECT_EQ(e.code, ENOENT);
  EXPECT_TRUE(contains(e.message, "\"/system.slice/nope.service\"")) << e.message;
  EXPECT_TRUE(contains(e.message, kV1 + "/fs/cgroup/cpu,cpuacct/system.slice/nope.service")) << e.message;
  EXPECT_TRUE(contains(e.message, kV1 + "/fs/cgroup/memory/system.slice/nope.service")) << e.message;
  EXPECT_TRUE(contains(e.message, "cgroup v1")) << e.message;
  EXPECT_TRUE(contains(e.message, "/proc/<pid>/cgroup")) << e.message;
}

TEST(CgroupV1, ExplicitVersionOverridesDetection) {
  // The v2 tree has no v1 hierarchies, so forcing v1 finds nothing.
  auto probe = CgroupProbe::open(kV2, "system.slice/api.service", CgroupVersion::v1);
  ASSERT_FALSE(probe.ok());
  EXPECT_TRUE(contains(probe.error().message, "cgroup v1")) << probe.error().message;
  auto v2 = CgroupProbe::open(kV2, "system.slice/api.service", CgroupVersion::v2);
  ASSERT_TRUE(v2.ok()) << v2.error().message;
  EXPECT_EQ(v2->version(), CgroupVersion::v2);
}

TEST(CgroupV1, SeparateCpuAndCpuacctHierarchies) {
  // Some hosts mount cpu and cpuacct apart instead of as "cpu,cpuacct".
  TempDir dir;
  dir.write("fs/cgroup/cpuacct/app/cpuacct.usage", "3000000\n");
  dir.write("fs/cgroup/cpu/app/cpu.cfs_quota_us", "50000\n");
  dir.write("fs/cgroup/cpu/app/cpu.cfs_period_us", "100000\n");
  dir.write("fs/cgroup/cpu/app/cpu.stat", "nr_periods 10\nnr_throttled 4\nthrottled_time 8000\n");
  dir.write("fs/cgroup/memory/app/memory.usage_in_bytes", "8192\n");
  dir.write("fs/cgroup/memory/app/memory.limit_in_bytes", "1073741824\n");
  auto probe = CgroupProbe::open(dir.path(), "app");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  EXPECT_EQ(probe->directory(), dir.path() + "/fs/cgroup/cpuacct/app");
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->cpu->usage_usec, 3000u);
  EXPECT_EQ(r->cpu->quota_cpus, std::optional<double>(0.5));
  EXPECT_EQ(r->cpu->nr_throttled, 4u);
  EXPECT_EQ(r->cpu->throttled_usec, 8u);
  ASSERT_TRUE(r->memory.has_value());
  EXPECT_EQ(r->memory->limit_bytes, std::optional<uint64_t>(1073741824u));
}

TEST(CgroupV1, WithoutCpuHierarchyQuotaIsUnknown) {
  TempDir dir;
  dir.write("fs/cgroup/cpuacct/app/cpuacct.usage", "1000\n");
  dir.write("fs/cgroup/memory/app/memory.usage_in_bytes", "1\n");
  dir.write("fs/cgroup/memory/app/memory.limit_in_bytes", "9223372036854771712\n");
  auto probe = CgroupProbe::open(dir.path(), "app");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->cpu->usage_usec, 1u);
  EXPECT_FALSE(r->cpu->quota_cpus.has_value());
  EXPECT_EQ(r->cpu->nr_throttled, 0u);
}

TEST(CgroupV1, QuotaWithZeroPeriodMakesTheCpuUnavailable) {
  TempDir dir;
  dir.write("fs/cgroup/cpu,cpuacct/app/cpuacct.usage", "1000\n");
  dir.write("fs/cgroup/cpu,cpuacct/app/cpu.cfs_quota_us", "50000\n");
  const std::string period = dir.write("fs/cgroup/cpu,cpuacct/app/cpu.cfs_period_us", "0\n");
  dir.write("fs/cgroup/memory/app/memory.usage_in_bytes", "1\n");
  dir.write("fs/cgroup/memory/app/memory.limit_in_bytes", "2\n");
  auto probe = CgroupProbe::open(dir.path(), "app");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->cpu.has_value());
  EXPECT_TRUE(r->cpu_error->message.starts_with(period + ": period is 0; ")) << r->cpu_error->message;
  EXPECT_EQ(r->memory->current_bytes, 1u);
}

TEST(CgroupV1, MissingMemoryHierarchyLeavesMemoryAbsent) {
  TempDir dir;
  dir.write("fs/cgroup/cpu,cpuacct/app/cpuacct.usage", "1000\n");
  auto probe = CgroupProbe::open(dir.path(), "app");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->cpu->usage_usec, 1u);
  EXPECT_FALSE(r->memory.has_value());
}

TEST(CgroupV1, FixtureCgroupWithoutMemoryControllerStillGivesItsCpu) {
  auto probe = CgroupProbe::open(kV1, "system.slice/cpuonly.service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  EXPECT_EQ(probe->memory_directory(), kV1 + "/fs/cgroup/memory/system.slice/cpuonly.service");
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->memory.has_value());
  EXPECT_EQ(r->cpu->usage_usec, 3000000u);
  EXPECT_EQ(r->cpu->quota_cpus, std::optional<double>(1.0));
  EXPECT_EQ(r->cpu->throttled_usec, 250000u);
}

TEST(CgroupV1, UsageWithoutLimitMakesTheMemoryUnavailable) {
  TempDir dir;
  dir.write("fs/cgroup/cpu,cpuacct/app/cpuacct.usage", "1000\n");
  dir.write("fs/cgroup/memory/app/memory.usage_in_bytes", "1\n");
  auto probe = CgroupProbe::open(dir.path(), "app");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->cpu->usage_usec, 1u);
  ASSERT_TRUE(r->memory_error.has_value());
  EXPECT_EQ(r->memory_error->code, ENOENT);
  EXPECT_TRUE(contains(r->memory_error->message, "memory.limit_in_bytes")) << r->memory_error->message;
}

TEST(CgroupV1, ControllersAtDifferentPaths) {
  // A process in /system.slice/x.service for cpu and in /user.slice for
  // memory, as /proc/PID/cgroup can show under v1.
  TempDir dir;
  dir.write("fs/cgroup/cpu,cpuacct/system.slice/x.service/cpuacct.usage", "7000000\n");
  dir.write("fs/cgroup/cpuset/system.slice/x.service/cpuset.effective_cpus", "0-3\n");
  dir.write("fs/cgroup/memory/user.slice/memory.usage_in_bytes", "4096\n");
  dir.write("fs/cgroup/memory/user.slice/memory.limit_in_bytes", "65536\n");
  dir.write("fs/cgroup/memory/system.slice/x.service/memory.usage_in_bytes", "1\n");
  dir.write("fs/cgroup/memory/system.slice/x.service/memory.limit_in_bytes", "2\n");
  auto probe = CgroupProbe::open(dir.path(), CgroupPaths{"/system.slice/x.service", "/user.slice"});
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  EXPECT_EQ(probe->version(), CgroupVersion::v1);
  EXPECT_EQ(probe->directory(), dir.path() + "/fs/cgroup/cpu,cpuacct/system.slice/x.service");
  EXPECT_EQ(probe->memory_directory(), dir.path() + "/fs/cgroup/memory/user.slice");
  auto r = probe->read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->cpu->usage_usec, 7000u);
  EXPECT_EQ(r->cpu->cpuset_cpus, 4u);
  ASSERT_TRUE(r->memory.has_value());
  EXPECT_EQ(r->memory->current_bytes, 4096u);
  EXPECT_EQ(r->memory->limit_bytes, std::optional<uint64_t>(65536u));
}

TEST(CgroupV1, MemoryPathIsNormalizedAndCheckedToo) {
  auto probe = CgroupProbe::open(kV1, CgroupPaths{"system.slice/api.service", "/system.slice/../etc"});
  ASSERT_FALSE(probe.ok());
  EXPECT_TRUE(contains(probe.error().message, "must not contain \"..\"")) << probe.error().message;
}

// ------------------------------------------------- each controller in turn

// What a case does to one path of a complete tree (relative to fs/cgroup).
enum class Break { remove, unreadable };  // unreadable: a directory in its place (EISDIR, even for root)

struct ControllerCase {
  const char* name;
  const char* path;
  Break how;
  bool cpu, memory;           // read after the change
  const char* why = nullptr;  // in the missing part's error
};

void apply(const TempDir& dir, const ControllerCase& c) {
  const std::filesystem::path p = dir.path() + "/fs/cgroup/" + c.path;
  std::filesystem::remove_all(p);
  if (c.how == Break::unreadable) std::filesystem::create_directories(p);
}

void expect_parts(const CgroupReading& r, const ControllerCase& c) {
  EXPECT_EQ(r.cpu.has_value(), c.cpu) << c.name;
  EXPECT_EQ(r.memory.has_value(), c.memory) << c.name;
  EXPECT_EQ(r.cpu_error.has_value(), !c.cpu) << c.name;
  EXPECT_EQ(r.memory_error.has_value(), !c.memory) << c.name;
  const std::optional<Error>& e = !c.cpu ? r.cpu_error : r.memory_error;
  if (c.why != nullptr && e) {
    EXPECT_TRUE(contains(e->message, c.why)) << c.name << ": " << e->message;
    EXPECT_TRUE(contains(e->message, !c.cpu ? "CPUAccounting=yes" : "MemoryAccounting=yes")) << e->message;
  }
}

// A v1 service in every hierarchy, mounted apart as on many hosts.
void write_v1_complete(const TempDir& dir) {
  dir.write("fs/cgroup/cpuacct/app/cpuacct.usage", "3000000\n");
  dir.write("fs/cgroup/cpu/app/cpu.cfs_quota_us", "50000\n");
  dir.write("fs/cgroup/cpu/app/cpu.cfs_period_us", "100000\n");
  dir.write("fs/cgroup/cpu/app/cpu.stat", "nr_periods 10\nnr_throttled 4\nthrottled_time 8000\n");
  dir.write("fs/cgroup/cpuset/app/cpuset.effective_cpus", "0-1\n");
  dir.write("fs/cgroup/memory/app/memory.usage_in_bytes", "8192\n");
  dir.write("fs/cgroup/memory/app/memory.limit_in_bytes", "16384\n");
}

TEST(CgroupControllers, V1EachControllerMissingOrUnreadableInTurnLeavesTheOthers) {
  const ControllerCase cases[] = {
      {"not in cpuacct", "cpuacct/app", Break::remove, false, true, "not in the cpuacct hierarchy"},
      {"not in cpu", "cpu/app", Break::remove, true, true},
      {"not in cpuset", "cpuset/app", Break::remove, true, true},
      {"not in memory", "memory/app", Break::remove, true, false, "not in the memory hierarchy"},
      {"no memory.limit_in_bytes", "memory/app/memory.limit_in_bytes", Break::remove, true, false,
       "memory.limit_in_bytes"},
      {"cpuacct.usage unreadable", "cpuacct/app/cpuacct.usage", Break::unreadable, false, true, "Is a directory"},
      {"cpu.cfs_quota_us unreadable", "cpu/app/cpu.cfs_quota_us", Break::unreadable, false, true, "cfs_quota_us"},
      {"cpu.cfs_period_us unreadable", "cpu/app/cpu.cfs_period_us", Break::unreadable, false, true, "cfs_period_us"},
      {"cpu.stat unreadable", "cpu/app/cpu.stat", Break::unreadable, false, true, "cpu/app/cpu.stat"},
      {"cpuset unreadable", "cpuset/app/cpuset.effective_cpus", Break::unreadable, false, true, "effective_cpus"},
      {"memory.usage_in_bytes unreadable", "memory/app/memory.usage_in_bytes", Break::unreadable, true, false,
       "Is a directory"},
      {"memory.limit_in_bytes unreadable", "memory/app/memory.limit_in_bytes", Break::unreadable, true, false,
       "memory.limit_in_bytes"},
  };
  for (const auto& c : cases) {
    TempDir dir;
    write_v1_complete(dir);
    apply(dir, c);
    auto probe = CgroupProbe::open(dir.path(), "app");
    ASSERT_TRUE(probe.ok()) << c.name << ": " << probe.error().message;
    auto r = probe->read();
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.error().message;
    expect_parts(*r, c);
    if (r->cpu) {
      EXPECT_EQ(r->cpu->usage_usec, 3000u) << c.name;
    }
    if (r->memory) {
      EXPECT_EQ(r->memory->current_bytes, 8192u) << c.name;
    }
  }
}

TEST(CgroupControllers, V1WhatIsMissingOfACompleteGroupAtOpenIsReadOnceItIsThere) {
  TempDir dir;
  write_v1_complete(dir);
  std::filesystem::remove_all(dir.path() + "/fs/cgroup/cpuacct/app");
  auto probe = CgroupProbe::open(dir.path(), "app");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  EXPECT_FALSE(probe->read()->cpu.has_value());
  dir.write("fs/cgroup/cpuacct/app/cpuacct.usage", "5000000\n");
  auto later = probe->read();
  ASSERT_TRUE(later.ok()) << later.error().message;
  ASSERT_TRUE(later->cpu.has_value());
  EXPECT_EQ(later->cpu->usage_usec, 5000u);
  EXPECT_EQ(later->cpu->quota_cpus, std::optional<double>(0.5));
}

TEST(CgroupControllers, V1GroupInNoHierarchyIsNotFoundAtOpenAndGoneWhenRead) {
  TempDir dir;
  write_v1_complete(dir);
  auto probe = CgroupProbe::open(dir.path(), "app");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  for (const char* h : {"cpuacct", "cpu", "cpuset", "memory"})
    std::filesystem::remove_all(dir.path() + "/fs/cgroup/" + h + "/app");
  auto r = probe->read();
  ASSERT_FALSE(r.ok()) << "one error for the whole cgroup, not one per controller";
  EXPECT_EQ(r.error().code, ENOENT);
  EXPECT_TRUE(contains(r.error().message, "\"/app\" not found (cgroup v1)")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "/fs/cgroup/memory/app")) << r.error().message;
  auto again = CgroupProbe::open(dir.path(), "app");
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(contains(again.error().message, "/fs/cgroup/cpuacct/app")) << again.error().message;
  EXPECT_TRUE(contains(again.error().message, "/fs/cgroup/cpu/app")) << again.error().message;
}

TEST(CgroupControllers, V2EachControllerMissingOrUnreadableInTurnLeavesTheOthers) {
  const ControllerCase cases[] = {
      {"no cpu controller (no cpu.max)", "x.service/cpu.max", Break::remove, true, true},
      {"no cpuset controller", "x.service/cpuset.cpus.effective", Break::remove, true, true},
      {"no memory controller", "x.service/memory.current", Break::remove, true, false,
       "has no memory controller (no memory.current)"},
      {"no memory.max", "x.service/memory.max", Break::remove, true, true},
      {"cpu.stat unreadable", "x.service/cpu.stat", Break::unreadable, false, true, "x.service/cpu.stat"},
      {"cpu.max unreadable", "x.service/cpu.max", Break::unreadable, false, true, "x.service/cpu.max"},
      {"cpuset unreadable", "x.service/cpuset.cpus.effective", Break::unreadable, false, true, "Is a directory"},
      {"memory.current unreadable", "x.service/memory.current", Break::unreadable, true, false, "Is a directory"},
      {"memory.max unreadable", "x.service/memory.max", Break::unreadable, true, false, "x.service/memory.max"},
  };
  for (const auto& c : cases) {
    TempDir dir;
    write_v2_service(dir, "x.service");
    dir.write("fs/cgroup/x.service/cpu.max", "50000 100000\n");
    dir.write("fs/cgroup/x.service/cpuset.cpus.effective", "0-1\n");
    dir.write("fs/cgroup/x.service/memory.max", "16384\n");
    for (const char* p : {"cpu.pressure", "memory.pressure", "io.pressure"})
      dir.write(std::string("fs/cgroup/x.service/") + p, "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n");
    apply(dir, c);
    auto probe = CgroupProbe::open(dir.path(), "x.service");
    ASSERT_TRUE(probe.ok()) << c.name << ": " << probe.error().message;
    auto r = probe->read();
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.error().message;
    expect_parts(*r, c);
    EXPECT_TRUE(r->cpu_pressure && r->memory_pressure && r->io_pressure) << c.name;
  }
}

TEST(CgroupControllers, V2EachPressureFileUnreadableInTurnIsItsOwn) {
  using P = std::optional<PressureReading> CgroupReading::*;
  using E = std::optional<Error> CgroupReading::*;
  const struct {
    const char* file;
    P reading;
    E error;
  } cases[] = {{"cpu.pressure", &CgroupReading::cpu_pressure, &CgroupReading::cpu_pressure_error},
               {"memory.pressure", &CgroupReading::memory_pressure, &CgroupReading::memory_pressure_error},
               {"io.pressure", &CgroupReading::io_pressure, &CgroupReading::io_pressure_error}};
  for (const auto& c : cases) {
    TempDir dir;
    write_v2_service(dir, "x.service");
    for (const auto& other : cases)
      dir.write(std::string("fs/cgroup/x.service/") + other.file, "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n");
    std::filesystem::remove(dir.path() + "/fs/cgroup/x.service/" + c.file);
    dir.mkdir(std::string("fs/cgroup/x.service/") + c.file);
    auto probe = CgroupProbe::open(dir.path(), "x.service");
    ASSERT_TRUE(probe.ok()) << probe.error().message;
    auto r = probe->read();
    ASSERT_TRUE(r.ok()) << c.file << ": " << r.error().message;
    EXPECT_TRUE(r->cpu && r->memory) << c.file;
    for (const auto& other : cases) {
      const bool broken = other.file == c.file;
      EXPECT_EQ(((*r).*other.reading).has_value(), !broken) << c.file << " broken, " << other.file;
      EXPECT_EQ(((*r).*other.error).has_value(), broken) << c.file << " broken, " << other.file;
    }
    EXPECT_TRUE(contains(((*r).*c.error)->message, c.file)) << ((*r).*c.error)->message;
  }
}

TEST(CgroupControllers, V2RemovedCgroupIsOneError) {
  TempDir dir;
  write_v2_service(dir, "x.service");
  auto probe = CgroupProbe::open(dir.path(), "x.service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  ASSERT_TRUE(probe->read().ok());
  // The kernel fails reads of a removed cgroup's open files (ENODEV); here the
  // moved-away files turn unreadable and the directory is gone.
  const std::string moved = dir.path() + "/moved";
  std::filesystem::rename(dir.path() + "/fs/cgroup/x.service", moved);
  std::ofstream(moved + "/cpu.stat", std::ios::trunc) << "garbage\n";
  std::ofstream(moved + "/memory.current", std::ios::trunc) << "garbage\n";
  auto r = probe->read();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message, "\"/x.service\" not found (cgroup v2)")) << r.error().message;
}

// ------------------------------------------------------------------- paths

TEST(CgroupPath, DotDotIsRejected) {
  for (const char* path : {"..", "../etc", "system.slice/../../etc", "/system.slice/..", "a/../b"}) {
    for (const std::string& root : {kV2, kV1}) {
      auto probe = CgroupProbe::open(root, path);
      ASSERT_FALSE(probe.ok()) << path;
      EXPECT_TRUE(contains(probe.error().message, "\"..\"")) << probe.error().message;
      EXPECT_TRUE(contains(probe.error().message, path)) << probe.error().message;
    }
  }
}

TEST(CgroupPath, DotsInNamesAreFine) {
  TempDir dir;
  write_v2_service(dir, "user.slice/..hidden..service");
  auto probe = CgroupProbe::open(dir.path(), "user.slice/..hidden..service");
  ASSERT_TRUE(probe.ok()) << probe.error().message;
}

TEST(CgroupPath, EmptySysRootIsNotFound) {
  TempDir dir;
  auto probe = CgroupProbe::open(dir.path(), "system.slice/api.service");
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.error().code, ENOENT);
  EXPECT_TRUE(contains(probe.error().message, dir.path() + "/fs/cgroup/cpuacct/system.slice/api.service"))
      << probe.error().message;
  EXPECT_TRUE(contains(probe.error().message, dir.path() + "/fs/cgroup/memory/system.slice/api.service"))
      << probe.error().message;
}

}  // namespace
}  // namespace headroom::probes
