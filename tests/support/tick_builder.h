// SPDX-License-Identifier: Apache-2.0
// Hand-made ticks for the publishers' tests: the reports a pipeline would
// build from a node sample and endpoint signals, serialized, as
// Agent::prepare makes them.
#pragma once

#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/endpoint_signals.h"
#include "agent/signals/report_builder.h"
#include "headroom/orca/names.h"
#include "publishers/tick.h"

namespace headroom::testing {

struct EndpointInput {
  const agent::EndpointConfig* config = nullptr;
  const agent::EndpointSignals* signals = nullptr;  // null: latency signals unavailable
  std::optional<publishers::EndpointCounts> counts{};  // what the kernel counted this tick
};

inline void fill_tick(publishers::Tick& tick, const agent::NodeSample& node, const agent::Config& config,
                      const std::vector<EndpointInput>& endpoints) {
  agent::NodeValues values;
  agent::node_values(node, config, values);
  tick.reports.resize(1 + endpoints.size());
  tick.reports[0].scope = std::string(orca::kNodeScope);
  agent::build_node_report_into(values, node, tick.meta, tick.reports[0].report);
  tick.endpoints.clear();
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    const auto& e = endpoints[i];
    auto& r = tick.reports[1 + i];
    r.scope = orca::endpoint_scope(e.config->name);
    agent::build_endpoint_report_into(*e.config, e.signals, tick.meta, r.report, agent::node_cpu(values));
    auto& t = tick.endpoints.emplace_back();
    t.name = e.config->name;
    t.report = 1 + i;
    t.target_seconds = std::chrono::duration<double>(e.config->target).count();
    t.max_seconds = std::chrono::duration<double>(e.config->max).count();
    t.measured = e.signals != nullptr;
    t.counted = e.counts.has_value();
    if (e.counts) t.counts = *e.counts;
  }
  for (auto& r : tick.reports) r.report.SerializeToString(&r.bytes);
}

}  // namespace headroom::testing
