// SPDX-License-Identifier: Apache-2.0
// Every kind of publisher in one table, and how each is built from the
// configuration. Adding one: its class in publishers/ (a Publisher built
// from options of its own, never from agent::Config), its row here, and its
// configuration keys (agent/config/config_keys.cc).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config.h"
#include "headroom/orca/result.h"
#include "publishers/publisher.h"

namespace headroom::agent {

struct PublisherKind {
  std::string_view name;
  std::string_view description;
  // The publishers the configuration asks for (none is fine). `scopes`: the
  // reports this configuration publishes (report_scopes in pipeline.h).
  Result<publishers::Publishers> (*build)(const Config& config, const std::vector<std::string>& scopes);
};

std::span<const PublisherKind> publisher_kinds();

// Every kind's publishers, in table order: the order in which they publish
// each tick. The first failure is the answer; nothing built is kept. An
// error with an errno (`code`) is about a place that cannot be used (exit
// 73), one without about the configuration (exit 78).
Result<publishers::Publishers> build_publishers(const Config& config, const std::vector<std::string>& scopes);

}  // namespace headroom::agent
