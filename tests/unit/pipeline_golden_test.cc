// SPDX-License-Identifier: Apache-2.0
// The whole tick in-process, at clocks the test sets: the pipeline on the
// fixture trees, a baseline at t0, the counters of tests/fixtures/golden-after
// written in place, a tick at exactly t0 + 1 s. node.orca must then equal
// the golden report field for field, its timestamp included: no value
// depends on the machine's clock. (tests/integration/golden_test.cc runs the
// real `headroomd --once` on the same trees, on the real clock, within 1 %.)
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "agent/daemon/pipeline.h"
#include "headroom/orca/report.h"
#include "golden_cases.h"
#include "temp_dir.h"

namespace headroom::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using testing::GoldenCase;
using testing::rewrite_in_place;

class PipelineGolden : public ::testing::TestWithParam<GoldenCase> {
 protected:
  void SetUp() override {
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>()));
  }
  void TearDown() override { spdlog::set_default_logger(previous_); }
  std::shared_ptr<spdlog::logger> previous_;
};

TEST_P(PipelineGolden, ATickAtAnExactTimeGivesTheGoldenReportExactly) {
  const auto& c = GetParam();
  testing::TempDir dir;
  const fs::path fixtures = HEADROOM_FIXTURES;
  fs::copy(fixtures / "proc", dir / "proc", fs::copy_options::recursive);
  fs::copy(fixtures / c.sys_tree, dir / "sys", fs::copy_options::recursive);
  auto parsed = parse_config(c.config, "golden.toml");
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  Config config = std::move(parsed).value();
  config.proc_root = dir / "proc";
  config.sys_root = dir / "sys";
  config.orca_dir = dir / "orca";
  auto built = build_pipeline(config);
  ASSERT_TRUE(built) << built.error().message;
  Agent agent(std::move(built.value()));

  const TickTime t0{5'000'000'000, 1'700'000'000'000};
  EXPECT_FALSE(agent.tick(t0));  // the baseline
  rewrite_in_place(fixtures / "golden-after/proc", dir / "proc");
  if (fs::exists(fixtures / "golden-after" / c.sys_tree))
    rewrite_in_place(fixtures / "golden-after" / c.sys_tree, dir / "sys");
  ASSERT_TRUE(agent.tick({t0.monotonic_ns + 1'000'000'000, t0.unix_ms + 1000}));

  auto actual = orca::read_report_file(dir / "orca/node.orca");
  ASSERT_TRUE(actual) << actual.error().message;
  EXPECT_EQ(testing::read_file(dir / "orca/node.orca"), agent.last_tick().node().bytes);
  auto& nm = *actual->mutable_named_metrics();
  ASSERT_TRUE(nm.contains(std::string(orca::kTimestampMsKey)));
  EXPECT_EQ(nm.at(std::string(orca::kTimestampMsKey)), 1'700'000'001'000.0) << "the injected Unix time";
  nm.erase(std::string(orca::kTimestampMsKey));

  const std::string golden_path = std::string(HEADROOM_SOURCE_DIR) + "/tests/golden/" + c.name + ".textproto";
  if (std::getenv("HEADROOM_UPDATE_GOLDEN") != nullptr) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(*actual, &text);
    std::ofstream(golden_path) << "# node.orca of one tick at an exact time on tests/fixtures (" << c.name
                               << "); regenerate with HEADROOM_UPDATE_GOLDEN=1 build/tests/pipeline_golden_test\n"
                               << text;
  }
  orca::Report golden;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(testing::read_file(golden_path), &golden)) << golden_path;
  google::protobuf::util::MessageDifferencer differ;  // exact: no tolerance on any value
  std::string diff;
  differ.ReportDifferencesToString(&diff);
  std::string text;
  google::protobuf::TextFormat::PrintToString(*actual, &text);
  EXPECT_TRUE(differ.Compare(golden, *actual)) << "differences from " << golden_path << ":\n" << diff
                                                << "\nactual:\n" << text;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PipelineGolden, ::testing::ValuesIn(testing::kGoldenCases),
                         testing::golden_case_name);

}  // namespace
}  // namespace headroom::agent
