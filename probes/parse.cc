// SPDX-License-Identifier: Apache-2.0
#include "probes/parse.h"
#include "headroom/orca/text.h"

#include <charconv>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>
#include <system_error>
#include <type_traits>

namespace headroom::probes {
namespace {

// Splits off the next line; false at the end of the text.
bool next_line(std::string_view& text, std::string_view& line) {
  if (text.empty()) return false;
  const size_t nl = text.find('\n');
  line = text.substr(0, nl);
  text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  return true;
}

// Splits off the next whitespace-separated token; false when none is left.
bool next_token(std::string_view& line, std::string_view& token) {
  size_t i = 0;
  while (i < line.size() && is_ascii_space(line[i])) ++i;
  if (i == line.size()) {
    line = {};
    return false;
  }
  size_t j = i;
  while (j < line.size() && !is_ascii_space(line[j])) ++j;
  token = line.substr(i, j - i);
  line.remove_prefix(j);
  return true;
}

// from_chars: no locale, no exceptions, no leading '+' or whitespace; the
// whole token must be the number.
template <class T>
bool to_number(std::string_view s, T& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  if constexpr (std::is_floating_point_v<T>) {
    if (ec == std::errc() && !std::isfinite(out)) return false;
  }
  return ec == std::errc() && p == end;
}

// Quotes a token for an error message, cut short so a garbage file cannot
// produce a garbage-sized message.
std::string quote(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string q = "\"";
  q.append(s.substr(0, kMax));
  if (s.size() > kMax) q += "...";
  q += '"';
  return q;
}

Error bad_number(std::string_view where, std::string_view token) {
  return logic_error(std::string(where) + ": bad number " + quote(token));
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// "cpu0", "cpu17": the per-CPU lines of /proc/stat and /proc/schedstat.
bool is_cpu_n(std::string_view key) { return key.size() > 3 && key.starts_with("cpu") && all_digits(key.substr(3)); }

// The first value token of a "key value" line. Extra tokens are ignored.
template <class T>
Result<T> first_value(std::string_view key, std::string_view rest) {
  std::string_view token;
  if (!next_token(rest, token)) return logic_error(quote(key) + " line has no value");
  T value{};
  if (!to_number(token, value)) return bad_number(quote(key) + " line", token);
  return value;
}

Result<PressureLine> parse_pressure_line(std::string_view kind, std::string_view rest) {
  PressureLine line;
  bool have_avg10 = false, have_avg60 = false, have_avg300 = false, have_total = false;
  const std::string where = quote(kind) + " line";
  std::string_view token;
  while (next_token(rest, token)) {
    const size_t eq = token.find('=');
    if (eq == std::string_view::npos) return logic_error(where + ": expected key=value, got " + quote(token));
    const std::string_view key = token.substr(0, eq), value = token.substr(eq + 1);
    bool ok = true;
    if (key == "avg10") {
      ok = to_number(value, line.avg10);
      have_avg10 = true;
    } else if (key == "avg60") {
      ok = to_number(value, line.avg60);
      have_avg60 = true;
    } else if (key == "avg300") {
      ok = to_number(value, line.avg300);
      have_avg300 = true;
    } else if (key == "total") {
      ok = to_number(value, line.total_us);
      have_total = true;
    }  // other keys: a newer kernel's addition, not ours to judge
    if (!ok) return bad_number(where, token);
  }
  if (!have_avg10) return logic_error(where + ": no avg10");
  if (!have_avg60) return logic_error(where + ": no avg60");
  if (!have_avg300) return logic_error(where + ": no avg300");
  if (!have_total) return logic_error(where + ": no total");
  return line;
}

// "<quota> <period>" -> CPUs; shared by v2 cpu.max's numeric form.
Result<std::optional<double>> quota_cpus(std::optional<uint64_t> quota, uint64_t period) {
  if (period == 0) return logic_error("period is 0");
  if (!quota) return std::optional<double>();
  if (*quota == 0) return logic_error("quota is 0");
  return std::optional<double>(static_cast<double>(*quota) / static_cast<double>(period));
}

}  // namespace

Result<HostCpuReading> parse_proc_stat(std::string_view text) {
  HostCpuReading r;
  bool have_cpu = false, have_running = false, have_blocked = false;
  std::string_view line, key;
  while (next_line(text, line)) {
    if (!next_token(line, key)) continue;
    if (key == "cpu") {
      if (have_cpu) return logic_error("duplicate \"cpu\" line");
      uint64_t* const fields[] = {&r.total.user, &r.total.nice,   &r.total.system,  &r.total.idle,
                                  &r.total.iowait, &r.total.irq, &r.total.softirq, &r.total.steal};
      size_t n = 0;
      std::string_view token;
      // guest and guest_nice (fields 9 and 10) are already in user and nice.
      while (n < std::size(fields) && next_token(line, token)) {
        if (!to_number(token, *fields[n])) return bad_number("\"cpu\" line", token);
        ++n;
      }
      if (n < 4) return logic_error("\"cpu\" line has " + std::to_string(n) + " fields, need at least 4");
      have_cpu = true;
    } else if (is_cpu_n(key)) {
      ++r.ncpu;
    } else if (key == "procs_running") {
      auto v = first_value<uint32_t>(key, line);
      if (!v) return v.error();
      r.procs_running = *v;
      have_running = true;
    } else if (key == "procs_blocked") {
      auto v = first_value<uint32_t>(key, line);
      if (!v) return v.error();
      r.procs_blocked = *v;
      have_blocked = true;
    }
  }
  if (!have_cpu) return logic_error("no \"cpu\" line");
  if (r.ncpu == 0) return logic_error("no \"cpuN\" lines");
  if (!have_running) return logic_error("no \"procs_running\" line");
  if (!have_blocked) return logic_error("no \"procs_blocked\" line");
  return r;
}

Result<SchedStatReading> parse_schedstat(std::string_view text) {
  // The cpuN line layout (field 8 = run_delay) is the same in versions 15 to 17.
  constexpr uint64_t kMinVersion = 15;
  constexpr size_t kRunDelayField = 8;
  SchedStatReading r;
  bool have_version = false;
  std::string_view line, key;
  while (next_line(text, line)) {
    if (!next_token(line, key)) continue;
    if (key == "version") {
      auto v = first_value<uint64_t>(key, line);
      if (!v) return v.error();
      if (*v < kMinVersion) {
        return logic_error("version " + std::to_string(*v) + " is too old, need " + std::to_string(kMinVersion) +
                           " or later");
      }
      have_version = true;
    } else if (is_cpu_n(key)) {
      std::string_view token;
      uint64_t value = 0;
      for (size_t field = 1; field <= kRunDelayField; ++field) {
        if (!next_token(line, token)) {
          return logic_error(quote(key) + " line has " + std::to_string(field - 1) + " fields, need at least " +
                             std::to_string(kRunDelayField));
        }
        if (!to_number(token, value)) return bad_number(quote(key) + " line", token);
      }
      if (__builtin_add_overflow(r.run_delay_ns, value, &r.run_delay_ns)) {
        return logic_error("run delay sum overflows");
      }
      ++r.ncpu;
    }  // timestamp, domainN: not needed
  }
  if (!have_version) return logic_error("no \"version\" line");
  if (r.ncpu == 0) return logic_error("no \"cpuN\" lines");
  return r;
}

Result<MemInfoReading> parse_meminfo(std::string_view text) {
  MemInfoReading r;
  bool have_total = false, have_available = false;
  std::string_view line, key;
  while (next_line(text, line)) {
    if (!next_token(line, key)) continue;
    uint64_t* out = nullptr;
    if (key == "MemTotal:") {
      out = &r.total_bytes;
      have_total = true;
    } else if (key == "MemAvailable:") {
      out = &r.available_bytes;
      have_available = true;
    } else {
      continue;
    }
    key.remove_suffix(1);
    std::string_view value, unit;
    if (!next_token(line, value)) return logic_error(quote(key) + " line has no value");
    uint64_t kb = 0;
    if (!to_number(value, kb)) return bad_number(quote(key) + " line", value);
    if (!next_token(line, unit) || unit != "kB") return logic_error(quote(key) + " line: expected unit kB");
    if (__builtin_mul_overflow(kb, uint64_t{1024}, out)) return logic_error(quote(key) + " line: value overflows");
  }
  if (!have_total) return logic_error("no MemTotal");
  if (!have_available) return logic_error("no MemAvailable");
  return r;
}

Result<PressureReading> parse_pressure(std::string_view text) {
  PressureReading r;
  bool have_some = false;
  std::string_view line, kind;
  while (next_line(text, line)) {
    if (!next_token(line, kind)) continue;
    if (kind == "some") {
      if (have_some) return logic_error("duplicate \"some\" line");
      auto p = parse_pressure_line(kind, line);
      if (!p) return p.error();
      r.some = *p;
      have_some = true;
    } else if (kind == "full") {
      if (r.full) return logic_error("duplicate \"full\" line");
      auto p = parse_pressure_line(kind, line);
      if (!p) return p.error();
      r.full = *p;
    }
  }
  if (!have_some) return logic_error("no \"some\" line");
  return r;
}

Result<CpuStatV2> parse_cgroup2_cpu_stat(std::string_view text) {
  CpuStatV2 r;
  bool have_usage = false;
  std::string_view line, key;
  while (next_line(text, line)) {
    if (!next_token(line, key)) continue;
    uint64_t* out = nullptr;
    if (key == "usage_usec") {
      out = &r.usage_usec;
      have_usage = true;
    } else if (key == "throttled_usec") {
      out = &r.throttled_usec;
    } else if (key == "nr_throttled") {
      out = &r.nr_throttled;
    } else {
      continue;
    }
    auto v = first_value<uint64_t>(key, line);
    if (!v) return v.error();
    *out = *v;
  }
  // throttled_* exist only when the cpu controller is enabled for the cgroup;
  // without it nothing is throttled, so 0 is the truth.
  if (!have_usage) return logic_error("no usage_usec");
  return r;
}

Result<std::optional<double>> parse_cgroup2_cpu_max(std::string_view text) {
  std::string_view rest = text, quota_token, period_token, extra;
  if (!next_token(rest, quota_token) || !next_token(rest, period_token) || next_token(rest, extra)) {
    return logic_error("expected \"<quota> <period>\" or \"max <period>\", got " + quote(trim(text)));
  }
  uint64_t period = 0;
  if (!to_number(period_token, period)) return bad_number("period", period_token);
  std::optional<uint64_t> quota;
  if (quota_token != "max") {
    uint64_t q = 0;
    if (!to_number(quota_token, q)) return bad_number("quota", quota_token);
    quota = q;
  }
  return quota_cpus(quota, period);
}

Result<unsigned> parse_cpu_list_count(std::string_view text) {
  std::string_view rest = trim(text);
  if (rest.empty()) return logic_error("empty CPU list");
  uint64_t count = 0;  // wider than the result so one huge range cannot wrap
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const size_t dash = item.find('-');
    unsigned first = 0, last = 0;
    if (dash == std::string_view::npos) {
      if (!to_number(item, first)) return logic_error("bad CPU list item " + quote(item));
      last = first;
    } else if (!to_number(item.substr(0, dash), first) || !to_number(item.substr(dash + 1), last) || last < first) {
      return logic_error("bad CPU list item " + quote(item));
    }
    count += uint64_t{last} - first + 1;
    if (count > std::numeric_limits<unsigned>::max()) return logic_error("CPU list count overflows");
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return static_cast<unsigned>(count);
}

Result<std::optional<uint64_t>> parse_cgroup2_memory_max(std::string_view text) {
  if (trim(text) == "max") return std::optional<uint64_t>();
  auto v = parse_u64(text);
  if (!v) return v.error();
  return std::optional<uint64_t>(*v);
}

Result<uint64_t> parse_u64(std::string_view text) {
  const std::string_view t = trim(text);
  if (t.empty()) return logic_error("empty, expected a number");
  uint64_t v = 0;
  if (!to_number(t, v)) return logic_error("bad number " + quote(t));
  return v;
}

Result<int64_t> parse_i64(std::string_view text) {
  const std::string_view t = trim(text);
  if (t.empty()) return logic_error("empty, expected a number");
  int64_t v = 0;
  if (!to_number(t, v)) return logic_error("bad number " + quote(t));
  return v;
}

Result<CpuStatV1> parse_cgroup1_cpu_stat(std::string_view text) {
  CpuStatV1 r;
  bool have_nr = false, have_time = false;
  std::string_view line, key;
  while (next_line(text, line)) {
    if (!next_token(line, key)) continue;
    uint64_t* out = nullptr;
    if (key == "nr_throttled") {
      out = &r.nr_throttled;
      have_nr = true;
    } else if (key == "throttled_time") {
      out = &r.throttled_time_ns;
      have_time = true;
    } else {
      continue;
    }
    auto v = first_value<uint64_t>(key, line);
    if (!v) return v.error();
    *out = *v;
  }
  if (!have_nr) return logic_error("no nr_throttled");
  if (!have_time) return logic_error("no throttled_time");
  return r;
}

}  // namespace headroom::probes
