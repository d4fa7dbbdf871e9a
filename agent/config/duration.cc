// SPDX-License-Identifier: Apache-2.0
#include "agent/config/duration.h"

#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include "agent/config/config_messages.h"

namespace headroom::agent {

namespace {

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

// Why `text` is not a duration, or the duration.
Result<std::chrono::nanoseconds, std::string> parse_explained(std::string_view text) {
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

}  // namespace

Result<std::chrono::nanoseconds> parse_duration_checked(std::string_view text) {
  auto parsed = parse_explained(text);
  if (parsed) return *parsed;
  return problem("invalid duration " + quote(text) + ": " + parsed.error() +
                 "; write a number and a unit (ns, us, ms, s, m, h) without spaces, e.g. \"100ms\" or \"1.5s\"");
}

std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text) {
  auto parsed = parse_explained(text);
  if (parsed) return *parsed;
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

}  // namespace headroom::agent
