// SPDX-License-Identifier: Apache-2.0
// Reading one headroom.toml: the errors found so far with their places in the
// file, where each key was written, and the value a key's setter is given.
// Internal to the configuration code (it carries toml++ types).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "agent/config/config.h"
#include "headroom/orca/shedder_config.h"

namespace headroom::agent {

// "integer 100", "string \"x\"", "array": the TOML type and, for scalars, the
// value as written.
std::string describe(const toml::node& n);

class ConfigReader {
 public:
  explicit ConfigReader(std::string file) : file_(std::move(file)) {}

  // Records `err` at `where`; its key, when empty, becomes `key`.
  void error(const toml::source_region& where, const std::string& key, Error err);
  void error(const toml::source_region& where, const std::string& key, std::string message);
  void error(const toml::node& where, const std::string& key, std::string message);
  void type_error(const toml::node& v, const std::string& key, std::string_view expected);
  // A key no row of `section` has (a plain table: "", "agent", "node", "node.weights").
  void unknown(const toml::key& k, const toml::node& v, std::string_view section);
  // The error that comes first in the file (errors without a place last),
  // or success when there is none.
  Result<void> first_error() const;

  // Where a key (dotted, "endpoint[1].name") was written with a valid value.
  void wrote(const std::string& key, const toml::source_region& where) { places_[key] = where; }
  std::optional<toml::source_region> where(const std::string& key) const;

  // A check that needs the whole file (node.signals may follow [[envoy]]),
  // made by finish() and reported at `where` under `key`.
  void later(std::string key, const toml::source_region& where,
             std::function<Result<void>(const Config&)> check);
  void finish(const Config& config);

 private:
  struct Later {
    std::string key;
    toml::source_region where;
    std::function<Result<void>(const Config&)> check;
  };
  std::string file_;
  std::vector<Error> errors_;
  std::map<std::string, toml::source_region> places_;
  std::vector<Later> later_;
};

// What a row's setter is given: the value, its dotted key, and where it is
// stored (`endpoint`, `envoy` and `dependency` are the entry being read, in
// those sections; `shed` the [[endpoint.shed]] entry being read, and
// `shed_entries` all of the endpoint's, read, for the endpoint's `shed` row).
struct KeyValue {
  ConfigReader& reader;
  const toml::node& node;
  const std::string& key;
  Config& config;
  EndpointConfig* endpoint = nullptr;
  EnvoyBridgeConfig* envoy = nullptr;
  DependencyConfig* dependency = nullptr;
  orca::ShedEntry* shed = nullptr;
  std::span<const orca::ShedEntry> shed_entries{};

  // Each reports at the value and returns false.
  bool fail(std::string message) const;
  bool fail(Error err) const;
  bool type_error(std::string_view expected) const;

  // Typed access; the row's type was checked before the setter runs.
  const std::string& str() const { return node.as_string()->get(); }
  bool boolean() const { return node.as_boolean()->get(); }
  // A number of a KeyType::number value.
  double number() const;
  // "1.5" or "2" as written, for messages.
  std::string number_shown() const;
  // Parses a KeyType::duration value; nullopt after reporting why not.
  std::optional<std::chrono::nanoseconds> duration() const;
  // Non-empty, absolute, without NUL; nullopt after reporting.
  std::optional<std::string> absolute_path(std::string_view example) const;
  // Runs `check` once the whole file is read, reporting at this value.
  void later(std::function<Result<void>(const Config&)> check) const;
};

}  // namespace headroom::agent
