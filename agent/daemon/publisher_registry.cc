// SPDX-License-Identifier: Apache-2.0
#include "agent/daemon/publisher_registry.h"

#include "publishers/envoy_bridge.h"
#include "publishers/oob_module.h"
#include "publishers/orca_dir_publisher.h"
#include "publishers/prometheus_publisher.h"

namespace headroom::publishers {
namespace {

// node.orca first: the bridges follow it, whether or not it could be written.
constexpr PublisherKind kPublishers[] = {
    {"orca_dir", "node.orca and endpoint.<name>.orca in agent.orca_dir", &OrcaReportsPublisher::build},
    {"envoy", "one [[envoy]] entry's value, as the file Envoy's injected resource monitor reads",
     &EnvoyPublisher::build},
    {"oob", "[oob]: OpenRcaService/StreamCoreMetrics streams on each listen address", &build_oob_publishers},
    // Last: its figures include the failures of those before it on the same tick.
    {"prometheus", "[prometheus]: GET /metrics on listen, and node_exporter's textfile",
     &PrometheusListener::build},
};

}  // namespace

std::span<const PublisherKind> publisher_kinds() { return kPublishers; }

std::variant<Publishers, BuildError> build_publishers(const agent::Config& config) {
  Publishers all;
  for (const auto& kind : kPublishers) {
    auto built = kind.build(config);
    if (auto* e = std::get_if<BuildError>(&built)) return std::move(*e);
    for (auto& p : std::get<Publishers>(built)) all.push_back(std::move(p));
  }
  return all;
}

}  // namespace headroom::publishers
