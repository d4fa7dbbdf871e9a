// SPDX-License-Identifier: Apache-2.0
// [[envoy]]: what one Envoy bridge publishes (docs/envoy.md).
// The configuration (agent/config/config.h) holds it as it is; the key
// table's setters check these bounds.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "headroom/orca/names.h"

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

// The values an entry can name besides utilization.<signal>, with the node
// signal each needs enabled ("" = none in particular). The bridge parses
// them (publishers/envoy_bridge.cc); the configuration checks and documents
// them from this list.
struct EnvoyValueName {
  std::string_view name;
  std::string_view needs_signal;
};
inline constexpr EnvoyValueName kEnvoyValueNames[] = {
    {"application_utilization", ""},
    {"cpu_utilization", orca::kSignalCpu},
    {"mem_utilization", orca::kSignalMemory},
};
// utilization.<signal>: one entry of the report's utilization map.
inline constexpr std::string_view kEnvoyUtilizationPrefix = "utilization.";

// [[envoy]] entries: each rewrites a file every interval.
inline constexpr std::size_t kMaxEnvoyBridges = 64;

}  // namespace headroom::publishers
