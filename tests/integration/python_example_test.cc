// SPDX-License-Identifier: Apache-2.0
// examples/python/read_reports.py against a live headroomd: the code is
// generated with protoc into a temporary directory, the real agent publishes,
// and Debian's /usr/bin/python3 with python3-protobuf decodes its reports.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "process.h"
#include "temp_dir.h"

namespace headroom {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using testing::Process;
using testing::TempDir;

constexpr const char* kPython = "/usr/bin/python3";
const std::string kScript = std::string(HEADROOM_SOURCE_DIR) + "/examples/python/read_reports.py";

class PythonExample : public ::testing::Test {
 protected:
  void SetUp() override {
    // The example's only dependency: its absence is a broken build machine,
    // not a reason to skip.
    ASSERT_EQ(::access(kPython, X_OK), 0) << kPython << " is missing: install python3 (Debian package python3)";
    const auto probe = testing::run({kPython, "-c", "import google.protobuf"}, logs_);
    ASSERT_EQ(probe.code, 0) << kPython << " cannot import google.protobuf: install python3-protobuf "
                             << "(apt-get install python3-protobuf; packaging/install-build-deps.sh does)\n"
                             << probe.err;

    std::filesystem::create_directories(gen_);
    const std::string proto_dir = std::string(HEADROOM_SOURCE_DIR) + "/orca/proto";
    const auto gen = testing::run({PROTOC_PATH, "--python_out=" + gen_, "-I", proto_dir,
                                   proto_dir + "/xds/data/orca/v3/orca_load_report.proto"},
                                  logs_);
    ASSERT_EQ(gen.code, 0) << "protoc --python_out failed:\n" << gen.err;
  }

  testing::RunResult read_reports(std::vector<std::string> extra) {
    std::vector<std::string> argv = {kPython, kScript, "--dir", orca_, "--gen", gen_};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return testing::run(std::move(argv), logs_);
  }

  TempDir dir_{testing::tmpfs_base()}, logs_;
  const std::string gen_ = dir_ / "gen";
  const std::string orca_ = dir_ / "orca";
};

TEST_F(PythonExample, ReadsTheReportsOfALiveHeadroomd) {
  const auto config = dir_.write("headroom.toml", "[agent]\ninterval = \"100ms\"\n");
  Process d({HEADROOMD_PATH, "--config", config, "--orca-dir", orca_}, logs_);
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(orca_ + "/node.orca"); })) << d.err();

  const auto r = read_reports({"--once"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("scope node  (" + orca_ + "/node.orca)"), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n  cpu_utilization +[0-9]+\.[0-9]{4}\n)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(utilization +.*cpu=[0-9.]+.*memory=[0-9.]+)"))) << r.out;
  EXPECT_NE(r.out.find("status                   fresh (age "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("INVALID"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");

  // --count: that many rounds, a blank line between them.
  const auto two = read_reports({"--count", "2", "--interval", "0.1"});
  EXPECT_EQ(two.code, 0) << two.err;
  EXPECT_NE(two.out.find("\n\nscope node"), std::string::npos) << two.out;

  // A clean stop leaves a final report marked stopped: stale at once.
  ASSERT_TRUE(d.running()) << d.err();
  d.signal(SIGTERM);
  ASSERT_EQ(d.wait(10s), 0) << d.err();
  const auto after = read_reports({"--once"});
  EXPECT_EQ(after.code, 0) << after.err;
  EXPECT_NE(after.out.find("STALE: headroomd stopped"), std::string::npos) << after.out;
}

TEST_F(PythonExample, SaysHowToGenerateTheCodeWhenItIsMissing) {
  std::filesystem::create_directories(orca_);
  const auto r = testing::run({kPython, kScript, "--dir", orca_, "--gen", dir_ / "nothing-here", "--once"}, logs_);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("protoc --python_out="), std::string::npos) << r.err;
}

TEST_F(PythonExample, EmptyDirectoryExitsOne) {
  std::filesystem::create_directories(orca_);
  const auto r = read_reports({"--once"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no *.orca files"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace headroom
