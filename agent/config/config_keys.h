// SPDX-License-Identifier: Apache-2.0
// Every key of headroom.toml, one row each: where it lives, its type, what it
// allows, its default, one line of documentation, and how it is stored into
// the Config. The reader (agent/config/config.cc) walks the file against this table:
// unknown keys, type errors, ranges and missing required keys all come from
// it, and so do the key tables of docs/configuration.md, the man page
// headroom.toml(5), examples/headroom.toml and the fuzzer's dictionary
// (agent/config/config_reference.h).
#pragma once

#include <cstddef>
#include <span>
#include <string>
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
  tables,    // an array of tables: the entries of a nested section ([[endpoint.shed]])
  any,       // several types are accepted; the setter checks
};

// One key. Everything said about it (the parser's checks and messages, the
// docs' key tables, the man page, the shipped example, the fuzzer's
// dictionary) comes from this row: the allowed text is built from the same
// constants the setter checks against, the default from the Config struct's
// default (headroom-config-reference prints the generated documents).
struct KeyRow {
  std::string_view section;  // "agent", "node", or the repeated "envoy", "endpoint"
  std::string_view key;
  KeyType type;
  std::string expected;       // "expected <this>, got ..." on a type error
  std::string allowed;        // the range or the values, as the docs say it
  std::string default_value;  // as written in TOML; "" when required or none
  std::string_view required;  // when non-empty the key is required, and this says what to give
  // What the key does, for the docs: Markdown with `code` and [links](x.md)
  // only; the man page and the example's comments are made from it.
  std::string_view doc;
  // Checks the value's range and stores it; false after reporting an error.
  bool (*set)(KeyValue& value);
  // In a repeated section, the value the example shows for a key without a
  // default ("" for a key with one).
  std::string_view example;
};

// A top-level key: a table ([agent]) or an array of tables ([[endpoint]]);
// or an array of tables inside each entry of one ([[endpoint.shed]]), the
// rows' key of type `tables` there.
struct SectionRow {
  std::string_view name;
  bool repeated;
  std::string_view entry_is;  // repeated only: "one [[x]] section per <this>"
  std::size_t max_entries;    // repeated only: the most entries a file (or a parent entry) may have
  std::string_view within;    // the repeated section whose entries hold it; "" at the top level
};

std::span<const KeyRow> config_key_rows();
std::span<const SectionRow> config_sections();
// Any section, nested ones by their dotted name ("endpoint.shed").
const SectionRow* find_section(std::string_view name);
const KeyRow* find_key(std::string_view section, std::string_view key);

// The keys of a table in table order, for "valid keys are ..." and "did you
// mean": "" is the top level (nested sections are not), "node.weights" takes
// the signal names.
std::vector<std::string_view> keys_in(std::string_view section);
// Of those, the ones whose values are tables.
std::vector<std::string_view> table_keys_in(std::string_view section);
// The tables a misplaced key may belong in: each section that is not
// repeated and the tables among its keys (agent, node, node.weights, ...).
std::span<const std::string_view> plain_tables();

}  // namespace headroom::agent
