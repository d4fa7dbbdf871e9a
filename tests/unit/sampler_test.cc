// SPDX-License-Identifier: Apache-2.0
// NodeSampler on fixture trees with an injected clock: which probes feed which
// signal, baselines, and unavailable probes logged once.
#include "agent/signals/sampler.h"

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace headroom::agent {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kSecond = 1'000'000'000;

class SamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy(fs::path(HEADROOM_FIXTURES) / "proc", dir_ / "proc", fs::copy_options::recursive);
    fs::copy(fs::path(HEADROOM_FIXTURES) / "sys-cgroup2", dir_ / "sys", fs::copy_options::recursive);
    config_.proc_root = dir_ / "proc";
    config_.sys_root = dir_ / "sys";
    sink_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(100);
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink_));
  }
  void TearDown() override { spdlog::set_default_logger(previous_); }

  // Rewrites a fixture file in place with the golden "after" version.
  void advance(const std::string& relative) {
    const auto after = fs::path(HEADROOM_FIXTURES) / "golden-after" / relative;
    std::string target = relative.starts_with("sys-cgroup2/") ? dir_ / ("sys/" + relative.substr(12)) : dir_ / relative;
    std::ofstream(target, std::ios::trunc) << testing::read_file(after.string());
  }

  int log_lines_containing(const std::string& needle) {
    int n = 0;
    for (const auto& line : sink_->last_formatted()) n += line.find(needle) != std::string::npos;
    return n;
  }

  testing::TempDir dir_;
  Config config_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST_F(SamplerTest, FirstSampleIsABaselineThenRatesAppear) {
  auto s = NodeSampler::create(config_);
  ASSERT_TRUE(s) << s.error().message;
  auto first = (*s)->sample(0);
  EXPECT_FALSE(first.signals.contains("cpu"));
  EXPECT_FALSE(first.signals.contains("cpu.pressure"));
  EXPECT_TRUE(first.signals.contains("memory")) << "a level needs no baseline";

  for (auto f : {"proc/stat", "proc/schedstat", "proc/pressure/cpu", "proc/pressure/memory", "proc/pressure/io"})
    advance(f);
  auto second = (*s)->sample(kSecond);
  EXPECT_DOUBLE_EQ(second.signals.at("cpu"), 1.5);  // busy 0.5 + 1 s of run delay per CPU
  EXPECT_DOUBLE_EQ(second.signals.at("cpu.pressure"), 0.25);
  EXPECT_DOUBLE_EQ(second.signals.at("memory.pressure"), 0.1);
  EXPECT_DOUBLE_EQ(second.signals.at("io.pressure"), 0.05);
  EXPECT_DOUBLE_EQ(second.raw.at("headroom.cpu.capacity"), 64);
  EXPECT_TRUE((*s)->unavailable().empty());
}

TEST_F(SamplerTest, DisabledSignalsAreNotSampled) {
  config_.signals = {"memory"};
  fs::remove_all(dir_ / "proc/pressure");
  auto s = NodeSampler::create(config_);
  ASSERT_TRUE(s);
  (*s)->sample(0);
  auto out = (*s)->sample(kSecond);
  EXPECT_EQ(out.signals.size(), 1u);
  EXPECT_TRUE((*s)->unavailable().empty()) << "a disabled probe is never an error";
}

TEST_F(SamplerTest, AMissingFileIsLoggedOnceAndTheOthersGoOn) {
  fs::remove(dir_ / "proc/pressure/io");
  auto s = NodeSampler::create(config_);
  ASSERT_TRUE(s);
  for (int i = 0; i < 5; ++i) {
    auto out = (*s)->sample(i * kSecond);
    EXPECT_FALSE(out.signals.contains("io.pressure"));
    if (i > 0) {
      EXPECT_TRUE(out.signals.contains("cpu.pressure"));
    }
  }
  ASSERT_TRUE((*s)->unavailable().contains("io.pressure"));
  EXPECT_NE((*s)->unavailable().at("io.pressure").find("pressure/io"), std::string::npos);
  EXPECT_EQ(log_lines_containing("io.pressure unavailable"), 1);

  // It comes back (PSI enabled again): logged once, and the rate needs a new baseline.
  fs::copy(fs::path(HEADROOM_FIXTURES) / "proc/pressure/io", dir_ / "proc/pressure/io");
  auto back = (*s)->sample(5 * kSecond);
  EXPECT_FALSE(back.signals.contains("io.pressure"));
  EXPECT_TRUE((*s)->sample(6 * kSecond).signals.contains("io.pressure"));
  EXPECT_FALSE((*s)->unavailable().contains("io.pressure"));
  EXPECT_EQ(log_lines_containing("io.pressure available again"), 1);
}

TEST_F(SamplerTest, CgroupV2IsQuotaAwareAndUsesItsOwnPressure) {
  config_.cgroup = "system.slice/api.service";
  auto s = NodeSampler::create(config_);
  ASSERT_TRUE(s) << s.error().message;
  (*s)->sample(0);
  for (auto f : {"sys-cgroup2/fs/cgroup/system.slice/api.service/cpu.stat",
                 "sys-cgroup2/fs/cgroup/system.slice/api.service/cpu.pressure",
                 "sys-cgroup2/fs/cgroup/system.slice/api.service/io.pressure", "proc/pressure/cpu"})
    advance(f);
  auto out = (*s)->sample(kSecond);
  EXPECT_DOUBLE_EQ(out.raw.at("headroom.cpu.capacity"), 2.0);   // quota, not the 64 host CPUs
  EXPECT_DOUBLE_EQ(out.raw.at("headroom.cpu.busy"), 0.5);
  EXPECT_DOUBLE_EQ(out.signals.at("cpu"), 0.6);                  // + its cpu.pressure
  EXPECT_DOUBLE_EQ(out.signals.at("cpu.pressure"), 0.1) << "the cgroup's, not the host's 0.25";
  EXPECT_DOUBLE_EQ(out.signals.at("io.pressure"), 0.02);
  EXPECT_NEAR(out.signals.at("memory"), 0.3, 1e-9);
}

TEST_F(SamplerTest, ACgroupThatCannotBeReadMakesItsSignalsUnavailableUntilItReturns) {
  config_.cgroup = "system.slice/api.service";
  auto s = NodeSampler::create(config_);
  ASSERT_TRUE(s);
  (*s)->sample(0);
  // The kernel fails reads of a removed cgroup's open files (ENODEV); here the
  // directory is moved away and its files (still open) turn unreadable.
  const fs::path cgroup = dir_ / "sys/fs/cgroup/system.slice/api.service";
  const fs::path moved = dir_ / "moved";
  const auto saved_stat = testing::read_file(cgroup / "cpu.stat");
  const auto saved_memory = testing::read_file(cgroup / "memory.current");
  fs::rename(cgroup, moved);
  std::ofstream(moved / "cpu.stat", std::ios::trunc) << "garbage\n";
  std::ofstream(moved / "memory.current", std::ios::trunc) << "garbage\n";
  for (int i = 1; i <= 3; ++i) {
    auto out = (*s)->sample(i * kSecond);
    EXPECT_FALSE(out.signals.contains("cpu"));
    EXPECT_FALSE(out.signals.contains("memory"));
    EXPECT_EQ(out.raw.at("headroom.cgroup.cpu_unavailable"), 1.0);
    EXPECT_EQ(out.raw.at("headroom.cgroup.memory_unavailable"), 1.0);
  }
  EXPECT_TRUE((*s)->unavailable().contains("cgroup"));
  EXPECT_EQ(log_lines_containing("unavailable"), 1) << "one reason for the cgroup, not one per signal";
  fs::rename(moved, cgroup);
  std::ofstream(cgroup / "cpu.stat", std::ios::trunc) << saved_stat;
  std::ofstream(cgroup / "memory.current", std::ios::trunc) << saved_memory;
  (*s)->sample(4 * kSecond);
  auto out = (*s)->sample(5 * kSecond);
  EXPECT_TRUE(out.signals.contains("cpu"));
  EXPECT_FALSE(out.raw.contains("headroom.cgroup.cpu_unavailable"));
  EXPECT_TRUE((*s)->unavailable().empty());
}

TEST_F(SamplerTest, ACgroupWhoseCpuCannotBeReadGivesItsMemoryAndPressureAndNamesTheCpu) {
  config_.cgroup = "system.slice/api.service";
  auto s = NodeSampler::create(config_);
  ASSERT_TRUE(s) << s.error().message;
  (*s)->sample(0);
  const fs::path cpu_stat = dir_ / "sys/fs/cgroup/system.slice/api.service/cpu.stat";
  const auto saved = testing::read_file(cpu_stat);
  std::ofstream(cpu_stat, std::ios::trunc) << "garbage\n";
  advance("sys-cgroup2/fs/cgroup/system.slice/api.service/cpu.pressure");
  for (int i = 1; i <= 3; ++i) {
    auto out = (*s)->sample(i * kSecond);
    EXPECT_FALSE(out.signals.contains("cpu"));
    EXPECT_FALSE(out.raw.contains("headroom.cpu.busy"));
    EXPECT_EQ(out.raw.at("headroom.cgroup.cpu_unavailable"), 1.0) << "cpu_utilization 0 is not an idle cgroup";
    EXPECT_NEAR(out.signals.at("memory"), 0.3, 1e-9);
    EXPECT_FALSE(out.raw.contains("headroom.cgroup.memory_unavailable"));
    if (i == 1) {
      EXPECT_DOUBLE_EQ(out.signals.at("cpu.pressure"), 0.1) << "its own file, read all the same";
    }
  }
  ASSERT_TRUE((*s)->unavailable().contains("cpu"));
  const std::string& why = (*s)->unavailable().at("cpu");
  EXPECT_NE(why.find(cpu_stat.string() + ": "), std::string::npos) << why;
  EXPECT_NE(why.find("CPUAccounting=yes"), std::string::npos) << why;
  EXPECT_FALSE((*s)->unavailable().contains("cgroup"));
  EXPECT_FALSE((*s)->unavailable().contains("memory"));
  EXPECT_EQ(log_lines_containing("cpu unavailable"), 1);
  EXPECT_EQ(log_lines_containing("unavailable"), 1) << "one line, for the CPU alone";

  std::ofstream(cpu_stat, std::ios::trunc) << saved;
  (*s)->sample(4 * kSecond);
  auto out = (*s)->sample(5 * kSecond);
  EXPECT_TRUE(out.signals.contains("cpu"));
  EXPECT_FALSE((*s)->unavailable().contains("cpu"));
  EXPECT_EQ(log_lines_containing("cpu available again"), 1);
}

TEST_F(SamplerTest, ACgroupWhoseMemoryOrPressureCannotBeReadGivesTheRest) {
  config_.cgroup = "system.slice/api.service";
  const fs::path cgroup = dir_ / "sys/fs/cgroup/system.slice/api.service";
  // Directories in place of the files: they exist and read(2) fails, even for root.
  for (const char* f : {"memory.current", "io.pressure"}) {
    fs::remove(cgroup / f);
    fs::create_directory(cgroup / f);
  }
  auto s = NodeSampler::create(config_);
  ASSERT_TRUE(s) << s.error().message;
  (*s)->sample(0);
  advance("sys-cgroup2/fs/cgroup/system.slice/api.service/cpu.stat");
  auto out = (*s)->sample(kSecond);
  EXPECT_DOUBLE_EQ(out.raw.at("headroom.cpu.busy"), 0.5);
  EXPECT_TRUE(out.signals.contains("cpu"));
  EXPECT_FALSE(out.signals.contains("memory"));
  EXPECT_EQ(out.raw.at("headroom.cgroup.memory_unavailable"), 1.0);
  EXPECT_FALSE(out.signals.contains("io.pressure"));
  EXPECT_TRUE(out.signals.contains("memory.pressure"));
  EXPECT_NE((*s)->unavailable().at("memory").find("memory.current: Is a directory"), std::string::npos)
      << (*s)->unavailable().at("memory");
  EXPECT_NE((*s)->unavailable().at("io.pressure").find("io.pressure"), std::string::npos);
  (*s)->sample(2 * kSecond);
  EXPECT_EQ(log_lines_containing("memory unavailable"), 1);
  EXPECT_EQ(log_lines_containing("io.pressure unavailable"), 1);
  EXPECT_EQ(log_lines_containing("unavailable"), 2);
}

TEST_F(SamplerTest, ACgroupV1MissingFromEachHierarchyInTurnGivesTheOtherSignal) {
  fs::remove_all(dir_ / "sys");
  fs::copy(fs::path(HEADROOM_FIXTURES) / "sys-cgroup1", dir_ / "sys", fs::copy_options::recursive);
  config_.cgroup = "system.slice/api.service";
  const struct {
    const char* hierarchy;
    const char* missing;  // the signal that goes
    const char* kept;
  } cases[] = {{"cpu,cpuacct", "cpu", "memory"}, {"memory", "memory", "cpu"}};
  for (const auto& c : cases) {
    const int before = log_lines_containing("unavailable");
    const fs::path group = fs::path(dir_ / "sys/fs/cgroup") / c.hierarchy / "system.slice/api.service";
    const fs::path aside = dir_ / "aside";
    fs::rename(group, aside);
    auto s = NodeSampler::create(config_);
    ASSERT_TRUE(s) << c.hierarchy << ": " << s.error().message;
    (*s)->sample(0);
    auto out = (*s)->sample(kSecond);
    EXPECT_FALSE(out.signals.contains(c.missing)) << c.hierarchy;
    EXPECT_TRUE(out.signals.contains(c.kept)) << c.hierarchy;
    EXPECT_EQ(out.raw.at(std::string("headroom.cgroup.") + c.missing + "_unavailable"), 1.0) << c.hierarchy;
    ASSERT_TRUE((*s)->unavailable().contains(c.missing)) << c.hierarchy;
    const std::string& why = (*s)->unavailable().at(c.missing);
    EXPECT_NE(why.find(group.string()), std::string::npos) << why;
    EXPECT_NE(why.find("hierarchy"), std::string::npos) << why;
    EXPECT_EQ(log_lines_containing("unavailable") - before, 1) << c.hierarchy;
    fs::rename(aside, group);
  }
}

TEST_F(SamplerTest, ACgroupWithoutMemoryControllerGivesItsCpuAndNamesTheMissingMemory) {
  config_.cgroup = "system.slice/cpuonly.service";
  auto s = NodeSampler::create(config_);
  ASSERT_TRUE(s) << s.error().message;
  (*s)->sample(0);
  const auto cpu_stat = dir_ / "sys/fs/cgroup/system.slice/cpuonly.service/cpu.stat";
  std::ofstream(cpu_stat, std::ios::trunc) << "usage_usec 3500000\nnr_periods 30\nnr_throttled 3\nthrottled_usec 250000\n";
  auto out = (*s)->sample(kSecond);
  EXPECT_DOUBLE_EQ(out.raw.at("headroom.cpu.capacity"), 1.0);  // its quota
  EXPECT_DOUBLE_EQ(out.raw.at("headroom.cpu.busy"), 0.5);
  EXPECT_TRUE(out.signals.contains("cpu"));
  EXPECT_FALSE(out.signals.contains("memory")) << "not the host's memory in its place";
  EXPECT_FALSE(out.raw.contains("headroom.memory.used_bytes"));
  ASSERT_TRUE((*s)->unavailable().contains("memory"));
  const std::string& why = (*s)->unavailable().at("memory");
  EXPECT_NE(why.find("cpuonly.service has no memory controller (no memory.current)"), std::string::npos) << why;
  EXPECT_FALSE((*s)->unavailable().contains("cgroup"));
  EXPECT_FALSE((*s)->unavailable().contains("cpu"));
  (*s)->sample(2 * kSecond);
  EXPECT_EQ(log_lines_containing("memory unavailable"), 1);

  // The memory controller enabled for it: the signal is back, and says so once.
  const std::string cgroup = dir_ / "sys/fs/cgroup/system.slice/cpuonly.service";
  std::ofstream(cgroup + "/memory.current") << "1073741824\n";
  std::ofstream(cgroup + "/memory.max") << "4294967296\n";
  auto back = (*s)->sample(3 * kSecond);
  EXPECT_DOUBLE_EQ(back.signals.at("memory"), 0.25);
  EXPECT_DOUBLE_EQ(back.raw.at("headroom.memory.used_bytes"), 1073741824.0);
  EXPECT_FALSE((*s)->unavailable().contains("memory"));
  (*s)->sample(4 * kSecond);
  EXPECT_EQ(log_lines_containing("memory available again"), 1);
}

TEST_F(SamplerTest, AConfiguredCgroupThatDoesNotExistIsAnError) {
  config_.cgroup = "system.slice/nope.service";
  auto s = NodeSampler::create(config_);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("nope.service"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace headroom::agent
