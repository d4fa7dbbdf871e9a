// SPDX-License-Identifier: Apache-2.0
// The golden reports' cases, shared by the in-process tick at exact clocks
// (tests/unit/pipeline_golden_test.cc) and `headroomd --once` on the real
// clock (tests/integration/golden_test.cc): the fixture trees, the
// configuration, and the counters rewritten between the two readings.
#pragma once

#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace headroom::testing {

struct GoldenCase {
  const char* name;      // tests/golden/<name>.textproto
  const char* sys_tree;  // fixture sys root
  const char* config;    // headroom.toml
};
inline void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

inline const GoldenCase kGoldenCases[] = {
    {"node-host", "sys-cgroup2", "[agent]\ninterval = \"1s\"\nsmoothing = \"0s\"\n"},
    {"node-cgroup2", "sys-cgroup2",
     "[agent]\ninterval = \"1s\"\nsmoothing = \"0s\"\n[node]\ncgroup = \"system.slice/api.service\"\n"},
    {"node-cgroup1", "sys-cgroup1",
     "[agent]\ninterval = \"1s\"\nsmoothing = \"0s\"\n[node]\ncgroup = \"system.slice/api.service\"\n"},
    {"node-mean-weights", "sys-cgroup2",
     "[agent]\ninterval = \"1s\"\nsmoothing = \"0s\"\n[node]\nsignals = [\"cpu\", \"memory\", "
     "\"io.pressure\"]\ncomposite = \"mean\"\n[node.weights]\ncpu = 0.5\n"},
};

inline std::string golden_case_name(const ::testing::TestParamInfo<GoldenCase>& param_info) {
  std::string n = param_info.param.name;
  for (auto& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

// Overwrites every file of `after` into the same relative path under `root`,
// in place (same inode), as the kernel's files change under an open descriptor.
inline void rewrite_in_place(const std::filesystem::path& after, const std::filesystem::path& root) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(after)) {
    if (!e.is_regular_file()) continue;
    const std::filesystem::path target = root / std::filesystem::relative(e.path(), after);
    ASSERT_TRUE(std::filesystem::exists(target)) << target;
    std::ofstream(target, std::ios::binary | std::ios::trunc) << read_file(e.path().string());
  }
}

}  // namespace headroom::testing
