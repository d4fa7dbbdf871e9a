// SPDX-License-Identifier: Apache-2.0
// Building the key table (agent/config/config_keys.h): the rows of each part
// of the file, each beside its setter (config_rows_node.cc for [agent] and
// [node], config_rows_endpoint.cc, config_rows_publishers.cc), the word lists
// the setters parse, and what the rows' texts are made of. A new key is a
// field in Config, one row and, unless the row's lambda does, one setter in
// the same file. Internal to the configuration code.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config.h"
#include "agent/config/config_keys.h"
#include "agent/config/config_messages.h"
#include "agent/config/config_reader.h"

namespace headroom::agent {

// The words a key takes, for its setter, its messages and its row's
// "allowed" text; each indexed by its enum (LogLevel, EbpfMode,
// CompositeMethod, UnsafeDirAction).
inline constexpr std::string_view kLogLevelNames[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
inline constexpr std::string_view kEbpfModes[] = {"auto", "off"};
inline constexpr std::string_view kCompositeNames[] = {"max", "mean"};
inline constexpr std::string_view kUnsafeDirActions[] = {"refuse", "warn"};
inline constexpr std::string_view kUnknownAuthorityChoices[] = {"node", "error"};
inline constexpr std::string_view kEnvoyFileExample = "\"/run/orca/envoy/node.pressure\"";

// The "expected ..." of common types.
inline constexpr const char* kDuration = "a duration string such as \"100ms\"";
inline constexpr const char* kBoolean = "a boolean (true or false)";
inline constexpr const char* kFraction = "a number (a fraction in [0, 1])";

// Pieces of the rows' texts, so that each says a constant's value.
template <class Integer>
std::string n(Integer v) {
  return std::to_string(v);
}
inline std::string toml_bool(bool b) { return b ? "true" : "false"; }
inline std::string toml_duration(std::chrono::nanoseconds d) { return quote(format_duration(d)); }
inline std::string range(std::chrono::nanoseconds lo, std::chrono::nanoseconds hi) {
  return format_duration(lo) + " to " + format_duration(hi);
}
inline std::string quoted(Names names, std::string_view last = ", ") { return quoted_list(names, last); }
template <class T>
std::string toml_array(const std::vector<T>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i > 0 ? ", " : "") + quote(values[i]);
  return out + "]";
}
inline std::string path_limits() {
  return "at most " + n(kMaxPathBytes) + " bytes, each name in it at most " + n(kMaxPathComponentBytes);
}

// The defaults the rows show, from the structs.
struct KeyFacts {
  const Config d{};
  const EnvoyBridgeConfig envoy{};
  const EndpointConfig endpoint{};
  const std::string absolute = "absolute path, " + path_limits();
};

// Each appends its part's rows in table order.
void add_agent_rows(std::vector<KeyRow>& out, const KeyFacts& f);
void add_node_rows(std::vector<KeyRow>& out, const KeyFacts& f);
void add_envoy_rows(std::vector<KeyRow>& out, const KeyFacts& f);
void add_endpoint_rows(std::vector<KeyRow>& out, const KeyFacts& f);
void add_endpoint_shed_rows(std::vector<KeyRow>& out, const KeyFacts& f);
void add_dependency_rows(std::vector<KeyRow>& out, const KeyFacts& f);
void add_prometheus_rows(std::vector<KeyRow>& out, const KeyFacts& f);
void add_oob_rows(std::vector<KeyRow>& out, const KeyFacts& f);

}  // namespace headroom::agent
