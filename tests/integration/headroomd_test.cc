// SPDX-License-Identifier: Apache-2.0
// headroomd as a process: the real binary on the real /proc, signals, reloads,
// bad input and exit codes.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "headroom/orca/report.h"
#include "process.h"
#include "temp_dir.h"

namespace headroom {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using testing::Process;
using testing::TempDir;

std::optional<orca::Report> read_node(const TempDir& dir) {
  auto r = orca::read_report_file(dir / "orca/node.orca");
  if (!r) return std::nullopt;
  return *r;
}

uint64_t seq_of(const orca::Report& r) { return orca::metadata_of(r)->seq; }

std::vector<std::string> daemon_args(const TempDir& dir, const std::string& config) {
  return {HEADROOMD_PATH, "--config", config, "--orca-dir", dir / "orca"};
}

// Spins on one CPU until stopped.
class BusyThreads {
 public:
  explicit BusyThreads(int n) {
    for (int i = 0; i < n; ++i)
      threads_.emplace_back([this] {
        volatile uint64_t x = 0;
        while (!stop_.load(std::memory_order_relaxed)) x = x + 1;
      });
  }
  ~BusyThreads() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

TEST(Headroomd, CpuUtilizationRisesStrictlyWithBusyThreadsPastSaturation) {
  TempDir dir;
  const auto config = dir.write("headroom.toml", "[agent]\ninterval = \"100ms\"\nsmoothing = \"300ms\"\n");
  Process d(daemon_args(dir, config), dir);
  ASSERT_TRUE(eventually([&] { return read_node(dir).has_value(); })) << d.err();

  std::vector<double> means;
  for (int threads : {0, 1, 2, 4, 8}) {
    BusyThreads load(threads);
    std::this_thread::sleep_for(2500ms);  // > 5 smoothing time constants
    double sum = 0;
    int n = 0;
    uint64_t last_seq = 0;
    const auto until = std::chrono::steady_clock::now() + 1500ms;
    while (std::chrono::steady_clock::now() < until) {
      if (auto r = read_node(dir); r && seq_of(*r) != last_seq) {
        last_seq = seq_of(*r);
        sum += r->cpu_utilization();
        ++n;
      }
      std::this_thread::sleep_for(20ms);
    }
    ASSERT_GT(n, 5) << "too few reports at " << threads << " threads";
    means.push_back(sum / n);
    std::cout << "[ ramp ] " << threads << " busy threads on " << std::thread::hardware_concurrency()
              << " CPUs: cpu_utilization " << means.back() << "\n";
  }
  for (std::size_t i = 1; i < means.size(); ++i)
    EXPECT_GT(means[i], means[i - 1]) << "step " << i << " did not rise";
  ASSERT_TRUE(d.running()) << d.err();
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait(), 0);
}

TEST(Headroomd, PublishesEveryIntervalWithMetadataAndMarksTheFinalReportStopped) {
  TempDir dir;
  const auto config = dir.write("headroom.toml", "[agent]\ninterval = \"50ms\"\n");
  Process d(daemon_args(dir, config), dir);
  ASSERT_TRUE(eventually([&] {
    auto r = read_node(dir);
    return r && seq_of(*r) >= 10;
  })) << d.err();
  auto r = read_node(dir);
  auto md = orca::metadata_of(*r);
  ASSERT_TRUE(md);
  EXPECT_EQ(md->interval_ms, 50);
  EXPECT_FALSE(md->stopped);
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LT(std::abs(now_ms - md->timestamp_ms), 2000);
  for (const char* key : {"cpu", "memory"}) EXPECT_TRUE(r->utilization().contains(key)) << key;
  EXPECT_GT(r->mem_utilization(), 0.0);
  EXPECT_GE(r->application_utilization(), r->mem_utilization());

  d.signal(SIGTERM);
  ASSERT_EQ(d.wait(), 0) << d.err();
  auto last = read_node(dir);
  ASSERT_TRUE(last);
  EXPECT_TRUE(orca::metadata_of(*last)->stopped);
  EXPECT_TRUE(orca::check_staleness(*last, now_ms).stale);
  // No temporary file left behind: the report and the agent's lock file only.
  for (const auto& e : std::filesystem::directory_iterator(dir / "orca"))
    EXPECT_TRUE(e.path().filename() == "node.orca" || e.path().filename() == ".headroomd.lock") << e.path();
}

TEST(Headroomd, SighupWithABrokenConfigKeepsTheRunningConfig) {
  TempDir dir;
  const auto config = dir.write("headroom.toml", "[agent]\ninterval = \"100ms\"\n");
  Process d(daemon_args(dir, config), dir);
  ASSERT_TRUE(eventually([&] { return read_node(dir).has_value(); })) << d.err();

  dir.write("headroom.toml", "[agent]\ninterval = \"50ms\n");  // unterminated string
  d.signal(SIGHUP);
  ASSERT_TRUE(eventually([&] { return d.err().find("reload rejected") != std::string::npos; })) << d.err();
  const uint64_t seq_after = seq_of(*read_node(dir));
  ASSERT_TRUE(eventually([&] { return seq_of(*read_node(dir)) >= seq_after + 3; })) << "stopped publishing";
  EXPECT_TRUE(d.running());
  EXPECT_EQ(orca::metadata_of(*read_node(dir))->interval_ms, 100);
  EXPECT_NE(d.err().find("headroom.toml:2"), std::string::npos) << "error names file and line: " << d.err();

  dir.write("headroom.toml", "[agent]\ninterval = \"200ms\"\n");
  d.signal(SIGHUP);
  ASSERT_TRUE(eventually([&] { return orca::metadata_of(*read_node(dir))->interval_ms == 200; })) << d.err();
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait(), 0);
}

TEST(Headroomd, OnceAgainstTheRealProcPublishesOneValidReport) {
  TempDir dir;
  const auto config = dir.write("headroom.toml", "");
  auto r = testing::run({HEADROOMD_PATH, "--config", config, "--once", "--orca-dir", dir / "orca"}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  auto report = read_node(dir);
  ASSERT_TRUE(report);
  EXPECT_EQ(seq_of(*report), 1u);
  EXPECT_TRUE(report->utilization().contains("cpu"));
}

struct BadInput {
  const char* name;
  const char* toml;          // nullptr: the file does not exist
  const char* expect_in_err; // part of the message
  int code;
};

void PrintTo(const BadInput& c, std::ostream* os) { *os << c.name; }

class HeadroomdBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(HeadroomdBadInput, ExitsWithAClearError) {
  const auto& c = GetParam();
  TempDir dir;
  const std::string config = c.toml ? dir.write("headroom.toml", c.toml) : dir / "missing.toml";
  for (bool check_only : {true, false}) {
    std::vector<std::string> args = daemon_args(dir, config);
    if (check_only) args.push_back("--check-config");
    else args.push_back("--once");
    auto r = testing::run(args, dir);
    EXPECT_EQ(r.code, c.code) << (check_only ? "--check-config: " : "run: ") << r.err;
    EXPECT_NE(r.err.find(c.expect_in_err), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "orca/node.orca"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Config, HeadroomdBadInput,
    ::testing::Values(
        BadInput{"missing", nullptr, "missing.toml", 78},
        BadInput{"syntax", "[agent]\ninterval = = 3\n", "headroom.toml:2:", 78},
        BadInput{"unknown_key", "[agent]\nintervall = \"1s\"\n", "did you mean \"interval\"", 78},
        BadInput{"wrong_type", "[agent]\ninterval = 100\n", "agent.interval", 78},
        BadInput{"zero_interval", "[agent]\ninterval = \"0ms\"\n", "greater than 0", 78},
        BadInput{"weight_out_of_range", "[node.weights]\ncpu = 1.5\n", "[0, 1]", 78},
        BadInput{"cgroup_missing", "[node]\ncgroup = \"system.slice/no-such.service\"\n", "no-such.service", 78},
        BadInput{"dependency_host_name",
                 "[[dependency]]\nname = \"db\"\naddress = \"db.internal:5432\"\ntarget = \"5ms\"\nmax = \"1s\"\n",
                 "headroom.toml:3:11: dependency[0].address: \"db.internal\" is a host name", 78},
        BadInput{"dependency_no_remote", "[[dependency]]\nname = \"db\"\ntarget = \"5ms\"\nmax = \"1s\"\n",
                 "names no remote side", 78}),
    [](const ::testing::TestParamInfo<BadInput>& param_info) { return std::string(param_info.param.name); });

// A dependency's configuration is checked like the rest, on the command line
// too; with agent.ebpf = "off" its report is published, saying the probe
// does not measure it.
TEST(Headroomd, DependenciesAreCheckedAndPublishedWithoutEbpf) {
  TempDir dir;
  const auto config = dir.write("headroom.toml",
                                "[agent]\nebpf = \"off\"\n[[dependency]]\nname = \"cache\"\n"
                                "address = \"[2001:db8::5]:6379\"\nprotocol = \"generic\"\ntarget = \"2ms\"\n"
                                "max = \"50ms\"\nmax_concurrency = 8\n");
  auto args = daemon_args(dir, config);
  args.push_back("--check-config");
  auto checked = testing::run(args, dir);
  EXPECT_EQ(checked.code, 0) << checked.err;
  EXPECT_NE(checked.out.find("configuration is valid"), std::string::npos) << checked.out;

  args = daemon_args(dir, config);
  args.insert(args.end(), {"--dependency", "name=cache,port=80,target=1ms,max=2ms", "--check-config"});
  auto clash = testing::run(args, dir);
  EXPECT_EQ(clash.code, 78) << clash.err;
  EXPECT_NE(clash.err.find("dependency[1].name: duplicate name \"cache\""), std::string::npos) << clash.err;

  args = daemon_args(dir, config);
  args.insert(args.end(), {"--dependency", "name=api,address=api.local:80,target=1ms,max=2ms", "--check-config"});
  auto bad_flag = testing::run(args, dir);
  EXPECT_EQ(bad_flag.code, 64) << bad_flag.err;
  EXPECT_NE(bad_flag.err.find("--dependency 'name=api,address=api.local:80,target=1ms,max=2ms': address: "),
            std::string::npos)
      << bad_flag.err;

  args = daemon_args(dir, config);
  args.insert(args.end(), {"--dependency", "name=api,port=443,target=10ms,max=1s", "--once"});
  auto once = testing::run(args, dir);
  ASSERT_EQ(once.code, 0) << once.err;
  for (const char* name : {"dependency.cache.orca", "dependency.api.orca"}) {
    auto report = orca::read_report_file(dir / (std::string("orca/") + name));
    ASSERT_TRUE(report) << name << ": " << report.error().message;
    EXPECT_EQ(report->named_metrics().at("headroom.ebpf.unavailable"), 1.0) << name;
    EXPECT_TRUE(report->utilization().empty()) << name;
  }
  EXPECT_NE(once.err.find("dependency signals are off"), std::string::npos) << once.err;
}

TEST(Headroomd, UnreadableConfigIsAConfigError) {
  TempDir dir;
  const auto config = dir.write("headroom.toml", "[agent]\n");
  ::chmod(config.c_str(), 0);
  Process::Options as_nobody;
  if (::geteuid() == 0) {
    struct passwd* pw = ::getpwnam("nobody");
    ASSERT_NE(pw, nullptr);
    as_nobody.uid = pw->pw_uid;
    as_nobody.gid = pw->pw_gid;
    ::chmod(dir.path().c_str(), 0755);
  }
  Process p({HEADROOMD_PATH, "--config", config, "--check-config"}, dir, as_nobody);
  EXPECT_EQ(p.wait(), 78);
  EXPECT_NE(p.err().find("headroom.toml"), std::string::npos) << p.err();
}

TEST(Headroomd, OrcaDirectoryThatCannotBeCreatedExits73) {
  TempDir dir;
  dir.write("file", "not a directory");
  const auto config = dir.write("headroom.toml", "");
  auto r = testing::run({HEADROOMD_PATH, "--config", config, "--once", "--orca-dir", dir / "file/orca"}, dir);
  EXPECT_EQ(r.code, 73) << r.err;
  EXPECT_NE(r.err.find("file/orca"), std::string::npos) << r.err;
}

// Runs the daemon as an unprivileged user when the test is root, since root
// writes into any directory whatever its mode.
Process::Options unprivileged(const TempDir& dir, const std::string& orca) {
  Process::Options o;
  if (::geteuid() == 0) {
    struct passwd* pw = ::getpwnam("nobody");
    if (pw == nullptr) return o;
    o.uid = pw->pw_uid;
    o.gid = pw->pw_gid;
    ::chmod(dir.path().c_str(), 0755);
    ::chown(orca.c_str(), pw->pw_uid, pw->pw_gid);
  }
  return o;
}

TEST(Headroomd, OrcaDirectoryThatIsNotWritableExits73) {
  TempDir dir;
  const std::string orca = dir / "orca";
  std::filesystem::create_directory(orca);
  const auto config = dir.write("headroom.toml", "");
  auto who = unprivileged(dir, orca);
  ::chmod(orca.c_str(), 0555);
  Process p({HEADROOMD_PATH, "--config", config, "--once", "--orca-dir", orca}, dir, who);
  EXPECT_EQ(p.wait(), 73) << p.err();
  EXPECT_NE(p.err().find("cannot write report files into " + orca), std::string::npos) << p.err();
}

TEST(Headroomd, WhilePublishingFailsTheLastReportStaysValid) {
  TempDir dir;
  const std::string orca = dir / "orca";
  std::filesystem::create_directory(orca);
  const auto config = dir.write("headroom.toml", "[agent]\ninterval = \"50ms\"\n");
  Process d({HEADROOMD_PATH, "--config", config, "--orca-dir", orca}, dir, unprivileged(dir, orca));
  ASSERT_TRUE(eventually([&] { return read_node(dir).has_value(); })) << d.err();

  ::chmod(orca.c_str(), 0555);  // the agent can no longer create files there
  ASSERT_TRUE(eventually([&] { return d.err().find("cannot publish") != std::string::npos; })) << d.err();
  const uint64_t frozen = seq_of(*read_node(dir));
  for (int i = 0; i < 20; ++i) {
    auto r = read_node(dir);
    ASSERT_TRUE(r) << "the last report must stay readable";
    EXPECT_EQ(seq_of(*r), frozen);
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(d.running());
  const auto err = d.err();
  const auto first = err.find("cannot publish");
  EXPECT_EQ(err.find("cannot publish", first + 1), std::string::npos) << "logged once: " << err;

  ::chmod(orca.c_str(), 0755);
  ASSERT_TRUE(eventually([&] { return seq_of(*read_node(dir)) > frozen; })) << d.err();
  EXPECT_NE(d.err().find("publishing"), std::string::npos);
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait(), 0);
}

TEST(Headroomd, AMissingProbeFileMakesOnlyItsSignalUnavailable) {
  TempDir dir;
  // A copy of the real /proc files the node probes read, without pressure.
  for (const char* f : {"stat", "meminfo"}) dir.write(std::string("proc/") + f, testing::read_file(std::string("/proc/") + f));
  const auto config = dir.write("headroom.toml", "");
  auto r = testing::run({HEADROOMD_PATH, "--config", config, "--once", "--orca-dir", dir / "orca", "--proc-root",
                         dir / "proc"},
                        dir);
  ASSERT_EQ(r.code, 0) << r.err;
  auto report = read_node(dir);
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->utilization().contains("memory"));
  EXPECT_FALSE(report->utilization().contains("io.pressure"));
  EXPECT_NE(r.err.find("io.pressure unavailable"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pressure/io"), std::string::npos) << "names the file: " << r.err;
}

TEST(Headroomd, BadFlagsAreUsageErrors) {
  TempDir dir;
  EXPECT_EQ(testing::run({HEADROOMD_PATH, "--no-such-flag"}, dir).code, 64);
  auto r = testing::run({HEADROOMD_PATH, "--log-level", "loud", "--check-config"}, dir);
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("loud"), std::string::npos);
}

}  // namespace
}  // namespace headroom
