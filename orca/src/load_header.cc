// SPDX-License-Identifier: Apache-2.0
// ORCA response headers for Envoy. The rules below restate what Envoy's parser
// (envoyproxy/envoy source/common/orca/orca_parser.cc, its tests in
// test/common/orca/orca_parser_test.cc, and HeaderUtility::
// parseCommaDelimitedHeader in source/common/http/header_utility.cc) accepts:
//
//  E1 endpoint-load-metrics must start with "TEXT " (kHeaderFormatPrefixText);
//     another prefix is "unsupported ORCA header format". An HTTP stack trims
//     trailing spaces, so a bare "TEXT " would arrive as "TEXT": never send it.
//  E2 tokens are split on ',' and trimmed of ASCII whitespace; empty tokens are
//     skipped. Key and value are split at '=' (':' is still accepted, the
//     original syntax). Spaces around '=' stay in the key and make it unknown.
//  E3 keys: cpu_utilization, mem_utilization, application_utilization, eps,
//     rps_fractional, named_metrics.<k>, utilization.<k> (utilization since
//     envoy PR #37487). Anything else, request_cost.<k> and rps included, is
//     "unsupported metric name" and rejects the whole header. <k> may not be
//     empty ("named metric key is empty.", "utilization metric key is empty.").
//  E4 values are read with absl::SimpleAtod; an empty value, unparsable text,
//     NaN, infinity or (newest versions) a negative value rejects the header.
//  E5 a key seen twice (compared as written, prefix included) rejects it.
//  E6 the -bin header is base64 of the binary message, decoded with
//     Envoy::Base64::decode: padded is accepted by every version, unpadded
//     only since the grpc-go fix (runtime guard orca_accept_unpadded_base64).
//     An empty value, or one that decodes to nothing, is rejected.
//
// On top of those, for safety against stricter Envoy versions:
//  S1 mem_utilization and utilization.<k> above 1 are not sent. The parser we
//     read accepts them, but the ORCA schema bounds them to [0, 1] and a range
//     check was asked for in review of envoy PR #37487.
//  S2 map keys are sent in TEXT only when they are visible ASCII without ',',
//     '=' or ':' (which would split the token differently, E2) and are not
//     empty (E3); whitespace would be trimmed or end up inside the key.
//  S3 -0 is written as "0": "-0" parses as a negative-signed zero that a
//     sign-bit check would refuse.
//  S4 map keys that are not valid UTF-8 are dropped from BIN too: the keys are
//     proto3 strings, and protobuf's parser (Envoy's ParseFromString) fails
//     the whole message on invalid UTF-8 in a string field.
//  S5 BIN is serialized deterministically (map entries sorted by key), so one
//     report always gives the same header value.
#include "headroom/orca/load_header.h"
#include "headroom/orca/text.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

namespace headroom::orca {
namespace {

constexpr std::string_view kCpu = "cpu_utilization";
constexpr std::string_view kMem = "mem_utilization";
constexpr std::string_view kApplication = "application_utilization";
constexpr std::string_view kRpsFractional = "rps_fractional";
constexpr std::string_view kEps = "eps";
constexpr std::string_view kNamedPrefix = "named_metrics.";
constexpr std::string_view kUtilizationPrefix = "utilization.";

using Map = google::protobuf::Map<std::string, double>;

// E4: what Envoy refuses in any field.
bool acceptable(double v) { return std::isfinite(v) && v >= 0.0; }
// S1: fields the schema bounds to [0, 1].
bool acceptable_fraction(double v) { return acceptable(v) && v <= 1.0; }
// S3: one zero.
double positive_zero(double v) { return v == 0.0 ? 0.0 : v; }

// S2 (E2, E3).
bool text_safe_key(std::string_view key) {
  if (key.empty()) return false;
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x21 || c > 0x7e || c == ',' || c == '=' || c == ':') return false;
  }
  return true;
}

// S4: RFC 3629 UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1fu, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0fu, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07u, min = 0x10000;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = cp << 6 | (cc & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

void filter_map(Map& m, bool fraction) {
  for (auto it = m.begin(); it != m.end();) {
    if (it->first.empty() || !valid_utf8(it->first) ||
        !(fraction ? acceptable_fraction(it->second) : acceptable(it->second))) {
      it = m.erase(it);
    } else {
      it->second = positive_zero(it->second);
      ++it;
    }
  }
}

// The report with every value Envoy (or a stricter reader) would refuse
// removed; a removed top-level field becomes 0, i.e. absent in proto3. Starts
// from a copy so that fields this code does not name (the deprecated rps, any
// added later) pass through untouched.
Report usable_values(const Report& r) {
  Report out = r;
  auto top = [](double v) { return acceptable(v) ? positive_zero(v) : 0.0; };
  out.set_cpu_utilization(top(r.cpu_utilization()));
  out.set_mem_utilization(acceptable_fraction(r.mem_utilization()) ? positive_zero(r.mem_utilization()) : 0.0);
  out.set_application_utilization(top(r.application_utilization()));
  out.set_rps_fractional(top(r.rps_fractional()));
  out.set_eps(top(r.eps()));
  filter_map(*out.mutable_named_metrics(), false);
  filter_map(*out.mutable_utilization(), true);
  filter_map(*out.mutable_request_cost(), false);
  return out;
}

// Shortest decimal that reads back as the same double (std::to_chars without a
// precision), so a TEXT round trip is exact.
void append_number(std::string& out, double v) {
  std::array<char, 64> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), positive_zero(v));
  if (ec != std::errc()) {  // cannot happen for a finite double in 64 bytes
    out += '0';
    return;
  }
  out.append(buf.data(), end);
}

void append_pair(std::string& out, std::string_view prefix, std::string_view key, double v) {
  if (out.size() > kTextFormatPrefix.size()) out += ',';
  out += prefix;
  out += key;
  out += '=';
  append_number(out, v);
}

// Map entries sorted by key: headers that differ only in map order would
// defeat caching and diffing.
std::vector<std::pair<std::string, double>> sorted(const Map& m) {
  std::vector<std::pair<std::string, double>> v(m.begin(), m.end());
  std::sort(v.begin(), v.end());
  return v;
}

Error text_error(std::string_view key, const std::string& what) {
  return logic_error(std::string(kLoadMetricsHeader) + ": " + std::string(key) + ": " + what);
}

// E4: like absl::SimpleAtod, one leading '+' is allowed and the text must be
// consumed entirely. Out-of-range text is rejected (absl turns overflow into
// infinity, which Envoy rejects, and underflow into 0, which we do not need).
Result<double> parse_number(std::string_view key, std::string_view text) {
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') {
    digits.remove_prefix(1);
    // "+-1" is not a number to absl either.
    if (!digits.empty() && digits.front() == '-')
      return text_error(key, "cannot parse \"" + std::string(text) + "\" as a number");
  }
  double v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec == std::errc::result_out_of_range)
    return text_error(key, "\"" + std::string(text) + "\" is out of the range of a double");
  if (ec != std::errc() || end != digits.data() + digits.size())
    return text_error(key, "cannot parse \"" + std::string(text) + "\" as a number");
  if (std::isnan(v)) return text_error(key, "value cannot be NaN");
  if (std::isinf(v)) return text_error(key, "value cannot be infinite");
  if (v < 0) return text_error(key, "value cannot be negative (" + std::string(text) + ")");
  return v;
}

Result<void> check_bin_value(const std::string& field, double v) {
  if (acceptable(v)) return {};
  std::string what = std::isnan(v) ? "NaN" : std::isinf(v) ? "infinite" : "negative";
  return logic_error(std::string(kLoadMetricsBinHeader) + ": " + field + " is " + what);
}

Result<void> check_bin_map(std::string_view prefix, const Map& m) {
  for (const auto& [key, v] : m) {
    if (auto c = check_bin_value(std::string(prefix) + key, v); !c) return c;
  }
  return {};
}

constexpr std::string_view kBase64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string text_header_value(const Report& report) {
  const Report r = usable_values(report);
  std::string out(kTextFormatPrefix);
  // E1: cpu_utilization always, so the value never ends in the prefix's space.
  append_pair(out, "", kCpu, r.cpu_utilization());
  const std::pair<std::string_view, double> top[] = {{kMem, r.mem_utilization()},
                                                     {kApplication, r.application_utilization()},
                                                     {kRpsFractional, r.rps_fractional()},
                                                     {kEps, r.eps()}};
  for (const auto& [name, v] : top) {
    if (v > 0) append_pair(out, "", name, v);
  }
  // Keys are unique within a map and the prefixes differ, so no key repeats (E5).
  for (const auto& [key, v] : sorted(r.named_metrics()))
    if (text_safe_key(key)) append_pair(out, kNamedPrefix, key, v);
  for (const auto& [key, v] : sorted(r.utilization()))
    if (text_safe_key(key)) append_pair(out, kUtilizationPrefix, key, v);
  return out;
}

std::string bin_header_value(const Report& report) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);  // S5
    usable_values(report).SerializeToCodedStream(&coded);
  }  // the stream trims `bytes` to what was written when it goes
  // E6: never empty. Field 1 (cpu_utilization), wire type 1 (64-bit), value
  // 0.0: decodes to the same all-default report.
  if (bytes.empty()) bytes = std::string("\x09\0\0\0\0\0\0\0\0", 9);
  return base64_encode(bytes);
}

Result<Report> parse_text_header_value(std::string_view value) {
  if (value.substr(0, kTextFormatPrefix.size()) != kTextFormatPrefix) {
    // Envoy names at most the first five characters, up to a space.
    std::string_view prefix = value.substr(0, 5);
    prefix = prefix.substr(0, prefix.find(' '));
    return logic_error(std::string(kLoadMetricsHeader) + ": unsupported format \"" + std::string(prefix) +
                       "\"; expected \"TEXT \"");
  }
  Report report;
  std::set<std::string_view> seen;
  std::string_view rest = value.substr(kTextFormatPrefix.size());
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view token = trim(rest.substr(0, comma));
    if (!token.empty()) {
      auto sep = token.find('=');
      if (sep == std::string_view::npos) sep = token.find(':');
      const std::string_view key = token.substr(0, sep);
      const std::string_view text = sep == std::string_view::npos ? std::string_view() : trim(token.substr(sep + 1));
      if (!seen.insert(key).second) return text_error(key, "appears more than once");
      if (key.empty()) return text_error(key, "empty metric name");
      if (text.empty()) return text_error(key, "empty value");
      auto v = parse_number(key, text);
      if (!v) return v.error();
      if (key.substr(0, kNamedPrefix.size()) == kNamedPrefix) {
        if (key.size() == kNamedPrefix.size()) return text_error(key, "named metric key is empty");
        (*report.mutable_named_metrics())[std::string(key.substr(kNamedPrefix.size()))] = *v;
      } else if (key.substr(0, kUtilizationPrefix.size()) == kUtilizationPrefix) {
        if (key.size() == kUtilizationPrefix.size()) return text_error(key, "utilization metric key is empty");
        (*report.mutable_utilization())[std::string(key.substr(kUtilizationPrefix.size()))] = *v;
      } else if (key == kCpu) {
        report.set_cpu_utilization(*v);
      } else if (key == kMem) {
        report.set_mem_utilization(*v);
      } else if (key == kApplication) {
        report.set_application_utilization(*v);
      } else if (key == kRpsFractional) {
        report.set_rps_fractional(*v);
      } else if (key == kEps) {
        report.set_eps(*v);
      } else {
        return text_error(key, "unsupported metric name");
      }
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return report;
}

Result<Report> parse_bin_header_value(std::string_view value) {
  const std::string name(kLoadMetricsBinHeader);
  if (value.empty()) return logic_error(name + ": empty value");
  auto bytes = base64_decode(value);
  if (!bytes) return logic_error(name + ": " + bytes.error().message);
  if (bytes->empty()) return logic_error(name + ": decodes to no bytes");
  Report report;
  if (!report.ParseFromString(*bytes))
    return logic_error(name + ": not a valid xds.data.orca.v3.OrcaLoadReport (" + std::to_string(bytes->size()) +
                       " bytes)");
  const std::pair<std::string_view, double> top[] = {{kCpu, report.cpu_utilization()},
                                                     {kMem, report.mem_utilization()},
                                                     {kApplication, report.application_utilization()},
                                                     {kRpsFractional, report.rps_fractional()},
                                                     {kEps, report.eps()}};
  for (const auto& [field, v] : top) {
    if (auto c = check_bin_value(std::string(field), v); !c) return c.error();
  }
  if (auto c = check_bin_map(kNamedPrefix, report.named_metrics()); !c) return c.error();
  if (auto c = check_bin_map(kUtilizationPrefix, report.utilization()); !c) return c.error();
  if (auto c = check_bin_map("request_cost.", report.request_cost()); !c) return c.error();
  return report;
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  auto byte = [&](std::size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int shift = 18; shift >= 0; shift -= 6) out += kBase64Alphabet[(n >> shift) & 0x3f];
  }
  const std::size_t left = bytes.size() - i;
  if (left > 0) {
    const uint32_t n = byte(i) << 16 | (left == 2 ? byte(i + 1) << 8 : 0);
    out += kBase64Alphabet[(n >> 18) & 0x3f];
    out += kBase64Alphabet[(n >> 12) & 0x3f];
    out += left == 2 ? kBase64Alphabet[(n >> 6) & 0x3f] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  std::size_t n = text.size();
  std::size_t pad = 0;
  while (pad < 2 && n > 0 && text[n - 1] == '=') {
    --n;
    ++pad;
  }
  // Padding only completes a 4-character group; without it, one character
  // left over in a group cannot encode a byte.
  if (pad > 0 && text.size() % 4 != 0) return logic_error("base64: padding does not complete a 4-character group");
  if (n % 4 == 1) return logic_error("base64: " + std::to_string(text.size()) + " characters is not a valid length");
  std::string out;
  out.reserve(n / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const int v = base64_value(text[i]);
    if (v < 0) return logic_error("base64: invalid character at offset " + std::to_string(i));
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
      acc &= (1u << bits) - 1;
    }
  }
  // Canonical encodings leave the unused low bits of the last character zero.
  if (acc != 0) return logic_error("base64: non-zero bits after the last byte");
  return out;
}

}  // namespace headroom::orca
