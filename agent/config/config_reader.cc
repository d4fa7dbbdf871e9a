// SPDX-License-Identifier: Apache-2.0
#include "agent/config/config_reader.h"

#include <algorithm>
#include <limits>
#include <sstream>
#include <utility>

#include "agent/config/config_checks.h"
#include "agent/config/config_keys.h"
#include "agent/config/config_messages.h"
#include "agent/config/duration.h"

namespace headroom::agent {

std::string describe(const toml::node& n) {
  const std::string type(toml::impl::node_type_friendly_names[static_cast<std::size_t>(n.type())]);
  std::ostringstream os;
  if (const auto* s = n.as_string()) return type + " " + quote(s->get());
  if (const auto* i = n.as_integer()) return type + " " + std::to_string(i->get());
  if (const auto* d = n.as_floating_point()) return type + " " + format_double(d->get());
  if (const auto* b = n.as_boolean()) return type + (b->get() ? " true" : " false");
  if (const auto* dt = n.as_date()) os << *dt;
  if (const auto* t = n.as_time()) os << *t;
  if (const auto* dtt = n.as_date_time()) os << *dtt;
  const std::string shown = os.str();
  return shown.empty() ? type : type + " " + shown;
}

// ---------------------------------------------------------------------------
// ConfigReader

void ConfigReader::error(const toml::source_region& where, const std::string& key, Error err) {
  err.file = file_;
  err.line = static_cast<int>(where.begin.line);
  err.column = static_cast<int>(where.begin.column);
  if (err.key.empty()) err.key = key;
  errors_.push_back(std::move(err));
}

void ConfigReader::error(const toml::source_region& where, const std::string& key, std::string message) {
  error(where, key, problem(std::move(message)));
}

void ConfigReader::error(const toml::node& where, const std::string& key, std::string message) {
  error(where.source(), key, std::move(message));
}

void ConfigReader::type_error(const toml::node& v, const std::string& key, std::string_view expected) {
  error(v, key, "expected " + std::string(expected) + ", got " + describe(v));
}

void ConfigReader::unknown(const toml::key& k, const toml::node& v, std::string_view section) {
  const std::string_view name = k.str();
  const std::string key = dotted(section, name);
  const std::string where = section.empty() ? "at the top level" : "in [" + std::string(section) + "]";
  const std::vector<std::string_view> keys = keys_in(section);
  std::string msg;
  std::string hint;
  if (v.is_table()) {
    msg = "unknown table [" + key + "]";
    if (auto n = nearest(name, table_keys_in(section))) hint = "; did you mean [" + dotted(section, *n) + "]?";
  } else {
    msg = "unknown key " + quote(name) + " " + where;
    hint = did_you_mean(name, keys);
  }
  if (hint.empty()) {
    // A valid key in the wrong table, e.g. "interval" above the first header.
    for (std::string_view other : plain_tables()) {
      if (other == section) continue;
      const std::vector<std::string_view> other_keys = keys_in(other);
      if (std::find(other_keys.begin(), other_keys.end(), name) == other_keys.end()) continue;
      if (v.is_table()) {
        hint = "; did you mean [" + dotted(other, name) + "]?";
      } else {
        hint = "; " + quote(name) + " belongs in [" + std::string(other) + "]";
        if (section.empty()) hint += " (keys above the first [table] header are top-level)";
      }
      break;
    }
  }
  if (hint.empty())
    hint = keys.empty() ? std::string("; this table takes no keys") : "; valid keys " + where + " are " + join(keys);
  error(k.source(), key, msg + hint);
}

Result<void> ConfigReader::first_error() const {
  if (errors_.empty()) return {};
  const auto rank = [](const Error& e) {
    return std::pair(e.line == 0 ? std::numeric_limits<int>::max() : e.line, e.column);
  };
  return *std::min_element(errors_.begin(), errors_.end(),
                           [&](const Error& a, const Error& b) { return rank(a) < rank(b); });
}

std::optional<toml::source_region> ConfigReader::where(const std::string& key) const {
  const auto it = places_.find(key);
  if (it == places_.end()) return std::nullopt;
  return it->second;
}

void ConfigReader::later(std::string key, const toml::source_region& where,
                         std::function<Result<void>(const Config&)> check) {
  later_.push_back({std::move(key), where, std::move(check)});
}

void ConfigReader::finish(const Config& config) {
  for (const Later& l : later_)
    if (auto r = l.check(config); !r) error(l.where, l.key, std::move(r).error());
  later_.clear();
}

// ---------------------------------------------------------------------------
// KeyValue

bool KeyValue::fail(std::string message) const {
  reader.error(node, key, std::move(message));
  return false;
}

bool KeyValue::fail(Error err) const {
  reader.error(node.source(), key, std::move(err));
  return false;
}

bool KeyValue::type_error(std::string_view expected) const {
  reader.type_error(node, key, expected);
  return false;
}

double KeyValue::number() const {
  if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
  return node.as_floating_point()->get();
}

std::string KeyValue::number_shown() const {
  if (const auto* i = node.as_integer()) return std::to_string(i->get());
  return format_double(number());
}

std::optional<std::chrono::nanoseconds> KeyValue::duration() const {
  auto parsed = parse_duration_checked(str());
  if (!parsed) {
    fail(std::move(parsed).error());
    return std::nullopt;
  }
  return *parsed;
}

std::optional<std::string> KeyValue::absolute_path(std::string_view example) const {
  const std::string& p = str();
  if (p.empty()) {
    fail("must not be empty; give an absolute path such as " + std::string(example));
    return std::nullopt;
  }
  if (p.find('\0') != std::string::npos) {
    fail("must not contain NUL characters");
    return std::nullopt;
  }
  if (p.front() != '/') {
    // The daemon's working directory is "/", but say what is meant.
    fail("must be an absolute path, got " + quote(p) + "; write " + quote("/" + p));
    return std::nullopt;
  }
  if (auto r = check_path_length(p); !r) {
    fail(std::move(r).error());
    return std::nullopt;
  }
  return p;
}

void KeyValue::later(std::function<Result<void>(const Config&)> check) const {
  reader.later(key, node.source(), std::move(check));
}

}  // namespace headroom::agent
