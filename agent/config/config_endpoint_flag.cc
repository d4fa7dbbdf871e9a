// SPDX-License-Identifier: Apache-2.0
// headroomd --endpoint 'name=api,port=8080,target=10ms,max=500ms': the keys of
// an [[endpoint]] as comma-separated key=value, checked like the table.
#include "agent/config/config.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <functional>
#include <system_error>
#include <utility>
#include <vector>

#include "agent/config/config_checks.h"
#include "agent/config/config_keys.h"
#include "agent/config/config_messages.h"
#include "agent/config/duration.h"
#include "headroom/orca/text.h"

namespace headroom::agent {

namespace {

using namespace std::string_view_literals;

constexpr std::string_view kEndpointFlagForm =
    "name=NAME,port=PORT[,path=/PREFIX][,protocol=http2],target=DURATION,max=DURATION[,max_concurrency=N]";
constexpr std::string_view kEndpointFlagExample = "name=api,port=8080,path=/play,target=10ms,max=500ms";

// One key=value into `c`; the error names the key.
Result<void> set_field(EndpointConfig& c, std::string_view key, std::string_view value,
                                     std::optional<std::chrono::nanoseconds>& target,
                                     std::optional<std::chrono::nanoseconds>& max) {
  if (key == "name") {
    if (auto r = check_endpoint_name(value); !r) return at_key(std::move(r), key);
    c.name = std::string(value);
  } else if (key == "port") {
    auto port = flag_port(key, value, "8080");
    if (!port) return std::move(port).error();
    c.port = *port;
  } else if (key == "path") {
    if (auto r = check_endpoint_path(value); !r) return at_key(std::move(r), key);
    c.path = std::string(value);
  } else if (key == "protocol") {
    if (auto r = check_endpoint_protocol(value); !r) return at_key(std::move(r), key);
    c.protocol = *parse_endpoint_protocol(value);
  } else if (key == "target" || key == "max") {
    return flag_latency(key, value, target, max);
  } else {  // max_concurrency
    auto n = flag_max_concurrency(key, value);
    if (!n) return std::move(n).error();
    c.max_concurrency = *n;
  }
  return {};
}

}  // namespace

std::optional<std::int64_t> flag_integer(std::string_view text) {
  std::int64_t n = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  // Out-of-range values saturate so that the range check reports them.
  if (ec == std::errc::result_out_of_range)
    return text.front() == '-' ? std::numeric_limits<std::int64_t>::min() : std::numeric_limits<std::int64_t>::max();
  if (ec != std::errc()) return std::nullopt;
  return n;
}

Error at_key(Result<void> failed, std::string_view key) {
  Error err = std::move(failed).error();
  err.key = std::string(key);
  return err;
}

Result<uint16_t> flag_port(std::string_view key, std::string_view value, std::string_view example) {
  const auto n = flag_integer(value);
  if (!n)
    return problem("expected an integer TCP port such as " + std::string(example) + ", got " + quote(value),
                   std::string(key));
  if (auto r = check_endpoint_port(*n, value); !r) return at_key(std::move(r), key);
  return static_cast<uint16_t>(*n);
}

Result<uint32_t> flag_max_concurrency(std::string_view key, std::string_view value) {
  const auto n = flag_integer(value);
  if (!n) return problem("expected an integer such as 64, got " + quote(value), std::string(key));
  if (auto r = check_max_concurrency(*n, value); !r) return at_key(std::move(r), key);
  return static_cast<uint32_t>(*n);
}

Result<void> flag_latency(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds>& target,
                          std::optional<std::chrono::nanoseconds>& max) {
  auto parsed = parse_duration_checked(value);
  if (!parsed) {
    Error err = std::move(parsed).error();
    err.key = std::string(key);
    return err;
  }
  if (key == "max") {
    max = *parsed;  // max >= target once both are read
    return {};
  }
  if (auto r = check_endpoint_target(*parsed); !r) return at_key(std::move(r), key);
  target = *parsed;
  return {};
}

Result<void> parse_flag(std::string_view text, const FlagForm& form,
                        const std::function<Result<void>(std::string_view key, std::string_view value)>& set) {
  const std::string expected =
      "expected " + std::string(form.form) + ", e.g. " + std::string(form.example);
  if (trim(text).empty()) return problem("is empty; " + expected);
  // The flag takes the keys of its table, but for nested sections ([[endpoint.shed]]).
  std::vector<std::string_view> keys;
  for (std::string_view k : keys_in(form.section))
    if (find_key(form.section, k)->type != KeyType::tables) keys.push_back(k);
  std::vector<std::string_view> seen;
  std::size_t pos = 0;
  for (;;) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = trim(text.substr(pos, comma - pos));
    const bool last = comma == text.size();
    pos = comma + 1;
    if (item.empty()) {
      if (last) return problem("ends with a comma; " + expected);
      return problem("has an empty item between two commas; " + expected);
    }
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) return problem(quote(item) + " is not key=value; " + expected);
    const std::string_view key = trim(item.substr(0, eq));
    const std::string_view value = trim(item.substr(eq + 1));
    const auto known = std::find(keys.begin(), keys.end(), key);
    if (known == keys.end()) {
      const std::string hint = did_you_mean(key, keys);
      return problem("unknown key " + quote(key) + (hint.empty() ? "; valid keys are " + join(keys) : hint) + " " +
                     (hint.empty() ? "(" + expected + ")" : "Expected " + std::string(form.form)));
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      return problem("duplicate key " + quote(key) + "; give each key once, " + expected);
    seen.push_back(*known);
    if (auto r = set(*known, value); !r) return std::move(r).error();
    if (last) break;
  }

  std::vector<std::string_view> missing;
  for (const KeyRow& row : config_key_rows())
    if (row.section == form.section && !row.required.empty() &&
        std::find(seen.begin(), seen.end(), row.key) == seen.end())
      missing.push_back(row.key);
  if (!missing.empty()) {
    std::string list;
    for (std::size_t i = 0; i < missing.size(); ++i) list += (i > 0 ? ", " : "") + quote(missing[i]);
    return problem(std::string(missing.size() == 1 ? "missing key " : "missing keys ") + list + "; " + expected);
  }
  return {};
}

Result<EndpointConfig> parse_endpoint_flag(std::string_view text) {
  EndpointConfig c;
  std::optional<std::chrono::nanoseconds> target, max;
  const FlagForm form{"endpoint", kEndpointFlagForm, kEndpointFlagExample};
  auto parsed = parse_flag(text, form, [&](std::string_view key, std::string_view value) {
    return set_field(c, key, value, target, max);
  });
  if (!parsed) return std::move(parsed).error();
  if (auto r = check_endpoint_max(*max, *target); !r) return at_key(std::move(r), "max");
  c.target = *target;
  c.max = *max;
  return c;
}

}  // namespace headroom::agent
