// SPDX-License-Identifier: Apache-2.0
// The rows of [[dependency]] and their setters, side by side, as
// config_rows_endpoint.cc does for [[endpoint]]. address and port (exactly
// one of them) and max >= target are checked once the whole entry is read
// (agent/config/config.cc).
#include <cstdint>
#include <iterator>
#include <utility>

#include "agent/config/config_checks.h"
#include "agent/config/config_messages.h"
#include "agent/config/config_rows.h"

namespace headroom::agent {

namespace {

bool set_name(KeyValue& v) {
  if (auto r = check_dependency_name(v.str()); !r) return v.fail(std::move(r).error());
  v.dependency->name = v.str();
  return true;
}

bool set_address(KeyValue& v) {
  auto a = parse_dependency_address(v.str());
  if (!a) return v.fail(std::move(a).error());
  v.dependency->host = a->host;
  v.dependency->port = a->port;
  return true;
}

bool set_port(KeyValue& v) {
  const std::int64_t port = v.node.as_integer()->get();
  if (auto r = check_endpoint_port(port, std::to_string(port)); !r) return v.fail(std::move(r).error());
  v.dependency->port = static_cast<uint16_t>(port);
  return true;
}

bool set_callers_cgroup(KeyValue& v) {
  if (auto r = check_callers_cgroup(v.str()); !r) return v.fail(std::move(r).error());
  v.dependency->callers_cgroup = v.str();
  return true;
}

bool set_callers_process(KeyValue& v) {
  if (auto r = check_callers_process(v.str()); !r) return v.fail(std::move(r).error());
  v.dependency->callers_process = v.str();
  return true;
}

bool set_protocol(KeyValue& v) {
  if (auto r = check_dependency_protocol(v.str()); !r) return v.fail(std::move(r).error());
  v.dependency->protocol = *parse_dependency_protocol(v.str());
  return true;
}

bool set_target(KeyValue& v) {
  const auto d = v.duration();
  if (!d) return false;
  if (auto r = check_endpoint_target(*d); !r) return v.fail(std::move(r).error());
  v.dependency->target = *d;
  return true;
}

bool set_max(KeyValue& v) {
  const auto d = v.duration();
  if (!d) return false;
  v.dependency->max = *d;
  return true;
}

bool set_max_concurrency(KeyValue& v) {
  const std::int64_t n = v.node.as_integer()->get();
  if (auto r = check_max_concurrency(n, std::to_string(n)); !r) return v.fail(std::move(r).error());
  v.dependency->max_concurrency = static_cast<uint32_t>(n);
  return true;
}

bool set_errors(KeyValue& v) {
  auto e = parse_dependency_errors(v.str());
  if (!e) return v.fail(std::move(e).error());
  v.dependency->errors = *e;
  return true;
}

}  // namespace

// [[dependency]]
void add_dependency_rows(std::vector<KeyRow>& out, const KeyFacts& f) {
  const DependencyConfig d{};
  const KeyRow rows[] = {
      {"dependency", "name", KeyType::string, "a name string such as \"cache\"",
       "1 to " + n(kMaxDependencyNameBytes) + " bytes of A-Z, a-z, 0-9, _, ., -; not . or ..; unique", "",
       "a short name such as name = \"cache\"; the report is dependency.<name>.orca",
       "Names the report file `dependency.<name>.orca` ([dependencies.md](dependencies.md)).", set_name,
       "\"cache\""},
      {"dependency", "address", KeyType::string, "an address string such as \"10.0.0.5:6379\"",
       "an IPv4 address and a port (\"10.0.0.5:6379\") or an IPv6 address in brackets and a port "
       "(\"[2001:db8::5]:443\"); not with port",
       "", "",
       "The remote side: calls on connections to this address and port. An IP address, not a host name (names are "
       "not resolved). Give `address` or `port`, not both.",
       set_address, "\"10.0.0.5:6379\""},
      {"dependency", "port", KeyType::integer, "an integer TCP port such as 6379", "1 to " + n(kMaxPort) + "; not with address",
       "", "",
       "The remote side as a port alone: calls on connections to this port of any host. Give `address` or `port`, "
       "not both.",
       set_port, "6379"},
      {"dependency", "callers_cgroup", KeyType::string, "a cgroup path string such as \"/system.slice/api.service\"",
       "starts with /, as /proc/PID/cgroup shows it, " + path_limits(), "", "",
       "Counts only the calls of processes in this cgroup or below it. Without it (and without `callers_process`), "
       "the calls of every process on the node.",
       set_callers_cgroup, "\"/system.slice/api.service\""},
      {"dependency", "callers_process", KeyType::string, "a process name string such as \"api\"",
       "1 to " + n(kMaxCallerProcessBytes) + " bytes (the kernel's process name, comm)", "", "",
       "Counts only the calls of processes of this name (comm, as `ps -o comm` shows it). With `callers_cgroup` "
       "too, a process must match both.",
       set_callers_process, "\"api\""},
      {"dependency", "protocol", KeyType::string, "a protocol string such as \"generic\"",
       quoted(kDependencyProtocolNames, " or "), quote(dependency_protocol_name(d.protocol)), "",
       "How calls are told apart on a connection: `\"http1\"` one at a time, a 5xx status an error; `\"http2\"` "
       "cleartext HTTP/2 (gRPC clients), each stream a call, a `:status` 5xx or a `grpc-status` other than OK an "
       "error; `\"generic\"` any request/response protocol, one call at a time (Redis, SQL wire protocols), "
       "only connect failures and resets errors.",
       set_protocol, ""},
      {"dependency", "target", KeyType::duration, kDuration, "> 0, at most " + format_duration(kMaxEndpointLatency), "",
       "the latency a call should take, e.g. target = \"5ms\"",
       "The latency a call should take; the `latency.slo_target` signal measures calls against it.", set_target,
       "\"5ms\""},
      {"dependency", "max", KeyType::duration, kDuration, ">= target, at most " + format_duration(kMaxEndpointLatency),
       "", "the latency past which the callers give up on a call, at least target, e.g. max = \"100ms\"",
       "The latency past which a call is as good as failed (the callers' timeout); the `latency.slo_max` signal "
       "measures calls against it, and a call in flight longer counts as late.",
       set_max, "\"100ms\""},
      {"dependency", "max_concurrency", KeyType::integer, "an integer such as 32", "1 to " + n(kMaxConcurrencyLimit),
       "", "",
       "The bulkhead's size: how many calls the callers allow in flight at once. Declaring it adds the "
       "`concurrency` signal: calls in flight over the last interval as a share of it, bounded to 1.",
       set_max_concurrency, "32"},
      {"dependency", "errors", KeyType::string, "a string of kinds joined by + such as \"connect+reset+5xx\"",
       "kinds from \"connect\", \"reset\", \"5xx\", \"4xx\", each once, joined by +; or \"none\"",
       quote(format_dependency_errors(d.errors)), "",
       "The error rule: which failed calls the `errors` signal counts. `connect`: a connect refused, timed out or "
       "given up; `reset`: a reset, or a close with the call in flight (for `http2` also a stream reset, "
       "RST_STREAM); `5xx`: an answer with a 5xx status (`http1`, `http2`) or a `grpc-status` other than OK "
       "(`http2`); `4xx`: an answer with a 4xx status (`http1`, `http2`). `generic` answers are not read, so "
       "`5xx` and `4xx` count nothing there. Connect failures and resets are counted apart (named metrics) "
       "whatever the rule.",
       set_errors, "\"connect+reset+5xx+4xx\""},
  };
  (void)f;
  out.insert(out.end(), std::begin(rows), std::end(rows));
}

}  // namespace headroom::agent
