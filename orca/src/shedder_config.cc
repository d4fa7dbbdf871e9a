// SPDX-License-Identifier: Apache-2.0
// headroom.toml's [[endpoint.shed]] entries -> ShedderConfig. toml++ reports
// syntax errors by exception; they are caught here and turned into an Error,
// so no exception leaves the library.
#include "headroom/orca/shedder_config.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <system_error>
#include <vector>

#include <toml++/toml.h>

namespace headroom::orca {
namespace {

std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string valid_keys() {
  std::string out;
  for (std::string_view k : kShedEntryKeys) out += (out.empty() ? "" : ", ") + std::string(k);
  return out;
}

// Errors of one text: each names the text, and the place and key when known.
class Places {
 public:
  explicit Places(std::string_view source) : source_(source) {}

  Error at(const toml::source_region& where, std::string key, std::string message) const {
    Error e = logic_error(std::move(message));
    e.file = source_;
    e.line = static_cast<int>(where.begin.line);
    e.column = static_cast<int>(where.begin.column);
    e.key = std::move(key);
    return e;
  }
  Error whole(std::string message) const {
    Error e = logic_error(std::move(message));
    e.file = source_;
    return e;
  }

 private:
  std::string source_;
};

// The values of one entry's keys, type-checked; unknown keys refused.
Result<ShedEntry> read_entry(const toml::table& t, const std::string& ekey, const Places& places) {
  ShedEntry entry;
  for (auto&& [k, v] : t) {
    const std::string_view name = k.str();
    const std::string key = ekey + "." + std::string(name);
    if (name == "signal") {
      if (!v.is_string()) return places.at(v.source(), key, "expected a signal name string such as \"cpu_utilization\"");
      entry.signal = v.as_string()->get();
    } else if (name == "shed_start" || name == "critical_start" || name == "all_shed") {
      if (!v.is_number()) return places.at(v.source(), key, "expected a number (a utilization such as 0.6)");
      const double value = v.value<double>().value_or(0.0);
      (name == "shed_start" ? entry.shed_start : name == "critical_start" ? entry.critical_start : entry.all_shed) =
          value;
    } else {
      return places.at(k.source(), key,
                       "unknown key " + quote(name) + " in [[endpoint.shed]]; valid keys are " + valid_keys());
    }
  }
  return entry;
}

// The index of the [[endpoint]] named `name`, or an error saying which exist.
Result<std::size_t> find_endpoint(const toml::table& root, std::string_view name, const Places& places) {
  const toml::array* endpoints = root["endpoint"].as_array();
  std::string names;
  if (endpoints != nullptr) {
    for (std::size_t i = 0; i < endpoints->size(); ++i) {
      const toml::table* t = endpoints->get(i)->as_table();
      const toml::node* n = t != nullptr ? t->get("name") : nullptr;
      if (n == nullptr || !n->is_string()) continue;
      if (n->as_string()->get() == name) return i;
      names += (names.empty() ? "" : ", ") + quote(n->as_string()->get());
    }
  }
  return places.whole("no [[endpoint]] named " + quote(name) +
                      (names.empty() ? " (the file declares no [[endpoint]])" : " (the file's endpoints: " + names + ")") +
                      "; give the endpoint's name as in the file");
}

}  // namespace

Result<void> check_shed_signal(std::string_view signal) {
  if (is_known_signal(signal)) return {};
  return logic_error("unknown signal " + quote(signal) +
                     "; expected application_utilization, cpu_utilization, mem_utilization or utilization.<key> "
                     "(e.g. utilization.latency.slo_target)");
}

Result<std::pair<std::string, SignalThresholds>> check_shed_entry(const ShedEntry& entry) {
  const auto fault = [](std::string_view field, std::string message) {
    Error e = logic_error(std::move(message));
    e.key = std::string(field);
    return e;
  };
  if (!entry.signal) return fault("signal", "is required: the signal to shed on, e.g. signal = \"cpu_utilization\"");
  if (auto r = check_shed_signal(*entry.signal); !r) return fault("signal", r.error().message);
  if (!entry.shed_start)
    return fault("shed_start", "is required: the utilization where non-critical shedding starts, e.g. shed_start = 0.6");
  if (!entry.critical_start)
    return fault("critical_start",
                 "is required: the utilization where CRITICAL shedding starts, e.g. critical_start = 0.8");
  SignalThresholds t = default_thresholds(*entry.signal);
  t.shed_start = *entry.shed_start;
  t.critical_start = *entry.critical_start;
  t.all_shed = entry.all_shed.value_or(t.all_shed);
  if (auto r = validate_thresholds(t); !r) {
    // validate_thresholds' message starts with the field at fault.
    std::string_view field = "shed_start";
    for (std::string_view f : {"critical_start", "all_shed"})
      if (r.error().message.starts_with(f)) field = f;
    std::string message = r.error().message;
    if (field == "all_shed" && !entry.all_shed)
      message += " (all_shed was not given: " + num(t.all_shed) + " is the default for " + *entry.signal +
                 "; give all_shed above critical_start)";
    return fault(field, std::move(message));
  }
  return std::pair(*entry.signal, t);
}

Result<ShedderConfig> shedder_config_from_toml(std::string_view text, std::string_view endpoint,
                                               std::string_view source_name) {
  const Places places(source_name);
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    return places.at(e.source(), "", "TOML syntax error: " + std::string(e.description()));
  }
  auto index = find_endpoint(root, endpoint, places);
  if (!index) return std::move(index).error();
  const std::string key = "endpoint[" + std::to_string(*index) + "]";
  const toml::table& ep = *root["endpoint"].as_array()->get(*index)->as_table();
  const toml::node* shed = ep.get("shed");
  if (shed == nullptr)
    return places.at(ep.source(), key,
                     "[[endpoint]] " + quote(endpoint) +
                         " has no [[endpoint.shed]] entries; add one per signal to shed on (signal, shed_start, "
                         "critical_start), or run the shedder without --config to use its defaults");
  const toml::array* entries = shed->as_array();
  if (entries != nullptr && entries->empty())
    return places.at(shed->source(), key + ".shed", "is empty; add one [[endpoint.shed]] section per signal");
  if (entries == nullptr || !entries->is_array_of_tables())
    return places.at(shed->source(), key + ".shed",
                     "expected an array of tables: one [[endpoint.shed]] section per signal");
  ShedderConfig config;
  config.signals.clear();
  std::vector<int> lines;  // of each entry, for "listed twice"
  for (std::size_t i = 0; i < entries->size(); ++i) {
    const std::string ekey = key + ".shed[" + std::to_string(i) + "]";
    const toml::table& t = *entries->get(i)->as_table();
    if (i >= kMaxShedEntries)
      return places.at(t.source(), ekey,
                       "is entry number " + std::to_string(i + 1) + "; at most " + std::to_string(kMaxShedEntries) +
                           " [[endpoint.shed]] entries per endpoint");
    auto written = read_entry(t, ekey, places);
    if (!written) return std::move(written).error();
    auto checked = check_shed_entry(*written);
    if (!checked) {
      const toml::node* at = t.get(checked.error().key);
      return places.at(at != nullptr ? at->source() : t.source(), ekey + "." + checked.error().key,
                       checked.error().message);
    }
    for (std::size_t j = 0; j < config.signals.size(); ++j)
      if (config.signals[j].first == checked->first)
        return places.at(t.get("signal")->source(), ekey + ".signal",
                         "signal " + quote(checked->first) + " is listed twice for endpoint " + quote(endpoint) +
                             " (also " + key + ".shed[" + std::to_string(j) + "] at line " + std::to_string(lines[j]) +
                             "); give each signal once");
    lines.push_back(static_cast<int>(t.source().begin.line));
    config.signals.push_back(std::move(*checked));
  }
  return config;
}

Result<ShedderConfig> read_shedder_config_file(const std::string& path, std::string_view endpoint) {
  const auto fail = [&](int code, std::string_view what) {
    Error e{code, std::string(what) + ": " + std::error_code(code, std::generic_category()).message()};
    e.file = path;
    return e;
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(errno, "cannot open the shedder's configuration");
  // A configuration file is small; the cap keeps a wrong path (/dev/zero)
  // from growing memory without bound.
  constexpr std::size_t kMaxSize = 1 << 20;
  std::string text;
  std::array<char, 8192> buf{};
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int code = errno;
      ::close(fd);
      return fail(code, "cannot read the shedder's configuration");
    }
    if (n == 0) break;
    text.append(buf.data(), static_cast<std::size_t>(n));
    if (text.size() > kMaxSize) {
      ::close(fd);
      return fail(EFBIG, "the shedder's configuration is larger than 1 MiB");
    }
  }
  ::close(fd);
  return shedder_config_from_toml(text, endpoint, path);
}

}  // namespace headroom::orca
