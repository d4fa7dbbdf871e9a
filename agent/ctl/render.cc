// SPDX-License-Identifier: Apache-2.0
#include "agent/ctl/render.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "agent/config/config.h"  // kNodeSignals: the column order of the node's signals

namespace headroom::ctl {
namespace {

template <class... Args>
std::string printf_string(const char* format, Args... args) {
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, format, args...);
  if (n < 0) return {};
  if (static_cast<std::size_t>(n) < sizeof buf) return std::string(buf, static_cast<std::size_t>(n));
  std::string out(static_cast<std::size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, args...);
  out.resize(static_cast<std::size_t>(n));
  return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Map fields sorted by key: protobuf's map iteration order is unspecified.
template <class Map>
std::vector<std::pair<std::string, double>> sorted(const Map& m) {
  std::vector<std::pair<std::string, double>> out(m.begin(), m.end());
  std::sort(out.begin(), out.end());
  return out;
}

// The STATUS / header marker for a report, from its metadata and staleness.
struct Marker {
  bool stopped = false;  // the agent stopped
  bool gone = false;     // the instance's servers stopped (the agent runs on)
  bool stale = false;
  std::string reason;
};

Marker marker_of(const orca::Report& report, const orca::Staleness& st) {
  Marker m;
  auto md = orca::metadata_of(report);
  m.gone = md && md->instance_gone;
  m.stopped = md && md->stopped && !m.gone;
  m.stale = st.stale;
  m.reason = st.reason;
  return m;
}

}  // namespace

std::string format_percent(double fraction) {
  double p = fraction * 100.0;
  if (p > -0.05 && p < 0.05) p = 0.0;  // no "-0.0 %"
  return printf_string("%.1f %%", p);
}

std::string format_age(int64_t age_ms) {
  if (age_ms < 0) {
    // Not -age_ms: that overflows for INT64_MIN.
    std::string positive = format_age(age_ms == INT64_MIN ? INT64_MAX : -age_ms);
    return "-" + positive;
  }
  if (age_ms < 60'000) return printf_string("%.1f s", static_cast<double>(age_ms) / 1000.0);
  const int64_t s = age_ms / 1000;
  const long long q = static_cast<long long>(s);
  if (s < 3600) return printf_string("%lld min %02lld s", q / 60, q % 60);
  if (s < 86400) return printf_string("%lld h %02lld min", q / 3600, q % 3600 / 60);
  return printf_string("%lld d %02lld h", q / 86400, q % 86400 / 3600);
}

std::string format_mib(double bytes) { return printf_string("%.1f MiB", bytes / (1024.0 * 1024.0)); }

std::string format_number(double value) {
  if (value == 0.0) return "0";  // also -0.0
  // Below 2^53 every integer is exact, so "%.0f" prints it digit for digit
  // (a millisecond timestamp must not turn into 1.7e+12).
  if (std::isfinite(value) && std::fabs(value) < 9007199254740992.0 && value == std::trunc(value))
    return printf_string("%.0f", value);
  return printf_string("%.6g", value);
}

std::string format_utc(int64_t unix_ms) {
  // Floor division, so times before 1970 keep a positive millisecond part.
  int64_t secs = unix_ms / 1000;
  int64_t ms = unix_ms % 1000;
  if (ms < 0) {
    ms += 1000;
    secs -= 1;
  }
  const auto t = static_cast<std::time_t>(secs);
  std::tm tm{};
  if (::gmtime_r(&t, &tm) == nullptr) return "?";
  char buf[40];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return std::string(buf, n) + printf_string(".%03lldZ", static_cast<long long>(ms));
}

std::string format_named_metric(std::string_view key, double value) {
  if (key == orca::kTimestampMsKey && std::isfinite(value) && std::fabs(value) < 1e15)
    return format_number(value) + " (" + format_utc(static_cast<int64_t>(value)) + ")";
  if (ends_with(key, "_bytes")) return format_mib(value);
  if (key == orca::kMetricCpuBusy || key == orca::kMetricCpuSaturation) return format_percent(value);
  if (key == orca::kMetricInstanceNetns) return format_number(value) + " (net:[" + format_number(value) + "])";
  return format_number(value);
}

std::string json_quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += printf_string("\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
        else
          out += c;
    }
  }
  out += '"';
  return out;
}

std::string without_path(std::string_view message, std::string_view path) {
  if (path.empty()) return std::string(message);
  const std::string prefix = std::string(path) + ": ";
  if (message.substr(0, prefix.size()) == prefix) return std::string(message.substr(prefix.size()));
  // "open /x/y.orca: reason" -> "open: reason"
  const std::string inner = " " + std::string(path) + ":";
  if (auto pos = message.find(inner); pos != std::string_view::npos) {
    std::string out(message);
    out.erase(pos, inner.size() - 1);
    return out;
  }
  return std::string(message);
}

// The scope of a path's last component ("" when it is not a report file).
std::string scope_of_path(std::string_view path) {
  const auto slash = path.rfind('/');
  return scope_of_file_name(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string scope_of_file_name(std::string_view name) {
  if (name.empty() || name.front() == '.') return {};
  if (!ends_with(name, orca::kReportSuffix) || name.size() == orca::kReportSuffix.size()) return {};
  return std::string(name.substr(0, name.size() - orca::kReportSuffix.size()));
}

ScopeParts split_instance(std::string_view scope) {
  const auto at = scope.find(orca::kInstanceSeparator);
  if (!scope.starts_with(orca::kEndpointSignalPrefix) || at == std::string_view::npos) return {scope, {}};
  return {scope.substr(0, at), scope.substr(at + 1)};
}

std::vector<std::string> instance_file_names(std::string_view aggregate_name, std::vector<std::string> names) {
  const std::string aggregate = scope_of_file_name(aggregate_name);
  if (!aggregate.starts_with(orca::kEndpointSignalPrefix) || !split_instance(aggregate).instance.empty()) return {};
  const std::string prefix = aggregate + orca::kInstanceSeparator;
  std::erase_if(names, [&](const std::string& name) {
    const std::string scope = scope_of_file_name(name);
    return !scope.starts_with(prefix) || scope.size() == prefix.size();
  });
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> render_report(std::string_view file, const orca::Report& report, int64_t now_unix_ms) {
  std::vector<std::string> out;
  const auto md = orca::metadata_of(report);
  const auto st = orca::check_staleness(report, now_unix_ms, kStaleIntervals);
  const Marker mark = marker_of(report, st);

  std::string header(file);
  header += ": ";
  if (md) {
    header += "seq " + std::to_string(md->seq) + ", ";
    header += st.age_ms >= 0 ? format_age(st.age_ms) + " ago" : format_age(-st.age_ms) + " in the future";
    header += ", interval " + std::to_string(md->interval_ms) + " ms";
  } else {
    header += "no headroom metadata";
  }
  if (mark.gone)
    header += "  GONE (the instance stopped serving; no server of it listens)";
  else if (mark.stopped)
    header += "  STOPPED (the agent stopped; the values are frozen)";
  else if (mark.stale)
    header += "  STALE (" + mark.reason + ")";
  out.push_back(std::move(header));

  // Lines of "key  value", aligned on one value column across all sections;
  // an empty value marks a section title.
  struct Item {
    std::size_t indent;
    std::string key;
    std::string value;
  };
  std::vector<Item> items;
  // An endpoint's aggregate and a dependency carry no machine CPU or memory:
  // leave them out rather than show 0 %. An instance's are its cgroup's.
  const std::string scope = scope_of_path(file);
  const bool aggregate = (scope.starts_with(orca::kEndpointSignalPrefix) && split_instance(scope).instance.empty()) ||
                         scope.starts_with(orca::kDependencyScopePrefix);
  if (!aggregate) {
    items.push_back({0, "cpu_utilization", format_percent(report.cpu_utilization())});
    items.push_back({0, "mem_utilization", format_percent(report.mem_utilization())});
  }
  items.push_back({0, "application_utilization", format_percent(report.application_utilization())});
  if (report.rps_fractional() != 0.0) items.push_back({0, "rps_fractional", format_number(report.rps_fractional())});
  if (report.eps() != 0.0) items.push_back({0, "eps", format_number(report.eps())});
  if (!report.utilization().empty()) {
    items.push_back({0, "utilization:", ""});
    for (const auto& [k, v] : sorted(report.utilization())) items.push_back({2, k, format_percent(v)});
  }
  if (!report.request_cost().empty()) {
    items.push_back({0, "request_cost:", ""});
    for (const auto& [k, v] : sorted(report.request_cost())) items.push_back({2, k, format_number(v)});
  }
  if (!report.named_metrics().empty()) {
    items.push_back({0, "named_metrics:", ""});
    for (const auto& [k, v] : sorted(report.named_metrics())) items.push_back({2, k, format_named_metric(k, v)});
  }

  std::size_t width = 0;
  for (const auto& it : items)
    if (!it.value.empty()) width = std::max(width, it.indent + it.key.size());
  for (const auto& it : items) {
    std::string line(it.indent, ' ');
    line += it.key;
    if (!it.value.empty()) {
      line.append(width - it.indent - it.key.size() + 2, ' ');
      line += it.value;
    }
    out.push_back(std::move(line));
  }
  return out;
}

std::string report_json(const orca::Report& report) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;  // a 0 utilization is a value, not an absence
  options.add_whitespace = false;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(report, &out, options).ok()) out = "null";
  return out;
}

std::string render_report_json(std::string_view file, const orca::Report& report, int64_t now_unix_ms) {
  const auto md = orca::metadata_of(report);
  const auto st = orca::check_staleness(report, now_unix_ms, kStaleIntervals);
  const std::string report_json = ctl::report_json(report);

  std::string out = "{\"file\":" + json_quote(file);
  out += ",\"age_ms\":" + (md ? std::to_string(st.age_ms) : std::string("null"));
  out += std::string(",\"stale\":") + (st.stale ? "true" : "false");
  out += ",\"stale_reason\":" + json_quote(st.reason);
  out += ",\"report\":" + report_json + "}";
  return out;
}

Table build_watch_table(std::vector<WatchEntry> entries, int64_t now_unix_ms) {
  // The node first: it is the row an operator looks for. Each endpoint's
  // instances follow its own row.
  std::sort(entries.begin(), entries.end(), [](const WatchEntry& a, const WatchEntry& b) {
    const bool an = a.scope == orca::kNodeScope, bn = b.scope == orca::kNodeScope;
    if (an != bn) return an;
    const ScopeParts pa = split_instance(a.scope), pb = split_instance(b.scope);
    return std::tie(pa.base, pa.instance) < std::tie(pb.base, pb.instance);
  });
  std::set<std::string_view> listed;
  for (const auto& e : entries) listed.insert(e.scope);

  std::set<std::string, std::less<>> seen;
  for (const auto& e : entries)
    if (e.report)
      for (const auto& [k, v] : e.report->utilization()) seen.insert(k);
  std::vector<std::string> keys;
  for (auto k : agent::kNodeSignals)
    if (auto it = seen.find(k); it != seen.end()) {
      keys.emplace_back(k);
      seen.erase(it);
    }
  keys.insert(keys.end(), seen.begin(), seen.end());

  Table t;
  t.header = {"SCOPE", "AGE", "SEQ", "CPU", "MEM", "APP"};
  t.header.insert(t.header.end(), keys.begin(), keys.end());
  t.header.emplace_back("STATUS");
  t.right_aligned.assign(t.header.size(), true);
  t.right_aligned.front() = false;
  t.right_aligned.back() = false;

  for (const auto& e : entries) {
    std::vector<std::string> row(t.header.size(), "-");
    const ScopeParts parts = split_instance(e.scope);
    const bool instance = !parts.instance.empty();
    row.front() = instance && listed.contains(parts.base) ? "  @" + std::string(parts.instance) : e.scope;
    if (!e.report) {
      row.back() = "ERROR: " + e.error;
      t.rows.push_back(std::move(row));
      continue;
    }
    const auto& r = *e.report;
    const auto md = orca::metadata_of(r);
    const auto st = orca::check_staleness(r, now_unix_ms, kStaleIntervals);
    if (md) {
      row[1] = format_age(st.age_ms);
      row[2] = std::to_string(md->seq);
    }
    const bool aggregate = (e.scope.starts_with(orca::kEndpointSignalPrefix) && !instance) ||
                           e.scope.starts_with(orca::kDependencyScopePrefix);
    const bool no_cgroup = r.named_metrics().contains(std::string(orca::kMetricInstanceCgroupUnavailable));
    if (!aggregate) {
      row[3] = format_percent(r.cpu_utilization());
      if (!no_cgroup) row[4] = format_percent(r.mem_utilization());
    }
    row[5] = format_percent(r.application_utilization());
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (auto it = r.utilization().find(keys[i]); it != r.utilization().end()) row[6 + i] = format_percent(it->second);
    const Marker mark = marker_of(r, st);
    const bool no_ebpf = r.named_metrics().contains(std::string(kEbpfUnavailableMetric));
    row.back() = mark.gone      ? "GONE (stopped serving)"
                 : mark.stopped ? "STOPPED"
                 : mark.stale   ? "STALE: " + mark.reason
                 : no_ebpf      ? "ok, latency unavailable (no eBPF)"
                 : no_cgroup    ? "ok, cgroup unavailable"
                                : "ok";
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::vector<std::string> format_table(const Table& table) {
  std::vector<std::size_t> width(table.header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  measure(table.header);
  for (const auto& row : table.rows) measure(row);

  auto line_of = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
      if (i > 0) line += "  ";
      const std::size_t pad = width[i] - row[i].size();
      const bool right = i < table.right_aligned.size() && table.right_aligned[i];
      if (right) line.append(pad, ' ');
      line += row[i];
      if (!right) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line;
  };
  std::vector<std::string> out;
  out.push_back(line_of(table.header));
  for (const auto& row : table.rows) out.push_back(line_of(row));
  return out;
}

std::vector<std::string> render_watch_frame(const WatchFrame& frame) {
  std::vector<std::string> out;
  out.push_back("headroomctl watch " + frame.dir + "  " + format_utc(frame.now_unix_ms));
  if (!frame.waiting_reason.empty()) {
    out.push_back("waiting for " + frame.dir + " (" + frame.waiting_reason + ")");
    return out;
  }
  if (frame.entries.empty()) {
    out.push_back("no report files (*" + std::string(orca::kReportSuffix) + ") in " + frame.dir + " yet");
    return out;
  }
  for (auto& line : format_table(build_watch_table(frame.entries, frame.now_unix_ms))) out.push_back(std::move(line));
  return out;
}

}  // namespace headroom::ctl
