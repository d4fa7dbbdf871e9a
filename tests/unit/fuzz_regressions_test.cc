// SPDX-License-Identifier: Apache-2.0
// Inputs the fuzz targets (tests/fuzz/, docs/fuzzing.md) once stopped on, fed
// to the same entry points in the normal suite, asserting the right answer.
// Each input is the file in tests/fuzz/regressions/<target>/ that
// tests/fuzz/run.sh replays too.
#include <cerrno>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "headroom/orca/headroom_orca.h"
#include "headroom/orca/report.h"
#include "temp_dir.h"

namespace {

using headroom::testing::TempDir;

std::string regression(const std::string& target, const std::string& name) {
  const std::string path = std::string(HEADROOM_SOURCE_DIR) + "/tests/fuzz/regressions/" + target + "/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct ReaderDeleter {
  void operator()(headroom_reader* r) const { headroom_reader_close(r); }
};

// fuzz_c_reader: a report whose utilization map has a key with a control
// byte ("no such key\x01", the very key the target probed as absent). The C
// ABI must serve that key's own value and tell it apart from its prefix.
TEST(FuzzRegressions, CReaderServesAKeyWithAControlByte) {
  const std::string input = regression("fuzz_c_reader", "report-with-the-absent-probe-key");
  ASSERT_GT(input.size(), 1u);
  ASSERT_EQ(input[0], '\0');  // the target's selector: scope "node", default staleness
  const std::string bytes = input.substr(1);
  auto want = headroom::orca::parse_report(bytes);
  ASSERT_TRUE(want) << want.error().message;

  TempDir tmp;
  tmp.write("node.orca", bytes);
  char err[256];
  std::unique_ptr<headroom_reader, ReaderDeleter> reader(headroom_reader_open(tmp.path().c_str(), 0, err, sizeof err));
  ASSERT_NE(reader, nullptr) << err;

  headroom_report out{};
  out.struct_size = sizeof out;
  const int rc = headroom_reader_get(reader.get(), "node", &out, err, sizeof err);
  ASSERT_TRUE(rc == 0 || rc == 1) << rc << ": " << err;
  EXPECT_EQ(out.cpu_utilization, want->cpu_utilization());
  EXPECT_EQ(out.seq, 1u);
  EXPECT_EQ(out.interval_ms, 100);

  double v = -1;
  EXPECT_GE(headroom_reader_utilization(reader.get(), "node", "no such key\x01", &v), 0);
  EXPECT_EQ(v, want->utilization().at("no such key\x01"));
  EXPECT_EQ(headroom_reader_utilization(reader.get(), "node", "no such key", &v), -ENOENT);
  EXPECT_GE(headroom_reader_utilization(reader.get(), "node", "cpu", &v), 0);
  EXPECT_EQ(v, 0.95);
}

}  // namespace
