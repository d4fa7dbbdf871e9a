// SPDX-License-Identifier: Apache-2.0
#include "agent/config/config_messages.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

namespace headroom::agent {

namespace {

constexpr char kHex[] = "0123456789ABCDEF";

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

std::string join(Names names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ", ";
    out += names[i];
  }
  return out;
}

std::string quoted_list(Names names, std::string_view last) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? std::string(last) : ", ";
    out += quote(names[i]);
  }
  return out;
}

std::optional<std::size_t> index_of(Names names, std::string_view word) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == word) return i;
  return std::nullopt;
}

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

std::string describe_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u > 0x20 && u < 0x7f) return quote(std::string_view(&c, 1));
  if (u == 0x20) return "a space";
  return std::string("byte 0x") + kHex[u >> 4] + kHex[u & 0xf];
}

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

std::string choices(std::string_view word, Names candidates, std::string_view what) {
  const std::string hint = did_you_mean(word, candidates);
  const std::string list = std::string(what) + " are " + join(candidates);
  return hint.empty() ? "; valid " + list : hint + " Valid " + list;
}

Error problem(std::string message, std::string key) {
  Error e;
  e.key = std::move(key);
  e.message = std::move(message);
  return e;
}

}  // namespace headroom::agent
