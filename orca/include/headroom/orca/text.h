// SPDX-License-Identifier: Apache-2.0
// Small text helpers every parser of headroom shares (the /proc and cgroup
// parsers, the configuration's flags, load headers, headroomctl's lists).
// Header-only, like result.h: probes/ uses them without linking protobuf.
#pragma once

#include <cstddef>
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

// ASCII letters' case folded (no locale lookup): HTTP header names, tokens.
constexpr char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Whether `a` and `b` are equal but for the case of ASCII letters.
constexpr bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

}  // namespace headroom
