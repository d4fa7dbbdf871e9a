// SPDX-License-Identifier: Apache-2.0
// Small text helpers every parser of headroom shares (the /proc and cgroup
// parsers, the configuration's flags, load headers, headroomctl's lists).
// Header-only, like result.h: probes/ uses them without linking protobuf.
#pragma once

#include <string_view>

namespace headroom {

// ASCII whitespace, as isspace() has it in the C locale (no locale lookup).
constexpr bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// `s` without leading and trailing ASCII whitespace.
constexpr std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ascii_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ascii_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace headroom
