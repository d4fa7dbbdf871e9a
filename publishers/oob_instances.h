// SPDX-License-Identifier: Apache-2.0
// [oob] instance_listen (docs/oob.md, "In each instance's network
// namespace"): a gRPC listener inside each endpoint instance's network
// namespace, whose every stream reads that instance's report. Part of the
// [oob] module (oob_module.h); which instances get one is the pure
// instances_to_serve() below.
//
// A socket keeps the network namespace it was made in: a short-lived thread
// enters the instance's namespace through /proc/<server_pid>/ns/net
// (setns, CAP_SYS_ADMIN), has gRPC bind its listening socket there, and
// returns to headroomd's own before it ends. The namespace entered is checked
// against the report's inode first, so a reused pid never opens a listener in
// another pod.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "headroom/orca/result.h"
#include "publishers/failure_latch.h"
#include "publishers/tick.h"

namespace grpc {
class Server;
}
namespace headroom::orca {
class StreamHub;
}

namespace headroom::publishers {

// An instance that should have a listener this tick.
struct InstanceToServe {
  std::string scope;     // "endpoint.<name>@<instance>"
  std::string instance;  // its id
  uint32_t netns = 0;    // its network namespace's inode
  int32_t server_pid = 0;
  bool operator==(const InstanceToServe&) const = default;
};

// The tick's instance reports that are serving, name a server process and a
// namespace, and are not in headroomd's own namespace (`own_netns`: the node
// listeners serve there), in the tick's order.
inline std::vector<InstanceToServe> instances_to_serve(const Tick& tick, uint32_t own_netns) {
  std::vector<InstanceToServe> out;
  if (tick.meta.stopped) return out;
  for (const ScopeReport& r : tick.reports) {
    if (r.instance.empty() || !r.serving || r.server_pid <= 0 || r.netns == 0 || r.netns == own_netns) continue;
    out.push_back({r.scope, r.instance, r.netns, r.server_pid});
  }
  return out;
}

// The listeners of one instance_listen address, one per instance.
class OobInstanceListeners {
 public:
  // How long a listener that could not be opened waits before it is tried
  // again (its server process and namespace unchanged).
  static constexpr int64_t kRetryMs = 30'000;

  OobInstanceListeners(std::shared_ptr<orca::StreamHub> streams, std::string address, std::string proc_root);
  ~OobInstanceListeners();  // closes every listener: their streams end with CANCELLED
  OobInstanceListeners(const OobInstanceListeners&) = delete;
  OobInstanceListeners& operator=(const OobInstanceListeners&) = delete;

  // Opens a listener for each instance to serve that has none, closes those
  // of instances that left the tick or stopped serving. Once per tick (a
  // second call with the same tick changes nothing). Never fails: a listener
  // that cannot be opened is logged once per instance.
  void sync(const Tick& tick);

  const std::string& address() const { return address_; }
  // The scopes with an open listener, and the TCP port each is bound to.
  std::map<std::string, int> open() const;

 private:
  struct Listener;
  struct Failure {
    uint32_t netns = 0;
    int32_t pid = 0;
    int64_t retry_ms = 0;
    FailureLatch latch;
  };
  // Opens `want`'s listener or says why not.
  Result<std::unique_ptr<Listener>> open_in(const InstanceToServe& want);

  std::shared_ptr<orca::StreamHub> streams_;
  std::string address_;
  std::string proc_root_;
  int own_netns_fd_ = -1;  // headroomd's network namespace, to return to
  uint32_t own_netns_ = 0;

  mutable std::mutex mutex_;
  bool have_seq_ = false;
  uint64_t last_seq_ = 0;
  std::map<std::string, std::unique_ptr<Listener>> listeners_;  // by scope
  std::map<std::string, Failure> failures_;                     // by scope
};

}  // namespace headroom::publishers
