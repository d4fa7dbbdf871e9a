// SPDX-License-Identifier: Apache-2.0
#include "agent/config/config_setters.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <utility>

#include "agent/config/config_checks.h"
#include "agent/config/config_messages.h"
#include "agent/config/config_reader.h"

namespace headroom::agent {

using namespace std::string_view_literals;

namespace {


bool is_signal(std::string_view name) {
  return std::find(std::begin(kNodeSignals), std::end(kNodeSignals), name) != std::end(kNodeSignals);
}

}  // namespace

// -- [agent] -----------------------------------------------------------------

bool set_unsafe_orca_dir(KeyValue& v) {
  const std::string& s = v.str();
  const auto i = index_of(kUnsafeDirActions, s);
  if (!i)
    return v.fail("must be " + quoted_list(kUnsafeDirActions, " or ") + ", got " + quote(s) +
                  did_you_mean(s, kUnsafeDirActions));
  v.config.unsafe_orca_dir = static_cast<UnsafeDirAction>(*i);
  return true;
}

bool set_interval(KeyValue& v) {
  const auto d = v.duration();
  if (!d) return false;
  if (auto r = check_interval(*d, v.str()); !r) return v.fail(std::move(r).error());
  v.config.interval = *d;
  return true;
}

bool set_smoothing(KeyValue& v) {
  const auto d = v.duration();
  if (!d) return false;
  if (auto r = check_smoothing(*d, v.str()); !r) return v.fail(std::move(r).error());
  v.config.smoothing = *d;
  return true;
}

bool set_path(KeyValue& v, std::string& into, std::string_view example) {
  auto p = v.absolute_path(example);
  if (!p) return false;
  into = std::move(*p);
  return true;
}

bool set_log_level(KeyValue& v) {
  const std::string& s = v.str();
  const auto level = parse_log_level(s);
  if (!level) return v.fail("unknown log level " + quote(s) + choices(s, kLogLevelNames, "levels"));
  v.config.log_level = *level;
  return true;
}

bool set_ebpf(KeyValue& v) {
  const auto* s = v.node.as_string();
  if (s == nullptr) {
    std::string hint;
    if (const auto* b = v.node.as_boolean()) hint = b->get() ? "; write ebpf = \"auto\"" : "; write ebpf = \"off\"";
    return v.fail("expected " + quoted_list(kEbpfModes, " or ") + ", got " + describe(v.node) + hint);
  }
  const std::string& mode = s->get();
  if (const auto i = index_of(kEbpfModes, mode)) {
    v.config.ebpf = static_cast<EbpfMode>(*i);
    return true;
  }
  // "on" is one edit from "off": never suggest the opposite of what was meant.
  std::string hint;
  for (std::string_view yes : {"on"sv, "true"sv, "yes"sv, "enable"sv, "enabled"sv, "1"sv})
    if (edit_distance(mode, yes) == 0) hint = "; write \"auto\": the probes are loaded whenever endpoints are declared";
  for (std::string_view no : {"false"sv, "no"sv, "disable"sv, "disabled"sv, "0"sv, "none"sv})
    if (edit_distance(mode, no) == 0) hint = "; write \"off\"";
  if (hint.empty()) hint = choices(mode, kEbpfModes, "modes");
  return v.fail("unknown mode " + quote(mode) + hint);
}

// -- [node] ------------------------------------------------------------------

bool set_cgroup(KeyValue& v) {
  std::string_view path = v.str();
  if (path.find('\0') != std::string_view::npos) return v.fail("must not contain NUL characters");
  // A common slip: the mount path instead of the cgroup path.
  constexpr std::string_view kMount = "/sys/fs/cgroup";
  if (path.starts_with(kMount) && (path.size() == kMount.size() || path[kMount.size()] == '/')) {
    std::string_view rest = path.substr(kMount.size());
    while (rest.starts_with('/')) rest.remove_prefix(1);
    // v1 paths start with the controller's hierarchy.
    for (std::string_view ctl : {"cpu,cpuacct"sv, "cpuacct"sv, "cpu"sv, "cpuset"sv, "memory"sv, "unified"sv}) {
      if (rest.starts_with(ctl) && (rest.size() == ctl.size() || rest[ctl.size()] == '/')) {
        rest.remove_prefix(ctl.size());
        while (rest.starts_with('/')) rest.remove_prefix(1);
        break;
      }
    }
    return v.fail(quote(path) + " is a filesystem path; give the path relative to the cgroup root" +
                  (rest.empty() ? std::string(", or \"\" for the whole host") : ", e.g. " + quote(rest)));
  }
  // "/system.slice/x.service" as /proc/PID/cgroup prints it is accepted;
  // "/" is the root cgroup, i.e. the whole host.
  auto normal = probes::normalize_cgroup_path(path);
  if (!normal)
    return v.fail("must not contain \"..\"; give the path below the cgroup root, e.g. \"system.slice/api.service\"");
  v.config.cgroup = std::move(*normal);
  return true;
}

bool set_cgroup_version(KeyValue& v) {
  const std::string expected = "must be \"auto\", 1 or 2, got ";
  if (const auto* s = v.node.as_string()) {
    if (s->get() == "auto") {
      v.config.cgroup_version = probes::CgroupVersion::automatic;
      return true;
    }
    if (const std::string_view n = s->get(); n == "1" || n == "2" || n == "v1" || n == "v2")
      return v.fail(expected + describe(v.node) + "; versions are integers: write cgroup_version = " + n.back());
    return v.fail(expected + describe(v.node));
  }
  if (const auto* i = v.node.as_integer()) {
    if (i->get() != 1 && i->get() != 2) return v.fail(expected + describe(v.node));
    v.config.cgroup_version = i->get() == 1 ? probes::CgroupVersion::v1 : probes::CgroupVersion::v2;
    return true;
  }
  return v.type_error("\"auto\", 1 or 2");
}

bool set_signals(KeyValue& v) {
  const toml::array& arr = *v.node.as_array();
  if (arr.empty()) return v.fail("must list at least one signal; valid signals are " + join(kNodeSignals));
  std::vector<std::string> out;
  std::vector<const toml::node*> seen;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const toml::node& e = *arr.get(i);
    const std::string ekey = v.key + "[" + std::to_string(i) + "]";
    const auto* s = e.as_string();
    if (s == nullptr) {
      v.reader.type_error(e, ekey, "a signal name string such as \"cpu\"");
      return false;
    }
    const std::string& name = s->get();
    if (!is_signal(name)) {
      v.reader.error(e, ekey, "unknown signal " + quote(name) + choices(name, kNodeSignals, "signals"));
      return false;
    }
    if (auto it = std::find(out.begin(), out.end(), name); it != out.end()) {
      const auto& first = seen[static_cast<std::size_t>(it - out.begin())]->source().begin;
      v.reader.error(e, ekey,
                     "duplicate signal " + quote(name) + " (first listed at line " + std::to_string(first.line) +
                         ", column " + std::to_string(first.column) + "); list each signal once");
      return false;
    }
    out.push_back(name);
    seen.push_back(&e);
  }
  v.config.signals = std::move(out);
  return true;
}

bool set_composite(KeyValue& v) {
  const std::string& s = v.str();
  const auto i = index_of(kCompositeNames, s);
  if (!i)
    return v.fail("must be " + quoted_list(kCompositeNames, " or ") + ", got " + quote(s) +
                  did_you_mean(s, kCompositeNames));
  v.config.composite = static_cast<CompositeMethod>(*i);
  return true;
}

bool set_weights(KeyValue& v) {
  constexpr std::string_view kSection = "node.weights";
  std::map<std::string, double> out;
  bool ok = true;
  for (auto&& [k, w] : *v.node.as_table()) {
    const std::string_view name = k.str();
    const std::string key = dotted(kSection, name);
    if (!is_signal(name)) {
      ok = false;
      // cpu.pressure = 0.5 unquoted is a dotted key: TOML makes a table
      // "cpu" holding "pressure". Say how to write it.
      if (const auto* sub = w.as_table(); sub != nullptr && !sub->empty()) {
        const std::string joined = std::string(name) + "." + std::string(sub->begin()->first.str());
        if (is_signal(joined)) {
          v.reader.error(k.source(), dotted(kSection, joined),
                         "signal names contain dots, so quote the key: write " + quote(joined) + " = <weight>");
          continue;
        }
      }
      v.reader.unknown(k, w, kSection);
      continue;
    }
    const KeyValue weight{v.reader, w, key, v.config};
    if (!w.is_number()) {
      ok = weight.type_error("a number (a fraction in [0, 1])");
      continue;
    }
    const double x = weight.number();
    if (!(x >= 0.0 && x <= 1.0)) {  // NaN fails both comparisons
      ok = weight.fail("must be a fraction in [0, 1], got " + weight.number_shown());
      continue;
    }
    // Weight 1 is the default: not storing it keeps Config equality
    // semantic (a file spelling out the defaults equals an empty one).
    if (x != 1.0) out.emplace(std::string(name), x);
  }
  if (ok) v.config.weights = std::move(out);
  return ok;
}

// -- [[envoy]] ---------------------------------------------------------------

bool set_envoy_scope(KeyValue& v) {
  if (auto r = check_envoy_scope(v.str()); !r) return v.fail(std::move(r).error());
  v.envoy->scope = v.str();
  return true;
}

bool set_envoy_value(KeyValue& v) {
  if (auto r = check_envoy_value(v.str()); !r) return v.fail(std::move(r).error());
  v.envoy->value = v.str();
  // After the whole file: [node] may come after [[envoy]].
  v.later([value = v.str()](const Config& c) { return check_envoy_value_signal(value, c); });
  return true;
}

bool set_envoy_file(KeyValue& v) {
  auto p = v.absolute_path(kEnvoyFileExample);
  if (!p) return false;
  auto normal = envoy_file_path(*p, kEnvoyFileExample);
  if (!normal) return v.fail(std::move(normal).error());
  v.envoy->file = std::move(normal).value();
  return true;
}

bool set_envoy_neutral(KeyValue& v) {
  const double n = v.number();
  if (!(n >= 0.0 && n <= 1.0))  // NaN fails both comparisons
    return v.fail("must be a fraction in [0, 1], got " + v.number_shown() + "; Envoy rejects pressure outside [0, 1]");
  v.envoy->neutral = n;
  return true;
}

// -- [[endpoint]] ------------------------------------------------------------

bool set_endpoint_name(KeyValue& v) {
  if (auto r = check_endpoint_name(v.str()); !r) return v.fail(std::move(r).error());
  v.endpoint->name = v.str();
  return true;
}

bool set_endpoint_port(KeyValue& v) {
  const std::int64_t port = v.node.as_integer()->get();
  if (auto r = check_endpoint_port(port, std::to_string(port)); !r) return v.fail(std::move(r).error());
  v.endpoint->port = static_cast<uint16_t>(port);
  return true;
}

bool set_endpoint_path(KeyValue& v) {
  if (auto r = check_endpoint_path(v.str()); !r) return v.fail(std::move(r).error());
  v.endpoint->path = v.str();
  return true;
}

bool set_endpoint_protocol(KeyValue& v) {
  if (auto r = check_endpoint_protocol(v.str()); !r) return v.fail(std::move(r).error());
  v.endpoint->protocol = *parse_endpoint_protocol(v.str());
  return true;
}

bool set_endpoint_target(KeyValue& v) {
  const auto d = v.duration();
  if (!d) return false;
  if (auto r = check_endpoint_target(*d); !r) return v.fail(std::move(r).error());
  v.endpoint->target = *d;
  return true;
}

// max >= target is checked once the whole entry is read.
bool set_endpoint_max(KeyValue& v) {
  const auto d = v.duration();
  if (!d) return false;
  v.endpoint->max = *d;
  return true;
}

bool set_max_concurrency(KeyValue& v) {
  const std::int64_t n = v.node.as_integer()->get();
  if (auto r = check_max_concurrency(n, std::to_string(n)); !r) return v.fail(std::move(r).error());
  v.endpoint->max_concurrency = static_cast<uint32_t>(n);
  return true;
}

// -- [prometheus] ------------------------------------------------------------

bool set_prometheus_listen(KeyValue& v) {
  if (!v.str().empty())
    if (auto r = check_listen_address(v.str()); !r) return v.fail(std::move(r).error());
  v.config.prometheus.listen = v.str();
  return true;
}

bool set_prometheus_textfile(KeyValue& v) {
  if (v.str().empty()) {
    v.config.prometheus.textfile.clear();
    return true;
  }
  constexpr std::string_view kExample = "\"/var/lib/prometheus/node-exporter/headroom.prom\"";
  auto p = v.absolute_path(kExample);
  if (!p) return false;
  auto normal = textfile_path(*p);
  if (!normal) return v.fail(std::move(normal).error());
  v.config.prometheus.textfile = std::move(normal).value();
  return true;
}

bool set_textfile_interval(KeyValue& v) {
  const auto d = v.duration();
  if (!d) return false;
  if (auto r = check_textfile_interval(*d, v.str()); !r) return v.fail(std::move(r).error());
  v.config.prometheus.textfile_interval = *d;
  return true;
}

// -- [oob] -------------------------------------------------------------------

bool set_oob_listen(KeyValue& v) {
  const toml::array& arr = *v.node.as_array();
  std::vector<std::string> out;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const toml::node& e = *arr.get(i);
    const std::string ekey = v.key + "[" + std::to_string(i) + "]";
    if (i >= kMaxOobListeners) {
      v.reader.error(e, ekey,
                     "is address number " + std::to_string(i + 1) + "; at most " + std::to_string(kMaxOobListeners) +
                         " are supported (each is a listener); one \"0.0.0.0:PORT\" or \"[::]:PORT\" covers every "
                         "address of the machine");
      return false;
    }
    const auto* s = e.as_string();
    if (s == nullptr) {
      v.reader.type_error(e, ekey, "an address string such as \"127.0.0.1:9447\" or \"unix:/run/orca/oob.sock\"");
      return false;
    }
    if (auto r = check_oob_address(s->get()); !r) {
      v.reader.error(e, ekey, r.error().message);
      return false;
    }
    if (std::find(out.begin(), out.end(), s->get()) != out.end()) {
      v.reader.error(e, ekey, "duplicate address " + quote(s->get()) + "; list each address once");
      return false;
    }
    out.push_back(s->get());
  }
  v.config.oob.listen = std::move(out);
  return true;
}

bool set_oob_max_streams(KeyValue& v) {
  const std::int64_t n = v.node.as_integer()->get();
  if (n < 1 || n > kMaxOobStreams)
    return v.fail("must be from 1 to " + std::to_string(kMaxOobStreams) + ", got " + std::to_string(n));
  v.config.oob.max_streams = static_cast<uint32_t>(n);
  return true;
}

bool set_unknown_authority(KeyValue& v) {
  const std::string& s = v.str();
  if (s != "node" && s != "error")
    return v.fail("expected \"node\" (the node report) or \"error\" (NOT_FOUND), got " + quote(s) +
                  choices(s, kUnknownAuthorityChoices, "choices"));
  v.config.oob.unknown_authority_error = s == "error";
  return true;
}

bool set_oob_default_interval(KeyValue& v) {
  const auto d = v.duration();
  if (!d) return false;
  if (*d < kMinOobDefaultInterval || *d > kMaxOobDefaultInterval)
    return v.fail("must be from " + format_duration(kMinOobDefaultInterval) + " to " +
                  format_duration(kMaxOobDefaultInterval) + ", got " + quote(v.str()));
  v.config.oob.default_interval = *d;
  return true;
}

}  // namespace headroom::agent
