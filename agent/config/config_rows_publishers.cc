// SPDX-License-Identifier: Apache-2.0
// The rows of the publishers' sections ([[envoy]], [prometheus], [oob]) and their setters, side by side: a setter sees a value
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

bool set_oob_instance_listen(KeyValue& v) {
  const std::string& s = v.str();
  if (s.empty()) {
    v.config.oob.instance_listen.clear();
    return true;
  }
  if (s.starts_with("unix:"))
    return v.fail("an instance's listener is a TCP address inside its network namespace, and a unix socket's path "
                  "is not in a network namespace; write an IP literal and a port such as \"0.0.0.0:9447\"");
  if (auto r = check_oob_address(s); !r) return v.fail(std::move(r).error());
  v.config.oob.instance_listen = s;
  return true;
}

}  // namespace

// [[envoy]]
void add_envoy_rows(std::vector<KeyRow>& out, const KeyFacts& f) {
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

// [prometheus]
void add_prometheus_rows(std::vector<KeyRow>& out, const KeyFacts& f) {
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
void add_oob_rows(std::vector<KeyRow>& out, const KeyFacts& f) {
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
       "What a stream whose `:authority` names neither the port nor the name of an `[[endpoint]]`, nor "
       "`dependency.<name>` of a `[[dependency]]`, gets: the node report, or `NOT_FOUND`.",
       set_unknown_authority, ""},
      {"oob", "default_interval", KeyType::duration, kDuration,
       range(kMinOobDefaultInterval, kMaxOobDefaultInterval), toml_duration(f.d.oob.default_interval), "",
       "The report interval of a request that sets none (or zero); never faster than `agent.interval`.",
       set_oob_default_interval, ""},
      {"oob", "instance_listen", KeyType::string, "an address string such as \"0.0.0.0:9447\"",
       "\"\" (off), or an IP literal and a port (IPv6 in brackets)", quote(f.d.oob.instance_listen), "",
       "A listener on this address inside each endpoint instance's network namespace (a pod's), whose every stream "
       "gets that instance's report, `endpoint.<name>@<instance>`, whatever its `:authority` "
       "([oob.md](oob.md)); opened when the instance appears, closed when it stops serving. Needs "
       "`CAP_SYS_ADMIN` (setns), which the packaged unit does not grant; a listener that cannot be opened is "
       "logged once and retried, and never stops the others. An instance in headroomd's own network namespace "
       "(`host`) is served by `listen`.",
       set_oob_instance_listen, ""},
  };
  out.insert(out.end(), std::begin(rows), std::end(rows));
}

}  // namespace headroom::agent
