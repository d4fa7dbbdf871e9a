// SPDX-License-Identifier: Apache-2.0
// hr-test-server (tests/tools/) for the C++ integration tests: started on an
// ephemeral port, stopped with its Process.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "process.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace headroom::testing {

struct TestServer {
  std::unique_ptr<Process> proc;
  uint16_t port = 0;
};

// hr-test-server ARGS on 127.0.0.1 and an ephemeral port, once it printed
// "port=N". A server that printed no port fails the test (the port stays 0).
inline TestServer start_test_server(const TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), {HR_TEST_SERVER_PATH, "--port", "0"});
  TestServer s;
  s.proc = std::make_unique<Process>(args, dir);
  eventually([&] { return s.proc->out().find('\n') != std::string::npos || !s.proc->running(); });
  const auto out = s.proc->out();
  if (out.starts_with("port=")) s.port = static_cast<uint16_t>(std::atoi(out.c_str() + 5));
  EXPECT_NE(s.port, 0) << "hr-test-server printed no port: " << out << s.proc->err();
  return s;
}

// Sends SIGCONT at scope exit, so a failing assertion never leaves a stopped server.
struct ContinueAtExit {
  pid_t pid;
  ~ContinueAtExit() { ::kill(pid, SIGCONT); }
};

}  // namespace headroom::testing
