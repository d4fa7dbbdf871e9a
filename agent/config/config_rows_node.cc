// SPDX-License-Identifier: Apache-2.0
// The rows of [agent] and [node] and their setters, side by side: a setter sees a value
// of the row's type (checked before it runs), checks only its range and
// stores it; false after reporting an error. The messages say what is wrong
// and what to write instead.
#include "agent/config/config_rows.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <utility>

#include "agent/config/config_checks.h"
#include "agent/config/config_messages.h"

namespace headroom::agent {

using namespace std::string_view_literals;

namespace {

bool is_signal(std::string_view name) {
  return std::find(std::begin(kNodeSignals), std::end(kNodeSignals), name) != std::end(kNodeSignals);
}

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

bool set_endpoint_instances(KeyValue& v) {
  const std::int64_t n = v.node.as_integer()->get();
  if (n < 1 || n > kMaxEndpointInstances)
    return v.fail("must be from 1 to " + std::to_string(kMaxEndpointInstances) + ", got " + std::to_string(n));
  v.config.endpoint_instances = static_cast<uint32_t>(n);
  return true;
}

bool set_instance_grace(KeyValue& v) {
  const auto d = v.duration();
  if (!d) return false;
  if (*d < std::chrono::nanoseconds(0) || *d > kMaxInstanceGrace)
    return v.fail("must be from 0s to " + format_duration(kMaxInstanceGrace) + ", got " + v.str());
  v.config.instance_grace = *d;
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

}  // namespace

// [agent]
void add_agent_rows(std::vector<KeyRow>& out, const KeyFacts& f) {
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
       "what procfs alone measures ([endpoints.md](endpoints.md)). The same for the dependency probe and "
       "`[[dependency]]` (`--dependency`), whose reports then say `headroom.ebpf.unavailable` "
       "([dependencies.md](dependencies.md)). `\"off\"` never loads them (`--no-ebpf`). "
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
      {"agent", "endpoint_instances", KeyType::integer, "an integer such as 256", "1 to " + n(kMaxEndpointInstances),
       std::to_string(f.d.endpoint_instances), "",
       "The most instances of one endpoint (its servers in distinct network namespaces: pods) counted and reported "
       "apart, each in `endpoint.<name>@<instance>.orca` ([endpoints.md](endpoints.md)). The requests of instances "
       "past it still count in `endpoint.<name>.orca`, without a report of their own; one warning says so. The "
       "kernel keeps about 2.4 KiB per CPU for each instance that has served.",
       set_endpoint_instances, ""},
      {"agent", "instance_grace", KeyType::duration, kDuration, "0s to " + format_duration(kMaxInstanceGrace),
       toml_duration(f.d.instance_grace), "",
       "How long the report of an instance that stopped serving (no server listens in its namespace any more) "
       "stays, saying so (`headroom.instance.gone = 1`, `headroom.stopped = 1`), before it is removed. A server "
       "that comes back within it keeps its instance.",
       set_instance_grace, ""},
  };
  out.insert(out.end(), std::begin(rows), std::end(rows));
}

// [node]
void add_node_rows(std::vector<KeyRow>& out, const KeyFacts& f) {
  const std::vector<std::string_view> signals(std::begin(kNodeSignals), std::end(kNodeSignals));
  const KeyRow rows[] = {
      {"node", "cgroup", KeyType::string, "a cgroup path string such as \"system.slice/api.service\"",
       "\"\" or a path relative to the cgroup root", quote(f.d.cgroup), "",
       "Whose load the node report describes. `\"\"` is the whole host; `\"system.slice/api.service\"` is that "
       "cgroup (a leading `/`, as `/proc/PID/cgroup` prints it, is accepted; `\"/\"` is the host). Paths with `..` "
       "and mount paths such as `/sys/fs/cgroup/...` are refused. That the cgroup exists is checked at start-up and "
       "by `--check-config` (cgroup v1: in at least one of the cpuacct, cpu and memory hierarchies). Each "
       "controller is read on its own: one that is missing or unreadable makes only its own signal unavailable, "
       "logged once ([orca-files.md](orca-files.md)).",
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

}  // namespace headroom::agent
