// SPDX-License-Identifier: Apache-2.0
// `headroomctl header` end to end: a report file in a temporary directory, the
// built binary (HEADROOMCTL_PATH) run on it, its lines parsed back.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "headroom/orca/load_header.h"
#include "headroom/orca/report.h"
#include "process.h"
#include "temp_dir.h"

namespace headroom {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::TempDir;

orca::Report sample() {
  orca::Report r;
  r.set_cpu_utilization(0.62);
  r.set_mem_utilization(0.41);
  r.set_application_utilization(0.62);
  (*r.mutable_utilization())["cpu"] = 0.62;
  (*r.mutable_utilization())["memory"] = 0.41;
  (*r.mutable_utilization())["cpu.pressure"] = 0.03;
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(orca::kTimestampMsKey)] = 1700000000123;
  nm[std::string(orca::kSeqKey)] = 7;
  nm[std::string(orca::kIntervalMsKey)] = 100;
  return r;
}

std::vector<std::string> lines_of(const std::string& out) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (auto nl = out.find('\n'); nl != std::string::npos; nl = out.find('\n', start)) {
    lines.push_back(out.substr(start, nl - start));
    start = nl + 1;
  }
  EXPECT_EQ(start, out.size()) << "output does not end with a newline:\n" << out;
  return lines;
}

// "name: value" -> value, checking the name.
std::string value_of(const std::string& line, std::string_view name) {
  const std::string head = std::string(name) + ": ";
  EXPECT_EQ(line.rfind(head, 0), 0u) << line;
  return line.substr(std::min(head.size(), line.size()));
}

class CtlHeader : public ::testing::Test {
 protected:
  testing::RunResult ctl(std::vector<std::string> args) {
    args.insert(args.begin(), HEADROOMCTL_PATH);
    return testing::run(std::move(args), logs_);
  }
  std::string write_report(const orca::Report& r) { return dir_.write("node.orca", r.SerializeAsString()); }

  TempDir dir_, logs_;
};

TEST_F(CtlHeader, PrintsBothHeadersByDefaultAndTheyDecodeToTheReport) {
  const std::string file = write_report(sample());
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"header", file}, std::vector<std::string>{"header", file, "--text", "--bin"}}) {
    const auto r = ctl(args);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    const auto lines = lines_of(r.out);
    ASSERT_EQ(lines.size(), 2u) << r.out;

    auto text = orca::parse_text_header_value(value_of(lines[0], "endpoint-load-metrics"));
    ASSERT_TRUE(text) << lines[0] << "\n" << text.error().message;
    EXPECT_TRUE(MessageDifferencer::Equals(sample(), *text)) << lines[0];
    EXPECT_EQ(lines[0].rfind("endpoint-load-metrics: TEXT cpu_utilization=0.62,mem_utilization=0.41,", 0), 0u);

    auto bin = orca::parse_bin_header_value(value_of(lines[1], "endpoint-load-metrics-bin"));
    ASSERT_TRUE(bin) << lines[1] << "\n" << bin.error().message;
    EXPECT_TRUE(MessageDifferencer::Equals(sample(), *bin)) << lines[1];
  }
}

TEST_F(CtlHeader, TextOnly) {
  const auto r = ctl({"header", "--text", write_report(sample())});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_EQ(lines[0], "endpoint-load-metrics: " + orca::text_header_value(sample()));
}

TEST_F(CtlHeader, BinOnly) {
  const auto r = ctl({"header", write_report(sample()), "--bin"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_EQ(lines[0], "endpoint-load-metrics-bin: " + orca::bin_header_value(sample()));
}

TEST_F(CtlHeader, MissingFileExitsOneNamingIt) {
  const std::string missing = dir_ / "missing.orca";
  const auto r = ctl({"header", missing});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No such file"), std::string::npos) << r.err;
}

TEST_F(CtlHeader, FileThatIsNotAReportExitsOne) {
  const std::string junk = dir_.write("junk.orca", "\xff\xff\xff this is not protobuf");
  const auto r = ctl({"header", junk});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(junk), std::string::npos) << r.err;
}

TEST_F(CtlHeader, WithoutAFileIsAUsageError) {
  const auto r = ctl({"header"});
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("FILE"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace headroom
