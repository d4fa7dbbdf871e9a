// SPDX-License-Identifier: Apache-2.0
// headroom.toml -> Config. Everything here is a pure function of the text
// (load_config only adds reading the file), so SIGHUP can compile a new Config
// beside the running one and swap only on success.
//
// The file is walked against the key table (agent/config/config_keys.h): a key the
// table has is type-checked and handed to its row's setter, any other is
// reported with the nearest valid key. toml++ reports syntax errors by
// exception; they are caught here and turned into an Error, so no
// exception leaves the configuration code.
#include "agent/config/config.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <system_error>
#include <span>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "agent/config/config_checks.h"
#include "agent/config/config_keys.h"
#include "agent/config/config_messages.h"
#include "agent/config/config_reader.h"

namespace headroom::agent {

namespace {

// Whether a value has the type a row wants; reports the type error if not.
bool type_ok(const KeyRow& row, const KeyValue& v) {
  bool ok = true;
  switch (row.type) {
    case KeyType::duration:
    case KeyType::string: ok = v.node.is_string(); break;
    case KeyType::boolean: ok = v.node.is_boolean(); break;
    case KeyType::integer: ok = v.node.is_integer(); break;
    case KeyType::number: ok = v.node.is_number(); break;
    case KeyType::array:
    case KeyType::tables: ok = v.node.is_array(); break;
    case KeyType::table:
      if (v.node.is_table()) return true;
      return v.type_error("a table ([" + v.key + "])");
    case KeyType::any: break;
  }
  return ok || v.type_error(row.expected);
}

// Where a key of an entry is stored: the entry being read.
struct Into {
  EndpointConfig* endpoint = nullptr;
  EnvoyBridgeConfig* envoy = nullptr;
  DependencyConfig* dependency = nullptr;
  orca::ShedEntry* shed = nullptr;
  std::span<const orca::ShedEntry> shed_entries{};
};

class Walker {
 public:
  explicit Walker(const std::string& file) : reader_(file) {}

  void top(const toml::table& root) {
    for (auto&& [k, v] : root) {
      const std::string_view name = k.str();
      const SectionRow* section = find_section(name);
      if (section == nullptr || !section->within.empty()) {
        reader_.unknown(k, v, "");
        continue;
      }
      const std::string key = dotted("", name);
      if (section->name == "endpoint") {
        endpoints(*section, v, key);
      } else if (section->name == "dependency") {
        dependencies(*section, v, key);
      } else if (section->name == "envoy") {
        envoy(*section, v, key);
      } else if (const auto* t = v.as_table()) {
        table(*section, *t);
      } else {
        reader_.type_error(v, key, "a table ([" + key + "])");
      }
    }
    reader_.finish(config_);
    // The two keys bound each other, in whichever order the file gives
    // them; the error is at agent.smoothing (a default smoothing never
    // exceeds the window, but the place falls back to agent.interval).
    if (auto r = check_window(config_.interval, config_.smoothing); !r) {
      auto where = reader_.where("agent.smoothing");
      if (!where) where = reader_.where("agent.interval");
      if (where) reader_.error(*where, "agent.smoothing", std::move(r).error());
    }
  }

  Config& config() { return config_; }
  Result<void> first_error() const { return reader_.first_error(); }

 private:
  // One key of a section; false after reporting an error.
  bool set(const KeyRow& row, const toml::node& v, const std::string& key, const Into& into = Into{}) {
    KeyValue value{reader_, v, key, config_, into.endpoint, into.envoy, into.dependency, into.shed, into.shed_entries};
    if (!type_ok(row, value) || !row.set(value)) return false;
    reader_.wrote(key, v.source());
    return true;
  }

  void table(const SectionRow& section, const toml::table& t) {
    for (auto&& [k, v] : t) {
      if (const KeyRow* row = find_key(section.name, k.str()))
        set(*row, v, dotted(section.name, k.str()));
      else
        reader_.unknown(k, v, section.name);
    }
  }

  // The tables of a repeated section, or nullptr after reporting.
  const toml::array* entries(const SectionRow& section, const toml::node& v, const std::string& key) {
    if (const auto* arr = v.as_array()) return arr;
    const std::string header = "[[" + std::string(section.name) + "]]";
    std::string hint = "an array of tables: one " + header + " section per " + std::string(section.entry_is);
    if (v.is_table()) hint += " (write " + header + " with two brackets, not [" + std::string(section.name) + "])";
    reader_.type_error(v, key, hint);
    return nullptr;
  }

  // The entries of a nested section (a row of type `tables`: [[endpoint.shed]]
  // in an [[endpoint]]), each read like an entry, then handed together to
  // the row's setter for what needs them all; false after reporting.
  bool nested(const KeyRow& row, const toml::node& v, const std::string& key, const Into& into) {
    const SectionRow& section = *find_section(dotted(row.section, row.key));
    const toml::array* arr = entries(section, v, key);
    if (arr == nullptr) return false;
    std::vector<orca::ShedEntry> read(arr->size());
    bool ok = true;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      Into one = into;
      one.shed = &read[i];
      ok = entry(section, *arr->get(i), key + "[" + std::to_string(i) + "]", one) && ok;
    }
    if (!ok) return false;
    Into all = into;
    all.shed_entries = read;
    return set(row, v, key, all);
  }

  // One entry of a repeated section into the entry `into` names; false
  // after reporting its errors. [[endpoint]], [[endpoint.shed]] and
  // [[dependency]] name every missing key; [[envoy]] names a missing file
  // once the rest of the entry is valid.
  bool entry(const SectionRow& section, const toml::node& e, const std::string& ekey, const Into& into) {
    const std::vector<std::string_view> keys = keys_in(section.name);
    const auto* t = e.as_table();
    if (t == nullptr) {
      reader_.type_error(e, ekey, "a table with keys " + join(keys));
      return false;
    }
    reader_.wrote(ekey, t->source());
    const std::string header = "[[" + std::string(section.name) + "]]";
    bool ok = true;
    std::vector<std::string_view> written;
    for (auto&& [k, v] : *t) {
      const std::string_view name = k.str();
      const std::string key = ekey + "." + key_part(name);
      const KeyRow* row = find_key(section.name, name);
      if (row == nullptr) {
        reader_.error(k.source(), key,
                      "unknown key " + quote(name) + " in " + header +
                          (nearest(name, keys) ? did_you_mean(name, keys)
                                               : "; valid keys in " + header + " are " + join(keys)));
        ok = false;
        continue;
      }
      written.push_back(row->key);
      ok = (row->type == KeyType::tables ? nested(*row, v, key, into) : set(*row, v, key, into)) && ok;
    }
    const bool name_all_missing = section.name != "envoy";
    for (const KeyRow& row : config_key_rows()) {
      if (row.section != section.name || row.required.empty()) continue;
      if (std::find(written.begin(), written.end(), row.key) != written.end()) continue;
      if (!ok && !name_all_missing) continue;
      reader_.error(t->source(), ekey + "." + std::string(row.key), "is required: " + std::string(row.required));
      ok = false;
    }
    return ok;
  }

  void endpoints(const SectionRow& section, const toml::node& v, const std::string& key) {
    const toml::array* arr = entries(section, v, key);
    if (arr == nullptr) return;
    std::vector<EndpointConfig> out;
    bool ok = true;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const std::string ekey = key + "[" + std::to_string(i) + "]";
      EndpointConfig c;
      bool good = entry(section, *arr->get(i), ekey, Into{.endpoint = &c});
      // max >= target has its say whenever both were valid on their own.
      if (reader_.where(ekey + ".target") && reader_.where(ekey + ".max")) {
        if (auto r = check_endpoint_max(c.max, c.target); !r) {
          reader_.error(*reader_.where(ekey + ".max"), ekey + ".max", std::move(r).error());
          good = false;
        }
      }
      if (!good) {
        ok = false;
        continue;
      }
      out.push_back(std::move(c));
    }
    // The list as a whole, once every entry is valid on its own (--endpoint
    // flags are checked again with these by validate_endpoints).
    if (!ok) return;
    if (auto r = check_endpoint_list(out); !r) {
      const EndpointListIssue* issue = &r.error();
      const std::string ikey = key + "[" + std::to_string(issue->index) + "]";
      const std::string fkey = issue->field.empty() ? ikey : ikey + "." + std::string(issue->field);
      std::string other;
      if (issue->other) {
        const std::string okey = key + "[" + std::to_string(*issue->other) + "]";
        other = okey + " at line " + std::to_string(reader_.where(okey)->begin.line);
      }
      reader_.error(*reader_.where(fkey), fkey, issue->message_with(other));
      return;
    }
    config_.endpoints = std::move(out);
  }

  // One [[dependency]]: its keys, then what needs the whole entry (address
  // or port, max >= target); false after reporting.
  bool dependency(const SectionRow& section, const toml::node& e, const std::string& ekey, DependencyConfig& d) {
    bool good = entry(section, e, ekey, Into{.dependency = &d});
    const auto* t = e.as_table();
    if (t == nullptr) return false;
    const bool address = t->contains("address"), port = t->contains("port");
    if (auto r = check_dependency_remote(address, port); !r) {
      const std::string at = ekey + (address ? ".port" : "");
      reader_.error(port ? (*t)["port"].node()->source() : t->source(), at, std::move(r).error());
      good = false;
    }
    if (reader_.where(ekey + ".target") && reader_.where(ekey + ".max")) {
      if (auto r = check_endpoint_max(d.max, d.target); !r) {
        reader_.error(*reader_.where(ekey + ".max"), ekey + ".max", std::move(r).error());
        good = false;
      }
    }
    return good;
  }

  void dependencies(const SectionRow& section, const toml::node& v, const std::string& key) {
    const toml::array* arr = entries(section, v, key);
    if (arr == nullptr) return;
    std::vector<DependencyConfig> out;
    bool ok = true;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      DependencyConfig d;
      if (!dependency(section, *arr->get(i), key + "[" + std::to_string(i) + "]", d)) {
        ok = false;
        continue;
      }
      out.push_back(std::move(d));
    }
    if (!ok) return;
    // The list as a whole, once every entry is valid on its own.
    if (auto r = check_dependency_list(out); !r) {
      const EndpointListIssue& issue = r.error();
      const std::string ikey = key + "[" + std::to_string(issue.index) + "]";
      const std::string fkey = issue.field.empty() ? ikey : ikey + "." + std::string(issue.field);
      std::string other;
      if (issue.other) {
        const std::string okey = key + "[" + std::to_string(*issue.other) + "]";
        other = okey + " at line " + std::to_string(reader_.where(okey)->begin.line);
      }
      reader_.error(*reader_.where(fkey), fkey, issue.message_with(other));
      return;
    }
    config_.dependencies = std::move(out);
  }

  void envoy(const SectionRow& section, const toml::node& v, const std::string& key) {
    const toml::array* arr = entries(section, v, key);
    if (arr == nullptr) return;
    std::vector<EnvoyBridgeConfig> out;
    std::vector<std::size_t> index;  // of each entry of `out` in the file
    bool ok = true;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const std::string ekey = key + "[" + std::to_string(i) + "]";
      if (i >= kMaxEnvoyBridges) {
        reader_.error(*arr->get(i), ekey,
                      "is entry number " + std::to_string(i + 1) + "; at most " + std::to_string(kMaxEnvoyBridges) +
                          " [[envoy]] entries are supported (each rewrites its file every interval); remove some");
        return;
      }
      EnvoyBridgeConfig c;
      if (!entry(section, *arr->get(i), ekey, Into{.envoy = &c})) {
        ok = false;
        continue;
      }
      // Two entries writing one file would fight over it every interval.
      if (auto it = std::find_if(out.begin(), out.end(), [&](const auto& o) { return o.file == c.file; });
          it != out.end()) {
        const std::string first = key + "[" + std::to_string(index[static_cast<std::size_t>(it - out.begin())]) + "]";
        reader_.error(*reader_.where(ekey + ".file"), ekey + ".file",
                      "duplicate file " + quote(c.file) + " (already used by " + first + " at line " +
                          std::to_string(reader_.where(first + ".file")->begin.line) +
                          "); each [[envoy]] entry needs its own file");
        ok = false;
        continue;
      }
      out.push_back(std::move(c));
      index.push_back(i);
    }
    if (ok) config_.envoy = std::move(out);
  }

  ConfigReader reader_;
  Config config_;
};

}  // namespace

// ---------------------------------------------------------------------------
// Config

bool Config::signal_enabled(std::string_view key) const {
  return std::find(signals.begin(), signals.end(), key) != signals.end();
}

double Config::weight(std::string_view key) const {
  const auto it = weights.find(std::string(key));
  return it == weights.end() ? 1.0 : it->second;
}

// ---------------------------------------------------------------------------
// Parsing

Result<Config> parse_config(std::string_view toml_text, const std::string& file) {
  toml::table root;
  try {
    root = toml::parse(toml_text, std::string_view(file));
  } catch (const toml::parse_error& e) {
    Error err;
    err.file = file;
    err.line = static_cast<int>(e.source().begin.line);
    err.column = static_cast<int>(e.source().begin.column);
    err.message = "TOML syntax error: " + std::string(e.description());
    return err;
  }
  Walker w(file);
  w.top(root);
  if (auto r = w.first_error(); !r) return std::move(r).error();
  return std::move(w.config());
}

Result<Config> load_config(const std::string& path) {
  const auto fail = [&](int code, std::string_view what) {
    Error err;
    err.code = code;
    err.file = path;
    err.message = std::string(what) + ": " + std::error_code(code, std::generic_category()).message();
    if (code == ENOENT)
      err.message += "; create it (examples/headroom.toml documents every key) or pass --config FILE";
    else
      err.message += "; check the path and its permissions, or pass --config FILE";
    return err;
  };

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(errno, "cannot open configuration file");
  // A configuration file is small; the cap keeps a wrong path (/dev/zero)
  // from growing memory without bound.
  constexpr std::size_t kMaxSize = 1 << 20;
  std::string text;
  std::array<char, 8192> buf{};
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int code = errno;
      ::close(fd);
      return fail(code, "cannot read configuration file");
    }
    if (n == 0) break;
    text.append(buf.data(), static_cast<std::size_t>(n));
    if (text.size() > kMaxSize) {
      ::close(fd);
      Error err;
      err.code = EFBIG;
      err.file = path;
      err.message = "configuration file is larger than 1 MiB; is --config pointing at the right file?";
      return err;
    }
  }
  ::close(fd);
  return parse_config(text, path);
}

}  // namespace headroom::agent
