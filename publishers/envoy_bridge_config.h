// SPDX-License-Identifier: Apache-2.0
// [[envoy]]: what one Envoy bridge publishes (docs/envoy.md).
// The configuration (agent/config/config.h) holds it as it is; the key
// table's setters check these bounds.
#pragma once

#include <cstddef>
#include <string>

namespace headroom::publishers {

// One [[envoy]] entry: a number of a report, written as the file Envoy's
// injected resource monitor reads (docs/envoy.md).
struct EnvoyBridgeConfig {
  std::string scope = "node";                      // which report; only "node" today
  std::string value = "application_utilization";  // or cpu_utilization, mem_utilization, utilization.<signal>
  std::string file;                                // absolute, lexically normal; required
  double neutral = 0.0;                            // in [0, 1]; written on stop and for absent values

  bool operator==(const EnvoyBridgeConfig&) const = default;
};

// [[envoy]] entries: each rewrites a file every interval.
inline constexpr std::size_t kMaxEnvoyBridges = 64;

}  // namespace headroom::publishers
