// SPDX-License-Identifier: Apache-2.0
// `headroomd --once` against fixture trees, decoded by protoc (a protobuf reader
// that knows nothing of headroom) and compared with golden text reports.
//
// The fixtures are copied to a temporary tree; between the agent's two readings
// (one interval of 1 s apart) the files that carry counters are rewritten in
// place with the values of tests/fixtures/golden-after, so every rate in the
// report is known: see tests/fixtures/README.md. Values are compared within 1 %
// because the window is measured on the real clock.
//
// The golden files are written by tests/unit/pipeline_golden_test.cc, which
// runs the same tick in-process at exact clocks (HEADROOM_UPDATE_GOLDEN=1).
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "headroom/orca/report.h"
#include "process.h"
#include "golden_cases.h"
#include "temp_dir.h"

namespace headroom {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using testing::GoldenCase;
using testing::rewrite_in_place;

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, OnceMatchesTheGoldenReport) {
  const auto& c = GetParam();
  testing::TempDir dir;
  const fs::path fixtures = HEADROOM_FIXTURES;
  fs::copy(fixtures / "proc", dir / "proc", fs::copy_options::recursive);
  fs::copy(fixtures / c.sys_tree, dir / "sys", fs::copy_options::recursive);
  const auto config = dir.write("headroom.toml", c.config);

  testing::Process d({HEADROOMD_PATH, "--once", "--config", config, "--proc-root", dir / "proc", "--sys-root",
                      dir / "sys", "--orca-dir", dir / "orca"},
                     dir);
  std::this_thread::sleep_for(300ms);
  rewrite_in_place(fixtures / "golden-after/proc", dir / "proc");
  if (fs::exists(fixtures / "golden-after" / c.sys_tree))
    rewrite_in_place(fixtures / "golden-after" / c.sys_tree, dir / "sys");
  ASSERT_EQ(d.wait(), 0) << d.err();

  // Decode with protoc from the project's .proto: the wire format is the contract.
  testing::Process::Options from_report;
  from_report.stdin_path = dir / "orca/node.orca";
  testing::Process protoc({PROTOC_PATH, "--decode=xds.data.orca.v3.OrcaLoadReport", "-I",
                           std::string(HEADROOM_SOURCE_DIR) + "/orca/proto", "xds/data/orca/v3/orca_load_report.proto"},
                          dir, from_report);
  ASSERT_EQ(protoc.wait(), 0) << protoc.err();

  orca::Report actual;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(protoc.out(), &actual)) << protoc.out();
  auto& nm = *actual.mutable_named_metrics();
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  ASSERT_TRUE(nm.contains(std::string(orca::kTimestampMsKey)));
  EXPECT_LT(std::abs(now_ms - static_cast<int64_t>(nm.at(std::string(orca::kTimestampMsKey)))), 10'000);
  nm.erase(std::string(orca::kTimestampMsKey));  // the one value that cannot be golden

  const std::string golden_path = std::string(HEADROOM_SOURCE_DIR) + "/tests/golden/" + c.name + ".textproto";
  orca::Report golden;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(testing::read_file(golden_path), &golden)) << golden_path;

  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_float_comparison(google::protobuf::util::DefaultFieldComparator::APPROXIMATE);
  comparator.SetDefaultFractionAndMargin(0.01, 1e-9);
  google::protobuf::util::MessageDifferencer differ;
  differ.set_field_comparator(&comparator);
  std::string diff;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(golden, actual)) << "differences from " << golden_path << ":\n" << diff
                                              << "\nactual:\n" << protoc.out();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, ::testing::ValuesIn(testing::kGoldenCases), testing::golden_case_name);

}  // namespace
}  // namespace headroom
