// SPDX-License-Identifier: Apache-2.0
// The key table and each key's setter. A setter sees a value of the row's
// type (checked before it runs) and checks only its range; the messages say
// what is wrong and what to write instead.
#include "agent/config/config_keys.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <utility>

#include "agent/config/config_checks.h"
#include "agent/config/config_messages.h"
#include "agent/config/config_reader.h"

namespace headroom::agent {

namespace {

using namespace std::string_view_literals;

// Indexed by LogLevel.
constexpr std::string_view kLogLevelNames[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
constexpr std::string_view kEbpfModes[] = {"auto", "off"};
constexpr std::string_view kCompositeNames[] = {"max", "mean"};
constexpr std::string_view kUnsafeDirActions[] = {"refuse", "warn"};
constexpr std::string_view kEnvoyFileExample = "\"/run/orca/envoy/node.pressure\"";

bool is_signal(std::string_view name) {
  return std::find(std::begin(kNodeSignals), std::end(kNodeSignals), name) != std::end(kNodeSignals);
}

// -- [agent] -----------------------------------------------------------------

bool set_unsafe_orca_dir(KeyValue& v) {
  const std::string& s = v.str();
  if (s != "refuse" && s != "warn")
    return v.fail("must be \"refuse\" or \"warn\", got " + quote(s) + did_you_mean(s, kUnsafeDirActions));
  v.config.unsafe_orca_dir = s == "refuse" ? UnsafeDirAction::refuse : UnsafeDirAction::warn;
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
    return v.fail("expected \"auto\" or \"off\", got " + describe(v.node) + hint);
  }
  const std::string& mode = s->get();
  if (mode == "auto" || mode == "off") {
    v.config.ebpf = mode == "auto" ? EbpfMode::automatic : EbpfMode::off;
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
  if (s != "max" && s != "mean")
    return v.fail("must be \"max\" or \"mean\", got " + quote(s) + did_you_mean(s, kCompositeNames));
  v.config.composite = s == "max" ? CompositeMethod::max : CompositeMethod::mean;
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
  constexpr std::string_view kChoices[] = {"node", "error"};
  const std::string& s = v.str();
  if (s != "node" && s != "error")
    return v.fail("expected \"node\" (the node report) or \"error\" (NOT_FOUND), got " + quote(s) +
                  choices(s, kChoices, "choices"));
  v.config.oob.unknown_authority_error = s == "error";
  return true;
}

bool set_oob_default_interval(KeyValue& v) {
  const auto d = v.duration();
  if (!d) return false;
  if (*d < kMinOobDefaultInterval || *d > kMaxOobDefaultInterval)
    return v.fail("must be from 10ms to 1h, got " + quote(v.str()));
  v.config.oob.default_interval = *d;
  return true;
}

// ---------------------------------------------------------------------------
// The table. Row order is the order of "valid keys are ..." lists.

constexpr std::string_view kDuration = "a duration string such as \"100ms\"";
constexpr std::string_view kBoolean = "a boolean (true or false)";
constexpr std::string_view kFraction = "a number (a fraction in [0, 1])";

constexpr SectionRow kSections[] = {
    {"agent", false, ""},
    {"node", false, ""},
    {"envoy", true, "file"},
    {"endpoint", true, "endpoint"},
    {"prometheus", false, ""},
    {"oob", false, ""},
};

constexpr KeyRow kRows[] = {
    // [agent]
    {"agent", "interval", KeyType::duration, kDuration, "10ms to 1h", "\"100ms\"", "",
     "How often the probes are sampled and the reports rewritten.", set_interval},
    {"agent", "smoothing", KeyType::duration, kDuration, "0s to 10m, and at most 10000 intervals", "\"500ms\"", "",
     "Time constant of the moving average applied to each signal; \"0s\" is off.", set_smoothing},
    {"agent", "orca_dir", KeyType::string, "an absolute path string such as \"/run/orca\"",
     "absolute path, at most 3840 bytes",
     "\"/run/orca\"", "", "Directory the report files are written to.",
     [](KeyValue& v) { return set_path(v, v.config.orca_dir, "\"/run/orca\""); }},
    {"agent", "proc_root", KeyType::string, "an absolute path string such as \"/proc\"", "absolute path", "\"/proc\"",
     "", "Where procfs is mounted.", [](KeyValue& v) { return set_path(v, v.config.proc_root, "\"/proc\""); }},
    {"agent", "sys_root", KeyType::string, "an absolute path string such as \"/sys\"", "absolute path", "\"/sys\"", "",
     "Where sysfs is mounted.", [](KeyValue& v) { return set_path(v, v.config.sys_root, "\"/sys\""); }},
    {"agent", "log_level", KeyType::string, "a log level string such as \"info\"",
     "trace, debug, info, warn, error, critical, off", "\"info\"", "", "Log verbosity.", set_log_level},
    {"agent", "fsync", KeyType::boolean, kBoolean, "", "false", "", "fsync each report before the rename.",
     [](KeyValue& v) {
       v.config.fsync = v.boolean();
       return true;
     }},
    {"agent", "ebpf", KeyType::any, "\"auto\" or \"off\"", "\"auto\", \"off\"", "\"auto\"", "",
     "Whether the eBPF endpoint probes are loaded.", set_ebpf},
    {"agent", "unsafe_orca_dir", KeyType::string, "\"refuse\" or \"warn\"", "\"refuse\", \"warn\"", "\"refuse\"", "",
     "An orca_dir others can write into: refuse to start, or only warn.", set_unsafe_orca_dir},
    // [node]
    {"node", "cgroup", KeyType::string, "a cgroup path string such as \"system.slice/api.service\"",
     "\"\" or a path relative to the cgroup root", "\"\"", "", "Whose load the node report describes.", set_cgroup},
    {"node", "cgroup_version", KeyType::any, "\"auto\", 1 or 2", "\"auto\", 1, 2", "\"auto\"", "",
     "Which cgroup hierarchy to read.", set_cgroup_version},
    {"node", "signals", KeyType::array, "an array of signal names such as [\"cpu\", \"memory\"]",
     "non-empty, each signal once", "[\"cpu\", \"memory\", \"cpu.pressure\", \"memory.pressure\", \"io.pressure\"]", "",
     "The signals published and combined.", set_signals},
    {"node", "composite", KeyType::string, "\"max\" or \"mean\"", "\"max\", \"mean\"", "\"max\"", "",
     "How application_utilization combines the signals.", set_composite},
    {"node", "weights", KeyType::table, "", "signal = weight in [0, 1]", "", "",
     "Per-signal weights for the composite; missing = 1.", set_weights},
    {"node", "include_endpoints", KeyType::boolean, kBoolean, "", "false", "",
     "Each endpoint's composite joins the node's.",
     [](KeyValue& v) {
       v.config.include_endpoints = v.boolean();
       return true;
     }},
    // [[envoy]]
    {"envoy", "scope", KeyType::string, "a scope name such as \"node\"", "\"node\"", "\"node\"", "",
     "Which report the number comes from.", set_envoy_scope},
    {"envoy", "value", KeyType::string, "a value name such as \"application_utilization\"",
     "application_utilization, cpu_utilization, mem_utilization, utilization.<signal>", "\"application_utilization\"",
     "", "Which number of the report.", set_envoy_value},
    {"envoy", "file", KeyType::string, "an absolute path string such as \"/run/orca/envoy/node.pressure\"",
     "absolute path, not ending in .orca", "",
     "the file Envoy's injected resource monitor reads, e.g. file = \"/run/orca/envoy/node.pressure\"",
     "The file Envoy reads.", set_envoy_file},
    {"envoy", "neutral", KeyType::number, kFraction, "[0, 1]", "0.0", "",
     "Written on stop and for a value the report does not carry.", set_envoy_neutral},
    // [[endpoint]]
    {"endpoint", "name", KeyType::string, "a name string such as \"api\"", "1..64 bytes of [A-Za-z0-9_.-], unique", "",
     "a short name such as name = \"api\"; the report is endpoint.<name>.orca", "Names endpoint.<name>.orca.",
     set_endpoint_name},
    {"endpoint", "port", KeyType::integer, "an integer TCP port such as 8080", "1..65535", "",
     "the TCP port the service listens on, e.g. port = 8080", "The local TCP port.", set_endpoint_port},
    {"endpoint", "path", KeyType::string, "a path prefix string such as \"/api\"",
     "starts with /, printable ASCII, at most 63 bytes", "", "", "An HTTP/1.x path prefix.", set_endpoint_path},
    {"endpoint", "protocol", KeyType::string, "a protocol string such as \"http2\"", "\"http1\" or \"http2\"",
     "\"http1\"", "", "HTTP/1.x, or cleartext HTTP/2 and gRPC (streams).", set_endpoint_protocol},
    {"endpoint", "target", KeyType::duration, kDuration, "> 0, at most 10m", "",
     "the latency the endpoint aims for, e.g. target = \"10ms\"", "The SLO target.", set_endpoint_target},
    {"endpoint", "max", KeyType::duration, kDuration, ">= target, at most 10m", "",
     "the latency no request should exceed, at least target, e.g. max = \"500ms\"", "The SLO max.", set_endpoint_max},
    {"endpoint", "max_concurrency", KeyType::integer, "an integer such as 64", "1..1000000", "", "",
     "The most requests handled at once; adds the concurrency signal.", set_max_concurrency},
    // [prometheus]
    {"prometheus", "listen", KeyType::string, "an address string such as \"127.0.0.1:9446\"",
     "\"\" or an IP literal and a port (IPv6 in brackets)", "\"\"", "",
     "Where GET /metrics is served; \"\" is off.", set_prometheus_listen},
    {"prometheus", "textfile", KeyType::string,
     "a path string such as \"/var/lib/prometheus/node-exporter/headroom.prom\"", "\"\" or an absolute path ending in .prom",
     "\"\"", "", "The file node_exporter's textfile collector reads; \"\" is off.", set_prometheus_textfile},
    {"prometheus", "textfile_interval", KeyType::duration, kDuration, "100ms to 1h", "\"15s\"", "",
     "How often the textfile is rewritten (at most once per tick).", set_textfile_interval},
    // [oob]
    {"oob", "listen", KeyType::array, "an array of address strings such as [\"127.0.0.1:9447\"]",
     "at most 16, each an IP literal and port (IPv6 in brackets), or unix: and an absolute path", "[]", "",
     "Where OpenRcaService/StreamCoreMetrics is served; [] is off.", set_oob_listen},
    {"oob", "max_streams", KeyType::integer, "an integer such as 1024", "1..100000", "1024", "",
     "The most streams served at once; more are refused with RESOURCE_EXHAUSTED.", set_oob_max_streams},
    {"oob", "unknown_authority", KeyType::string, "\"node\" or \"error\"", "\"node\", \"error\"", "\"node\"", "",
     "What a stream whose authority names no endpoint's port gets.", set_unknown_authority},
    {"oob", "default_interval", KeyType::duration, kDuration, "10ms to 1h", "\"1s\"", "",
     "The report interval of a request that asks for none.", set_oob_default_interval},
};

}  // namespace

std::span<const KeyRow> config_key_rows() { return kRows; }
std::span<const SectionRow> config_sections() { return kSections; }

const SectionRow* find_section(std::string_view name) {
  for (const SectionRow& s : kSections)
    if (s.name == name) return &s;
  return nullptr;
}

const KeyRow* find_key(std::string_view section, std::string_view key) {
  for (const KeyRow& r : kRows)
    if (r.section == section && r.key == key) return &r;
  return nullptr;
}

std::vector<std::string_view> keys_in(std::string_view section) {
  std::vector<std::string_view> out;
  if (section.empty()) {
    for (const SectionRow& s : kSections) out.push_back(s.name);
  } else if (section == "node.weights") {
    out.assign(std::begin(kNodeSignals), std::end(kNodeSignals));
  } else {
    for (const KeyRow& r : kRows)
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
    for (const KeyRow& r : kRows)
      if (r.section == section && r.type == KeyType::table) out.push_back(r.key);
  }
  return out;
}

std::vector<std::string_view> plain_tables() { return {"agent", "node", "node.weights", "prometheus", "oob"}; }

// ---------------------------------------------------------------------------
// Log levels

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::trace: return "trace";
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
    case LogLevel::critical: return "critical";
    case LogLevel::off: return "off";
  }
  return "info";
}

std::optional<LogLevel> parse_log_level(std::string_view text) {
  for (std::size_t i = 0; i < std::size(kLogLevelNames); ++i)
    if (kLogLevelNames[i] == text) return static_cast<LogLevel>(i);
  return std::nullopt;
}

}  // namespace headroom::agent
