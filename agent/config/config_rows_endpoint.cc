// SPDX-License-Identifier: Apache-2.0
// The rows of [[endpoint]] and their setters, side by side: a setter sees a value
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
#include "headroom/orca/shedder_config.h"

namespace headroom::agent {

using namespace std::string_view_literals;

namespace {

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

// -- [[endpoint.shed]] ---------------------------------------------------------
// Each key of an entry is stored as written; the entry as a whole is checked
// by orca::check_shed_entry (the shedder's own reader checks the same), once
// the endpoint's entries are all read.

bool set_shed_signal(KeyValue& v) {
  if (auto r = orca::check_shed_signal(v.str()); !r) return v.fail(std::move(r).error());
  v.shed->signal = v.str();
  return true;
}

bool set_shed_start(KeyValue& v) {
  v.shed->shed_start = v.number();
  return true;
}

bool set_critical_start(KeyValue& v) {
  v.shed->critical_start = v.number();
  return true;
}

bool set_all_shed(KeyValue& v) {
  v.shed->all_shed = v.number();
  return true;
}

// The endpoint's entries, each read: checked one by one, then each signal
// once, and stored.
bool set_endpoint_shed(KeyValue& v) {
  if (v.shed_entries.size() > orca::kMaxShedEntries)
    return v.fail("has " + n(v.shed_entries.size()) + " entries; at most " + n(orca::kMaxShedEntries) +
                  " [[endpoint.shed]] entries per endpoint (one per signal)");
  std::vector<std::pair<std::string, orca::SignalThresholds>> shed;
  for (std::size_t i = 0; i < v.shed_entries.size(); ++i) {
    const std::string ekey = v.key + "[" + n(i) + "]";
    auto checked = orca::check_shed_entry(v.shed_entries[i]);
    if (!checked) {
      Error e = std::move(checked).error();
      const std::string key = ekey + "." + e.key;
      e.key = key;
      v.reader.error(v.reader.where(key).value_or(*v.reader.where(ekey)), key, std::move(e));
      return false;
    }
    for (std::size_t j = 0; j < shed.size(); ++j) {
      if (shed[j].first != checked->first) continue;
      const std::string okey = v.key + "[" + n(j) + "]";
      v.reader.error(*v.reader.where(ekey + ".signal"), ekey + ".signal",
                     "signal " + quote(checked->first) + " is listed twice (also " + okey + " at line " +
                         n(v.reader.where(okey)->begin.line) + "); give each signal once");
      return false;
    }
    shed.push_back(std::move(*checked));
  }
  v.endpoint->shed = std::move(shed);
  return true;
}

}  // namespace

// [[endpoint]]
void add_endpoint_rows(std::vector<KeyRow>& out, const KeyFacts& f) {
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
       "the `concurrency` signal to the endpoint's report: the requests in flight, queued ones included, "
       "over the last interval as a share of it, bounded to 1 "
       "([shedding.md](shedding.md#the-concurrency-signal)).",
       set_max_concurrency, "64"},
      {"endpoint", "shed", KeyType::tables, "an array of tables: one [[endpoint.shed]] section per signal",
       "at most " + n(orca::kMaxShedEntries) + " entries, each signal once", "", "",
       "The reference shedder's function on this endpoint's report: one `[[endpoint.shed]]` entry per signal "
       "(its keys below). headroomd checks the entries and does not use them; the reference shedder reads them "
       "([shedding.md](shedding.md#the-shedders-function-in-headroomtoml)).",
       set_endpoint_shed, ""},
  };
  out.insert(out.end(), std::begin(rows), std::end(rows));
}

// [[endpoint.shed]]
void add_endpoint_shed_rows(std::vector<KeyRow>& out, const KeyFacts&) {
  const KeyRow rows[] = {
      {"endpoint.shed", "signal", KeyType::string, "a signal name string such as \"cpu_utilization\"",
       "\"application_utilization\", \"cpu_utilization\", \"mem_utilization\" or \"utilization.<key>\"; each "
       "once per endpoint",
       "", "the signal to shed on, e.g. signal = \"utilization.latency.slo_target\"",
       "The signal of the endpoint's report the shedder reads: a top-level field, or `utilization.` and a key of "
       "the report's utilization map (`utilization.latency.slo_target`, `utilization.latency.slo_max`, "
       "`utilization.concurrency`).",
       set_shed_signal, "\"utilization.latency.slo_target\""},
      {"endpoint.shed", "shed_start", KeyType::number, "a number (a utilization such as 0.6)",
       ">= 0, less than critical_start", "",
       "the utilization where non-critical shedding starts, e.g. shed_start = 0.6",
       "The utilization where non-critical shedding starts: BULK, then BEST_EFFORT, then DEGRADED, each in its "
       "own third of the range up to `critical_start`.",
       set_shed_start, "0.6"},
      {"endpoint.shed", "critical_start", KeyType::number, "a number (a utilization such as 0.8)",
       "greater than shed_start", "",
       "the utilization where CRITICAL shedding starts, e.g. critical_start = 0.8",
       "The utilization where CRITICAL shedding starts; every other priority is shed in full there.",
       set_critical_start, "0.8"},
      {"endpoint.shed", "all_shed", KeyType::number, "a number (a utilization such as 1.0)",
       "greater than critical_start", "",
       "",
       "The utilization where everything is shed. Without it, the signal's default: 1.5 for the CPU signals "
       "(`application_utilization`, `cpu_utilization`, `utilization.cpu`), 1.0 for the others.",
       set_all_shed, "1.0"},
  };
  out.insert(out.end(), std::begin(rows), std::end(rows));
}

}  // namespace headroom::agent
