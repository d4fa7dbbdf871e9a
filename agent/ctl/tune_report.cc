// SPDX-License-Identifier: Apache-2.0
#include "agent/ctl/tune_report.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

namespace headroom::ctl::tune {
namespace {

using json = nlohmann::ordered_json;

std::string format(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, value);
  return buf;
}

std::string shown(double value, const std::string& unit) {
  if (unit == "%") return format("%.2f %%", value * 100);
  if (unit == "ms") return format("%.1f ms", value);
  return format("%.2f", value);
}

std::string thresholds_text(const std::vector<ShedEntry>& shed) {
  if (shed.empty()) return "(no [[endpoint.shed]])";
  std::string out;
  for (const auto& e : shed)
    out += (out.empty() ? "" : "; ") + e.signal + " " + format("%.3g", e.thresholds.shed_start) + "/" +
           format("%.3g", e.thresholds.critical_start) + "/" + format("%.3g", e.thresholds.all_shed);
  return out;
}

std::string verdict_text(const Judgement& j) {
  if (j.passed) return "PASS";
  for (const auto& c : j.criteria)
    if (!c.passed) return "FAIL " + c.name + " (" + std::string(cause_name(j.cause)) + ")";
  return "FAIL";
}

json run_object(const RunSummary& r) {
  json criteria = json::array();
  for (const auto& c : r.judgement.criteria) {
    json measures = json::array();
    for (const auto& m : c.measures)
      measures.push_back({{"what", m.what}, {"value", m.value}, {"limit", m.limit}, {"at_least", m.at_least},
                          {"pass", m.passed}, {"unit", m.unit}});
    criteria.push_back({{"name", c.name}, {"pass", c.passed}, {"measures", measures}});
  }
  json suggestion = nullptr;
  if (const auto& s = r.judgement.suggestion) {
    suggestion = {{"cause", std::string(cause_name(s->cause))}, {"text", s->text}};
    if (!s->signal.empty()) suggestion["signal"] = s->signal;
    if (s->value) suggestion["value"] = *s->value;
    if (s->shed_start) suggestion["shed_start"] = *s->shed_start;
    if (s->critical_start) suggestion["critical_start"] = *s->critical_start;
  }
  const auto& b = r.buffers;
  return {{"pass", r.judgement.passed},
          {"criteria", criteria},
          {"buffers",
           {{"baseline_rps", b.baseline_rps},
            {"success", b.success},
            {"success_is_lower_bound", b.success_is_lower_bound},
            {"failure", b.failure},
            {"failure_is_lower_bound", b.failure_is_lower_bound}}},
          {"suggestion", suggestion}};
}

json shed_array(const std::vector<ShedEntry>& shed) {
  json out = json::array();
  for (const auto& e : shed)
    out.push_back({{"signal", e.signal},
                   {"shed_start", e.thresholds.shed_start},
                   {"critical_start", e.thresholds.critical_start},
                   {"all_shed", e.thresholds.all_shed}});
  return out;
}

}  // namespace

std::vector<std::string> render_judgement(const RunSummary& r) {
  std::vector<std::string> out;
  char line[256];
  std::snprintf(line, sizeof line, "%-22s %-5s %s", "CRITERION", "", "MEASURED (LIMIT)");
  out.emplace_back(line);
  for (const auto& c : r.judgement.criteria) {
    std::string measures;
    for (const auto& m : c.measures)
      measures += (measures.empty() ? "" : "; ") + m.what + " " + shown(m.value, m.unit) + (m.at_least ? " (>= " : " (<= ") +
                  shown(m.limit, m.unit) + ")" + (m.passed ? "" : " !");
    std::snprintf(line, sizeof line, "%-22s %-5s ", c.name.c_str(), c.passed ? "pass" : "FAIL");
    out.push_back(line + measures);
  }
  out.push_back("buffers: success " + format("%.2f", r.buffers.success) + (r.buffers.success_is_lower_bound ? "+" : "") +
                ", failure " + format("%.2f", r.buffers.failure) + (r.buffers.failure_is_lower_bound ? "+" : "") +
                " (baseline " + format("%.0f", r.buffers.baseline_rps) + " req/s)");
  out.push_back("verdict: " + verdict_text(r.judgement));
  if (r.judgement.suggestion) out.push_back("suggestion: " + r.judgement.suggestion->text);
  return out;
}

std::string judgement_json(const RunSummary& r) { return run_object(r).dump(); }

std::vector<std::string> render_runs(const std::vector<RunSummary>& runs) {
  std::vector<std::string> out{"RUN  S      SUCCESS  FAILURE  VERDICT  THRESHOLDS (signal start/critical/all)"};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    char line[128];
    std::snprintf(line, sizeof line, "%-4zu %-6.3f %-8.2f %-8.2f ", i + 1, r.s, r.buffers.success, r.buffers.failure);
    out.push_back(line + verdict_text(r.judgement) + "  " + thresholds_text(r.shed));
  }
  return out;
}

std::string search_json(const std::vector<RunSummary>& runs, std::optional<std::size_t> best, const std::string& out) {
  json list = json::array();
  for (const auto& r : runs) {
    json o = run_object(r);
    o["s"] = r.s;
    o["shed"] = shed_array(r.shed);
    list.push_back(std::move(o));
  }
  json result = {{"pass", best.has_value()}, {"best", nullptr}, {"out", best ? json(out) : json(nullptr)}, {"runs", list}};
  if (best) result["best"] = *best;
  return result.dump();
}

std::string search_header(const std::string& command, const std::vector<RunSummary>& runs, std::size_t best) {
  std::string out = "# Made by headroomctl tune search: the passing run with the largest success buffer (run " +
                    std::to_string(best + 1) + ", s = " + format("%.3g", runs[best].s) + ").\n# Command: " + command +
                    "\n# Runs (s scales shed_start and critical_start from the signal's baseline level; docs/tuning.md):\n";
  for (const auto& line : render_runs(runs)) out += "#   " + line + "\n";
  return out + "\n";
}

}  // namespace headroom::ctl::tune
