// SPDX-License-Identifier: Apache-2.0
// The checks on values, apart from how they were written: one endpoint's
// fields (shared by [[endpoint]] and --endpoint), the endpoint list as a
// whole, the [[envoy]] values, and the keys that bound each other
// (agent.interval and agent.smoothing, envoy values and node.signals), and
// what --check-config verifies on this machine (check_config_on_this_machine).
//
// Each returns an Error without place (and, for a single value, without
// key): the caller knows where the value was written.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config.h"

namespace headroom::agent {

inline constexpr std::int64_t kMaxConcurrencyLimit = 1'000'000;
// A TCP port: [[endpoint]] port and the port of a listen address.
inline constexpr std::int64_t kMaxPort = 65535;
// The name of a file a publisher writes beside its temporary ("." + name +
// ".XXXXXX" within NAME_MAX).
inline constexpr std::size_t kMaxWrittenFileNameBytes = 199;
// Where a unix: listen address's path must fit (sockaddr_un::sun_path, less the NUL).
inline constexpr std::size_t kMaxUnixSocketPathBytes = 107;

// -- one endpoint's fields --
Result<void> check_endpoint_name(std::string_view name);
Result<void> check_endpoint_path(std::string_view path);
// "http1" or "http2" (docs/endpoints.md, "HTTP/2 and gRPC").
std::optional<EndpointProtocol> parse_endpoint_protocol(std::string_view name);
// Indexed by EndpointProtocol.
inline constexpr std::string_view kEndpointProtocolNames[] = {"http1", "http2"};
std::string_view endpoint_protocol_name(EndpointProtocol protocol);
Result<void> check_endpoint_protocol(std::string_view name);
// `shown` is the value as the user wrote it.
Result<void> check_endpoint_port(std::int64_t port, std::string_view shown);
Result<void> check_max_concurrency(std::int64_t n, std::string_view shown);
Result<void> check_endpoint_target(std::chrono::nanoseconds target);
Result<void> check_endpoint_max(std::chrono::nanoseconds max, std::chrono::nanoseconds target);

// -- the endpoint list --
// A problem of the list as a whole, found at entry `index`. When it clashes
// with an earlier entry `other`, the caller describes that entry ("endpoint[0]
// at line 3") for with_other().
struct EndpointListIssue {
  std::size_t index = 0;
  std::string_view field;  // "name", "port", "path", or "" for the entry as a whole
  std::optional<std::size_t> other;
  Error error;             // key and place left to the caller

  // The message with the description of entry `other` filled in.
  std::string message_with(std::string_view other_entry) const;
};
Result<void, EndpointListIssue> check_endpoint_list(const std::vector<EndpointConfig>& endpoints);

// -- one dependency's fields (agent/config/config_dependency.cc) --
Result<void> check_dependency_name(std::string_view name);
// "10.0.0.5:6379" or "[2001:db8::5]:443": an IP literal and a port. A host
// name is refused (not resolved in this version): give an address, or port.
struct DependencyAddress {
  std::string host;  // normalized, without brackets; an IPv4-mapped IPv6 address as IPv4
  uint16_t port = 0;
};
Result<DependencyAddress> parse_dependency_address(std::string_view address);
Result<void> check_callers_cgroup(std::string_view path);
Result<void> check_callers_process(std::string_view comm);
// Indexed by DependencyProtocol.
inline constexpr std::string_view kDependencyProtocolNames[] = {"http1", "http2", "generic"};
std::optional<DependencyProtocol> parse_dependency_protocol(std::string_view name);
std::string_view dependency_protocol_name(DependencyProtocol protocol);
Result<void> check_dependency_protocol(std::string_view name);
// errors: kinds joined by '+' ("connect+reset+5xx"), or "none"; the
// DependencyError bits. Written back in kDependencyErrorNames' order.
struct DependencyErrorName {
  std::string_view name;
  uint32_t bit;
};
inline constexpr DependencyErrorName kDependencyErrorNames[] = {
    {"connect", kDependencyErrorConnect}, {"reset", kDependencyErrorReset},
    {"5xx", kDependencyError5xx},         {"4xx", kDependencyError4xx}};
Result<uint32_t> parse_dependency_errors(std::string_view text);
std::string format_dependency_errors(uint32_t errors);
// address and port: exactly one of them was given.
Result<void> check_dependency_remote(bool address_given, bool port_given);
// The list as a whole: the limit and unique names (issue.field "name" or "").
Result<void, EndpointListIssue> check_dependency_list(const std::vector<DependencyConfig>& dependencies);

// -- the command line's --endpoint and --dependency (config_endpoint_flag.cc) --
// A whole decimal integer; nullopt for anything else (out of range saturates).
std::optional<std::int64_t> flag_integer(std::string_view text);
// A failed check as the fault of flag key `key`.
Error at_key(Result<void> failed, std::string_view key);
// target (checked) or max (checked against target once both are read).
Result<void> flag_latency(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds>& target,
                          std::optional<std::chrono::nanoseconds>& max);
// A flag's port (1..65535) and max_concurrency values; the error names the
// key and, for the port, gives `example`.
Result<uint16_t> flag_port(std::string_view key, std::string_view value, std::string_view example);
Result<uint32_t> flag_max_concurrency(std::string_view key, std::string_view value);
struct FlagForm {
  std::string_view section;  // its keys are the table's rows
  std::string_view form;     // "name=NAME,port=PORT,..."
  std::string_view example;
};
// Splits 'key=value,key=value', refuses unknown and repeated keys and
// missing required ones, and hands each pair to `set` (whose error names
// the key).
Result<void> parse_flag(std::string_view text, const FlagForm& form,
                        const std::function<Result<void>(std::string_view key, std::string_view value)>& set);

// -- [[envoy]] --
Result<void> check_envoy_scope(std::string_view scope);
Result<void> check_envoy_value(std::string_view value);
// The values check_envoy_value accepts, in the order the docs list them.
std::span<const std::string_view> envoy_value_names();
inline constexpr std::string_view kEnvoyScopes[] = {"node"};
// A value read from a signal node.signals does not enable.
Result<void> check_envoy_value_signal(std::string_view value, const Config& config);
// An absolute path -> the normalized file name the bridge writes.
Result<std::string> envoy_file_path(const std::string& absolute, std::string_view example);

// -- paths --
// At most kMaxPathBytes, each component at most kMaxPathComponentBytes.
Result<void> check_path_length(std::string_view path);

// -- [agent] timing --
Result<void> check_interval(std::chrono::nanoseconds interval, std::string_view shown);
Result<void> check_smoothing(std::chrono::nanoseconds smoothing, std::string_view shown);
// The endpoint window's slots (smoothing / interval); the key is
// "agent.smoothing".
Result<void> check_window(std::chrono::nanoseconds interval, std::chrono::nanoseconds smoothing);

// -- [prometheus] --
// "127.0.0.1:9446", "0.0.0.0:9446", "[::1]:9446", "[::]:9446": an IP literal
// (IPv6 in brackets) and a port 1..65535. Host names are refused: the
// address a scraper reaches must not depend on name resolution at start.
Result<void> check_listen_address(std::string_view address);
// An absolute path -> the normalized textfile name: it must end in ".prom",
// which is all node_exporter's textfile collector reads.
Result<std::string> textfile_path(const std::string& absolute);
Result<void> check_textfile_interval(std::chrono::nanoseconds interval, std::string_view shown);

// -- [oob] --
// An [oob] listen entry: an address check_listen_address accepts, or
// "unix:" and an absolute path short enough for a socket address.
Result<void> check_oob_address(std::string_view address);

}  // namespace headroom::agent
