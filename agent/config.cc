// headroom.toml -> Config. Everything here is a pure function of the text
// (load_config only adds reading the file), so SIGHUP can compile a new Config
// beside the running one and swap only on success.
//
// toml++ reports syntax errors by exception; they are caught here and turned
// into a ConfigError, so no exception leaves this file.
#include "agent/config.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <span>
#include <sstream>
#include <system_error>
#include <utility>
#include <vector>

#include <toml++/toml.h>

namespace headroom::agent {

namespace {

using namespace std::string_view_literals;

// ---------------------------------------------------------------------------
// Schema

constexpr std::string_view kTopKeys[] = {"agent", "node", "envoy", "endpoint"};
constexpr std::string_view kAgentKeys[] = {"interval",  "smoothing", "orca_dir", "proc_root",
                                           "sys_root",  "log_level", "fsync",    "ebpf"};
constexpr std::string_view kNodeKeys[] = {"cgroup",    "cgroup_version", "signals",
                                          "composite", "weights",        "include_endpoints"};
constexpr std::string_view kEbpfModes[] = {"auto", "off"};
constexpr std::string_view kCompositeNames[] = {"max", "mean"};
constexpr std::string_view kEnvoyKeys[] = {"scope", "value", "file", "neutral"};
constexpr std::string_view kEnvoyScopes[] = {"node"};
// Every value a node [[envoy]] entry can publish (utilization.<signal> for each signal).
constexpr std::string_view kEnvoyValues[] = {
    "application_utilization",  "cpu_utilization",         "mem_utilization",       "utilization.cpu",
    "utilization.memory",       "utilization.cpu.pressure", "utilization.memory.pressure",
    "utilization.io.pressure"};
// The signal a value needs in node.signals ("" = none in particular).
constexpr std::string_view kEnvoyValueSignals[] = {"", "cpu", "memory", "cpu", "memory", "cpu.pressure",
                                                   "memory.pressure", "io.pressure"};
static_assert(std::size(kEnvoyValues) == std::size(kEnvoyValueSignals));
// [[endpoint]] keys, and the same keys of --endpoint.
constexpr std::string_view kEndpointKeys[] = {"name", "port", "path", "target", "max", "max_concurrency"};
constexpr std::int64_t kMaxConcurrencyLimit = 1'000'000;
constexpr std::string_view kEndpointFlagForm =
    "name=NAME,port=PORT[,path=/PREFIX],target=DURATION,max=DURATION[,max_concurrency=N]";
constexpr std::string_view kEndpointFlagExample = "name=api,port=8080,path=/play,target=10ms,max=500ms";
// Indexed by LogLevel.
constexpr std::string_view kLogLevelNames[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};

using Names = std::span<const std::string_view>;

// A table of the file, for "unknown key" messages and for telling the user
// where a misplaced key belongs.
struct Section {
  std::string_view path;  // "" = top level
  Names keys;
  Names table_keys;  // the keys whose values are tables
};

constexpr std::string_view kTopTableKeys[] = {"agent", "node"};
constexpr std::string_view kNodeTableKeys[] = {"weights"};

constexpr Section kTopSection{""sv, kTopKeys, kTopTableKeys};
constexpr Section kAgentSection{"agent"sv, kAgentKeys, {}};
constexpr Section kNodeSection{"node"sv, kNodeKeys, kNodeTableKeys};
constexpr Section kWeightsSection{"node.weights"sv, kNodeSignals, {}};
constexpr const Section* kSections[] = {&kTopSection, &kAgentSection, &kNodeSection, &kWeightsSection};

constexpr std::chrono::nanoseconds kMaxInterval = std::chrono::hours(1);

// ---------------------------------------------------------------------------
// Text helpers

std::string join(Names names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ", ";
    out += names[i];
  }
  return out;
}

// A TOML basic string, so values in messages look like what the user typed.
std::string quote(std::string_view s) {
  constexpr std::size_t kMaxShown = 80;  // keep one-line messages one line
  std::string out = "\"";
  std::size_t shown = 0;
  for (char c : s) {
    if (++shown > kMaxShown) {
      out += "...";
      break;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          constexpr char kHex[] = "0123456789ABCDEF";
          const auto u = static_cast<unsigned char>(c);
          out += "\\u00";
          out += kHex[u >> 4];
          out += kHex[u & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

// One component of a dotted key path; signal names contain dots, so they are
// quoted the way TOML needs them ("node.weights.\"cpu.pressure\"").
std::string key_part(std::string_view k) {
  const bool bare = !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  return bare ? std::string(k) : quote(k);
}

std::string dotted(std::string_view section, std::string_view key) {
  return section.empty() ? key_part(key) : std::string(section) + "." + key_part(key);
}

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  std::array<char, 64> buf{};
  const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  std::string out(buf.data(), res.ptr);
  // TOML floats always show they are floats.
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

// "integer 100", "string \"x\"", "array": toml++'s type name and, for
// scalars, the value as written in TOML.
std::string describe(const toml::node& n) {
  const std::string type(toml::impl::node_type_friendly_names[static_cast<std::size_t>(n.type())]);
  std::ostringstream os;
  if (const auto* s = n.as_string()) return type + " " + quote(s->get());
  if (const auto* i = n.as_integer()) return type + " " + std::to_string(i->get());
  if (const auto* d = n.as_floating_point()) return type + " " + format_double(d->get());
  if (const auto* b = n.as_boolean()) return type + (b->get() ? " true" : " false");
  if (const auto* dt = n.as_date()) os << *dt;
  if (const auto* t = n.as_time()) os << *t;
  if (const auto* dtt = n.as_date_time()) os << *dtt;
  const std::string shown = os.str();
  return shown.empty() ? type : type + " " + shown;
}

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Levenshtein distance, two rows; case is ignored so that "INFO" finds "info".
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  std::iota(prev.begin(), prev.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t subst = prev[j - 1] + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// The closest candidate, if it is close enough to be what the user meant.
std::optional<std::string_view> nearest(std::string_view word, Names candidates) {
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  std::optional<std::string_view> best;
  std::size_t best_d = std::numeric_limits<std::size_t>::max();
  for (std::string_view c : candidates) {
    const std::size_t d = edit_distance(word, c);
    // d < c.size(): never "correct" a word into something it shares nothing with.
    if (d <= limit && d < c.size() && d < best_d) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, Names candidates) {
  if (auto n = nearest(word, candidates)) return "; did you mean " + quote(*n) + "?";
  return {};
}

// For a value that must be one of a few words: the nearest one, and the list.
std::string choices(std::string_view word, Names candidates, std::string_view what) {
  const std::string hint = did_you_mean(word, candidates);
  const std::string list = std::string(what) + " are " + join(candidates);
  return hint.empty() ? "; valid " + list : hint + " Valid " + list;
}

// ---------------------------------------------------------------------------
// Durations

struct DurationUnit {
  std::string_view name;
  std::int64_t ns;
};
// Largest first: format_duration prefers the larger unit on ties.
constexpr DurationUnit kUnits[] = {
    {"h", 3'600'000'000'000}, {"m", 60'000'000'000}, {"s", 1'000'000'000},
    {"ms", 1'000'000},        {"us", 1'000},         {"ns", 1},
};
constexpr std::string_view kUnitList = "ns, us, ms, s, m, h";

// parse_duration with the reason for a rejection, for config messages.
std::variant<std::chrono::nanoseconds, std::string> parse_duration_explained(std::string_view text) {
  if (text.empty()) return std::string("is empty");
  if (text.find_first_of(" \t\r\n") != std::string_view::npos)
    return std::string("must not contain spaces");
  if (text.front() == '-') return std::string("must not be negative");
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0;
  const std::size_t int_begin = i;
  while (i < text.size() && is_digit(text[i])) ++i;
  const std::string_view int_digits = text.substr(int_begin, i - int_begin);
  std::string_view frac_digits;
  if (i < text.size() && text[i] == '.') {
    const std::size_t frac_begin = ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
    frac_digits = text.substr(frac_begin, i - frac_begin);
    if (frac_digits.empty() || int_digits.empty())
      return std::string("needs digits on both sides of the decimal point, e.g. \"0.5s\"");
  }
  if (int_digits.empty()) return std::string("must start with a number, e.g. \"100ms\"");
  const std::string_view unit_name = text.substr(i);
  if (unit_name.empty()) return "has no unit; append one of " + std::string(kUnitList);
  const DurationUnit* unit = nullptr;
  for (const auto& u : kUnits)
    if (u.name == unit_name) unit = &u;
  if (unit == nullptr) return "has unknown unit " + quote(unit_name) + "; use one of " + std::string(kUnitList);

  const std::string too_large = "is too large";
  std::int64_t whole = 0;
  for (char c : int_digits) {
    if (__builtin_mul_overflow(whole, 10, &whole) || __builtin_add_overflow(whole, c - '0', &whole))
      return too_large;
  }
  std::int64_t total = 0;
  if (__builtin_mul_overflow(whole, unit->ns, &total)) return too_large;

  // The fraction must come to whole nanoseconds: F/10^k of a unit is exact
  // when 10^k/gcd(unit, 10^k) divides F. Trailing zeros carry no value.
  while (!frac_digits.empty() && frac_digits.back() == '0') frac_digits.remove_suffix(1);
  if (!frac_digits.empty()) {
    const std::string not_whole = "is not a whole number of nanoseconds";
    if (frac_digits.size() > 18) return not_whole;  // 10^k would not fit; never exact anyway
    std::uint64_t f = 0, pow10 = 1;
    for (char c : frac_digits) {
      f = f * 10 + static_cast<std::uint64_t>(c - '0');
      pow10 *= 10;
    }
    const auto unit_ns = static_cast<std::uint64_t>(unit->ns);
    const std::uint64_t g = std::gcd(unit_ns, pow10);
    const std::uint64_t den = pow10 / g;
    if (f % den != 0) return not_whole;
    // (f/den) * (unit/g) = f*unit/10^k < unit: cannot overflow.
    const auto frac_ns = static_cast<std::int64_t>((f / den) * (unit_ns / g));
    if (__builtin_add_overflow(total, frac_ns, &total)) return too_large;
  }
  return std::chrono::nanoseconds(total);
}

// The message for a duration parse_duration_explained refused.
std::string invalid_duration(std::string_view text, std::string_view reason) {
  return "invalid duration " + quote(text) + ": " + std::string(reason) +
         "; write a number and a unit (ns, us, ms, s, m, h) without spaces, e.g. \"100ms\" or \"1.5s\"";
}

// ---------------------------------------------------------------------------
// Endpoints: the checks an [[endpoint]] table and an --endpoint flag share.
// Each returns why a value is refused, or nullopt when it is fine.

bool endpoint_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

// One byte for a message: "\"/\"" when printable ASCII, else "byte 0xC3".
std::string describe_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u > 0x20 && u < 0x7f) return quote(std::string_view(&c, 1));
  if (u == 0x20) return "a space";
  constexpr char kHex[] = "0123456789ABCDEF";
  return std::string("byte 0x") + kHex[u >> 4] + kHex[u & 0xf];
}

std::optional<std::string> endpoint_name_error(std::string_view name) {
  if (name.empty()) return std::string("must not be empty; give a short name such as \"api\"");
  if (name.size() > kMaxEndpointNameBytes)
    return "is " + std::to_string(name.size()) + " bytes long; at most " + std::to_string(kMaxEndpointNameBytes) +
           " are allowed";
  if (name == "." || name == "..")
    return std::string("must not be \".\" or \"..\" (the report file is endpoint.<name>.orca); give a short name such as \"api\"");
  for (char c : name) {
    if (!endpoint_name_char(c))
      return quote(name) + " contains " + describe_byte(c) +
             "; a name may contain only letters, digits, \"_\", \".\" and \"-\" (it names the report file "
             "endpoint.<name>.orca)";
  }
  return std::nullopt;
}

bool path_byte_ok(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u > 0x20 && u < 0x7f;
}

std::optional<std::string> endpoint_path_error(std::string_view path) {
  if (path.empty())
    return std::string(
        "must not be empty; leave path out to count every request on the port, or give a prefix such as \"/api\"");
  if (path.front() != '/') {
    const std::string fixed = "/" + std::string(path);
    return "must start with \"/\", got " + quote(path) +
           (std::all_of(path.begin(), path.end(), path_byte_ok) ? "; write " + quote(fixed) : std::string());
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
    return "must be printable ASCII without spaces, but contains " + describe_byte(path[i]) + " at offset " +
           std::to_string(i) + "; requests carry such bytes percent-encoded, so write " + quote(encoded);
  }
  if (path.size() > kMaxEndpointPathBytes)
    return "is " + std::to_string(path.size()) + " bytes long; a path prefix may be at most " +
           std::to_string(kMaxEndpointPathBytes) + " bytes (the probe compares that much of each request's path)";
  return std::nullopt;
}

std::optional<std::string> endpoint_port_error(std::int64_t port, std::string_view shown) {
  if (port >= 1 && port <= 65535) return std::nullopt;
  return "must be a TCP port in 1..65535, got " + std::string(shown);
}

std::optional<std::string> max_concurrency_error(std::int64_t n, std::string_view shown) {
  if (n >= 1 && n <= kMaxConcurrencyLimit) return std::nullopt;
  return "must be in 1.." + std::to_string(kMaxConcurrencyLimit) + ", got " + std::string(shown) +
         "; leave max_concurrency out when the service has no concurrency limit";
}

std::optional<std::string> endpoint_target_error(std::chrono::nanoseconds target) {
  if (target.count() > 0) return std::nullopt;
  return "must be greater than 0, got " + quote(format_duration(target)) +
         "; give the latency the endpoint aims for, e.g. \"10ms\"";
}

std::optional<std::string> endpoint_max_error(std::chrono::nanoseconds max, std::chrono::nanoseconds target) {
  if (max >= target) return std::nullopt;
  return "must be at least target (" + quote(format_duration(target)) + "), got " + quote(format_duration(max)) +
         "; max is the latency no request should exceed, target the one the endpoint aims for";
}

// A problem of the list as a whole, found at entry `index`. When it clashes
// with an earlier entry `other`, the caller puts its description of that
// entry ("endpoint[0] at line 3") where the message says kOtherEntry.
constexpr std::string_view kOtherEntry = "{other}";
struct EndpointListIssue {
  std::size_t index = 0;
  std::string_view field;  // "name", "port", "path", or "" for the entry as a whole
  std::optional<std::size_t> other;
  std::string message;

  std::string message_with(std::string_view other_entry) const {
    std::string out = message;
    if (const auto at = out.find(kOtherEntry); at != std::string::npos) out.replace(at, kOtherEntry.size(), other_entry);
    return out;
  }
};

std::optional<EndpointListIssue> endpoint_list_issue(const std::vector<EndpointConfig>& eps) {
  for (std::size_t i = 0; i < eps.size(); ++i) {
    const EndpointConfig& e = eps[i];
    if (i >= kMaxEndpoints) {
      return EndpointListIssue{i, "", std::nullopt,
                               "is endpoint number " + std::to_string(i + 1) + "; at most " +
                                   std::to_string(kMaxEndpoints) + " endpoints are supported (the eBPF maps are sized for " +
                                   std::to_string(kMaxEndpoints) + "); remove some, or merge some under a shorter path prefix"};
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (eps[j].name == e.name)
        return EndpointListIssue{i, "name", j,
                                 "duplicate name " + quote(e.name) + " (already used by " + std::string(kOtherEntry) +
                                     "); each endpoint needs its own name (it names the report file endpoint." + e.name +
                                     ".orca)"};
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (eps[j].port != e.port || eps[j].path != e.path) continue;
      if (e.path.empty())
        return EndpointListIssue{i, "port", j,
                                 "port " + std::to_string(e.port) + " already has an endpoint without a path (" +
                                     std::string(kOtherEntry) +
                                     "); a port has at most one endpoint without a path: give one of them a path, "
                                     "or remove one"};
      return EndpointListIssue{i, "path", j,
                               "duplicate port " + std::to_string(e.port) + " and path " + quote(e.path) +
                                   " (already used by " + std::string(kOtherEntry) +
                                   "); each port and path prefix belongs to one endpoint: remove one or change its path"};
    }
    if (!e.path.empty()) {
      const auto on_port = static_cast<std::size_t>(std::count_if(
          eps.begin(), eps.begin() + static_cast<std::ptrdiff_t>(i) + 1,
          [&](const EndpointConfig& o) { return o.port == e.port && !o.path.empty(); }));
      if (on_port > kMaxPathsPerPort)
        return EndpointListIssue{
            i, "path", std::nullopt,
            "is endpoint number " + std::to_string(on_port) + " with a path on port " + std::to_string(e.port) +
                "; at most " + std::to_string(kMaxPathsPerPort) +
                " endpoints with a path are supported per port; merge some of them under a shorter common prefix"};
    }
  }
  return std::nullopt;
}

// Each field of one entry on its own, for validate_endpoints on a list built
// elsewhere: the key ("name", ...) and the message of the first bad field.
std::optional<std::pair<std::string_view, std::string>> endpoint_field_issue(const EndpointConfig& e) {
  if (auto m = endpoint_name_error(e.name)) return std::pair("name"sv, std::move(*m));
  if (auto m = endpoint_port_error(e.port, std::to_string(e.port))) return std::pair("port"sv, std::move(*m));
  if (!e.path.empty())
    if (auto m = endpoint_path_error(e.path)) return std::pair("path"sv, std::move(*m));
  if (auto m = endpoint_target_error(e.target)) return std::pair("target"sv, std::move(*m));
  if (auto m = endpoint_max_error(e.max, e.target)) return std::pair("max"sv, std::move(*m));
  if (e.max_concurrency != 0)
    if (auto m = max_concurrency_error(e.max_concurrency, std::to_string(e.max_concurrency)))
      return std::pair("max_concurrency"sv, std::move(*m));
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// The compiler: TOML tree -> Config, collecting errors.

class Compiler {
 public:
  explicit Compiler(const std::string& file) : file_(file) {}

  void top(const toml::table& root) {
    for (auto&& [k, v] : root) {
      const std::string_view name = k.str();
      const std::string key = dotted("", name);
      if (name == "agent") {
        if (const auto* t = require_table(v, key)) agent(*t);
      } else if (name == "node") {
        if (const auto* t = require_table(v, key)) node(*t);
      } else if (name == "envoy") {
        envoy(v, key);
      } else if (name == "endpoint") {
        endpoints(v, key);
      } else {
        unknown(k, v, kTopSection);
      }
    }
    // After the whole file: [node] may come after [[envoy]].
    check_envoy_signals();
  }

  Config& config() { return config_; }

  // The error that comes first in the file; errors without a place last.
  std::optional<ConfigError> first_error() const {
    if (errors_.empty()) return std::nullopt;
    const auto rank = [](const ConfigError& e) {
      return std::pair(e.line == 0 ? std::numeric_limits<int>::max() : e.line, e.column);
    };
    return *std::min_element(errors_.begin(), errors_.end(),
                             [&](const ConfigError& a, const ConfigError& b) { return rank(a) < rank(b); });
  }

 private:
  void agent(const toml::table& t) {
    for (auto&& [k, v] : t) {
      const std::string_view name = k.str();
      const std::string key = dotted("agent", name);
      if (name == "interval") {
        if (auto d = duration(v, key)) {
          if (d->count() <= 0)
            error(v, key, "must be greater than 0, got " + quote(v.as_string()->get()) +
                              "; the recommended minimum is \"10ms\"");
          else if (*d > kMaxInterval)
            error(v, key, "must be at most \"1h\", got " + quote(v.as_string()->get()));
          else
            config_.interval = *d;
        }
      } else if (name == "smoothing") {
        // >= 0 holds by construction: parse_duration rejects negatives.
        if (auto d = duration(v, key)) config_.smoothing = *d;
      } else if (name == "orca_dir") {
        if (auto p = absolute_path(v, key, "\"/run/orca\"")) config_.orca_dir = std::move(*p);
      } else if (name == "proc_root") {
        if (auto p = absolute_path(v, key, "\"/proc\"")) config_.proc_root = std::move(*p);
      } else if (name == "sys_root") {
        if (auto p = absolute_path(v, key, "\"/sys\"")) config_.sys_root = std::move(*p);
      } else if (name == "log_level") {
        if (const auto* s = require_string(v, key, "a log level string such as \"info\"")) {
          if (auto level = parse_log_level(s->get()))
            config_.log_level = *level;
          else
            error(v, key, "unknown log level " + quote(s->get()) + choices(s->get(), kLogLevelNames, "levels"));
        }
      } else if (name == "fsync") {
        if (const auto* b = v.as_boolean())
          config_.fsync = b->get();
        else
          type_error(v, key, "a boolean (true or false)");
      } else if (name == "ebpf") {
        ebpf(v, key);
      } else {
        unknown(k, v, kAgentSection);
      }
    }
  }

  void node(const toml::table& t) {
    for (auto&& [k, v] : t) {
      const std::string_view name = k.str();
      const std::string key = dotted("node", name);
      if (name == "cgroup") {
        cgroup(v, key);
      } else if (name == "cgroup_version") {
        cgroup_version(v, key);
      } else if (name == "signals") {
        signals(v, key);
      } else if (name == "composite") {
        if (const auto* s = require_string(v, key, "\"max\" or \"mean\"")) {
          if (s->get() == "max")
            config_.composite = CompositeMethod::max;
          else if (s->get() == "mean")
            config_.composite = CompositeMethod::mean;
          else
            error(v, key, "must be \"max\" or \"mean\", got " + quote(s->get()) + did_you_mean(s->get(), kCompositeNames));
        }
      } else if (name == "weights") {
        if (const auto* w = require_table(v, key)) weights(*w);
      } else if (name == "include_endpoints") {
        if (const auto* b = v.as_boolean())
          config_.include_endpoints = b->get();
        else
          type_error(v, key, "a boolean (true or false)");
      } else {
        unknown(k, v, kNodeSection);
      }
    }
  }

  void ebpf(const toml::node& v, const std::string& key) {
    const auto* s = v.as_string();
    if (s == nullptr) {
      std::string hint;
      if (const auto* b = v.as_boolean()) hint = b->get() ? "; write ebpf = \"auto\"" : "; write ebpf = \"off\"";
      error(v, key, "expected \"auto\" or \"off\", got " + describe(v) + hint);
      return;
    }
    const std::string& mode = s->get();
    if (mode == "auto") {
      config_.ebpf = EbpfMode::automatic;
      return;
    }
    if (mode == "off") {
      config_.ebpf = EbpfMode::off;
      return;
    }
    // "on" is one edit from "off": never suggest the opposite of what was meant.
    std::string hint;
    for (std::string_view yes : {"on"sv, "true"sv, "yes"sv, "enable"sv, "enabled"sv, "1"sv})
      if (edit_distance(mode, yes) == 0)
        hint = "; write \"auto\": the probes are loaded whenever endpoints are declared";
    for (std::string_view no : {"false"sv, "no"sv, "disable"sv, "disabled"sv, "0"sv, "none"sv})
      if (edit_distance(mode, no) == 0) hint = "; write \"off\"";
    if (hint.empty()) hint = choices(mode, kEbpfModes, "modes");
    error(v, key, "unknown mode " + quote(mode) + hint);
  }

  void cgroup(const toml::node& v, const std::string& key) {
    const auto* s = require_string(v, key, "a cgroup path string such as \"system.slice/api.service\"");
    if (s == nullptr) return;
    std::string_view path = s->get();
    if (path.find('\0') != std::string_view::npos) {
      error(v, key, "must not contain NUL characters");
      return;
    }
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
      error(v, key, quote(path) + " is a filesystem path; give the path relative to the cgroup root" +
                        (rest.empty() ? std::string(", or \"\" for the whole host") : ", e.g. " + quote(rest)));
      return;
    }
    // "/system.slice/x.service" as /proc/PID/cgroup prints it is accepted;
    // "/" is the root cgroup, i.e. the whole host.
    while (path.starts_with('/')) path.remove_prefix(1);
    while (path.ends_with('/')) path.remove_suffix(1);
    for (std::size_t pos = 0; pos <= path.size();) {
      std::size_t slash = path.find('/', pos);
      if (slash == std::string_view::npos) slash = path.size();
      if (path.substr(pos, slash - pos) == "..") {
        error(v, key, "must not contain \"..\"; give the path below the cgroup root, e.g. \"system.slice/api.service\"");
        return;
      }
      pos = slash + 1;
    }
    config_.cgroup = std::string(path);
  }

  void cgroup_version(const toml::node& v, const std::string& key) {
    const std::string expected = "must be \"auto\", 1 or 2, got ";
    if (const auto* s = v.as_string()) {
      if (s->get() == "auto")
        config_.cgroup_version = probes::CgroupVersion::automatic;
      else if (const std::string_view n = s->get(); n == "1" || n == "2" || n == "v1" || n == "v2")
        error(v, key, expected + describe(v) + "; versions are integers: write cgroup_version = " + n.back());
      else
        error(v, key, expected + describe(v));
    } else if (const auto* i = v.as_integer()) {
      if (i->get() == 1)
        config_.cgroup_version = probes::CgroupVersion::v1;
      else if (i->get() == 2)
        config_.cgroup_version = probes::CgroupVersion::v2;
      else
        error(v, key, expected + describe(v));
    } else {
      type_error(v, key, "\"auto\", 1 or 2");
    }
  }

  void signals(const toml::node& v, const std::string& key) {
    const auto* arr = v.as_array();
    if (arr == nullptr) {
      type_error(v, key, "an array of signal names such as [\"cpu\", \"memory\"]");
      return;
    }
    if (arr->empty()) {
      error(v, key, "must list at least one signal; valid signals are " + join(kNodeSignals));
      return;
    }
    std::vector<std::string> out;
    std::vector<const toml::node*> seen;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const toml::node& e = *arr->get(i);
      const std::string ekey = key + "[" + std::to_string(i) + "]";
      const auto* s = e.as_string();
      if (s == nullptr) {
        type_error(e, ekey, "a signal name string such as \"cpu\"");
        return;
      }
      const std::string& name = s->get();
      if (std::find(std::begin(kNodeSignals), std::end(kNodeSignals), name) == std::end(kNodeSignals)) {
        error(e, ekey, "unknown signal " + quote(name) + choices(name, kNodeSignals, "signals"));
        return;
      }
      if (auto it = std::find(out.begin(), out.end(), name); it != out.end()) {
        const auto& first = seen[static_cast<std::size_t>(it - out.begin())]->source().begin;
        error(e, ekey,
              "duplicate signal " + quote(name) + " (first listed at line " + std::to_string(first.line) +
                  ", column " + std::to_string(first.column) + "); list each signal once");
        return;
      }
      out.push_back(name);
      seen.push_back(&e);
    }
    config_.signals = std::move(out);
  }

  void weights(const toml::table& t) {
    std::map<std::string, double> out;
    bool ok = true;
    for (auto&& [k, v] : t) {
      const std::string_view name = k.str();
      const std::string key = dotted("node.weights", name);
      const bool known =
          std::find(std::begin(kNodeSignals), std::end(kNodeSignals), name) != std::end(kNodeSignals);
      if (!known) {
        // cpu.pressure = 0.5 unquoted is a dotted key: TOML makes a table
        // "cpu" holding "pressure". Say how to write it.
        if (const auto* sub = v.as_table(); sub != nullptr && !sub->empty()) {
          const std::string joined = std::string(name) + "." + std::string(sub->begin()->first.str());
          if (std::find(std::begin(kNodeSignals), std::end(kNodeSignals), joined) != std::end(kNodeSignals)) {
            error(k.source(), dotted("node.weights", joined),
                  "signal names contain dots, so quote the key: write " + quote(joined) + " = <weight>");
            ok = false;
            continue;
          }
        }
        unknown(k, v, kWeightsSection);
        ok = false;
        continue;
      }
      double w = 0;
      if (const auto* d = v.as_floating_point()) {
        w = d->get();
      } else if (const auto* i = v.as_integer()) {
        w = static_cast<double>(i->get());
      } else {
        type_error(v, key, "a number (a fraction in [0, 1])");
        ok = false;
        continue;
      }
      if (!(w >= 0.0 && w <= 1.0)) {  // NaN fails both comparisons
        const std::string shown = v.is_integer() ? std::to_string(v.as_integer()->get()) : format_double(w);
        error(v, key, "must be a fraction in [0, 1], got " + shown);
        ok = false;
        continue;
      }
      // Weight 1 is the default: not storing it keeps Config equality
      // semantic (a file spelling out the defaults equals an empty one).
      if (w != 1.0) out.emplace(std::string(name), w);
    }
    if (ok) config_.weights = std::move(out);
  }

  // -- [[endpoint]] ---------------------------------------------------------

  // Where an entry's keys were given, for messages about the whole list.
  struct EndpointPlaces {
    toml::source_region entry, name, port, path;
  };

  void endpoints(const toml::node& v, const std::string& key) {
    const auto* arr = v.as_array();
    if (arr == nullptr) {
      std::string hint = "an array of tables: one [[endpoint]] section per endpoint";
      if (v.is_table()) hint += " (write [[endpoint]] with two brackets, not [endpoint])";
      type_error(v, key, hint);
      return;
    }
    std::vector<EndpointConfig> out;
    std::vector<EndpointPlaces> places;
    bool ok = true;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const toml::node& e = *arr->get(i);
      const std::string ekey = key + "[" + std::to_string(i) + "]";
      const auto* t = e.as_table();
      if (t == nullptr) {
        type_error(e, ekey, "a table with keys " + join(kEndpointKeys));
        ok = false;
        continue;
      }
      EndpointPlaces p;
      p.entry = t->source();
      if (auto entry = endpoint_entry(*t, ekey, p)) {
        out.push_back(std::move(*entry));
        places.push_back(p);
      } else {
        ok = false;
      }
    }
    // The list as a whole, once every entry is valid on its own (--endpoint
    // flags are checked again with these by validate_endpoints).
    if (!ok) return;
    if (auto issue = endpoint_list_issue(out)) {
      const EndpointPlaces& p = places[issue->index];
      const toml::source_region& where = issue->field == "name"   ? p.name
                                         : issue->field == "port" ? p.port
                                         : issue->field == "path" ? p.path
                                                                  : p.entry;
      std::string other;
      if (issue->other)
        other = key + "[" + std::to_string(*issue->other) + "] at line " +
                std::to_string(places[*issue->other].entry.begin.line);
      const std::string ikey =
          key + "[" + std::to_string(issue->index) + "]" + (issue->field.empty() ? "" : "." + std::string(issue->field));
      error(where, ikey, issue->message_with(other));
      return;
    }
    config_.endpoints = std::move(out);
  }

  // One [[endpoint]] table; nullopt after reporting its errors.
  std::optional<EndpointConfig> endpoint_entry(const toml::table& t, const std::string& ekey, EndpointPlaces& places) {
    EndpointConfig c;
    bool ok = true;
    bool has_name = false, has_port = false, has_target = false, has_max = false;
    std::optional<std::chrono::nanoseconds> target, max;
    toml::source_region max_place;
    const auto fail = [&](const toml::node& v, const std::string& key, std::optional<std::string> message) {
      if (!message) return false;
      error(v, key, std::move(*message));
      ok = false;
      return true;
    };
    for (auto&& [k, v] : t) {
      const std::string_view name = k.str();
      const std::string key = ekey + "." + key_part(name);
      if (name == "name") {
        has_name = true;
        if (const auto* s = require_string(v, key, "a name string such as \"api\"")) {
          if (!fail(v, key, endpoint_name_error(s->get()))) {
            c.name = s->get();
            places.name = v.source();
          }
        } else {
          ok = false;
        }
      } else if (name == "port") {
        has_port = true;
        if (const auto* i = v.as_integer()) {
          if (!fail(v, key, endpoint_port_error(i->get(), std::to_string(i->get())))) {
            c.port = static_cast<uint16_t>(i->get());
            places.port = v.source();
          }
        } else {
          type_error(v, key, "an integer TCP port such as 8080");
          ok = false;
        }
      } else if (name == "path") {
        if (const auto* s = require_string(v, key, "a path prefix string such as \"/api\"")) {
          if (!fail(v, key, endpoint_path_error(s->get()))) {
            c.path = s->get();
            places.path = v.source();
          }
        } else {
          ok = false;
        }
      } else if (name == "target") {
        has_target = true;
        if (auto d = duration(v, key)) {
          if (!fail(v, key, endpoint_target_error(*d))) target = *d;
        } else {
          ok = false;
        }
      } else if (name == "max") {
        has_max = true;
        if (auto d = duration(v, key)) {
          max = *d;
          max_place = v.source();
        } else {
          ok = false;
        }
      } else if (name == "max_concurrency") {
        if (const auto* i = v.as_integer()) {
          if (!fail(v, key, max_concurrency_error(i->get(), std::to_string(i->get()))))
            c.max_concurrency = static_cast<uint32_t>(i->get());
        } else {
          type_error(v, key, "an integer such as 64");
          ok = false;
        }
      } else {
        error(k.source(), key,
              "unknown key " + quote(name) + " in [[endpoint]]" +
                  (nearest(name, kEndpointKeys) ? did_you_mean(name, kEndpointKeys)
                                                : "; valid keys in [[endpoint]] are " + join(kEndpointKeys)));
        ok = false;
      }
    }
    if (target && max) {
      if (auto m = endpoint_max_error(*max, *target)) {
        error(max_place, ekey + ".max", std::move(*m));
        ok = false;
      }
    }
    // Missing keys are reported at the [[endpoint]] header.
    const std::pair<bool, std::pair<std::string_view, std::string_view>> required[] = {
        {has_name, {"name", "a short name such as name = \"api\"; the report is endpoint.<name>.orca"}},
        {has_port, {"port", "the TCP port the service listens on, e.g. port = 8080"}},
        {has_target, {"target", "the latency the endpoint aims for, e.g. target = \"10ms\""}},
        {has_max, {"max", "the latency no request should exceed, at least target, e.g. max = \"500ms\""}},
    };
    for (const auto& [present, what] : required) {
      if (present) continue;
      error(t.source(), ekey + "." + std::string(what.first), "is required: " + std::string(what.second));
      ok = false;
    }
    if (!ok) return std::nullopt;
    c.target = *target;
    c.max = *max;
    return c;
  }

  // -- [[envoy]] ------------------------------------------------------------

  void envoy(const toml::node& v, const std::string& key) {
    const auto* arr = v.as_array();
    if (arr == nullptr) {
      std::string hint = "an array of tables: one [[envoy]] section per file";
      if (v.is_table()) hint += " (write [[envoy]] with two brackets, not [envoy])";
      type_error(v, key, hint);
      return;
    }
    std::vector<EnvoyBridgeConfig> out;
    std::vector<toml::source_region> file_places;
    bool ok = true;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const toml::node& e = *arr->get(i);
      const std::string ekey = key + "[" + std::to_string(i) + "]";
      const auto* t = e.as_table();
      if (t == nullptr) {
        type_error(e, ekey, "a table with keys " + join(kEnvoyKeys));
        ok = false;
        continue;
      }
      std::optional<toml::source_region> file_place;
      if (auto entry = envoy_entry(*t, ekey, file_place)) {
        // Two entries writing one file would fight over it every interval.
        if (auto it = std::find_if(out.begin(), out.end(), [&](const auto& o) { return o.file == entry->file; });
            it != out.end()) {
          const auto first = static_cast<std::size_t>(it - out.begin());
          error(*file_place, ekey + ".file",
                "duplicate file " + quote(entry->file) + " (already used by " + key + "[" + std::to_string(first) +
                    "] at line " + std::to_string(file_places[first].begin.line) +
                    "); each [[envoy]] entry needs its own file");
          ok = false;
          continue;
        }
        out.push_back(std::move(*entry));
        file_places.push_back(*file_place);
      } else {
        ok = false;
      }
    }
    if (ok) config_.envoy = std::move(out);
  }

  // One [[envoy]] table; nullopt after reporting an error. `file_place` is
  // where the file was given, for duplicate messages.
  std::optional<EnvoyBridgeConfig> envoy_entry(const toml::table& t, const std::string& ekey,
                                               std::optional<toml::source_region>& file_place) {
    EnvoyBridgeConfig c;
    bool ok = true;
    for (auto&& [k, v] : t) {
      const std::string_view name = k.str();
      const std::string key = ekey + "." + key_part(name);
      if (name == "scope") {
        if (const auto* s = require_string(v, key, "a scope name such as \"node\"")) {
          if (std::find(std::begin(kEnvoyScopes), std::end(kEnvoyScopes), s->get()) != std::end(kEnvoyScopes)) {
            c.scope = s->get();
          } else {
            error(v, key,
                  "unknown scope " + quote(s->get()) + choices(s->get(), kEnvoyScopes, "scopes") +
                      " (per-endpoint scopes come later)");
            ok = false;
          }
        } else {
          ok = false;
        }
      } else if (name == "value") {
        if (const auto* s = require_string(v, key, "a value name such as \"application_utilization\"")) {
          if (auto msg = envoy_value_error(s->get())) {
            error(v, key, *msg);
            ok = false;
          } else {
            c.value = s->get();
            value_checks_.push_back({c.value, v.source(), key});
          }
        } else {
          ok = false;
        }
      } else if (name == "file") {
        if (auto p = envoy_file(v, key)) {
          c.file = std::move(*p);
          file_place = v.source();
        } else {
          ok = false;
        }
      } else if (name == "neutral") {
        double n = 0;
        if (const auto* d = v.as_floating_point()) {
          n = d->get();
        } else if (const auto* i = v.as_integer()) {
          n = static_cast<double>(i->get());
        } else {
          type_error(v, key, "a number (a fraction in [0, 1])");
          ok = false;
          continue;
        }
        if (!(n >= 0.0 && n <= 1.0)) {  // NaN fails both comparisons
          const std::string shown = v.is_integer() ? std::to_string(v.as_integer()->get()) : format_double(n);
          error(v, key, "must be a fraction in [0, 1], got " + shown + "; Envoy rejects pressure outside [0, 1]");
          ok = false;
        } else {
          c.neutral = n;
        }
      } else {
        error(k.source(), key,
              "unknown key " + quote(name) + " in [[envoy]]" +
                  (nearest(name, kEnvoyKeys) ? did_you_mean(name, kEnvoyKeys)
                                             : "; valid keys in [[envoy]] are " + join(kEnvoyKeys)));
        ok = false;
      }
    }
    if (ok && !file_place) {
      error(t.source(), ekey + ".file",
            "is required: the file Envoy's injected resource monitor reads, e.g. file = "
            "\"/run/orca/envoy/node.pressure\"");
      ok = false;
    }
    if (!ok) return std::nullopt;
    return c;
  }

  // Why `value` is not one the bridge can publish, or nullopt if it is.
  static std::optional<std::string> envoy_value_error(std::string_view value) {
    if (std::find(std::begin(kEnvoyValues), std::end(kEnvoyValues), value) != std::end(kEnvoyValues))
      return std::nullopt;
    const std::string unknown = "unknown value " + quote(value);
    // A bare signal name: say where it lives in the report.
    if (std::find(std::begin(kNodeSignals), std::end(kNodeSignals), value) != std::end(kNodeSignals))
      return unknown + "; a signal is read from the utilization map: write " + quote("utilization." + std::string(value));
    constexpr std::string_view kPrefix = "utilization.";
    if (value.starts_with(kPrefix)) {
      const std::string_view signal = value.substr(kPrefix.size());
      return unknown + ": " + quote(signal) + " is not a signal" + choices(signal, kNodeSignals, "signals");
    }
    return unknown + choices(value, kEnvoyValues, "values");
  }

  // Absolute, normalized, and a name the atomic writer and Envoy can both use.
  std::optional<std::string> envoy_file(const toml::node& v, const std::string& key) {
    constexpr std::string_view kExample = "\"/run/orca/envoy/node.pressure\"";
    auto p = absolute_path(v, key, kExample);
    if (!p) return std::nullopt;
    const std::filesystem::path normal = std::filesystem::path(*p).lexically_normal();
    const std::string name = normal.filename().string();
    if (name.empty() || name == "." || name == "..") {
      error(v, key, "must name a file, not a directory, e.g. " + std::string(kExample));
      return std::nullopt;
    }
    if (name.front() == '.') {
      // The writer's temporaries are dot-files next to the final name.
      error(v, key, "the file name must not start with \".\" (headroom's temporary files do); got " + quote(name));
      return std::nullopt;
    }
    if (name.size() >= 200) {
      error(v, key, "the file name is too long (at most 199 characters)");
      return std::nullopt;
    }
    if (name.ends_with(".orca")) {
      error(v, key,
            "names ending in \".orca\" are reserved for the ORCA report files; use another name, e.g. " +
                std::string(kExample));
      return std::nullopt;
    }
    return normal.string();
  }

  // A value read from a disabled signal would always be the neutral value.
  void check_envoy_signals() {
    for (const auto& check : value_checks_) {
      const auto it = std::find(std::begin(kEnvoyValues), std::end(kEnvoyValues), check.value);
      const std::string_view signal = kEnvoyValueSignals[static_cast<std::size_t>(it - std::begin(kEnvoyValues))];
      if (signal.empty() || config_.signal_enabled(signal)) continue;
      error(check.where, check.key,
            quote(check.value) + " needs the signal " + quote(signal) +
                ", which node.signals does not enable, so Envoy would only ever see the neutral value; add " +
                quote(signal) + " to node.signals or choose another value");
    }
  }

  struct ValueCheck {
    std::string value;
    toml::source_region where;
    std::string key;
  };
  std::vector<ValueCheck> value_checks_;

  // -- typed access ---------------------------------------------------------

  const toml::table* require_table(const toml::node& v, const std::string& key) {
    if (const auto* t = v.as_table()) return t;
    type_error(v, key, "a table ([" + key + "])");
    return nullptr;
  }

  const toml::value<std::string>* require_string(const toml::node& v, const std::string& key,
                                                 std::string_view expected) {
    if (const auto* s = v.as_string()) return s;
    type_error(v, key, expected);
    return nullptr;
  }

  std::optional<std::chrono::nanoseconds> duration(const toml::node& v, const std::string& key) {
    const auto* s = require_string(v, key, "a duration string such as \"100ms\"");
    if (s == nullptr) return std::nullopt;
    auto parsed = parse_duration_explained(s->get());
    if (auto* reason = std::get_if<std::string>(&parsed)) {
      error(v, key, invalid_duration(s->get(), *reason));
      return std::nullopt;
    }
    return std::get<std::chrono::nanoseconds>(parsed);
  }

  std::optional<std::string> absolute_path(const toml::node& v, const std::string& key, std::string_view example) {
    const auto* s = require_string(v, key, "an absolute path string such as " + std::string(example));
    if (s == nullptr) return std::nullopt;
    const std::string& p = s->get();
    if (p.empty()) {
      error(v, key, "must not be empty; give an absolute path such as " + std::string(example));
      return std::nullopt;
    }
    if (p.find('\0') != std::string::npos) {
      error(v, key, "must not contain NUL characters");
      return std::nullopt;
    }
    if (p.front() != '/') {
      // The daemon's working directory is "/", but say what is meant.
      error(v, key, "must be an absolute path, got " + quote(p) + "; write " + quote("/" + p));
      return std::nullopt;
    }
    return p;
  }

  // -- errors ---------------------------------------------------------------

  void error(const toml::source_region& where, std::string key, std::string message) {
    ConfigError e;
    e.file = file_;
    e.line = static_cast<int>(where.begin.line);
    e.column = static_cast<int>(where.begin.column);
    e.key = std::move(key);
    e.message = std::move(message);
    errors_.push_back(std::move(e));
  }
  void error(const toml::node& where, std::string key, std::string message) {
    error(where.source(), std::move(key), std::move(message));
  }

  void type_error(const toml::node& v, const std::string& key, std::string_view expected) {
    error(v, key, "expected " + std::string(expected) + ", got " + describe(v));
  }

  void unknown(const toml::key& k, const toml::node& v, const Section& section) {
    const std::string_view name = k.str();
    const std::string key = dotted(section.path, name);
    const std::string where = section.path.empty() ? "at the top level" : "in [" + std::string(section.path) + "]";
    std::string msg;
    std::string hint;
    if (v.is_table()) {
      msg = "unknown table [" + key + "]";
      if (auto n = nearest(name, section.table_keys)) hint = "; did you mean [" + dotted(section.path, *n) + "]?";
    } else {
      msg = "unknown key " + quote(name) + " " + where;
      hint = did_you_mean(name, section.keys);
    }
    if (hint.empty()) {
      // A valid key in the wrong table, e.g. "interval" above the first header.
      for (const Section* other : kSections) {
        if (other == &section || other->path.empty()) continue;
        if (std::find(other->keys.begin(), other->keys.end(), name) == other->keys.end()) continue;
        if (v.is_table()) {
          hint = "; did you mean [" + dotted(other->path, name) + "]?";
        } else {
          hint = "; " + quote(name) + " belongs in [" + std::string(other->path) + "]";
          if (section.path.empty()) hint += " (keys above the first [table] header are top-level)";
        }
        break;
      }
    }
    if (hint.empty()) {
      hint = section.keys.empty() ? std::string("; this table takes no keys")
                                  : "; valid keys " + where + " are " + join(section.keys);
    }
    error(k.source(), key, msg + hint);
  }

  const std::string& file_;
  Config config_;
  std::vector<ConfigError> errors_;
};

}  // namespace

// ---------------------------------------------------------------------------
// Config

bool Config::signal_enabled(std::string_view key) const {
  return std::find(signals.begin(), signals.end(), key) != signals.end();
}

double Config::weight(std::string_view key) const {
  const auto it = weights.find(std::string(key));
  return it == weights.end() ? 1.0 : it->second;
}

std::string ConfigError::to_string() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  if (!out.empty()) out += ": ";
  if (!key.empty()) out += key + ": ";
  out += message;
  return out;
}

// ---------------------------------------------------------------------------
// Parsing

std::variant<Config, ConfigError> parse_config(std::string_view toml_text, const std::string& file) {
  toml::table root;
  try {
    root = toml::parse(toml_text, std::string_view(file));
  } catch (const toml::parse_error& e) {
    ConfigError err;
    err.file = file;
    err.line = static_cast<int>(e.source().begin.line);
    err.column = static_cast<int>(e.source().begin.column);
    err.message = "TOML syntax error: " + std::string(e.description());
    return err;
  }
  Compiler c(file);
  c.top(root);
  if (auto err = c.first_error()) return std::move(*err);
  return std::move(c.config());
}

std::variant<Config, ConfigError> load_config(const std::string& path) {
  const auto fail = [&](int code, std::string_view what) {
    ConfigError err;
    err.file = path;
    err.message = std::string(what) + ": " + std::error_code(code, std::generic_category()).message();
    if (code == ENOENT)
      err.message += "; create it (examples/headroom.toml documents every key) or pass --config FILE";
    else
      err.message += "; check the path and its permissions, or pass --config FILE";
    return err;
  };

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(errno, "cannot open configuration file");
  // A configuration file is small; the cap keeps a wrong path (/dev/zero)
  // from growing memory without bound.
  constexpr std::size_t kMaxSize = 1 << 20;
  std::string text;
  std::array<char, 8192> buf{};
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int code = errno;
      ::close(fd);
      return fail(code, "cannot read configuration file");
    }
    if (n == 0) break;
    text.append(buf.data(), static_cast<std::size_t>(n));
    if (text.size() > kMaxSize) {
      ::close(fd);
      ConfigError err;
      err.file = path;
      err.message = "configuration file is larger than 1 MiB; is --config pointing at the right file?";
      return err;
    }
  }
  ::close(fd);
  return parse_config(text, path);
}

// ---------------------------------------------------------------------------
// Endpoints from the command line, and the merged list

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string expected_form() {
  return "expected " + std::string(kEndpointFlagForm) + ", e.g. " + std::string(kEndpointFlagExample);
}

// A whole decimal integer; nullopt for anything else. Out-of-range values
// saturate so that the range check reports them.
std::optional<std::int64_t> flag_integer(std::string_view text) {
  std::int64_t n = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  if (ec == std::errc::result_out_of_range)
    return text.front() == '-' ? std::numeric_limits<std::int64_t>::min() : std::numeric_limits<std::int64_t>::max();
  if (ec != std::errc()) return std::nullopt;
  return n;
}

}  // namespace

std::variant<EndpointConfig, std::string> parse_endpoint_flag(std::string_view text) {
  if (trim(text).empty()) return "is empty; " + expected_form();
  EndpointConfig c;
  std::vector<std::string_view> seen;
  std::optional<std::chrono::nanoseconds> target, max;
  const auto field_error = [](std::string_view key, const std::string& message) {
    return std::string(key) + ": " + message;
  };
  std::size_t pos = 0;
  for (;;) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = trim(text.substr(pos, comma - pos));
    const bool last = comma == text.size();
    pos = comma + 1;
    if (item.empty()) {
      if (last) return "ends with a comma; " + expected_form();
      return "has an empty item between two commas; " + expected_form();
    }
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return quote(item) + " is not key=value; " + expected_form();
    const std::string_view key = trim(item.substr(0, eq));
    const std::string_view value = trim(item.substr(eq + 1));
    const auto known = std::find(std::begin(kEndpointKeys), std::end(kEndpointKeys), key);
    if (known == std::end(kEndpointKeys)) {
      const std::string hint = did_you_mean(key, kEndpointKeys);
      return "unknown key " + quote(key) + (hint.empty() ? "; valid keys are " + join(kEndpointKeys) : hint) + " " +
             (hint.empty() ? "(" + expected_form() + ")" : "Expected " + std::string(kEndpointFlagForm));
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      return "duplicate key " + quote(key) + "; give each key once, " + expected_form();
    seen.push_back(*known);

    if (key == "name") {
      if (auto m = endpoint_name_error(value)) return field_error(key, *m);
      c.name = std::string(value);
    } else if (key == "port") {
      const auto n = flag_integer(value);
      if (!n) return field_error(key, "expected an integer TCP port such as 8080, got " + quote(value));
      if (auto m = endpoint_port_error(*n, value)) return field_error(key, *m);
      c.port = static_cast<uint16_t>(*n);
    } else if (key == "path") {
      if (auto m = endpoint_path_error(value)) return field_error(key, *m);
      c.path = std::string(value);
    } else if (key == "target" || key == "max") {
      auto parsed = parse_duration_explained(value);
      if (auto* reason = std::get_if<std::string>(&parsed)) return field_error(key, invalid_duration(value, *reason));
      const auto d = std::get<std::chrono::nanoseconds>(parsed);
      if (key == "target") {
        if (auto m = endpoint_target_error(d)) return field_error(key, *m);
        target = d;
      } else {
        max = d;
      }
    } else {  // max_concurrency
      const auto n = flag_integer(value);
      if (!n) return field_error(key, "expected an integer such as 64, got " + quote(value));
      if (auto m = max_concurrency_error(*n, value)) return field_error(key, *m);
      c.max_concurrency = static_cast<uint32_t>(*n);
    }
    if (last) break;
  }

  std::vector<std::string_view> missing;
  for (std::string_view required : {"name"sv, "port"sv, "target"sv, "max"sv})
    if (std::find(seen.begin(), seen.end(), required) == seen.end()) missing.push_back(required);
  if (!missing.empty()) {
    std::string list;
    for (std::size_t i = 0; i < missing.size(); ++i) list += (i > 0 ? ", " : "") + quote(missing[i]);
    return std::string(missing.size() == 1 ? "missing key " : "missing keys ") + list + "; " + expected_form();
  }
  if (auto m = endpoint_max_error(*max, *target)) return field_error("max", *m);
  c.target = *target;
  c.max = *max;
  return c;
}

std::optional<ConfigError> validate_endpoints(const std::vector<EndpointConfig>& endpoints, const std::string& file) {
  const auto make = [&](std::size_t index, std::string_view field, std::string message) {
    ConfigError e;
    e.file = file;
    e.key = "endpoint[" + std::to_string(index) + "]" + (field.empty() ? "" : "." + std::string(field));
    e.message = std::move(message);
    return e;
  };
  // Entries are numbered in list order: the file's [[endpoint]]s, then each --endpoint.
  for (std::size_t i = 0; i < endpoints.size(); ++i)
    if (auto issue = endpoint_field_issue(endpoints[i])) return make(i, issue->first, std::move(issue->second));
  if (auto issue = endpoint_list_issue(endpoints)) {
    std::string other;
    if (issue->other) {
      const EndpointConfig& o = endpoints[*issue->other];
      other = "endpoint[" + std::to_string(*issue->other) + "], " + quote(o.name) + " on port " + std::to_string(o.port);
    }
    return make(issue->index, issue->field, issue->message_with(other));
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Durations and log levels

std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text) {
  auto parsed = parse_duration_explained(text);
  if (auto* d = std::get_if<std::chrono::nanoseconds>(&parsed)) return *d;
  return std::nullopt;
}

std::string format_duration(std::chrono::nanoseconds d) {
  if (d.count() == 0) return "0s";
  // Magnitude in unsigned arithmetic so that the minimum value negates.
  const bool negative = d.count() < 0;
  const std::uint64_t mag =
      negative ? std::uint64_t{0} - static_cast<std::uint64_t>(d.count()) : static_cast<std::uint64_t>(d.count());
  // The shortest exact "<whole>[.<fraction>]<unit>" with whole >= 1, so
  // 100ms stays "100ms" rather than "0.1s" while 1500ms becomes "1.5s".
  std::string best;
  for (const auto& u : kUnits) {
    const auto unit = static_cast<std::uint64_t>(u.ns);
    const std::uint64_t whole = mag / unit;
    if (whole == 0) continue;
    std::uint64_t rem = mag % unit;
    std::string s = std::to_string(whole);
    if (rem != 0) {
      s += '.';
      // rem < unit <= 3.6e12, so rem * 10 cannot overflow.
      for (int digits = 0; rem != 0 && digits < 13; ++digits) {
        rem *= 10;
        s += static_cast<char>('0' + rem / unit);
        rem %= unit;
      }
      if (rem != 0) continue;  // not a terminating decimal of this unit (e.g. 1/3 h)
    }
    s += u.name;
    // On equal length a whole number reads better: "1001ms", not "1.001s".
    const auto rank = [](const std::string& t) { return std::pair(t.size(), t.find('.') != std::string::npos); };
    if (best.empty() || rank(s) < rank(best)) best = std::move(s);
  }
  return negative ? "-" + best : best;
}

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
