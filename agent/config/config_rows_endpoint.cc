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
  };
  out.insert(out.end(), std::begin(rows), std::end(rows));
}

}  // namespace headroom::agent
