// SPDX-License-Identifier: Apache-2.0
// The key table. Each row's allowed text is built from the constants its
// setter checks against (agent/config/config.h, config_checks.h, the
// publishers' *_config.h), and its default from the struct's default, so a
// bound or a default is written once. Setters: agent/config/config_setters.cc.
#include "agent/config/config_keys.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>

#include "agent/config/config_checks.h"
#include "agent/config/config_messages.h"
#include "agent/config/config_setters.h"

namespace headroom::agent {

namespace {

constexpr const char* kDuration = "a duration string such as \"100ms\"";
constexpr const char* kBoolean = "a boolean (true or false)";
constexpr const char* kFraction = "a number (a fraction in [0, 1])";

// Row order is the order of "valid keys are ..." lists.
constexpr SectionRow kSections[] = {
    {"agent", false, "", 0},
    {"node", false, "", 0},
    {"envoy", true, "file", kMaxEnvoyBridges},
    {"endpoint", true, "endpoint", kMaxEndpoints},
    {"prometheus", false, "", 0},
    {"oob", false, "", 0},
};

template <class Integer>
std::string n(Integer v) {
  return std::to_string(v);
}
std::string toml_bool(bool b) { return b ? "true" : "false"; }
std::string toml_duration(std::chrono::nanoseconds d) { return quote(format_duration(d)); }
std::string range(std::chrono::nanoseconds lo, std::chrono::nanoseconds hi) {
  return format_duration(lo) + " to " + format_duration(hi);
}
std::string quoted(Names names, std::string_view last = ", ") { return quoted_list(names, last); }
template <class T>
std::string toml_array(const std::vector<T>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i > 0 ? ", " : "") + quote(values[i]);
  return out + "]";
}
std::string path_limits() {
  return "at most " + n(kMaxPathBytes) + " bytes, each name in it at most " + n(kMaxPathComponentBytes);
}

// Shared by the sections' rows.
struct Facts {
  const Config d{};
  const EnvoyBridgeConfig envoy{};
  const EndpointConfig endpoint{};
  const std::string absolute = "absolute path, " + path_limits();
};

// [agent]
void add_agent_rows(std::vector<KeyRow>& out, const Facts& f) {
  const KeyRow rows[] = {
      {"agent", "interval", KeyType::duration, kDuration, range(kMinInterval, kMaxInterval),
       toml_duration(f.d.interval), "",
       "How often the probes are sampled and the report files rewritten. Each tick reads `/proc` (and cgroupfs) "
       "and rewrites every report: a shorter interval spends the CPU the agent is there to measure. The systemd "
       "watchdog is fed after every tick and at least every quarter of `WATCHDOG_USEC`, so a long interval never "
       "trips it ([systemd.md](systemd.md)).",
       set_interval, ""},
      {"agent", "smoothing", KeyType::duration, kDuration,
       "0s to " + format_duration(kMaxSmoothing) + ", and at most " + n(kMaxWindowSlots) + " intervals",
       toml_duration(f.d.smoothing), "",
       "Time constant of the exponential moving average applied to each signal: after a step change, ~63 % of the "
       "step shows after this long. Shorter reacts faster but follows bursts; longer is steadier but lets a queue "
       "build first ([buffers.md](buffers.md) has the measured trade-off). `\"0s\"` publishes the raw per-interval "
       "values. Each endpoint's latency window keeps one slot per interval for as long as `smoothing`; the error "
       "says which of the two to change.",
       set_smoothing, ""},
      {"agent", "orca_dir", KeyType::string, "an absolute path string such as \"/run/orca\"", f.absolute,
       quote(f.d.orca_dir), "",
       "Directory the report files are written to (`node.orca`, `endpoint.<name>.orca`), each replaced atomically "
       "(write + rename). Created if missing. Overridden by `--orca-dir`.",
       [](KeyValue& v) { return set_path(v, v.config.orca_dir, "\"/run/orca\""); }, ""},
      {"agent", "proc_root", KeyType::string, "an absolute path string such as \"/proc\"", f.absolute,
       quote(f.d.proc_root), "",
       "Where procfs is mounted, e.g. `\"/host/proc\"` in a container. Overridden by `--proc-root`.",
       [](KeyValue& v) { return set_path(v, v.config.proc_root, "\"/proc\""); }, ""},
      {"agent", "sys_root", KeyType::string, "an absolute path string such as \"/sys\"", f.absolute, quote(f.d.sys_root),
       "",
       "Where sysfs is mounted; cgroups are read under `<sys_root>/fs/cgroup`. Overridden by `--sys-root`.",
       [](KeyValue& v) { return set_path(v, v.config.sys_root, "\"/sys\""); }, ""},
      {"agent", "log_level", KeyType::string, "a log level string such as \"info\"", quoted(kLogLevelNames),
       quote(log_level_name(f.d.log_level)), "", "Log verbosity. Overridden by `--log-level`.", set_log_level, ""},
      {"agent", "fsync", KeyType::boolean, kBoolean, "", toml_bool(f.d.fsync), "",
       "fsync each report file before the rename. Only useful if reports must survive power loss (not for a tmpfs "
       "like `/run`).",
       [](KeyValue& v) {
         v.config.fsync = v.boolean();
         return true;
       },
       ""},
      {"agent", "ebpf", KeyType::any, quoted(kEbpfModes, " or "), quoted(kEbpfModes),
       quote(kEbpfModes[static_cast<std::size_t>(f.d.ebpf)]), "",
       "Whether the eBPF endpoint probes are loaded. `\"auto\"` loads them when at least one endpoint is declared "
       "(`[[endpoint]]` or `--endpoint`); if they cannot be loaded, one error is logged and the endpoints get only "
       "what procfs alone measures ([endpoints.md](endpoints.md)). `\"off\"` never loads them (`--no-ebpf`). "
       "`true`/`false` are not accepted.",
       set_ebpf, ""},
      {"agent", "unsafe_orca_dir", KeyType::string, quoted(kUnsafeDirActions, " or "), quoted(kUnsafeDirActions),
       quote(kUnsafeDirActions[static_cast<std::size_t>(f.d.unsafe_orca_dir)]), "",
       "What to do when others than the agent's user can write into `orca_dir` (writable by its group or by "
       "everyone without the sticky bit, or owned by another user than the agent's and root): such a user could "
       "replace or plant the reports proxies shed on. `\"refuse\"` exits with 73 and says how to fix it (`chown` to "
       "the agent's user, `chmod 0755`); `\"warn\"` logs a warning and publishes there. The packaged unit's "
       "`RuntimeDirectory=orca` and a directory headroomd creates itself are `0755`, owned by the agent's user.",
       set_unsafe_orca_dir, ""},
  };
  out.insert(out.end(), std::begin(rows), std::end(rows));
}

// [node]
void add_node_rows(std::vector<KeyRow>& out, const Facts& f) {
  const std::vector<std::string_view> signals(std::begin(kNodeSignals), std::end(kNodeSignals));
  const KeyRow rows[] = {
      {"node", "cgroup", KeyType::string, "a cgroup path string such as \"system.slice/api.service\"",
       "\"\" or a path relative to the cgroup root", quote(f.d.cgroup), "",
       "Whose load the node report describes. `\"\"` is the whole host; `\"system.slice/api.service\"` is that "
       "cgroup (a leading `/`, as `/proc/PID/cgroup` prints it, is accepted; `\"/\"` is the host). Paths with `..` "
       "and mount paths such as `/sys/fs/cgroup/...` are refused. That the cgroup exists is checked at start-up and "
       "by `--check-config`.",
       set_cgroup, ""},
      {"node", "cgroup_version", KeyType::any, "\"auto\", 1 or 2", "\"auto\", 1, 2", "\"auto\"", "",
       "Which cgroup hierarchy to read. `\"auto\"` picks v2 when `<sys_root>/fs/cgroup/cgroup.controllers` exists, "
       "v1 otherwise. `1` and `2` are integers, not strings.",
       set_cgroup_version, ""},
      {"node", "signals", KeyType::array, "an array of signal names such as [\"cpu\", \"memory\"]",
       "non-empty, each signal at most once: " + quoted(signals), toml_array(f.d.signals), "",
       "The signals published in the report's `utilization` map and combined into `application_utilization` "
       "([Signals](#signals)).",
       set_signals, ""},
      {"node", "composite", KeyType::string, quoted(kCompositeNames, " or "), quoted(kCompositeNames),
       quote(kCompositeNames[static_cast<std::size_t>(f.d.composite)]), "",
       "How `application_utilization` combines the enabled signals: `\"max\"` the largest weight × value (the "
       "scarcest resource decides), `\"mean\"` the weighted mean.",
       set_composite, ""},
      {"node", "weights", KeyType::table, "", "signal = weight in [0, 1]", "", "",
       "Per-signal weights for the composite; a signal without one has weight 1 "
       "([`[node.weights]`](#nodeweights)).",
       set_weights, ""},
      {"node", "include_endpoints", KeyType::boolean, kBoolean, "", toml_bool(f.d.include_endpoints), "",
       "When `true`, each endpoint's composite also enters the node's `application_utilization`, as one more "
       "signal named `endpoint.<name>` (weight 1). No effect without endpoints.",
       [](KeyValue& v) {
         v.config.include_endpoints = v.boolean();
         return true;
       },
       ""},
  };
  out.insert(out.end(), std::begin(rows), std::end(rows));
}

// [[envoy]]
void add_envoy_rows(std::vector<KeyRow>& out, const Facts& f) {
  std::string envoy_values;
  for (const auto& v : publishers::kEnvoyValueNames) envoy_values += std::string(v.name) + ", ";
  envoy_values += std::string(publishers::kEnvoyUtilizationPrefix) + "<signal>";
  const KeyRow rows[] = {
      {"envoy", "scope", KeyType::string, "a scope name such as \"node\"", quoted(kEnvoyScopes), quote(f.envoy.scope),
       "",
       "Which report the number comes from; only the node report feeds Envoy today (endpoint reports are read by "
       "ORCA consumers directly).",
       set_envoy_scope, ""},
      {"envoy", "value", KeyType::string, "a value name such as \"application_utilization\"", envoy_values,
       quote(f.envoy.value), "",
       "Which number of the report. `utilization.<signal>` is one entry of the report's `utilization` map, e.g. "
       "`\"utilization.cpu.pressure\"`; the signal must be enabled in `node.signals` (and so must `cpu` for "
       "`cpu_utilization` and `memory` for `mem_utilization`).",
       set_envoy_value, ""},
      {"envoy", "file", KeyType::string, "an absolute path string such as \"/run/orca/envoy/node.pressure\"",
       f.absolute + " (the file name at most " + n(kMaxWrittenFileNameBytes) + "), not ending in .orca", "",
       "the file Envoy's injected resource monitor reads, e.g. file = \"/run/orca/envoy/node.pressure\"",
       "The file Envoy's `filename` names. Its directory is created if missing (mode 0755). Stored lexically "
       "normalized (`/run//x/./y` is `/run/x/y`); two entries may not name the same file; the name may not start "
       "with `.` (the writer's temporary files do) or end in `.orca` (reserved for report files). It may be inside "
       "`agent.orca_dir`.",
       set_envoy_file, kEnvoyFileExample},
      {"envoy", "neutral", KeyType::number, kFraction, "[0, 1]", format_double(f.envoy.neutral), "",
       "Written when the agent stops cleanly and when a reload removes the entry, and instead of a value the "
       "report does not carry (a signal unavailable right now) or NaN.",
       set_envoy_neutral, ""},
  };
  out.insert(out.end(), std::begin(rows), std::end(rows));
}

// [[endpoint]]
void add_endpoint_rows(std::vector<KeyRow>& out, const Facts& f) {
  const KeyRow rows[] = {
      {"endpoint", "name", KeyType::string, "a name string such as \"api\"",
       "1 to " + n(kMaxEndpointNameBytes) + " bytes of A-Z, a-z, 0-9, _, ., -; not . or ..; unique", "",
       "a short name such as name = \"api\"; the report is endpoint.<name>.orca",
       "Names the report file `endpoint.<name>.orca` (and the signal `endpoint.<name>` with "
       "`node.include_endpoints`).",
       set_endpoint_name, "\"api\""},
      {"endpoint", "port", KeyType::integer, "an integer TCP port such as 8080", "1 to " + n(kMaxPort), "",
       "the TCP port the service listens on, e.g. port = 8080", "The local TCP port the service listens on.",
       set_endpoint_port, "8080"},
      {"endpoint", "path", KeyType::string, "a path prefix string such as \"/api\"",
       "starts with /, printable ASCII without spaces, at most " + n(kMaxEndpointPathBytes) + " bytes; at most " +
           n(kMaxPathsPerPort) + " per port",
       "", "",
       "An HTTP/1.x path prefix: the endpoint counts only the requests on `port` whose path starts with it (the "
       "longest matching prefix wins). Non-ASCII bytes and spaces are written percent-encoded, as they appear in "
       "requests (`\"/caf%C3%A9\"`). Without it, every request on the port.",
       set_endpoint_path, "\"/play\""},
      {"endpoint", "protocol", KeyType::string, "a protocol string such as \"http2\"",
       quoted(kEndpointProtocolNames, " or "), quote(endpoint_protocol_name(f.endpoint.protocol)), "",
       "How requests are told apart on a connection: `\"http1\"` one at a time (HTTP/1.x); `\"http2\"` cleartext "
       "HTTP/2 (h2c, gRPC without TLS), each stream a request, and a gRPC status other than OK or a `:status` 5xx "
       "an error ([endpoints.md](endpoints.md#http2-and-grpc)). Every endpoint of a port says the same; an "
       "`\"http2\"` endpoint has no `path`.",
       set_endpoint_protocol, ""},
      {"endpoint", "target", KeyType::duration, kDuration, "> 0, at most " + format_duration(kMaxEndpointLatency), "",
       "the latency the endpoint aims for, e.g. target = \"10ms\"",
       "The latency the endpoint aims for (SLO target); the `latency.slo_target` signal measures requests against "
       "it.",
       set_endpoint_target, "\"10ms\""},
      {"endpoint", "max", KeyType::duration, kDuration, ">= target, at most " + format_duration(kMaxEndpointLatency),
       "", "the latency no request should exceed, at least target, e.g. max = \"500ms\"",
       "The latency no request should exceed (SLO max); the `latency.slo_max` signal measures requests against it.",
       set_endpoint_max, "\"500ms\""},
      {"endpoint", "max_concurrency", KeyType::integer, "an integer such as 64", "1 to " + n(kMaxConcurrencyLimit),
       "", "",
       "How many requests the service handles at once at most (its worker or connection limit). Declaring it adds "
       "the `concurrency` signal to the endpoint's report.",
       set_max_concurrency, "64"},
  };
  out.insert(out.end(), std::begin(rows), std::end(rows));
}

// [prometheus]
void add_prometheus_rows(std::vector<KeyRow>& out, const Facts& f) {
  const KeyRow rows[] = {
      {"prometheus", "listen", KeyType::string, "an address string such as \"127.0.0.1:9446\"",
       "\"\" or an IP literal and a port 1 to " + n(kMaxPort) + " (IPv6 in brackets)", quote(f.d.prometheus.listen),
       "",
       "Where `GET /metrics` is served; `\"\"` is off. Host names are refused (the address must not depend on name "
       "resolution at start). An address that cannot be listened on stops the start with exit 73, and a reload "
       "with it is rejected; a reload that keeps the address keeps the socket. Under the packaged unit it needs "
       "the drop-in `prometheus.conf` ([systemd.md](systemd.md)).",
       set_prometheus_listen, ""},
      {"prometheus", "textfile", KeyType::string,
       "a path string such as \"/var/lib/prometheus/node-exporter/headroom.prom\"",
       "\"\" or an " + f.absolute + ", whose file name ends in .prom", quote(f.d.prometheus.textfile), "",
       "The file node_exporter's textfile collector reads (Debian: `/var/lib/prometheus/node-exporter/`); `\"\"` "
       "is off. Written to a temporary file in the same directory and renamed, mode 0644. The directory is not "
       "created; while it is missing or not writable, one error is logged and writing is retried.",
       set_prometheus_textfile, ""},
      {"prometheus", "textfile_interval", KeyType::duration, kDuration,
       range(kMinTextfileInterval, kMaxTextfileInterval), toml_duration(f.d.prometheus.textfile_interval), "",
       "How often the textfile is rewritten, at most once per `agent.interval`; about the scrape interval is right.",
       set_textfile_interval, ""},
  };
  out.insert(out.end(), std::begin(rows), std::end(rows));
}

// [oob]
void add_oob_rows(std::vector<KeyRow>& out, const Facts& f) {
  const KeyRow rows[] = {
      {"oob", "listen", KeyType::array, "an array of address strings such as [\"127.0.0.1:9447\"]",
       "at most " + n(kMaxOobListeners) + ", each an IP literal and a port (IPv6 in brackets), or unix: and an " +
           "absolute path of at most " + n(kMaxUnixSocketPathBytes) + " bytes; each once",
       toml_array(f.d.oob.listen), "",
       "Where `OpenRcaService/StreamCoreMetrics` is served, plaintext HTTP/2 ([oob.md](oob.md)); `[]` is off. An "
       "address that cannot be listened on stops the start with exit 73, and a reload with it is rejected; a "
       "reload that keeps an address keeps its listener and its streams. TCP under the packaged unit needs the "
       "drop-in `oob.conf` ([systemd.md](systemd.md)).",
       set_oob_listen, ""},
      {"oob", "max_streams", KeyType::integer, "an integer such as 1024", "1 to " + n(kMaxOobStreams),
       std::to_string(f.d.oob.max_streams), "",
       "The most streams served at once, over all listeners; one more is answered `RESOURCE_EXHAUSTED`.",
       set_oob_max_streams, ""},
      {"oob", "unknown_authority", KeyType::string, quoted(kUnknownAuthorityChoices, " or "),
       quoted(kUnknownAuthorityChoices),
       quote(kUnknownAuthorityChoices[f.d.oob.unknown_authority_error ? 1 : 0]), "",
       "What a stream whose `:authority` names neither the port nor the name of an `[[endpoint]]` gets: the node "
       "report, or `NOT_FOUND`.",
       set_unknown_authority, ""},
      {"oob", "default_interval", KeyType::duration, kDuration,
       range(kMinOobDefaultInterval, kMaxOobDefaultInterval), toml_duration(f.d.oob.default_interval), "",
       "The report interval of a request that sets none (or zero); never faster than `agent.interval`.",
       set_oob_default_interval, ""},
  };
  out.insert(out.end(), std::begin(rows), std::end(rows));
}

std::vector<KeyRow> build_rows() {
  const Facts facts;
  std::vector<KeyRow> out;
  add_agent_rows(out, facts);
  add_node_rows(out, facts);
  add_envoy_rows(out, facts);
  add_endpoint_rows(out, facts);
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
    for (const SectionRow& s : kSections) out.push_back(s.name);
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
