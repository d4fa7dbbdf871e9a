// SPDX-License-Identifier: Apache-2.0
#include "agent/config/config_checks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <utility>

#include "agent/config/config_messages.h"
#include "publishers/envoy_bridge_config.h"
#include "probes/cgroup.h"

namespace headroom::agent {

namespace {

using namespace std::string_view_literals;

// Every value a node [[envoy]] entry can publish: the bridge's names, then
// utilization.<signal> for each signal of the table; and the signal each
// needs in node.signals ("" = none in particular).
struct EnvoyValues {
  std::vector<std::string> storage;
  std::vector<std::string_view> names;
  std::vector<std::string_view> needs;
};

const EnvoyValues& envoy_values() {
  static const EnvoyValues values = [] {
    EnvoyValues v;
    for (const auto& n : publishers::kEnvoyValueNames) v.storage.emplace_back(n.name);
    for (std::string_view s : kNodeSignals) v.storage.push_back(std::string(publishers::kEnvoyUtilizationPrefix) + std::string(s));
    for (const auto& n : publishers::kEnvoyValueNames) v.needs.push_back(n.needs_signal);
    v.needs.insert(v.needs.end(), std::begin(kNodeSignals), std::end(kNodeSignals));
    v.names.assign(v.storage.begin(), v.storage.end());
    return v;
  }();
  return values;
}

// Where the message of a list issue names the earlier entry.
constexpr std::string_view kOtherEntry = "{other}";

bool endpoint_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

bool path_byte_ok(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u > 0x20 && u < 0x7f;
}

bool is_signal(std::string_view name) {
  return std::find(std::begin(kNodeSignals), std::end(kNodeSignals), name) != std::end(kNodeSignals);
}

EndpointListIssue list_issue(std::size_t index, std::string_view field, std::optional<std::size_t> other,
                             std::string message) {
  return EndpointListIssue{index, field, other, problem(std::move(message))};
}

}  // namespace

// ---------------------------------------------------------------------------
// One endpoint's fields

Result<void> check_endpoint_name(std::string_view name) {
  if (name.empty()) return problem("must not be empty; give a short name such as \"api\"");
  if (name.size() > kMaxEndpointNameBytes)
    return problem("is " + std::to_string(name.size()) + " bytes long; at most " +
                   std::to_string(kMaxEndpointNameBytes) + " are allowed");
  if (name == "." || name == "..")
    return problem(
        "must not be \".\" or \"..\" (the report file is endpoint.<name>.orca); give a short name such as \"api\"");
  for (char c : name) {
    if (!endpoint_name_char(c))
      return problem(quote(name) + " contains " + describe_byte(c) +
                     "; a name may contain only letters, digits, \"_\", \".\" and \"-\" (it names the report file "
                     "endpoint.<name>.orca)");
  }
  return {};
}

std::optional<EndpointProtocol> parse_endpoint_protocol(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kEndpointProtocolNames); ++i)
    if (kEndpointProtocolNames[i] == name) return static_cast<EndpointProtocol>(i);
  return std::nullopt;
}

std::string_view endpoint_protocol_name(EndpointProtocol protocol) {
  return kEndpointProtocolNames[static_cast<std::size_t>(protocol)];
}

Result<void> check_endpoint_protocol(std::string_view name) {
  if (parse_endpoint_protocol(name)) return {};
  std::string hint;
  if (name == "h2" || name == "h2c" || name == "grpc" || name == "HTTP/2" || name == "http/2")
    hint = "; write \"http2\" (cleartext HTTP/2, gRPC included)";
  else if (name == "http" || name == "http/1.1" || name == "HTTP/1.1" || name == "http1.1")
    hint = "; write \"http1\"";
  return problem("must be " + quoted_list(kEndpointProtocolNames, " or ") + ", got " + quote(name) + hint);
}

Result<void> check_endpoint_path(std::string_view path) {
  if (path.empty())
    return problem(
        "must not be empty; leave path out to count every request on the port, or give a prefix such as \"/api\"");
  if (path.front() != '/') {
    const std::string fixed = "/" + std::string(path);
    return problem("must start with \"/\", got " + quote(path) +
                   (std::all_of(path.begin(), path.end(), path_byte_ok) ? "; write " + quote(fixed) : std::string()));
  }
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path_byte_ok(path[i])) continue;
    // Requests carry such bytes percent-encoded; show the prefix that way.
    std::string encoded;
    constexpr char kHex[] = "0123456789ABCDEF";
    for (char c : path) {
      if (path_byte_ok(c)) {
        encoded += c;
      } else {
        const auto u = static_cast<unsigned char>(c);
        encoded += '%';
        encoded += kHex[u >> 4];
        encoded += kHex[u & 0xf];
      }
    }
    return problem("must be printable ASCII without spaces, but contains " + describe_byte(path[i]) + " at offset " +
                   std::to_string(i) + "; requests carry such bytes percent-encoded, so write " + quote(encoded));
  }
  if (path.size() > kMaxEndpointPathBytes)
    return problem("is " + std::to_string(path.size()) + " bytes long; a path prefix may be at most " +
                   std::to_string(kMaxEndpointPathBytes) +
                   " bytes (the probe compares that much of each request's path)");
  return {};
}

Result<void> check_endpoint_port(std::int64_t port, std::string_view shown) {
  if (port >= 1 && port <= kMaxPort) return {};
  return problem("must be a TCP port in 1.." + std::to_string(kMaxPort) + ", got " + std::string(shown));
}

Result<void> check_max_concurrency(std::int64_t n, std::string_view shown) {
  if (n >= 1 && n <= kMaxConcurrencyLimit) return {};
  return problem("must be in 1.." + std::to_string(kMaxConcurrencyLimit) + ", got " + std::string(shown) +
                 "; leave max_concurrency out when the service has no concurrency limit");
}

Result<void> check_endpoint_target(std::chrono::nanoseconds target) {
  if (target > kMaxEndpointLatency)
    return problem("must be at most " + quote(format_duration(kMaxEndpointLatency)) + ", got " +
                   quote(format_duration(target)) +
                   "; a stopped service shows as late only after target, and latencies above about 9 minutes are "
                   "beyond the probe's histogram");
  if (target.count() > 0) return {};
  return problem("must be greater than 0, got " + quote(format_duration(target)) +
                 "; give the latency the endpoint aims for, e.g. \"10ms\"");
}

Result<void> check_endpoint_max(std::chrono::nanoseconds max, std::chrono::nanoseconds target) {
  if (max > kMaxEndpointLatency)
    return problem("must be at most " + quote(format_duration(kMaxEndpointLatency)) + ", got " +
                   quote(format_duration(max)) +
                   "; a stopped service shows as over max only after max, and latencies above about 9 minutes are "
                   "beyond the probe's histogram");
  if (max >= target) return {};
  return problem("must be at least target (" + quote(format_duration(target)) + "), got " +
                 quote(format_duration(max)) +
                 "; max is the latency no request should exceed, target the one the endpoint aims for");
}

// ---------------------------------------------------------------------------
// The endpoint list

std::string EndpointListIssue::message_with(std::string_view other_entry) const {
  std::string out = error.message;
  if (const auto at = out.find(kOtherEntry); at != std::string::npos) out.replace(at, kOtherEntry.size(), other_entry);
  return out;
}

Result<void, EndpointListIssue> check_endpoint_list(const std::vector<EndpointConfig>& eps) {
  for (std::size_t i = 0; i < eps.size(); ++i) {
    const EndpointConfig& e = eps[i];
    if (i >= kMaxEndpoints) {
      return list_issue(i, "", std::nullopt,
                        "is endpoint number " + std::to_string(i + 1) + "; at most " + std::to_string(kMaxEndpoints) +
                            " endpoints are supported (the eBPF maps are sized for " + std::to_string(kMaxEndpoints) +
                            "); remove some, or merge some under a shorter path prefix");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (eps[j].name == e.name)
        return list_issue(i, "name", j,
                          "duplicate name " + quote(e.name) + " (already used by " + std::string(kOtherEntry) +
                              "); each endpoint needs its own name (it names the report file endpoint." + e.name +
                              ".orca)");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (eps[j].port != e.port || eps[j].path != e.path) continue;
      if (e.path.empty())
        return list_issue(i, "port", j,
                          "port " + std::to_string(e.port) + " already has an endpoint without a path (" +
                              std::string(kOtherEntry) +
                              "); a port has at most one endpoint without a path: give one of them a path, "
                              "or remove one");
      return list_issue(i, "path", j,
                        "duplicate port " + std::to_string(e.port) + " and path " + quote(e.path) +
                            " (already used by " + std::string(kOtherEntry) +
                            "); each port and path prefix belongs to one endpoint: remove one or change its path");
    }
    if (e.protocol == EndpointProtocol::http2 && !e.path.empty())
      return list_issue(i, "path", std::nullopt,
                        "cannot be used with protocol = \"http2\": HTTP/2 codes the path with HPACK, which the "
                        "probe does not decode; remove path (one HTTP/2 endpoint per port)");
    for (std::size_t j = 0; j < i; ++j) {
      if (eps[j].port != e.port || eps[j].protocol == e.protocol) continue;
      return list_issue(i, "protocol", j,
                        "is \"" + std::string(endpoint_protocol_name(e.protocol)) + "\" on port " +
                            std::to_string(e.port) + ", which " + std::string(kOtherEntry) + " says is \"" +
                            std::string(endpoint_protocol_name(eps[j].protocol)) +
                            "\"; every endpoint of a port speaks the same protocol");
    }
    if (!e.path.empty()) {
      const auto on_port = static_cast<std::size_t>(std::count_if(
          eps.begin(), eps.begin() + static_cast<std::ptrdiff_t>(i) + 1,
          [&](const EndpointConfig& o) { return o.port == e.port && !o.path.empty(); }));
      if (on_port > kMaxPathsPerPort)
        return list_issue(i, "path", std::nullopt,
                          "is endpoint number " + std::to_string(on_port) + " with a path on port " +
                              std::to_string(e.port) + "; at most " + std::to_string(kMaxPathsPerPort) +
                              " endpoints with a path are supported per port; merge some of them under a shorter "
                              "common prefix");
    }
  }
  return {};
}

namespace {

// Each field of one entry on its own, for a list built elsewhere; the key is
// the field's.
Result<void> check_endpoint_fields(const EndpointConfig& e) {
  const auto named = [](Result<void> r, std::string_view field) -> Result<void> {
    if (r) return r;
    Error err = std::move(r).error();
    err.key = std::string(field);
    return err;
  };
  if (auto r = check_endpoint_name(e.name); !r) return named(std::move(r), "name");
  if (auto r = check_endpoint_port(e.port, std::to_string(e.port)); !r) return named(std::move(r), "port");
  if (!e.path.empty())
    if (auto r = check_endpoint_path(e.path); !r) return named(std::move(r), "path");
  if (auto r = check_endpoint_target(e.target); !r) return named(std::move(r), "target");
  if (auto r = check_endpoint_max(e.max, e.target); !r) return named(std::move(r), "max");
  if (e.max_concurrency != 0)
    if (auto r = check_max_concurrency(e.max_concurrency, std::to_string(e.max_concurrency)); !r)
      return named(std::move(r), "max_concurrency");
  return {};
}

}  // namespace

Result<void> validate_endpoints(const std::vector<EndpointConfig>& endpoints, const std::string& file) {
  const auto placed = [&](std::size_t index, std::string_view field, std::string message) {
    Error e = problem(std::move(message),
                      "endpoint[" + std::to_string(index) + "]" + (field.empty() ? "" : "." + std::string(field)));
    e.file = file;
    return e;
  };
  // Entries are numbered in list order: the file's [[endpoint]]s, then each --endpoint.
  for (std::size_t i = 0; i < endpoints.size(); ++i)
    if (auto r = check_endpoint_fields(endpoints[i]); !r) return placed(i, r.error().key, r.error().message);
  if (auto r = check_endpoint_list(endpoints); !r) {
    const EndpointListIssue& issue = r.error();
    std::string other;
    if (issue.other) {
      const EndpointConfig& o = endpoints[*issue.other];
      other = "endpoint[" + std::to_string(*issue.other) + "], " + quote(o.name) + " on port " + std::to_string(o.port);
    }
    return placed(issue.index, issue.field, issue.message_with(other));
  }
  return {};
}

// ---------------------------------------------------------------------------
// [[envoy]]

Result<void> check_envoy_scope(std::string_view scope) {
  if (std::find(std::begin(kEnvoyScopes), std::end(kEnvoyScopes), scope) != std::end(kEnvoyScopes))
    return {};
  return problem("unknown scope " + quote(scope) + choices(scope, kEnvoyScopes, "scopes") +
                 " (per-endpoint scopes come later)");
}

std::span<const std::string_view> envoy_value_names() { return envoy_values().names; }

Result<void> check_envoy_value(std::string_view value) {
  const auto& values = envoy_values().names;
  if (std::find(values.begin(), values.end(), value) != values.end()) return {};
  const std::string unknown = "unknown value " + quote(value);
  // A bare signal name: say where it lives in the report.
  if (is_signal(value))
    return problem(unknown + "; a signal is read from the utilization map: write " +
                   quote("utilization." + std::string(value)));
  constexpr std::string_view kPrefix = publishers::kEnvoyUtilizationPrefix;
  if (value.starts_with(kPrefix)) {
    const std::string_view signal = value.substr(kPrefix.size());
    return problem(unknown + ": " + quote(signal) + " is not a signal" + choices(signal, kNodeSignals, "signals"));
  }
  return problem(unknown + choices(value, values, "values"));
}

Result<void> check_envoy_value_signal(std::string_view value, const Config& config) {
  const auto& values = envoy_values();
  const auto it = std::find(values.names.begin(), values.names.end(), value);
  if (it == values.names.end()) return {};
  const std::string_view signal = values.needs[static_cast<std::size_t>(it - values.names.begin())];
  if (signal.empty() || config.signal_enabled(signal)) return {};
  return problem(quote(value) + " needs the signal " + quote(signal) +
                 ", which node.signals does not enable, so Envoy would only ever see the neutral value; add " +
                 quote(signal) + " to node.signals or choose another value");
}

// A name the atomic writer and Envoy can both use.
Result<std::string> envoy_file_path(const std::string& absolute, std::string_view example) {
  const std::filesystem::path normal = std::filesystem::path(absolute).lexically_normal();
  const std::string name = normal.filename().string();
  if (name.empty() || name == "." || name == "..")
    return problem("must name a file, not a directory, e.g. " + std::string(example));
  // The writer's temporaries are dot-files next to the final name.
  if (name.front() == '.')
    return problem("the file name must not start with \".\" (headroom's temporary files do); got " + quote(name));
  if (name.size() > kMaxWrittenFileNameBytes)
    return problem("the file name is too long (at most " + std::to_string(kMaxWrittenFileNameBytes) + " characters)");
  if (name.ends_with(".orca"))
    return problem("names ending in \".orca\" are reserved for the ORCA report files; use another name, e.g. " +
                   std::string(example));
  return normal.string();
}

// ---------------------------------------------------------------------------
// Paths

Result<void> check_path_length(std::string_view path) {
  if (path.size() > kMaxPathBytes)
    return problem("is " + std::to_string(path.size()) + " bytes long; at most " + std::to_string(kMaxPathBytes) +
                   " are allowed (the files written below it must fit the system's 4096-byte path limit)");
  std::size_t start = 0;
  while (start < path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end - start > kMaxPathComponentBytes)
      return problem("has a component of " + std::to_string(end - start) + " bytes (" +
                     quote(std::string(path.substr(start, 16)) + "...") + "); a file or directory name is at most " +
                     std::to_string(kMaxPathComponentBytes) + " bytes");
    start = end + 1;
  }
  return {};
}

// ---------------------------------------------------------------------------
// [agent] timing

Result<void> check_interval(std::chrono::nanoseconds interval, std::string_view shown) {
  if (interval.count() <= 0)
    return problem("must be greater than 0, got " + quote(shown) + "; the minimum is " +
                   quote(format_duration(kMinInterval)));
  if (interval < kMinInterval)
    return problem("must be at least " + quote(format_duration(kMinInterval)) + ", got " + quote(shown) +
                   "; every interval reads /proc and rewrites every report, so a shorter one spends the CPU the "
                   "agent is there to measure");
  if (interval > kMaxInterval)
    return problem("must be at most " + quote(format_duration(kMaxInterval)) + ", got " + quote(shown));
  return {};
}

Result<void> check_smoothing(std::chrono::nanoseconds smoothing, std::string_view shown) {
  // >= 0 holds by construction: durations are never negative.
  if (smoothing <= kMaxSmoothing) return {};
  return problem("must be at most " + quote(format_duration(kMaxSmoothing)) + ", got " + quote(shown) +
                 "; a longer time constant hides a change in load for longer than a balancer can wait for it");
}

Result<void> check_window(std::chrono::nanoseconds interval, std::chrono::nanoseconds smoothing) {
  // interval <= 1h, so interval * kMaxWindowSlots cannot overflow.
  const auto slots = static_cast<std::int64_t>(kMaxWindowSlots);
  if (interval.count() <= 0 || smoothing <= interval * slots) return {};
  const std::chrono::nanoseconds longest = interval * slots;
  const std::chrono::nanoseconds shortest_interval((smoothing.count() + slots - 1) / slots);
  return problem("is " + quote(format_duration(smoothing)) + ", more than " + std::to_string(kMaxWindowSlots) +
                     " intervals of " + quote(format_duration(interval)) + " (agent.interval): each endpoint's " +
                     "latency window keeps one slot per interval for as long as smoothing; make smoothing at most " +
                     quote(format_duration(longest)) + " or agent.interval at least " +
                     quote(format_duration(shortest_interval)),
                 "agent.smoothing");
}

// ---------------------------------------------------------------------------
// On this machine

Result<void> check_config_on_this_machine(const Config& config, const std::string& file) {
  if (config.cgroup.empty()) return {};
  auto cg = probes::CgroupProbe::open(config.sys_root, config.cgroup, config.cgroup_version);
  if (cg) return {};
  Error e = problem(cg.error().message, "node.cgroup");
  e.file = file;
  return e;
}

}  // namespace headroom::agent

// ---------------------------------------------------------------------------
// [prometheus]

namespace headroom::agent {

Result<void> check_listen_address(std::string_view address) {
  constexpr std::string_view kExamples = "e.g. \"127.0.0.1:9446\", \"0.0.0.0:9446\" or \"[::1]:9446\"";
  const std::size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == address.size())
    return problem("must be an IP address and a port, got " + quote(address) + "; " + std::string(kExamples));
  std::string_view host = address.substr(0, colon);
  const std::string_view port = address.substr(colon + 1);
  int port_number = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || port_number > kMaxPort)
      return problem("the port of " + quote(address) + " must be a number from 1 to " + std::to_string(kMaxPort) +
                     "; " + std::string(kExamples));
    port_number = port_number * 10 + (c - '0');
  }
  if (port_number < 1 || port_number > kMaxPort)
    return problem("the port of " + quote(address) + " must be a number from 1 to " + std::to_string(kMaxPort) + "; " +
                   std::string(kExamples));
  unsigned char buf[sizeof(in6_addr)];
  if (host.starts_with('[') && host.ends_with(']') && host.size() > 2) {
    const std::string inner(host.substr(1, host.size() - 2));
    if (::inet_pton(AF_INET6, inner.c_str(), buf) == 1) return {};
    return problem(quote(inner) + " is not an IPv6 address; " + std::string(kExamples));
  }
  if (host.find(':') != std::string_view::npos)
    return problem("an IPv6 address goes in brackets: write " + quote("[" + std::string(host) + "]:" +
                   std::string(port)));
  if (host.empty())
    return problem("give the address to listen on as well as the port: \"127.0.0.1:" + std::string(port) +
                   "\" for this machine only, \"0.0.0.0:" + std::string(port) + "\" for every IPv4 address");
  if (::inet_pton(AF_INET, std::string(host).c_str(), buf) == 1) return {};
  if (host == "localhost")
    return problem("write the address, not a host name: \"127.0.0.1:" + std::string(port) + "\" or \"[::1]:" +
                   std::string(port) + "\"");
  return problem(quote(host) + " is not an IPv4 address (host names are not resolved); " + std::string(kExamples));
}

Result<std::string> textfile_path(const std::string& absolute) {
  constexpr std::string_view kExample = "\"/var/lib/prometheus/node-exporter/headroom.prom\"";
  const std::filesystem::path normal = std::filesystem::path(absolute).lexically_normal();
  const std::string name = normal.filename().string();
  if (name.empty() || name == "." || name == "..")
    return problem("must name a file, not a directory, e.g. " + std::string(kExample));
  if (name.front() == '.')
    return problem("the file name must not start with \".\" (the temporary file written before the rename does); "
                   "got " + quote(name));
  if (name.size() > kMaxWrittenFileNameBytes)
    return problem("the file name is too long (at most " + std::to_string(kMaxWrittenFileNameBytes) + " characters)");
  if (!name.ends_with(".prom") || name == ".prom")
    return problem("must end in \".prom\", the only files node_exporter's textfile collector reads; got " +
                   quote(name) + ", e.g. " + std::string(kExample));
  return normal.string();
}

Result<void> check_textfile_interval(std::chrono::nanoseconds interval, std::string_view shown) {
  if (interval < kMinTextfileInterval)
    return problem("must be at least " + quote(format_duration(kMinTextfileInterval)) + ", got " + quote(shown) +
                   "; node_exporter reads the file only when it is scraped, every 15 s or so");
  if (interval > kMaxTextfileInterval)
    return problem("must be at most " + quote(format_duration(kMaxTextfileInterval)) + ", got " + quote(shown));
  return {};
}

// ---------------------------------------------------------------------------
// [oob]

Result<void> check_oob_address(std::string_view address) {
  if (address.starts_with("unix:")) {
    const std::string_view path = address.substr(5);
    if (!path.starts_with('/'))
      return problem("a unix socket needs an absolute path: write \"unix:/run/orca/oob.sock\", got " + quote(address));
    static_assert(sizeof(sockaddr_un::sun_path) - 1 == kMaxUnixSocketPathBytes);
    if (path.size() > kMaxUnixSocketPathBytes)
      return problem("the socket path of " + quote(address) + " is " + std::to_string(path.size()) +
                     " bytes; a unix socket's path is at most " + std::to_string(kMaxUnixSocketPathBytes));
    if (path.ends_with('/')) return problem("the socket path of " + quote(address) + " names a directory");
    return {};
  }
  if (address.starts_with("unix-abstract:") || address.starts_with("dns:") || address.starts_with("ipv4:") ||
      address.starts_with("ipv6:"))
    return problem(quote(address) + ": write an IP literal and a port (\"127.0.0.1:9447\", \"[::1]:9447\") or "
                   "\"unix:\" and an absolute path");
  if (auto r = check_listen_address(address); !r) {
    std::string m = r.error().message;
    // The examples name Prometheus's port; [oob]'s is 9447.
    for (auto pos = m.find(":9446"); pos != std::string::npos; pos = m.find(":9446")) m.replace(pos, 5, ":9447");
    return problem(m + ", or \"unix:/run/orca/oob.sock\"");
  }
  return {};
}

}  // namespace headroom::agent
