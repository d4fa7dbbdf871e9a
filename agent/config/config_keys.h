// SPDX-License-Identifier: Apache-2.0
// Every key of headroom.toml, one row each: where it lives, its type, what it
// allows, its default, one line of documentation, and how it is stored into
// the Config. The reader (agent/config/config.cc) walks the file against this table:
// unknown keys, type errors, ranges and missing required keys all come from
// it, and tests/unit/config_keys_test.cc holds the documentation and the
// shipped example to it.
#pragma once

#include <span>
#include <string_view>
#include <vector>

namespace headroom::agent {

// The value being read, and where it goes (defined in agent/config/config_reader.h).
struct KeyValue;

// What the value must be in the file; decides the type check made before
// the row's setter runs.
enum class KeyType {
  duration,  // a string such as "100ms"
  string,
  boolean,
  integer,
  number,    // integer or floating-point
  array,
  table,
  any,       // several types are accepted; the setter checks
};

struct KeyRow {
  std::string_view section;  // "agent", "node", or the repeated "envoy", "endpoint"
  std::string_view key;
  KeyType type;
  std::string_view expected;       // "expected <this>, got ..." on a type error
  std::string_view allowed;        // the range or the values, as the docs say it
  std::string_view default_value;  // as written in TOML; "" when required or none
  std::string_view required;       // when non-empty the key is required, and this says what to give
  std::string_view doc;
  // Checks the value's range and stores it; false after reporting an error.
  bool (*set)(KeyValue& value);
};

// A top-level key: a table ([agent]) or an array of tables ([[endpoint]]).
struct SectionRow {
  std::string_view name;
  bool repeated;
  std::string_view entry_is;  // repeated only: "one [[x]] section per <this>"
};

std::span<const KeyRow> config_key_rows();
std::span<const SectionRow> config_sections();
const SectionRow* find_section(std::string_view name);
const KeyRow* find_key(std::string_view section, std::string_view key);

// The keys of a table in table order, for "valid keys are ..." and "did you
// mean": "" is the top level, "node.weights" takes the signal names.
std::vector<std::string_view> keys_in(std::string_view section);
// Of those, the ones whose values are tables.
std::vector<std::string_view> table_keys_in(std::string_view section);
// The tables a misplaced key may belong in: agent, node, node.weights.
std::vector<std::string_view> plain_tables();

}  // namespace headroom::agent
