// SPDX-License-Identifier: Apache-2.0
// [oob]: what the out-of-band ORCA stream serves (docs/oob.md).
// The configuration (agent/config/config.h) holds it as it is; the key
// table's setters check these bounds.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace headroom::publishers {

// [oob]: the out-of-band ORCA stream, OpenRcaService/StreamCoreMetrics
// (docs/oob.md). Off while listen is empty.
inline constexpr uint32_t kMaxOobStreams = 100'000;
// [oob] listen: each address is a listener (and a gRPC completion queue).
inline constexpr std::size_t kMaxOobListeners = 16;
inline constexpr std::chrono::nanoseconds kMinOobDefaultInterval = std::chrono::milliseconds(10);
inline constexpr std::chrono::nanoseconds kMaxOobDefaultInterval = std::chrono::hours(1);
struct OobConfig {
  // "127.0.0.1:9447", "[::1]:9447" (an IP literal and a port), "unix:/run/orca/oob.sock"
  std::vector<std::string> listen;
  uint32_t max_streams = 1024;           // 1..kMaxOobStreams
  bool unknown_authority_error = false;  // "error": NOT_FOUND; "node" (false): the node report
  std::chrono::nanoseconds default_interval = std::chrono::seconds(1);  // a request without one
  // An IP literal and a port ("0.0.0.0:9447"): a listener on it inside each
  // endpoint instance's network namespace, serving that instance's report
  // (docs/oob.md, "In each instance's network namespace"). "": none.
  std::string instance_listen;

  bool operator==(const OobConfig&) const = default;
};

// What the [oob] publisher is built from: its section, and what it needs of
// the rest of the configuration.
struct OobOptions {
  OobConfig oob;
  std::chrono::nanoseconds interval{0};  // agent.interval: no stream is sent reports more often
  struct Endpoint {
    std::string name;   // a stream whose authority's host is this name gets its report
    uint16_t port = 0;  // ... and one whose authority's port is this (the first endpoint of the port)
    std::string scope;  // "endpoint.<name>"
  };
  std::vector<Endpoint> endpoints;  // [[endpoint]]s, in file order
  struct Dependency {
    std::string name;   // a stream whose authority's host is "dependency.<name>" gets its report
    std::string scope;  // "dependency.<name>"
  };
  std::vector<Dependency> dependencies;  // [[dependency]]s
  std::string proc_root = "/proc";  // agent.proc_root: where /proc/PID/ns/net is (instance_listen)
};

}  // namespace headroom::publishers
