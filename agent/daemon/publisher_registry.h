// SPDX-License-Identifier: Apache-2.0
// Every kind of publisher in one table. Adding one: its class in its own file
// (a Publisher with a static build(const agent::Config&)), its row here, and
// its configuration keys in agent/config.*.
#pragma once

#include <span>
#include <string_view>
#include <variant>

#include "publishers/publisher.h"

namespace headroom::publishers {

struct PublisherKind {
  std::string_view name;
  std::string_view description;
  // The publishers the configuration asks for (none is fine).
  std::variant<Publishers, BuildError> (*build)(const agent::Config& config);
};

std::span<const PublisherKind> publisher_kinds();

// Every kind's publishers, in table order: the order in which they publish
// each tick. The first failure is the answer; nothing built is kept.
std::variant<Publishers, BuildError> build_publishers(const agent::Config& config);

}  // namespace headroom::publishers
