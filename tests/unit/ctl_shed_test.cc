// SPDX-License-Identifier: Apache-2.0
// `headroomctl shed` end to end: reports written with ReportFileWriter into a
// temporary directory from literal values, the built binary (HEADROOMCTL_PATH)
// run on them, its stdout, stderr and exit status checked.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "headroom/orca/clock.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_writer.h"
#include "process.h"


namespace headroom {
namespace {

namespace fs = std::filesystem;

struct CtlRun {
  int status = -1;  // exit code; 128 + signal when killed
  std::string out, err;
};

CtlRun run_ctl(const std::vector<std::string>& args) {
  static const testing::TempDir logs;
  std::vector<std::string> argv = {HEADROOMCTL_PATH, "shed"};
  argv.insert(argv.end(), args.begin(), args.end());
  // A hung child fails the test instead of hanging ctest (run() kills it).
  auto r = testing::run(argv, logs, std::chrono::seconds(30));
  if (r.code < 0) ADD_FAILURE() << "headroomctl did not finish within 30 s";
  return {r.code, r.out, r.err};
}

using orca::unix_now_ms;

// A report as headroomd writes it; timestamp_ms defaults to now.
orca::Report report(double u, int64_t timestamp_ms = 0, double interval_ms = 60'000) {
  orca::Report r;
  r.set_cpu_utilization(u);
  r.set_mem_utilization(0.3);
  r.set_application_utilization(u);
  (*r.mutable_utilization())["cpu"] = u > 1.0 ? 1.0 : u;
  (*r.mutable_utilization())["memory"] = 0.3;
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(orca::kTimestampMsKey)] = static_cast<double>(timestamp_ms != 0 ? timestamp_ms : unix_now_ms());
  nm[std::string(orca::kSeqKey)] = 9;
  // A long interval keeps the report fresh however slow the test machine is.
  nm[std::string(orca::kIntervalMsKey)] = interval_ms;
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// The lines after "would be dropped right now": one per bucket or priority.
std::vector<std::string> drop_lines(const std::string& out) {
  std::vector<std::string> result;
  bool in = false;
  for (const auto& l : lines_of(out)) {
    if (in) result.push_back(l);
    if (l.rfind("would be dropped right now", 0) == 0) in = true;
  }
  return result;
}

// The drop line of one bucket, e.g. "  BULK        priorities 76-100   100.0 %".
std::string bucket_line(const std::string& out, const std::string& bucket) {
  for (const auto& l : drop_lines(out))
    if (l.rfind("  " + bucket + " ", 0) == 0) return l;
  return "<no " + bucket + " line in:\n" + out + ">";
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class CtlShed : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ctl_shed.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void write(const std::string& name, const orca::Report& r) {
    auto w = orca::ReportFileWriter::open(dir_);
    ASSERT_TRUE(w.ok()) << w.error().message;
    auto written = w->write(name, r);
    ASSERT_TRUE(written.ok()) << written.error().message;
  }
  std::string dir_;
};

TEST_F(CtlShed, LowUtilizationShedsNothing) {
  write("node.orca", report(0.35));
  const CtlRun r = run_ctl({"--dir", dir_});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.rfind(dir_ + "/node.orca: seq 9, ", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("STALE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("application_utilization   35.0 %"), std::string::npos) << r.out;
  const auto drops = drop_lines(r.out);
  ASSERT_EQ(drops.size(), 4u) << r.out;
  for (const auto& l : drops) EXPECT_TRUE(ends_with(l, " 0.0 %")) << l;
}

// --orca-dir, as headroomd and `headroomctl buffer` name the directory, and
// --dir, its first name, read the same file.
TEST_F(CtlShed, OrcaDirAndDirNameTheSameDirectory) {
  write("node.orca", report(0.7));
  const CtlRun by_orca_dir = run_ctl({"--orca-dir", dir_});
  const CtlRun by_dir = run_ctl({"--dir", dir_});
  ASSERT_EQ(by_orca_dir.status, 0) << by_orca_dir.err;
  ASSERT_EQ(by_dir.status, 0) << by_dir.err;
  EXPECT_EQ(by_orca_dir.out.rfind(dir_ + "/node.orca: seq 9, ", 0), 0u) << by_orca_dir.out;
  EXPECT_EQ(drop_lines(by_orca_dir.out), drop_lines(by_dir.out)) << by_orca_dir.out << by_dir.out;
  const CtlRun missing = run_ctl({"--orca-dir", dir_ + "/nope"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find(dir_ + "/nope/node.orca"), std::string::npos) << missing.err;
  const CtlRun help = run_ctl({"--help"});
  EXPECT_NE(help.out.find("--orca-dir,--dir"), std::string::npos) << help.out;
}

TEST_F(CtlShed, SeventyPercentShedsBulkAndPartOfBestEffort) {
  write("node.orca", report(0.7));
  const CtlRun r = run_ctl({"--dir", dir_});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(ends_with(bucket_line(r.out, "BULK"), " 100.0 %")) << r.out;
  EXPECT_TRUE(ends_with(bucket_line(r.out, "BEST_EFFORT"), " 12.5 %")) << r.out;  // middle of its third: 0.5^3
  EXPECT_TRUE(ends_with(bucket_line(r.out, "DEGRADED"), " 0.0 %")) << r.out;
  EXPECT_TRUE(ends_with(bucket_line(r.out, "CRITICAL"), " 0.0 %")) << r.out;
  EXPECT_NE(bucket_line(r.out, "BULK").find("priorities 76-100"), std::string::npos);
  EXPECT_NE(r.out.find("priority 1 is the most important, 100 the least"), std::string::npos) << r.out;
}

TEST_F(CtlShed, NinetyPercentShedsAllButALittleCritical) {
  write("node.orca", report(0.9));
  const CtlRun r = run_ctl({"--dir", dir_});
  ASSERT_EQ(r.status, 0) << r.err;
  // CRITICAL: ((0.9 - 0.8) / (1.5 - 0.8))^3 = 1/343 = 0.29 %.
  EXPECT_TRUE(ends_with(bucket_line(r.out, "CRITICAL"), " 0.3 %")) << r.out;
  for (const char* b : {"DEGRADED", "BEST_EFFORT", "BULK"})
    EXPECT_TRUE(ends_with(bucket_line(r.out, b), " 100.0 %")) << r.out;
  EXPECT_NE(r.out.find("everything at 150.0 %"), std::string::npos) << r.out;
}

TEST_F(CtlShed, OnePriority) {
  write("node.orca", report(0.7));
  CtlRun r = run_ctl({"--dir", dir_, "--priority", "90"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto drops = drop_lines(r.out);
  ASSERT_EQ(drops.size(), 1u) << r.out;
  EXPECT_EQ(drops[0], "  priority 90 (BULK)  100.0 %");

  r = run_ctl({"--dir", dir_, "--priority", "best-effort"});
  ASSERT_EQ(r.status, 0) << r.err;
  drops = drop_lines(r.out);
  ASSERT_EQ(drops.size(), 1u) << r.out;
  EXPECT_EQ(drops[0], "  BEST_EFFORT (priorities 51-75)  12.5 %");

  r = run_ctl({"--dir", dir_, "--priority", "critical"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(drop_lines(r.out), std::vector<std::string>{"  CRITICAL (priorities 1-25)  0.0 %"});
}

TEST_F(CtlShed, BadArgumentsAreUsageErrors) {
  write("node.orca", report(0.7));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--priority", "0"}, {"--priority", "101"}, {"--priority", "urgent"},
        {"--signal", "cpu"}, {"--stale-policy", "maybe"}}) {
    std::vector<std::string> full = {"--dir", dir_};
    full.insert(full.end(), args.begin(), args.end());
    const CtlRun r = run_ctl(full);
    EXPECT_EQ(r.status, 64) << args[0] << " " << args[1] << "\n" << r.out;
    EXPECT_NE(r.err.find(args[0]), std::string::npos) << r.err;
  }
}

TEST_F(CtlShed, ChosenSignalsAndScope) {
  orca::Report r = report(0.5);
  (*r.mutable_utilization())["io.pressure"] = 0.9;  // bounded: all_shed 1.0
  write("endpoint.api.orca", r);
  const CtlRun run = run_ctl({"--dir", dir_ + "/", "--scope", "endpoint.api", "--signal", "cpu_utilization",
                              "--signal", "utilization.io.pressure", "--signal", "utilization.memory.pressure"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out.rfind(dir_ + "/endpoint.api.orca: ", 0), 0u) << run.out;
  EXPECT_NE(run.out.find("utilization.memory.pressure  absent from the report"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("everything at 100.0 %"), std::string::npos) << run.out;
  EXPECT_TRUE(ends_with(bucket_line(run.out, "CRITICAL"), " 12.5 %")) << run.out;  // io.pressure mid [0.8, 1]
}

TEST_F(CtlShed, StaleReportShedsNothing) {
  write("node.orca", report(1.2, unix_now_ms() - 3'600'000, 100));  // an hour old
  CtlRun r = run_ctl({"--dir", dir_});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("STALE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stale policy fail_open"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stale data sheds nothing"), std::string::npos) << r.out;
  const auto drops = drop_lines(r.out);
  ASSERT_EQ(drops.size(), 4u) << r.out;
  for (const auto& l : drops) EXPECT_TRUE(ends_with(l, " 0.0 %")) << r.out;

  // use_last keeps shedding on the last values, but never CRITICAL.
  r = run_ctl({"--dir", dir_, "--stale-policy", "use_last"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("stale policy use_last"), std::string::npos) << r.out;
  EXPECT_TRUE(ends_with(bucket_line(r.out, "CRITICAL"), " 0.0 %")) << r.out;
  EXPECT_TRUE(ends_with(bucket_line(r.out, "BULK"), " 100.0 %")) << r.out;
}

TEST_F(CtlShed, StoppedAgentIsStale) {
  orca::Report r = report(0.9);
  (*r.mutable_named_metrics())[std::string(orca::kStoppedKey)] = 1;
  write("node.orca", r);
  const CtlRun run = run_ctl({"--dir", dir_});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("STALE"), std::string::npos) << run.out;
  for (const auto& l : drop_lines(run.out)) EXPECT_TRUE(ends_with(l, " 0.0 %")) << run.out;
}

TEST_F(CtlShed, MissingFileNamesIt) {
  const CtlRun r = run_ctl({"--dir", dir_, "--scope", "endpoint.nope"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(dir_ + "/endpoint.nope.orca"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
}

TEST_F(CtlShed, CorruptFileNamesIt) {
  auto w = orca::ReportFileWriter::open(dir_);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->write_bytes("node.orca", "\xff\xff\xff").ok());
  const CtlRun r = run_ctl({"--dir", dir_});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(dir_ + "/node.orca"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace headroom
