// SPDX-License-Identifier: Apache-2.0
// The checks of one [[dependency]]'s fields and of the list, shared by the
// table and headroomd --dependency, and the flag's parser.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/config/config.h"
#include "agent/config/config_checks.h"
#include "agent/config/config_messages.h"

namespace headroom::agent {

namespace {

constexpr std::string_view kAddressExamples = "e.g. \"10.0.0.5:6379\" or \"[2001:db8::5]:443\"";

constexpr std::string_view kDependencyFlagForm =
    "name=NAME,address=IP:PORT|port=PORT[,callers_cgroup=/CGROUP][,callers_process=COMM]"
    "[,protocol=http1|http2|generic],target=DURATION,max=DURATION[,max_concurrency=N][,errors=KIND+KIND]";
constexpr std::string_view kDependencyFlagExample = "name=cache,address=10.0.0.5:6379,protocol=generic,target=2ms,max=50ms";

bool looks_like_ip(std::string_view host) {
  return std::all_of(host.begin(), host.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '.' || c == ':';
  });
}

// An in6_addr (network order) as text; an IPv4-mapped one as IPv4, the form
// the user most likely meant.
std::string address_text(const in6_addr& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (IN6_IS_ADDR_V4MAPPED(&a)) {
    ::inet_ntop(AF_INET, &a.s6_addr[12], buf, sizeof buf);
  } else {
    ::inet_ntop(AF_INET6, &a, buf, sizeof buf);
  }
  return buf;
}

}  // namespace

Result<void> check_dependency_name(std::string_view name) {
  auto r = check_endpoint_name(name);
  if (r) return r;
  // The endpoint check names endpoint.<name>.orca; say dependency.<name>.orca.
  std::string m = std::move(r).error().message;
  for (auto at = m.find("endpoint.<name>"); at != std::string::npos; at = m.find("endpoint.<name>"))
    m.replace(at, 8, "dependency");
  return problem(std::move(m));
}

Result<DependencyAddress> parse_dependency_address(std::string_view address) {
  const std::size_t colon = address.rfind(':');
  if (address.empty() || colon == std::string_view::npos || colon + 1 == address.size())
    return problem("must be an IP address and a port, got " + quote(address) + "; " + std::string(kAddressExamples) +
                   ", or give port alone for any host");
  std::string_view host = address.substr(0, colon);
  const std::string_view port = address.substr(colon + 1);
  int64_t port_number = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || port_number > kMaxPort) {
      port_number = -1;
      break;
    }
    port_number = port_number * 10 + (c - '0');
  }
  if (port_number < 1 || port_number > kMaxPort)
    return problem("the port of " + quote(address) + " must be a number from 1 to " + std::to_string(kMaxPort) +
                   "; " + std::string(kAddressExamples));
  in6_addr a{};
  const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) {
    const std::string inner(host.substr(1, host.size() - 2));
    if (::inet_pton(AF_INET6, inner.c_str(), &a) != 1)
      return problem(quote(inner) + " is not an IPv6 address; " + std::string(kAddressExamples));
  } else if (host.find(':') != std::string_view::npos) {
    return problem("an IPv6 address goes in brackets: write " +
                   quote("[" + std::string(host) + "]:" + std::string(port)));
  } else if (host.empty()) {
    return problem("names no host; to count calls to port " + std::string(port) + " of any host, write port = " +
                   std::string(port) + " instead of address");
  } else {
    in_addr v4{};
    if (::inet_pton(AF_INET, std::string(host).c_str(), &v4) != 1) {
      if (looks_like_ip(host))
        return problem(quote(host) + " is not an IPv4 address; " + std::string(kAddressExamples));
      return problem(quote(host) + " is a host name, which headroom does not resolve; give its IP address (" +
                     std::string(kAddressExamples) + "), or write port = " + std::string(port) +
                     " instead of address to count calls to that port of any host");
    }
    // Kept as the kernel shows an IPv4 peer to an IPv6 socket.
    a.s6_addr[10] = 0xff;
    a.s6_addr[11] = 0xff;
    std::copy_n(reinterpret_cast<const unsigned char*>(&v4), 4, &a.s6_addr[12]);
  }
  const bool any = IN6_IS_ADDR_UNSPECIFIED(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 0 &&
                                                   a.s6_addr[13] == 0 && a.s6_addr[14] == 0 && a.s6_addr[15] == 0);
  if (any)
    return problem(quote(address_text(a)) + " is no host's address; to count calls to port " + std::string(port) +
                   " of any host, write port = " + std::string(port) + " instead of address");
  return DependencyAddress{address_text(a), static_cast<uint16_t>(port_number)};
}

Result<void> check_callers_cgroup(std::string_view path) {
  if (path.empty() || path.front() != '/')
    return problem("must be a cgroup path as /proc/PID/cgroup shows it, starting with \"/\" (e.g. "
                   "\"/system.slice/api.service\"), got " + quote(path) +
                   "; leave callers_cgroup out to count every process");
  if (path.find('\0') != std::string_view::npos) return problem("must not contain NUL characters");
  for (std::string_view part : {"/./", "/../"})
    if (path.find(part) != std::string_view::npos || path.ends_with(part.substr(0, part.size() - 1)))
      return problem(quote(path) + " contains \".\" or \"..\"; write the cgroup's path as /proc/PID/cgroup shows it");
  return check_path_length(path);
}

Result<void> check_callers_process(std::string_view comm) {
  if (comm.empty())
    return problem("must not be empty; give a process name (its comm, as ps -o comm shows it), or leave "
                   "callers_process out to count every process");
  if (comm.size() > kMaxCallerProcessBytes)
    return problem(quote(comm) + " is " + std::to_string(comm.size()) + " bytes; the kernel keeps the first " +
                   std::to_string(kMaxCallerProcessBytes) + " bytes of a process name (comm): write " +
                   quote(comm.substr(0, kMaxCallerProcessBytes)));
  for (char c : comm)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return problem(quote(comm) + " contains " + describe_byte(c) + "; a process name is printable");
  return {};
}

std::optional<DependencyProtocol> parse_dependency_protocol(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kDependencyProtocolNames); ++i)
    if (kDependencyProtocolNames[i] == name) return static_cast<DependencyProtocol>(i);
  return std::nullopt;
}

std::string_view dependency_protocol_name(DependencyProtocol protocol) {
  return kDependencyProtocolNames[static_cast<std::size_t>(protocol)];
}

Result<void> check_dependency_protocol(std::string_view name) {
  if (parse_dependency_protocol(name)) return {};
  std::string hint;
  if (name == "h2" || name == "h2c" || name == "grpc" || name == "HTTP/2" || name == "http/2")
    hint = "; write \"http2\" (cleartext HTTP/2, gRPC included)";
  else if (name == "http" || name == "http/1.1" || name == "HTTP/1.1" || name == "http1.1")
    hint = "; write \"http1\"";
  else if (name == "redis" || name == "tcp" || name == "sql" || name == "postgres" || name == "mysql")
    hint = "; write \"generic\" (any request/response protocol)";
  return problem("must be " + quoted_list(kDependencyProtocolNames, " or ") + ", got " + quote(name) + hint);
}

Result<uint32_t> parse_dependency_errors(std::string_view text) {
  if (text == "none") return 0u;
  const auto names = [] {
    std::vector<std::string_view> v;
    for (const auto& e : kDependencyErrorNames) v.push_back(e.name);
    return quoted_list(v, ", ");
  };
  if (text.empty())
    return problem("is empty; name the kinds of failure that count as errors, joined by +, from " + names() +
                   " (\"connect+reset+5xx\" is the default), or \"none\"");
  uint32_t bits = 0;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t plus = std::min(text.find('+', at), text.size());
    const std::string_view kind = text.substr(at, plus - at);
    const auto* e = std::find_if(std::begin(kDependencyErrorNames), std::end(kDependencyErrorNames),
                                 [&](const DependencyErrorName& x) { return x.name == kind; });
    if (e == std::end(kDependencyErrorNames)) {
      std::string hint;
      if (kind == "5XX" || kind == "500" || kind == "http" || kind == "grpc" || kind == "status")
        hint = "; \"5xx\" counts HTTP 5xx answers and, for http2, a grpc-status other than OK";
      else if (kind == "none")
        hint = "; \"none\" stands alone";
      return problem("names " + quote(kind) + ", not a kind of failure; the kinds are " + names() +
                     ", joined by + (\"connect+reset+5xx\" is the default), or \"none\"" + hint);
    }
    if (bits & e->bit) return problem("names " + quote(kind) + " twice");
    bits |= e->bit;
    at = plus + 1;
  }
  return bits;
}

std::string format_dependency_errors(uint32_t errors) {
  std::string out;
  for (const auto& e : kDependencyErrorNames)
    if (errors & e.bit) out += (out.empty() ? "" : "+") + std::string(e.name);
  return out.empty() ? "none" : out;
}

Result<void> check_dependency_remote(bool address_given, bool port_given) {
  if (address_given && port_given)
    return problem("address and port are both given; give address (\"10.0.0.5:6379\": one host) or port "
                   "(6379: any host), not both");
  if (!address_given && !port_given)
    return problem("names no remote side; give address = \"10.0.0.5:6379\" (one host) or port = 6379 (any host)");
  return {};
}

Result<void, EndpointListIssue> check_dependency_list(const std::vector<DependencyConfig>& deps) {
  for (std::size_t i = 0; i < deps.size(); ++i) {
    if (i >= kMaxDependencies)
      return EndpointListIssue{i, "", std::nullopt,
                               problem("is dependency number " + std::to_string(i + 1) + "; at most " +
                                       std::to_string(kMaxDependencies) +
                                       " dependencies are supported (the probe's maps are sized for them); remove "
                                       "some")};
    for (std::size_t j = 0; j < i; ++j)
      if (deps[j].name == deps[i].name)
        return EndpointListIssue{i, "name", j,
                                 problem("duplicate name " + quote(deps[i].name) + " (already used by {other}); each "
                                         "dependency needs its own name (it names the report file dependency." +
                                         deps[i].name + ".orca)")};
  }
  return {};
}

namespace {

// Each field of one entry on its own, for a list built elsewhere.
Result<void> check_dependency_fields(const DependencyConfig& d) {
  if (auto r = check_dependency_name(d.name); !r) return at_key(std::move(r), "name");
  if (d.port == 0) return problem("names no remote side; give address or port", "port");
  if (!d.callers_cgroup.empty())
    if (auto r = check_callers_cgroup(d.callers_cgroup); !r) return at_key(std::move(r), "callers_cgroup");
  if (!d.callers_process.empty())
    if (auto r = check_callers_process(d.callers_process); !r) return at_key(std::move(r), "callers_process");
  if (auto r = check_endpoint_target(d.target); !r) return at_key(std::move(r), "target");
  if (auto r = check_endpoint_max(d.max, d.target); !r) return at_key(std::move(r), "max");
  if (d.max_concurrency != 0)
    if (auto r = check_max_concurrency(d.max_concurrency, std::to_string(d.max_concurrency)); !r)
      return at_key(std::move(r), "max_concurrency");
  if (d.errors & ~kDependencyErrorsAll)
    return problem("names a kind of failure this version does not know", "errors");
  return {};
}

// One key=value of --dependency into `d`; the error names the key.
Result<void> set_dependency_field(DependencyConfig& d, std::string_view key, std::string_view value,
                                  std::optional<std::chrono::nanoseconds>& target,
                                  std::optional<std::chrono::nanoseconds>& max) {
  if (key == "name") {
    if (auto r = check_dependency_name(value); !r) return at_key(std::move(r), key);
    d.name = std::string(value);
  } else if (key == "address") {
    auto a = parse_dependency_address(value);
    if (!a) return at_key(std::move(a).error(), key);
    d.host = a->host;
    d.port = a->port;
  } else if (key == "port") {
    auto port = flag_port(key, value, "6379");
    if (!port) return std::move(port).error();
    d.port = *port;
  } else if (key == "callers_cgroup") {
    if (auto r = check_callers_cgroup(value); !r) return at_key(std::move(r), key);
    d.callers_cgroup = std::string(value);
  } else if (key == "callers_process") {
    if (auto r = check_callers_process(value); !r) return at_key(std::move(r), key);
    d.callers_process = std::string(value);
  } else if (key == "protocol") {
    if (auto r = check_dependency_protocol(value); !r) return at_key(std::move(r), key);
    d.protocol = *parse_dependency_protocol(value);
  } else if (key == "target" || key == "max") {
    return flag_latency(key, value, target, max);
  } else if (key == "errors") {
    auto e = parse_dependency_errors(value);
    if (!e) return at_key(std::move(e).error(), key);
    d.errors = *e;
  } else {  // max_concurrency
    auto n = flag_max_concurrency(key, value);
    if (!n) return std::move(n).error();
    d.max_concurrency = *n;
  }
  return {};
}

}  // namespace

Result<DependencyConfig> parse_dependency_flag(std::string_view text) {
  DependencyConfig d;
  std::optional<std::chrono::nanoseconds> target, max;
  bool address = false, port = false;
  const FlagForm form{"dependency", kDependencyFlagForm, kDependencyFlagExample};
  auto parsed = parse_flag(text, form, [&](std::string_view key, std::string_view value) {
    address = address || key == "address";
    port = port || key == "port";
    return set_dependency_field(d, key, value, target, max);
  });
  if (!parsed) return std::move(parsed).error();
  if (auto r = check_dependency_remote(address, port); !r) return at_key(std::move(r), address ? "port" : "");
  if (auto r = check_endpoint_max(*max, *target); !r) return at_key(std::move(r), "max");
  d.target = *target;
  d.max = *max;
  return d;
}

Result<void> validate_dependencies(const std::vector<DependencyConfig>& deps, const std::string& file) {
  const auto placed = [&](std::size_t index, std::string_view field, std::string message) {
    Error e = problem(std::move(message),
                      "dependency[" + std::to_string(index) + "]" + (field.empty() ? "" : "." + std::string(field)));
    e.file = file;
    return e;
  };
  // Numbered in list order: the file's [[dependency]]s, then each --dependency.
  for (std::size_t i = 0; i < deps.size(); ++i)
    if (auto r = check_dependency_fields(deps[i]); !r) return placed(i, r.error().key, r.error().message);
  if (auto r = check_dependency_list(deps); !r) {
    const EndpointListIssue& issue = r.error();
    std::string other;
    if (issue.other) other = "dependency[" + std::to_string(*issue.other) + "], " + quote(deps[*issue.other].name);
    return placed(issue.index, issue.field, issue.message_with(other));
  }
  return {};
}

}  // namespace headroom::agent
