// SPDX-License-Identifier: Apache-2.0
#include "agent/ctl/tune_file.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <set>
#include <sstream>
#include <utility>

#include <toml++/toml.h>

#include "agent/config/config.h"

namespace headroom::ctl::tune {

namespace {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string quantile_name(double q) {
  std::string p = fixed(q * 100, 1);
  if (p.ends_with(".0")) p.resize(p.size() - 2);
  return "p" + p;
}

std::string range_of(const SignalPlan& s, bool cumulative) {
  if (!s.p50) return "not observed";
  if (cumulative) return "now " + fixed(*s.p50, 3);
  return fixed(*s.p50, 3) + ".." + fixed(s.p99.value_or(*s.p50), 3) + " (p50..p99 over the peak steps)";
}

void endpoint_lines(std::ostringstream& out, const Recommendation& r, const Provenance& p) {
  const Options& o = p.options;
  if (!r.ok) {
    out << "# endpoint \"" << r.endpoint << "\": left as it was: " << r.note << "\n";
    return;
  }
  out << "# endpoint \"" << r.endpoint << "\": " << std::llround(r.requests_at_peak) << " requests at peak";
  if (p.cumulative)
    out << " (all since headroomd started)\n";
  else
    out << " (" << r.peak_steps << " steps at >= " << fixed(o.peak_share * 100, 0) << " % of the busiest, "
        << fixed(r.peak_rate, 1) << " req/s)\n";
  out << "#   target = " << r.target << ": " << quantile_name(o.target_quantile) << " at peak; max = " << r.max << ": "
      << quantile_name(o.max_quantile) << " at peak";
  if (o.max_margin != 1) out << " x " << o.max_margin;
  out << "; from the " << r.method
      << (r.method == "histogram" ? " (interpolated inside its buckets)" : " (weighted by their window requests)")
      << "\n";
  for (const SignalPlan& s : r.signals)
    out << "#   " << s.signal << ": expected " << range_of(s, p.cumulative) << "; level " << fixed(s.level, 3)
        << " (" << s.level_from << ") -> shed from " << s.thresholds.shed_start << ", CRITICAL from "
        << s.thresholds.critical_start << ", all at " << s.thresholds.all_shed << "\n";
}

toml::array shed_array(const Recommendation& r) {
  toml::array shed;
  for (const SignalPlan& s : r.signals)
    shed.push_back(toml::table{{"signal", s.signal},
                               {"shed_start", s.thresholds.shed_start},
                               {"critical_start", s.thresholds.critical_start},
                               {"all_shed", s.thresholds.all_shed}});
  return shed;
}

std::string serialize(const toml::table& t) {
  std::ostringstream out;
  out << toml::toml_formatter(
      t, (toml::toml_formatter::default_flags | toml::format_flags::relaxed_float_precision) &
             ~toml::format_flags::indentation);
  return out.str();
}

Error at(const std::string& file, const toml::source_region& where, std::string key, std::string message) {
  Error e;
  e.file = file;
  e.line = static_cast<int>(where.begin.line);
  e.column = static_cast<int>(where.begin.column);
  e.key = std::move(key);
  e.message = std::move(message);
  return e;
}

}  // namespace

std::string utc_time(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string header(const std::vector<Recommendation>& recs, const Provenance& p) {
  std::ostringstream out;
  out << "# Made by `headroomctl tune recommend` on " << utc_time(p.made_unix) << ":\n";
  out << "#   " << p.command_line << "\n";
  out << "# From:\n";
  for (const auto& line : p.source) out << "#   " << line << "\n";
  out << "# Rewritten from " << p.input << " (toml++ keeps no comments: the input's are not here).\n";
  out << "# The rules (peak steps, quantiles, thresholds from each signal's expected level L:\n"
      << "# shed from L + 0.2 (1 - L), CRITICAL from L + 0.6 (1 - L)) are in docs/tuning.md.\n";
  out << "#\n";
  for (const Recommendation& r : recs) endpoint_lines(out, r, p);
  out << "\n";
  return out.str();
}

Result<std::string> tuned_file(std::string_view input, const std::string& input_name,
                               const std::vector<Recommendation>& recs, const Provenance& p) {
  toml::table root;
  try {
    root = toml::parse(input, std::string_view(input_name));
  } catch (const toml::parse_error& e) {
    return at(input_name, e.source(), "", "TOML syntax error: " + std::string(e.description()));
  }
  if (auto* endpoints = root["endpoint"].as_array()) {
    for (auto& node : *endpoints) {
      auto* e = node.as_table();
      if (e == nullptr) continue;
      const auto name = (*e)["name"].value<std::string>();
      for (const Recommendation& r : recs) {
        if (!name || r.endpoint != *name || !r.ok) continue;
        e->insert_or_assign("target", r.target);
        e->insert_or_assign("max", r.max);
        e->insert_or_assign("shed", shed_array(r));
      }
    }
  }
  return header(recs, p) + serialize(root) + "\n";
}

Result<void> check_tuned_file(std::string_view text, const std::string& name) {
  // As headroomd reads it: its [[endpoint.shed]] entries are checked there
  // with the shedder's own checker (orca::check_shed_entry).
  if (auto c = agent::parse_config(text, name); !c) return std::move(c).error();
  return {};
}

}  // namespace headroom::ctl::tune
