// SPDX-License-Identifier: Apache-2.0
// tune validate's edges: the endpoint read from a headroom.toml (and its
// errors), the file rewritten with other thresholds, headroomd found in a
// fake /proc, the configuration replaced and put back, and the wait for
// headroomd's report (real report files in a temporary directory).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agent/ctl/tune_apply.h"
#include "headroom/orca/clock.h"
#include "headroom/orca/names.h"
#include "headroom/orca/report_writer.h"
#include "temp_dir.h"

namespace headroom::ctl::tune {
namespace {

using headroom::testing::read_file;
using headroom::testing::TempDir;
using std::chrono::milliseconds;

constexpr const char* kFile = R"(# proposed by tune recommend
[[endpoint]]
name = "search"
port = 8081
target = "10ms"
max = "20ms"

[[endpoint]]
name = "play"
port = 8080
target = "37.9ms"          # p90 at peak
max = "64.1ms"

[[endpoint.shed]]
signal = "utilization.latency.slo_target"   # latency
shed_start = 0.28
critical_start = 0.64

[[endpoint.shed]]
signal = "cpu_utilization"
shed_start = 0.6
critical_start = 0.8
all_shed = 1.5
)";

TEST(TuneFile, ReadsTheEndpointsTargetMaxAndShedEntries) {
  auto e = endpoint_of(kFile, "f.toml", "play");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->target, std::chrono::microseconds(37900));
  EXPECT_EQ(e->max, std::chrono::microseconds(64100));
  ASSERT_EQ(e->shed.size(), 2u);
  EXPECT_EQ(e->shed[0].signal, "utilization.latency.slo_target");
  EXPECT_DOUBLE_EQ(e->shed[0].thresholds.shed_start, 0.28);
  EXPECT_DOUBLE_EQ(e->shed[0].thresholds.all_shed, 1.0);  // the signal's default
  EXPECT_DOUBLE_EQ(e->shed[1].thresholds.all_shed, 1.5);
  auto other = endpoint_of(kFile, "f.toml", "search");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->shed.empty());
}

TEST(TuneFile, ErrorsNameTheFileTheLineAndWhatIsMissing) {
  const std::string ep = "[[endpoint]]\nname = \"play\"\nport = 8080\n";
  struct Case {
    std::string text, endpoint, want;
  };
  const std::vector<Case> cases = {
      {ep + "target = \"10ms\"\n", "play", "f.toml:1:1: endpoint[0].max: is required"},
      {ep + "max = \"10ms\"\n", "play", "f.toml:1:1: endpoint[0].target: is required"},
      {ep + "target = 10\nmax = \"20ms\"\n", "play", "f.toml:4:10: endpoint[0].target: expected a duration string"},
      {ep + "target = \"10 parsecs\"\nmax = \"20ms\"\n", "play", "f.toml:4:10: endpoint[0].target: invalid duration"},
      {ep + "target = \"30ms\"\nmax = \"20ms\"\n", "play", "f.toml:5:7: endpoint[0].max: must be at least target"},
      {ep + "target = \"10ms\"\nmax = \"20ms\"\n", "other", "f.toml: no [[endpoint]] with name = \"other\"; give --endpoint one of the file's endpoints (play)"},
      {"[[endpoint]\n", "play", "f.toml:1:"},
      {ep + "target = \"10ms\"\nmax = \"20ms\"\n[[endpoint.shed]]\nsignal = \"bogus\"\nshed_start = 0.1\ncritical_start = 0.2\n",
       "play", "f.toml:7:10: endpoint[0].shed[0].signal: unknown signal \"bogus\""},
      {ep + "target = \"10ms\"\nmax = \"20ms\"\n[[endpoint.shed]]\nsignal = \"cpu_utilization\"\ncritical_start = 0.2\n", "play",
       "f.toml:6:1: endpoint[0].shed[0].shed_start: is required"},
      {ep + "target = \"10ms\"\nmax = \"20ms\"\n[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.9\n"
            "critical_start = 0.2\n",
       "play", "f.toml:9:18: endpoint[0].shed[0].critical_start: critical_start (0.2) must be"},
      {ep + "target = \"10ms\"\nmax = \"20ms\"\n[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.1\n"
            "critical_start = 0.2\n[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.1\ncritical_start = 0.2\n",
       "play", "f.toml:11:10: endpoint[0].shed[1].signal: signal \"cpu_utilization\" is listed twice"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto e = endpoint_of(c.text, "f.toml", c.endpoint);
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.error().to_string().find(c.want), std::string::npos) << e.error().to_string();
  }
}

TEST(TuneFile, WithThresholdsChangesOnlyTheValues) {
  std::vector<ShedEntry> shed{ShedEntry{"utilization.latency.slo_target", {0.19, 0.37, 1.0}},
                              ShedEntry{"cpu_utilization", {0.7, 0.9, 1.5}}};
  auto text = with_thresholds(kFile, "f.toml", "play", shed);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_NE(text->find("# proposed by tune recommend"), std::string::npos);
  EXPECT_NE(text->find("target = \"37.9ms\"          # p90 at peak"), std::string::npos);
  EXPECT_NE(text->find("shed_start = 0.19\n"), std::string::npos) << *text;
  EXPECT_NE(text->find("critical_start = 0.9\n"), std::string::npos) << *text;
  auto back = endpoint_of(*text, "f.toml", "play");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_DOUBLE_EQ(back->shed[0].thresholds.shed_start, 0.19);
  EXPECT_DOUBLE_EQ(back->shed[0].thresholds.critical_start, 0.37);
  EXPECT_DOUBLE_EQ(back->shed[1].thresholds.shed_start, 0.7);
  EXPECT_DOUBLE_EQ(back->shed[1].thresholds.all_shed, 1.5);
  // The same file at the same thresholds is the same text.
  auto same = with_thresholds(kFile, "f.toml", "play", endpoint_of(kFile, "f.toml", "play")->shed);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, kFile);
  auto missing = with_thresholds(kFile, "f.toml", "play", {ShedEntry{"mem_utilization", {0.5, 0.6, 1.0}}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("no [[endpoint.shed]] for mem_utilization"), std::string::npos);
}

TEST(TuneCanary, FindsTheOneHeadroomdInProc) {
  TempDir proc;
  proc.write("12/comm", "bash\n");
  proc.write("34/comm", "headroomd\n");
  proc.write("self/comm", "headroomd\n");  // not a pid
  auto pid = find_headroomd(proc.path());
  ASSERT_TRUE(pid.ok()) << pid.error().message;
  EXPECT_EQ(*pid, 34);
  proc.write("56/comm", "headroomd\n");
  auto two = find_headroomd(proc.path());
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.error().message.find("2 headroomd processes found; pass --headroomd-pid"), std::string::npos);
  TempDir empty;
  auto none = find_headroomd(empty.path());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no headroomd process found"), std::string::npos);
}

TEST(TuneCanary, AppliesAndPutsTheOriginalBackWithItsMode) {
  TempDir dir;
  const std::string path = dir.write("headroom.toml", "original\n");
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  // SIGHUP goes to this process, which ignores it here.
  struct sigaction ignore {}, old{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGHUP, &ignore, &old), 0);
  {
    auto canary = CanaryConfig::open(path, ::getpid());
    ASSERT_TRUE(canary.ok()) << canary.error().message;
    ASSERT_TRUE(canary->apply("proposed\n").ok());
    EXPECT_EQ(read_file(path), "proposed\n");
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u);
    ASSERT_TRUE(canary->restore().ok());
    EXPECT_EQ(read_file(path), "original\n");
    ASSERT_TRUE(canary->apply("second\n").ok());
  }  // the destructor restores
  EXPECT_EQ(read_file(path), "original\n");
  {
    auto kept = CanaryConfig::open(path, ::getpid());
    ASSERT_TRUE(kept.ok());
    ASSERT_TRUE(kept->apply("kept\n").ok());
    kept->keep();
  }
  EXPECT_EQ(read_file(path), "kept\n");
  ::sigaction(SIGHUP, &old, nullptr);
  auto missing = CanaryConfig::open(dir / "nope.toml", ::getpid());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("nope.toml"), std::string::npos);
}

TEST(TuneCanary, WaitsForTheReportToCarryTheFilesTarget) {
  TempDir dir;
  auto timeout = wait_for_target(dir.path(), "play", std::chrono::microseconds(37900), milliseconds(100));
  ASSERT_FALSE(timeout.ok());
  EXPECT_NE(timeout.error().message.find("headroomd did not take the file"), std::string::npos);

  orca::Report r;
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(orca::kTimestampMsKey)] = static_cast<double>(orca::unix_now_ms());
  nm[std::string(orca::kSeqKey)] = 1;
  nm[std::string(orca::kIntervalMsKey)] = 60'000;
  nm[std::string(orca::kMetricSloTargetMs)] = 50;
  auto w = orca::ReportFileWriter::open(dir.path());
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_TRUE(w->write("endpoint.play.orca", r).ok());
  auto old = wait_for_target(dir.path(), "play", std::chrono::microseconds(37900), milliseconds(100));
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.error().message.find("last: target_ms 50"), std::string::npos) << old.error().message;
  nm[std::string(orca::kMetricSloTargetMs)] = 37.92;  // within 0.1 %
  nm[std::string(orca::kSeqKey)] = 2;
  ASSERT_TRUE(w->write("endpoint.play.orca", r).ok());
  EXPECT_TRUE(wait_for_target(dir.path(), "play", std::chrono::microseconds(37900), milliseconds(100)).ok());
}

}  // namespace
}  // namespace headroom::ctl::tune
