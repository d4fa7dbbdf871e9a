// SPDX-License-Identifier: Apache-2.0
// [prometheus]: where the Prometheus publisher serves and writes (docs/metrics.md).
// The configuration (agent/config/config.h) holds it as it is; the key
// table's setters check these bounds.
#pragma once

#include <chrono>
#include <string>

namespace headroom::publishers {

// [prometheus]: the reports' figures for Prometheus (docs/metrics.md). Both
// off by default.
inline constexpr std::chrono::nanoseconds kMinTextfileInterval = std::chrono::milliseconds(100);
inline constexpr std::chrono::nanoseconds kMaxTextfileInterval = std::chrono::hours(1);
struct PrometheusConfig {
  std::string listen;    // "" off; "127.0.0.1:9446", "[::1]:9446": an IP literal and a port
  std::string textfile;  // "" off; an absolute path ending in .prom (node_exporter's textfile collector)
  std::chrono::nanoseconds textfile_interval = std::chrono::seconds(15);

  bool operator==(const PrometheusConfig&) const = default;
};

}  // namespace headroom::publishers
