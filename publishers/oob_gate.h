// SPDX-License-Identifier: Apache-2.0
// The [oob] listen TCP listeners' own accept(): a connection reaches gRPC
// only once its first 24 bytes are the HTTP/2 client preface. Until then it
// waits here, in one epoll with no memory of its own beyond its socket, at
// most kPrefaceDeadline, at most cap() of them (the oldest waiting one is
// closed for a new one); bytes that are not the preface close it at once. A
// flood of idle, trickling or garbage connections so never reaches the
// server's threads and memory, nor delays a new stream
// (docs/oob.md, "Under a connection flood").
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>

#include "headroom/orca/result.h"
#include "publishers/connection_deadlines.h"

namespace grpc {
class Server;
}

namespace headroom::publishers {

inline constexpr std::chrono::milliseconds kPrefaceDeadline{5000};
inline constexpr std::size_t kMaxPendingOobConnections = 1024;
// Connections handed to gRPC: over this many, the oldest one that has not
// started a call (fewer than kCallBytes received: the preface, SETTINGS and
// their acknowledgements only) is shut down for the new one.
inline constexpr std::size_t kMaxOobConnections = 2048;
inline constexpr uint64_t kCallBytes = 128;
// A connection with no call is closed after this long (GRPC_ARG_MAX_CONNECTION_IDLE_MS).
inline constexpr std::chrono::milliseconds kOobIdleConnection{15000};

class OobGate {
 public:
  // Listens on `address` ("127.0.0.1:9447", "[::1]:9447") and hands
  // `server` (started, with no ports of its own) each connection that sent
  // the preface. `port`: the bound port.
  static Result<std::unique_ptr<OobGate>> start(const std::string& address, grpc::Server* server, int& port);
  ~OobGate();  // stops accepting; the connections still waiting are closed
  OobGate(const OobGate&) = delete;
  OobGate& operator=(const OobGate&) = delete;

 private:
  OobGate(int listen_fd, int epoll_fd, int wake_fd, grpc::Server* server, std::size_t cap);
  void run();
  void accept_all();
  void examine(int fd, uint32_t events);
  void drop(int fd);
  void handed(int fd);
  void forget_handed(int keep);

  // A connection handed to gRPC is followed through a duplicate of its
  // descriptor (`keep`), the gate's own: shutting it down always reaches
  // that connection, whatever gRPC has closed meanwhile. gRPC shuts a
  // socket down before closing it, so the duplicate hears the end and is
  // closed then. `serial` tells an entry from a later one on the same number.
  struct Handed {
    int keep;
    uint64_t serial;
  };

  int listen_fd_, epoll_fd_, wake_fd_;
  grpc::Server* server_;
  ConnectionDeadlines pending_;  // ids are the descriptors: they are this thread's until handed over
  std::deque<Handed> handed_;                     // oldest first; entries of forgotten ones are skipped
  std::unordered_map<int, uint64_t> live_handed_;  // keep -> serial, while followed
  uint64_t next_serial_ = 0;
  std::size_t max_handed_;
  bool accepting_ = true;
  ConnectionDeadlines::Clock::time_point resume_accept_{};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace headroom::publishers
