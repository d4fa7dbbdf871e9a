// SPDX-License-Identifier: Apache-2.0
// ProcFile and the host probes: on the fixture proc tree (tests/fixtures/proc),
// on temporary files, and once on this machine's real /proc.
#include <gtest/gtest.h>

#include "temp_dir.h"
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

#include "probes/host.h"
#include "probes/proc_file.h"

namespace headroom::probes {
namespace {

const std::string kProc = std::string(HEADROOM_FIXTURES) + "/proc";

using headroom::testing::TempDir;

// ------------------------------------------------------------------ ProcFile

TEST(ProbeProcFile, MissingFileIsEnoentNamingThePath) {
  TempDir dir;
  ProcFile f(dir.path() + "/absent");
  auto r = f.read();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ENOENT);
  EXPECT_NE(r.error().message.find(dir.path() + "/absent"), std::string::npos) << r.error().message;
}

TEST(ProbeProcFile, OpensLazilyAndRetriesAfterAnError) {
  TempDir dir;
  ProcFile f(dir.path() + "/later");
  EXPECT_FALSE(f.read().ok());
  dir.write("later", "now here\n");
  auto r = f.read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "now here\n");
}

TEST(ProbeProcFile, FileRewrittenInPlaceIsReadAgain) {
  TempDir dir;
  const std::string path = dir.write("value", "first\n");
  ProcFile f(path);
  auto a = f.read();
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(*a, "first\n");

  dir.write("value", "second, and longer than the first\n");
  auto b = f.read();
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(*b, "second, and longer than the first\n");

  dir.write("value", "3\n");  // shorter: nothing of the old content may remain
  auto c = f.read();
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(*c, "3\n");
}

TEST(ProbeProcFile, KeepsTheDescriptorOpenAcrossReads) {
  TempDir dir;
  const std::string path = dir.write("kept", "still readable\n");
  ProcFile f(path);
  ASSERT_TRUE(f.read().ok());
  ASSERT_EQ(::unlink(path.c_str()), 0);
  // Re-opening would fail now; the open descriptor still reads.
  auto r = f.read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "still readable\n");
}

TEST(ProbeProcFile, ReadsFilesLargerThanAPage) {
  TempDir dir;
  std::string big;
  for (int i = 0; big.size() < 100000; ++i) big += "line " + std::to_string(i) + "\n";
  ProcFile f(dir.write("big", big));
  for (int pass = 0; pass < 2; ++pass) {  // the second read uses the grown buffer
    auto r = f.read();
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(*r, big);
  }
}

TEST(ProbeProcFile, ReadErrorClosesSoTheNextReadReopens) {
  TempDir dir;
  const std::string path = dir.path() + "/node";
  std::filesystem::create_directory(path);
  ProcFile f(path);
  // A directory opens read-only but pread fails (EISDIR), like a removed
  // cgroup's file failing with ENODEV.
  auto bad = f.read();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, EISDIR);
  EXPECT_NE(bad.error().message.find(path), std::string::npos) << bad.error().message;

  std::filesystem::remove(path);
  dir.write("node", "recreated\n");
  auto good = f.read();
  ASSERT_TRUE(good.ok()) << good.error().message;
  EXPECT_EQ(*good, "recreated\n");
}

TEST(ProbeProcFile, MoveKeepsPathAndDescriptor) {
  TempDir dir;
  ProcFile a(dir.write("m", "moved\n"));
  ASSERT_TRUE(a.read().ok());
  ProcFile b(std::move(a));
  ProcFile c(dir.path() + "/other");
  c = std::move(b);
  EXPECT_EQ(c.path(), dir.path() + "/m");
  auto r = c.read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "moved\n");
}

TEST(ProbeProcFile, EmptyFileReadsEmpty) {
  TempDir dir;
  ProcFile f(dir.write("empty", ""));
  auto r = f.read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->empty());
}

// ------------------------------------------------------- probes on fixtures

TEST(HostCpuProbe, FixtureWith64Cpus) {
  HostCpuProbe probe(kProc);
  auto r = probe.read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->total.user, 66016000u);
  EXPECT_EQ(r->total.nice, 130016u);
  EXPECT_EQ(r->total.system, 19401600u);
  EXPECT_EQ(r->total.idle, 340160000u);
  EXPECT_EQ(r->total.iowait, 66016u);
  EXPECT_EQ(r->total.irq, 0u);
  EXPECT_EQ(r->total.softirq, 340160u);
  EXPECT_EQ(r->total.steal, 8416u);
  EXPECT_EQ(r->ncpu, 64u);
  EXPECT_EQ(r->procs_running, 7u);
  EXPECT_EQ(r->procs_blocked, 2u);
  // The probe keeps its file: a second reading is the same.
  auto again = probe.read();
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->total.idle, r->total.idle);
}

TEST(SchedStatProbe, FixtureSumsRunDelay) {
  SchedStatProbe probe(kProc);
  auto r = probe.read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->run_delay_ns, 64002016000u);
  EXPECT_EQ(r->ncpu, 64u);
}

TEST(MemInfoProbe, FixtureInBytes) {
  MemInfoProbe probe(kProc);
  auto r = probe.read();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->total_bytes, 263855104ull * 1024);
  EXPECT_EQ(r->available_bytes, 198765432ull * 1024);
}

TEST(PressureProbe, FixtureCpuMemoryIo) {
  PressureProbe cpu(kProc, Resource::cpu), memory(kProc, Resource::memory), io(kProc, Resource::io);
  auto c = cpu.read();
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_DOUBLE_EQ(c->some.avg10, 12.50);
  EXPECT_DOUBLE_EQ(c->some.avg60, 8.25);
  EXPECT_DOUBLE_EQ(c->some.avg300, 4.10);
  EXPECT_EQ(c->some.total_us, 987654321u);
  ASSERT_TRUE(c->full.has_value());
  EXPECT_EQ(c->full->total_us, 0u);

  auto m = memory.read();
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_DOUBLE_EQ(m->some.avg10, 1.20);
  ASSERT_TRUE(m->full.has_value());
  EXPECT_DOUBLE_EQ(m->full->avg10, 0.60);
  EXPECT_EQ(m->full->total_us, 23456789u);

  auto i = io.read();
  ASSERT_TRUE(i.ok()) << i.error().message;
  EXPECT_EQ(i->some.total_us, 123456789u);
  ASSERT_TRUE(i->full.has_value());
  EXPECT_DOUBLE_EQ(i->full->avg300, 1.40);
}

TEST(PressureProbe, ResourceNames) {
  EXPECT_STREQ(resource_name(Resource::cpu), "cpu");
  EXPECT_STREQ(resource_name(Resource::memory), "memory");
  EXPECT_STREQ(resource_name(Resource::io), "io");
}

// ------------------------------------------------------------ missing files

TEST(HostProbes, EmptyProcRootGivesEnoentNamingTheFile) {
  TempDir dir;
  HostCpuProbe cpu(dir.path());
  SchedStatProbe sched(dir.path());
  MemInfoProbe mem(dir.path());
  PressureProbe psi(dir.path(), Resource::io);
  const std::pair<Error, std::string> errors[] = {
      {cpu.read().error(), dir.path() + "/stat"},
      {sched.read().error(), dir.path() + "/schedstat"},
      {mem.read().error(), dir.path() + "/meminfo"},
      {psi.read().error(), dir.path() + "/pressure/io"},
  };
  for (const auto& [error, path] : errors) {
    EXPECT_EQ(error.code, ENOENT) << error.message;
    EXPECT_NE(error.message.find(path), std::string::npos) << error.message;
  }
}

TEST(HostProbes, ParseErrorsArePrefixedWithThePath) {
  TempDir dir;
  dir.write("stat", "intr 0\nctxt 1\n");
  dir.write("meminfo", "MemTotal: 100 kB\n");
  dir.write("schedstat", "version 15\n");
  dir.write("pressure/cpu", "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");

  auto stat = HostCpuProbe(dir.path()).read();
  ASSERT_FALSE(stat.ok());
  EXPECT_EQ(stat.error().message, dir.path() + "/stat: no \"cpu\" line");

  auto mem = MemInfoProbe(dir.path()).read();
  ASSERT_FALSE(mem.ok());
  EXPECT_EQ(mem.error().message, dir.path() + "/meminfo: no MemAvailable");

  auto sched = SchedStatProbe(dir.path()).read();
  ASSERT_FALSE(sched.ok());
  EXPECT_EQ(sched.error().message, dir.path() + "/schedstat: no \"cpuN\" lines");

  auto psi = PressureProbe(dir.path(), Resource::cpu).read();
  ASSERT_FALSE(psi.ok());
  EXPECT_EQ(psi.error().message, dir.path() + "/pressure/cpu: no \"some\" line");
}

// ------------------------------------------------------------ this machine

TEST(HostProbes, RealProcStatAndMeminfo) {
  HostCpuProbe cpu("/proc");
  auto c = cpu.read();
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_GE(c->ncpu, 1u);
  EXPECT_GT(c->total.user + c->total.system + c->total.idle, 0u);
  EXPECT_GE(c->procs_running, 1u);  // this test is running

  MemInfoProbe mem("/proc");
  auto m = mem.read();
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_GT(m->total_bytes, 0u);
  EXPECT_LE(m->available_bytes, m->total_bytes);
  EXPECT_EQ(m->total_bytes % 1024, 0u);
}

TEST(HostProbes, RealPressureAndSchedStatWhenAvailable) {
  for (Resource r : {Resource::cpu, Resource::memory, Resource::io}) {
    PressureProbe probe("/proc", r);
    auto p = probe.read();
    if (!p.ok()) {
      // PSI off: the file is missing (or refuses reads on older kernels).
      EXPECT_TRUE(p.error().code == ENOENT || p.error().code == EOPNOTSUPP) << p.error().message;
      continue;
    }
    EXPECT_GE(p->some.avg10, 0.0);
  }
  auto s = SchedStatProbe("/proc").read();
  if (!s.ok()) {
    EXPECT_EQ(s.error().code, ENOENT) << s.error().message;  // no CONFIG_SCHEDSTATS
  } else {
    EXPECT_GE(s->ncpu, 1u);
  }
}

}  // namespace
}  // namespace headroom::probes
