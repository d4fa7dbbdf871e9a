// SPDX-License-Identifier: Apache-2.0
// The key table: the sections, and the rows of each (config_rows_*.cc, each
// row beside its setter) in table order. Each row's allowed text is built from
// the constants its setter checks against (agent/config/config.h,
// config_checks.h, the publishers' *_config.h), and its default from the
// struct's default, so a bound or a default is written once.
#include "agent/config/config_keys.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>

#include "agent/config/config_checks.h"
#include "agent/config/config_messages.h"
#include "agent/config/config_rows.h"
#include "headroom/orca/shedder_config.h"

namespace headroom::agent {

namespace {

// Row order is the order of "valid keys are ..." lists.
constexpr SectionRow kSections[] = {
    {"agent", false, "", 0, ""},
    {"node", false, "", 0, ""},
    {"envoy", true, "file", kMaxEnvoyBridges, ""},
    {"endpoint", true, "endpoint", kMaxEndpoints, ""},
    {"endpoint.shed", true, "signal", orca::kMaxShedEntries, "endpoint"},
    {"dependency", true, "dependency", kMaxDependencies, ""},
    {"prometheus", false, "", 0, ""},
    {"oob", false, "", 0, ""},
};

std::vector<KeyRow> build_rows() {
  const KeyFacts facts;
  std::vector<KeyRow> out;
  add_agent_rows(out, facts);
  add_node_rows(out, facts);
  add_envoy_rows(out, facts);
  add_endpoint_rows(out, facts);
  add_endpoint_shed_rows(out, facts);
  add_dependency_rows(out, facts);
  add_prometheus_rows(out, facts);
  add_oob_rows(out, facts);
  return out;
}

const std::vector<KeyRow>& rows() {
  static const std::vector<KeyRow> table = build_rows();
  return table;
}

}  // namespace

std::span<const KeyRow> config_key_rows() { return rows(); }
std::span<const SectionRow> config_sections() { return kSections; }

const SectionRow* find_section(std::string_view name) {
  for (const SectionRow& s : kSections)
    if (s.name == name) return &s;
  return nullptr;
}

const KeyRow* find_key(std::string_view section, std::string_view key) {
  for (const KeyRow& r : rows())
    if (r.section == section && r.key == key) return &r;
  return nullptr;
}

std::vector<std::string_view> keys_in(std::string_view section) {
  std::vector<std::string_view> out;
  if (section.empty()) {
    for (const SectionRow& s : kSections)
      if (s.within.empty()) out.push_back(s.name);
  } else if (section == "node.weights") {
    out.assign(std::begin(kNodeSignals), std::end(kNodeSignals));
  } else {
    for (const KeyRow& r : rows())
      if (r.section == section) out.push_back(r.key);
  }
  return out;
}

std::vector<std::string_view> table_keys_in(std::string_view section) {
  std::vector<std::string_view> out;
  if (section.empty()) {
    for (const SectionRow& s : kSections)
      if (!s.repeated) out.push_back(s.name);
  } else {
    for (const KeyRow& r : rows())
      if (r.section == section && r.type == KeyType::table) out.push_back(r.key);
  }
  return out;
}

std::span<const std::string_view> plain_tables() {
  struct Tables {
    std::vector<std::string> storage;
    std::vector<std::string_view> names;
  };
  static const Tables tables = [] {
    Tables t;
    for (const SectionRow& s : kSections) {
      if (s.repeated) continue;
      t.storage.emplace_back(s.name);
      for (std::string_view k : table_keys_in(s.name)) t.storage.push_back(std::string(s.name) + "." + std::string(k));
    }
    t.names.assign(t.storage.begin(), t.storage.end());
    return t;
  }();
  return tables.names;
}

// ---------------------------------------------------------------------------
// Log levels

const char* log_level_name(LogLevel level) {
  const auto i = static_cast<std::size_t>(level);
  return i < std::size(kLogLevelNames) ? kLogLevelNames[i].data() : "info";
}

std::optional<LogLevel> parse_log_level(std::string_view text) {
  for (std::size_t i = 0; i < std::size(kLogLevelNames); ++i)
    if (kLogLevelNames[i] == text) return static_cast<LogLevel>(i);
  return std::nullopt;
}

}  // namespace headroom::agent
