// SPDX-License-Identifier: Apache-2.0
// Small helpers shared by the test tools (hr-test-server, hr-test-load).
#pragma once

#include <sys/resource.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>

namespace headroom::test_tools {

// "250us", "50ms", "5s", "1.5s" -> duration. The unit is required.
inline std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text) {
  double scale = 0;  // nanoseconds per unit
  std::string_view number;
  if (text.ends_with("us")) {
    scale = 1e3;
    number = text.substr(0, text.size() - 2);
  } else if (text.ends_with("ms")) {
    scale = 1e6;
    number = text.substr(0, text.size() - 2);
  } else if (text.ends_with("s")) {
    scale = 1e9;
    number = text.substr(0, text.size() - 1);
  } else {
    return std::nullopt;
  }
  double value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (number.empty() || ec != std::errc{} || end != number.data() + number.size() || value < 0 || value > 1e7)
    return std::nullopt;
  return std::chrono::nanoseconds(static_cast<int64_t>(value * scale + 0.5));
}

// Parses a whole non-negative decimal integer; nullopt on anything else.
inline std::optional<int64_t> parse_int(std::string_view text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

// Many connections need many descriptors: lift the soft limit to the hard one.
inline void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

}  // namespace headroom::test_tools
