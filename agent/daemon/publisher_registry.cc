// SPDX-License-Identifier: Apache-2.0
#include "agent/daemon/publisher_registry.h"

#include "headroom/orca/names.h"
#include "publishers/envoy_bridge.h"
#include "publishers/oob_module.h"
#include "publishers/orca_dir_publisher.h"
#include "publishers/prometheus_publisher.h"

namespace headroom::agent {
namespace {

using publishers::Publishers;

Result<Publishers> orca_dir(const Config& c, const std::vector<std::string>& scopes) {
  return publishers::OrcaReportsPublisher::build(
      {c.orca_dir,
       publishers::OrcaDirOptions{orca::WriterOptions{0644, c.fsync}, c.unsafe_orca_dir == UnsafeDirAction::refuse},
       scopes});
}

Result<Publishers> envoy(const Config& c, const std::vector<std::string>&) {
  return publishers::EnvoyPublisher::build(c.envoy, c.fsync);
}

Result<Publishers> oob(const Config& c, const std::vector<std::string>&) {
  publishers::OobOptions o{c.oob, c.interval, {}, {}, c.proc_root};
  for (const auto& e : c.endpoints) o.endpoints.push_back({e.name, e.port, orca::endpoint_scope(e.name)});
  for (const auto& d : c.dependencies) o.dependencies.push_back({d.name, orca::dependency_scope(d.name)});
  return publishers::build_oob_publishers(o);
}

Result<Publishers> prometheus(const Config& c, const std::vector<std::string>&) {
  return publishers::PrometheusListener::build(c.prometheus);
}

// node.orca first: the bridges follow it, whether or not it could be written.
constexpr PublisherKind kPublishers[] = {
    {"orca_dir", "node.orca and endpoint.<name>.orca in agent.orca_dir", &orca_dir},
    {"envoy", "one [[envoy]] entry's value, as the file Envoy's injected resource monitor reads", &envoy},
    {"oob", "[oob]: OpenRcaService/StreamCoreMetrics streams on each listen address", &oob},
    // Last: its figures include the failures of those before it on the same tick.
    {"prometheus", "[prometheus]: GET /metrics on listen, and node_exporter's textfile", &prometheus},
};

}  // namespace

std::span<const PublisherKind> publisher_kinds() { return kPublishers; }

Result<Publishers> build_publishers(const Config& config, const std::vector<std::string>& scopes) {
  Publishers all;
  for (const auto& kind : kPublishers) {
    auto built = kind.build(config, scopes);
    if (!built) return std::move(built).error();
    for (auto& p : built.value()) all.push_back(std::move(p));
  }
  return all;
}

}  // namespace headroom::agent
