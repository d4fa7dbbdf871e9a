// SPDX-License-Identifier: Apache-2.0
// Where a test finds the source tree and the built programs. The values are
// compiled once, into the generated test_paths.cc (tests/CMakeLists.txt), and
// every test file sees this header through -include: no absolute path is in
// any test's compile flags, so a clone in another folder hits the compiler
// cache for every test file (tests/run-all.sh).
#pragma once

namespace headroom_test_paths {
extern const char* const source_dir;
extern const char* const fixtures;
extern const char* const headroomd;
extern const char* const headroomctl;
extern const char* const protoc;
extern const char* const test_server;
extern const char* const test_load;
extern const char* const shedding_server;  // examples/shedding-server/
extern const char* const c_example;        // examples/c/read_reports.c
}  // namespace headroom_test_paths

#define HEADROOM_SOURCE_DIR (::headroom_test_paths::source_dir)
#define HEADROOM_FIXTURES (::headroom_test_paths::fixtures)
#define HEADROOMD_PATH (::headroom_test_paths::headroomd)
#define HEADROOMCTL_PATH (::headroom_test_paths::headroomctl)
#define PROTOC_PATH (::headroom_test_paths::protoc)
#define HR_TEST_SERVER_PATH (::headroom_test_paths::test_server)
#define HR_TEST_LOAD_PATH (::headroom_test_paths::test_load)
#define SHEDDING_SERVER_PATH (::headroom_test_paths::shedding_server)
#define C_EXAMPLE_PATH (::headroom_test_paths::c_example)
