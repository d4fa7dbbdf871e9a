// SPDX-License-Identifier: Apache-2.0
#include "headroom/orca/retry.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <system_error>

namespace headroom::orca {
namespace {

constexpr double kMaxWaitGrowth = 100.0;
// ceil() forgives this much rounding: 2 x (1 - 0.5) must give 1, not 2.
constexpr double kCeilSlack = 1e-9;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string field(int bucket, const char* name) {
  return "buckets[" + std::string(bucket_name(static_cast<Bucket>(bucket))) + "]." + name;
}

Result<void> check_bucket(const RetryDialsOptions& o, int b) {
  const RetryDialsBase& d = o.buckets[static_cast<std::size_t>(b)];
  if (d.max_retries < 0 || d.max_retries > kMaxRetriesCap)
    return logic_error(field(b, "max_retries") + " (" + std::to_string(d.max_retries) + ") must be 0 to " +
                       std::to_string(kMaxRetriesCap) + ": more invites a retry storm");
  if (!std::isfinite(d.retry_after_seconds) || !(d.retry_after_seconds > 0) ||
      d.retry_after_seconds > kMaxRetryAfterSeconds)
    return logic_error(field(b, "retry_after_seconds") + " (" + num(d.retry_after_seconds) +
                       ") must be greater than 0 and at most 3600 (an hour)");
  if (b == 0) return {};
  // A less important bucket never retries more, nor sooner, than the one before it.
  const RetryDialsBase& m = o.buckets[static_cast<std::size_t>(b - 1)];
  if (d.max_retries > m.max_retries)
    return logic_error(field(b, "max_retries") + " (" + std::to_string(d.max_retries) + ") must be at most " +
                       field(b - 1, "max_retries") + " (" + std::to_string(m.max_retries) +
                       "): a less important bucket never retries more");
  if (d.retry_after_seconds < m.retry_after_seconds)
    return logic_error(field(b, "retry_after_seconds") + " (" + num(d.retry_after_seconds) + ") must be at least " +
                       field(b - 1, "retry_after_seconds") + " (" + num(m.retry_after_seconds) +
                       "): a less important bucket never retries sooner");
  return {};
}

double clamp01(double p) noexcept { return std::isnan(p) ? 1.0 : p < 0.0 ? 0.0 : p > 1.0 ? 1.0 : p; }

double clamp_wait(double s) noexcept {
  return std::isnan(s) ? kMaxRetryAfterSeconds : s < 0.0 ? 0.0 : s > kMaxRetryAfterSeconds ? kMaxRetryAfterSeconds : s;
}

// ---------------------------------------------------------------- the parser

// A cursor over the text; every method skips nothing but what it says.
struct Cursor {
  std::string_view s;
  std::size_t i = 0;

  void skip_ws() noexcept {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool eat(char c) noexcept {
    skip_ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  std::string where() const { return i < s.size() ? "at offset " + std::to_string(i) : "at the end"; }
};

// A JSON string without escapes (the keys have none): its contents.
std::optional<std::string_view> read_key(Cursor& c) {
  if (!c.eat('"')) return std::nullopt;
  const std::size_t start = c.i;
  while (c.i < c.s.size() && c.s[c.i] != '"' && c.s[c.i] != '\\' && static_cast<unsigned char>(c.s[c.i]) >= 0x20)
    ++c.i;
  if (c.i >= c.s.size() || c.s[c.i] != '"') return std::nullopt;
  return c.s.substr(start, c.i++ - start);
}

// The extent of a number in JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
std::size_t json_number_end(std::string_view s, std::size_t i) noexcept {
  auto digits = [&](std::size_t j) {
    const std::size_t from = j;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    return j == from ? std::string_view::npos : j;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i >= s.size()) return std::string_view::npos;
  if (s[i] == '0') {
    ++i;
  } else if ((i = digits(i)) == std::string_view::npos) {
    return i;
  }
  if (i < s.size() && s[i] == '.' && (i = digits(i + 1)) == std::string_view::npos) return i;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    i = digits(i);
  }
  return i;
}

Result<double> read_number(Cursor& c, std::string_view key) {
  c.skip_ws();
  const std::size_t end = json_number_end(c.s, c.i);
  if (end == std::string_view::npos)
    return logic_error("\"" + std::string(key) + "\" must be a number (" + c.where() + ")");
  double v = 0;
  const auto [ptr, ec] = std::from_chars(c.s.data() + c.i, c.s.data() + end, v);
  const std::string_view text = c.s.substr(c.i, end - c.i);
  if (ec == std::errc::result_out_of_range) {
    // Too large or too small for a double: an exponent without '-' overflowed.
    if (text.find("e-") == std::string_view::npos && text.find("E-") == std::string_view::npos)
      return logic_error("\"" + std::string(key) + "\" (" + std::string(text) + ") is too large for a number");
    v = 0;
  } else if (ec != std::errc()) {
    return logic_error("\"" + std::string(key) + "\" must be a number (" + c.where() + ")");
  } else if (ptr != c.s.data() + end) {
    return logic_error("\"" + std::string(key) + "\": a malformed number (" + c.where() + ")");
  }
  c.i = end;
  if (!std::isfinite(v)) return logic_error("\"" + std::string(key) + "\" must be finite");
  return v;
}

// One "key": number pair into dials; `seen` marks the keys read so far.
Result<void> read_member(Cursor& c, RetryDials& dials, bool seen[2]) {
  const auto key = read_key(c);
  if (!key) return logic_error("expected a key in double quotes " + c.where());
  const int k = *key == "maxRetries" ? 0 : *key == "retryAfterSeconds" ? 1 : -1;
  if (k < 0)
    return logic_error("unknown key \"" + std::string(*key) + "\": only \"maxRetries\" and \"retryAfterSeconds\"");
  if (seen[k]) return logic_error("\"" + std::string(*key) + "\" appears twice");
  seen[k] = true;
  if (!c.eat(':')) return logic_error("expected ':' after \"" + std::string(*key) + "\" " + c.where());
  auto v = read_number(c, *key);
  if (!v) return std::move(v).error();
  if (*v < 0) return logic_error("\"" + std::string(*key) + "\" (" + num(*v) + ") must not be negative");
  if (k == 0) {
    if (*v != std::floor(*v)) return logic_error("\"maxRetries\" (" + num(*v) + ") must be a whole number");
    dials.max_retries = *v > kMaxRetriesCap ? kMaxRetriesCap : static_cast<int>(*v);
  } else {
    dials.retry_after_seconds = clamp_wait(*v);
  }
  return {};
}

}  // namespace

std::array<RetryDialsBase, kBucketCount> default_retry_dials_base() noexcept {
  return {RetryDialsBase{2, 0.5}, RetryDialsBase{1, 1.0}, RetryDialsBase{1, 2.0}, RetryDialsBase{0, 5.0}};
}

Result<void> validate_retry_dials_options(const RetryDialsOptions& o) {
  for (int b = 0; b < kBucketCount; ++b)
    if (auto r = check_bucket(o, b); !r) return r;
  if (!std::isfinite(o.wait_growth) || o.wait_growth < 0 || o.wait_growth > kMaxWaitGrowth)
    return logic_error("wait_growth (" + num(o.wait_growth) + ") must be 0 to 100");
  return {};
}

RetryDials retry_dials(Bucket bucket, double shed_probability, const RetryDialsOptions& options) noexcept {
  int b = static_cast<int>(bucket);
  b = b < 0 ? 0 : b >= kBucketCount ? kBucketCount - 1 : b;
  const RetryDialsBase& base = options.buckets[static_cast<std::size_t>(b)];
  const double p = clamp01(shed_probability);
  const double n = std::ceil(static_cast<double>(base.max_retries) * (1.0 - p) - kCeilSlack);
  RetryDials d;
  d.max_retries = n <= 0 ? 0 : n >= kMaxRetriesCap ? kMaxRetriesCap : static_cast<int>(n);
  d.retry_after_seconds = clamp_wait(base.retry_after_seconds * (1.0 + options.wait_growth * p));
  return d;
}

RetryDials retry_dials(int priority, double shed_probability, const RetryDialsOptions& options) noexcept {
  return retry_dials(bucket_of_priority(priority), shed_probability, options);
}

ShedVerdict shed_verdict(double probability, double random01, int priority, const RetryDialsOptions& options) noexcept {
  if (!(random01 < probability)) return {};  // also NaN: never drops
  return {true, retry_dials(priority, probability, options)};
}

ShedVerdict shed_verdict(const Shedder& shedder, double random01, int priority,
                         const RetryDialsOptions& options) noexcept {
  return shed_verdict(shedder.probability(priority), random01, priority, options);
}

RetryDials clamp_retry_dials(const RetryDials& dials) noexcept {
  RetryDials d;
  d.max_retries = dials.max_retries < 0 ? 0 : dials.max_retries > kMaxRetriesCap ? kMaxRetriesCap : dials.max_retries;
  d.retry_after_seconds = clamp_wait(dials.retry_after_seconds);
  return d;
}

std::string format_retry_dials(const RetryDials& dials) {
  const RetryDials d = clamp_retry_dials(dials);
  char secs[32];
  const auto r = std::to_chars(secs, secs + sizeof secs, d.retry_after_seconds);
  return "{\"maxRetries\":" + std::to_string(d.max_retries) + ",\"retryAfterSeconds\":" +
         std::string(secs, r.ptr) + "}";
}

Result<RetryDials> parse_retry_dials(std::string_view text) {
  if (text.size() > kMaxRetryDialsText)
    return logic_error("retry dials: " + std::to_string(text.size()) + " bytes, more than " +
                       std::to_string(kMaxRetryDialsText) +
                       ": not a {\"maxRetries\":N,\"retryAfterSeconds\":S} object");
  Cursor c{text};
  RetryDials dials;
  bool seen[2] = {false, false};
  if (!c.eat('{')) return logic_error("retry dials: expected '{' " + c.where());
  do {
    if (auto r = read_member(c, dials, seen); !r) return logic_error("retry dials: " + r.error().message);
  } while (c.eat(','));
  if (!c.eat('}')) return logic_error("retry dials: expected ',' or '}' " + c.where());
  c.skip_ws();
  if (c.i != text.size()) return logic_error("retry dials: unexpected text after '}' " + c.where());
  if (!seen[0]) return logic_error("retry dials: \"maxRetries\" is missing");
  if (!seen[1]) return logic_error("retry dials: \"retryAfterSeconds\" is missing");
  return dials;
}

int retry_after_header_seconds(const RetryDials& dials) noexcept {
  const double s = clamp_wait(dials.retry_after_seconds);
  if (!(s > 0)) return 0;
  const double up = std::ceil(s);
  return up < 1 ? 1 : static_cast<int>(up);
}

int grpc_retry_pushback_ms(const RetryDials& dials) noexcept {
  const RetryDials d = clamp_retry_dials(dials);
  if (d.max_retries == 0) return -1;
  // Rounded up, forgiving the product's rounding (0.3 s is 300 ms, not 301).
  const double ms = std::ceil(d.retry_after_seconds * 1000.0 - kCeilSlack * 1000.0);
  return ms <= 0 ? 0 : static_cast<int>(ms);
}

std::array<GrpcTrailer, 2> grpc_shed_trailers(const RetryDials& dials) {
  return {GrpcTrailer{kGrpcPushbackTrailer, std::to_string(grpc_retry_pushback_ms(dials))},
          GrpcTrailer{kRetryDialsHeader, format_retry_dials(dials)}};
}

}  // namespace headroom::orca
