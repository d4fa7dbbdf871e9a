// SPDX-License-Identifier: Apache-2.0
// The shedding server's dependency (server.cc, --dependency): requests under
// --dependency-path make a worker call another HTTP/1.1 service and wait for
// its answer, as a service that reads from a database or a backend does. A
// latent dependency then holds the workers, and every path of the server
// waits behind it; the gate (--gate, headroom/orca/dependency_gate.h) fails
// those calls fast on headroom's report of the dependency instead.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace shedding_server {

// "10.0.0.5:6379" -> the address; nullopt when it is not an IPv4 host:port.
std::optional<sockaddr_in> parse_ipv4_endpoint(std::string_view text);

// The answer's status once its head and the body its Content-Length gives
// have arrived; nullopt while incomplete; -1 for a malformed answer.
// `consumed` is set to the bytes the answer takes.
std::optional<int> parse_answer(std::string_view buf, std::size_t& consumed);

enum class CallResult { ok, error_answer, failed, timed_out };
std::string_view call_result_name(CallResult r);

// One worker's keep-alive connection to the dependency. Blocking: a call
// waits for the answer, at most `timeout`, as a worker with a client library
// would. Not thread-safe: one per worker.
class DependencyClient {
 public:
  DependencyClient(sockaddr_in to, std::chrono::milliseconds timeout) : to_(to), timeout_(timeout) {}
  ~DependencyClient();
  DependencyClient(const DependencyClient&) = delete;
  DependencyClient& operator=(const DependencyClient&) = delete;

  // GET `path`, with x-priority: orca::outgoing_priority() (the caller's
  // PriorityScope, headroom/orca/priority.h); a failure or a timeout closes
  // the connection (the next call connects again).
  CallResult call(std::string_view path);

 private:
  bool connect_once();
  void drop();
  sockaddr_in to_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  std::string in_;
};

}  // namespace shedding_server
