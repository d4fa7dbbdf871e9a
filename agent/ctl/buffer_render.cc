// SPDX-License-Identifier: Apache-2.0
#include "agent/ctl/buffer_render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "agent/ctl/render.h"

namespace headroom::ctl::buffer {

namespace {

using nlohmann::json;

// printf into a string of the size the output needs (no truncation).
template <typename... Args>
std::string fmt(const char* f, Args... args) {
  const int n = std::snprintf(nullptr, 0, f, args...);
  if (n <= 0) return {};
  std::string out(static_cast<std::size_t>(n), '\0');
  std::snprintf(out.data(), out.size() + 1, f, args...);
  return out;
}

std::string ms(int64_t ns) { return ns > 0 ? fmt("%.1f ms", static_cast<double>(ns) / 1e6) : "-"; }
std::string pct(double f) { return fmt("%.1f %%", f * 100); }
std::string util(const UtilizationSummary& u) {
  if (!u.mean) return "-";
  return fmt("%.2f (max %.2f)", *u.mean, u.max.value_or(*u.mean));
}

json latency_json(const Latency& l) {
  auto v = [](int64_t ns) { return static_cast<double>(ns) / 1e6; };
  return json{{"p50", v(l.p50)}, {"p90", v(l.p90)}, {"p99", v(l.p99)}, {"max", v(l.max)}};
}

json counts_json(const Counts& c) {
  json failed_by = json::object();
  for (std::size_t i = 1; i < kFailReasons; ++i)
    if (c.failed_by[i] > 0) failed_by[std::string(fail_reason_name(static_cast<FailReason>(i)))] = c.failed_by[i];
  return json{{"offered", c.offered},
              {"served", c.served},
              {"rejected", c.rejected},
              {"failed", c.failed},
              {"failed_by", failed_by},
              {"served_share", c.served_share()},
              {"rejected_share", c.rejected_share()},
              {"failed_share", c.failed_share()},
              {"served_latency_ms", latency_json(c.served_latency)},
              {"rejected_latency_ms", latency_json(c.rejected_latency)}};
}

json optional_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::string step_label(const Step& s) {
  return s.kind == StepKind::ramp ? fmt("%gx", s.multiple) : std::string(step_kind_name(s.kind));
}

std::string xml_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// The axis' top: the next 1, 2, 2.5 or 5 times a power of ten at or above
// `v`, so that its quarters are round numbers.
double nice_ceiling(double v) {
  if (!(v > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= v * (1 - 1e-12)) return m * p;
  return 10 * p;
}

std::string suppressed_text(const RetryCounts& c) {
  std::string text;
  for (std::size_t i = 0; i < kSuppressedReasons; ++i)
    if (c.suppressed[i] > 0)
      text += (text.empty() ? "" : ", ") + std::string(suppressed_name(static_cast<Suppressed>(i))) + " " +
              std::to_string(c.suppressed[i]);
  return text.empty() ? "-" : text;
}

// --retries: per step, all priorities and then each.
std::vector<std::string> retry_table(const RunReport& r) {
  Table t;
  t.header = {"STEP", "PRIORITY", "FIRST ATTEMPTS", "RETRIES", "AMPLIFICATION", "SUPPRESSED"};
  t.right_aligned = {false, false, true, true, true, false};
  auto row = [&](const Step& step, const std::string& who, const RetryCounts& c) {
    t.rows.push_back({step_label(step), who, std::to_string(c.first_attempts), std::to_string(c.retries),
                      fmt("%.2fx", c.amplification()), suppressed_text(c)});
  };
  for (std::size_t i = 0; i < r.steps.size() && i < r.retries.size(); ++i) {
    row(r.steps[i].step, "all", r.retries[i].all);
    for (std::size_t k = 0; k < r.mix.size() && k < r.retries[i].by_class.size(); ++k)
      row(r.steps[i].step, r.mix[k].name, r.retries[i].by_class[k]);
  }
  std::vector<std::string> out = {"retries: " + std::string(retry_mode_name(r.retry_mode)) + ", at most " +
                                  std::to_string(r.max_retries) + " per request; a request's outcome is its last attempt's"};
  if (r.client.retries_past_end > 0)
    out.push_back(std::to_string(r.client.retries_past_end) + " retries were due after the run's end and not sent");
  for (auto& line : format_table(t)) out.push_back(std::move(line));
  out.emplace_back();
  return out;
}

// Several instances: each one's attempts, judged one by one.
std::vector<std::string> instance_table(const RunReport& r) {
  Table t;
  t.header = {"INSTANCE", "ATTEMPTS", "SERVED", "REJECTED", "FAILED"};
  t.right_aligned = {false, true, true, true, true};
  for (const auto& c : r.instances)
    t.rows.push_back({c.target, std::to_string(c.attempts), std::to_string(c.served), std::to_string(c.rejected),
                      std::to_string(c.failed)});
  std::vector<std::string> out = {"instances: first attempts round robin, a retry to the next instance; every attempt "
                                  "counted where it went"};
  for (auto& line : format_table(t)) out.push_back(std::move(line));
  out.emplace_back();
  return out;
}

json instances_json(const RunReport& r) {
  json out = json::array();
  for (const auto& c : r.instances)
    out.push_back({{"target", c.target},
                   {"attempts", c.attempts},
                   {"served", c.served},
                   {"rejected", c.rejected},
                   {"failed", c.failed}});
  return out;
}

json retry_counts_json(const RetryCounts& c) {
  json suppressed = json::object();
  for (std::size_t i = 0; i < kSuppressedReasons; ++i) suppressed[std::string(suppressed_name(static_cast<Suppressed>(i)))] = c.suppressed[i];
  return json{{"first_attempts", c.first_attempts},
              {"retries", c.retries},
              {"amplification", c.amplification()},
              {"suppressed", c.suppressed_total()},
              {"suppressed_by", suppressed}};
}

json retries_json(const RunReport& r) {
  json steps = json::array();
  for (const auto& s : r.retries) {
    json classes = json::object();
    for (std::size_t k = 0; k < r.mix.size() && k < s.by_class.size(); ++k) classes[r.mix[k].name] = retry_counts_json(s.by_class[k]);
    steps.push_back({{"all", retry_counts_json(s.all)}, {"classes", classes}});
  }
  return json{{"mode", retry_mode_name(r.retry_mode)},
              {"max_retries", r.max_retries},
              {"past_end", r.client.retries_past_end},
              {"steps", steps}};
}

}  // namespace

std::vector<std::string> render_table(const RunReport& r) {
  std::vector<std::string> out;
  const std::string others =
      r.instances.size() > 1 ? " and " + std::to_string(r.instances.size() - 1) + " other instances" : "";
  out.push_back("headroomctl buffer " + r.target + others + ": " + r.mode + ", baseline " + fmt("%.1f", r.baseline_rps) +
                " req/s (" + r.baseline_source + "), SLO " + ms(r.criteria.slo.count()) + ", rejections within " +
                ms(r.criteria.reject_within.count()));
  Table steps;
  steps.header = {"STEP", "OFFERED/S", "SERVED/S", "REJECTED/S", "FAILED/S", "SERVED P50", "P99", "REJECT P99",
                  "ENDPOINT UTIL", "NODE UTIL"};
  steps.right_aligned = {false, true, true, true, true, true, true, true, false, false};
  for (const auto& s : r.steps)
    steps.rows.push_back({step_label(s.step), fmt("%.0f", s.offered_rps), fmt("%.0f", s.served_rps),
                          fmt("%.0f", s.rejected_rps), fmt("%.0f", s.failed_rps), ms(s.all.served_latency.p50),
                          ms(s.all.served_latency.p99), ms(s.all.rejected_latency.p99), util(s.endpoint_utilization),
                          util(s.node_utilization)});
  for (auto& line : format_table(steps)) out.push_back(std::move(line));
  out.emplace_back();
  Table classes;
  classes.header = {"STEP", "PRIORITY", "OFFERED", "SERVED", "REJECTED", "FAILED", "SERVED P99", "FAILED BY"};
  classes.right_aligned = {false, false, true, true, true, true, true, false};
  for (const auto& s : r.steps)
    for (std::size_t k = 0; k < r.mix.size() && k < s.by_class.size(); ++k) {
      const auto& c = s.by_class[k];
      std::string why;
      for (std::size_t i = 1; i < kFailReasons; ++i)
        if (c.failed_by[i] > 0)
          why += (why.empty() ? "" : ", ") + std::string(fail_reason_name(static_cast<FailReason>(i))) + " " +
                 std::to_string(c.failed_by[i]);
      classes.rows.push_back({step_label(s.step), r.mix[k].name, std::to_string(c.offered), pct(c.served_share()),
                              pct(c.rejected_share()), pct(c.failed_share()), ms(c.served_latency.p99),
                              why.empty() ? "-" : why});
    }
  for (auto& line : format_table(classes)) out.push_back(std::move(line));
  out.emplace_back();
  if (r.retry_mode != RetryMode::none)
    for (auto& line : retry_table(r)) out.push_back(std::move(line));
  if (r.instances.size() > 1)
    for (auto& line : instance_table(r)) out.push_back(std::move(line));
  const auto& b = r.buffers;
  out.push_back(fmt("success buffer: %s%.2f  (%.0f req/s served above a baseline of %.0f)",
                    b.success_is_lower_bound ? "at least " : "", b.success, b.success_capacity_rps, r.baseline_rps));
  out.push_back(fmt("failure buffer: %s%.2f  (rejected gracefully up to %.0f req/s offered)",
                    b.failure_is_lower_bound ? "at least " : "", b.failure, b.graceful_limit_rps));
  out.push_back("  " + b.explanation);
  if (r.time_to_shed) {
    auto sec = [](const std::optional<double>& v) { return v ? fmt("%.3f s", *v) : std::string("never"); };
    out.push_back("time to shed: first rejection " + sec(r.time_to_shed->first_rejection) + " after the spike began; " +
                  (r.signal_scope.empty() ? std::string("no report sampled")
                                          : r.signal_scope + " " + r.signal + " >= " + fmt("%.2f", r.threshold) +
                                                " after " + sec(r.time_to_shed->signal_over_threshold)));
  }
  out.push_back(fmt("client: %lld connections opened (at most %d at once), send lag p99 %s, max %s",
                    static_cast<long long>(r.client.connections_opened), r.client.peak_connections,
                    ms(r.client.send_lag_p99_ns).c_str(), ms(r.client.send_lag_max_ns).c_str()));
  if (!r.client.first_error.empty()) out.push_back("first error: " + r.client.first_error);
  if (r.interrupted) out.push_back("INTERRUPTED: the figures cover the part that ran");
  out.emplace_back();
  for (const auto& c : r.verdict.checks)
    out.push_back(std::string(c.passed ? "PASS  " : "FAIL  ") + c.name + ": " + c.detail);
  out.push_back(std::string("verdict: ") + (r.verdict.passed ? "PASS" : "FAIL"));
  return out;
}

std::string render_json(const RunReport& r) {
  json mix = json::array();
  for (const auto& m : r.mix) mix.push_back({{"name", m.name}, {"share", m.share}, {"priority", m.priority}});
  json steps = json::array();
  for (const auto& s : r.steps) {
    json classes = json::object();
    for (std::size_t k = 0; k < r.mix.size() && k < s.by_class.size(); ++k) classes[r.mix[k].name] = counts_json(s.by_class[k]);
    steps.push_back({{"kind", step_kind_name(s.step.kind)},
                     {"multiple", s.step.multiple},
                     {"rate", s.step.rate},
                     {"duration_s", static_cast<double>(s.step.duration.count()) / 1e9},
                     {"measured_s", s.measured_seconds},
                     {"offered_rps", s.offered_rps},
                     {"served_rps", s.served_rps},
                     {"rejected_rps", s.rejected_rps},
                     {"failed_rps", s.failed_rps},
                     {"all", counts_json(s.all)},
                     {"classes", classes},
                     {"utilization",
                      {{"endpoint", {{"mean", optional_json(s.endpoint_utilization.mean)}, {"max", optional_json(s.endpoint_utilization.max)}}},
                       {"node", {{"mean", optional_json(s.node_utilization.mean)}, {"max", optional_json(s.node_utilization.max)}}}}}});
  }
  const auto& b = r.buffers;
  json checks = json::array();
  for (const auto& c : r.verdict.checks) checks.push_back({{"name", c.name}, {"passed", c.passed}, {"detail", c.detail}});
  json statuses = r.criteria.reject_statuses;
  json out = {
      {"target", r.target},
      {"mode", r.mode},
      {"baseline_rps", r.baseline_rps},
      {"baseline_source", r.baseline_source},
      {"criteria",
       {{"slo_ms", static_cast<double>(r.criteria.slo.count()) / 1e6},
        {"reject_statuses", statuses},
        {"reject_within_ms", static_cast<double>(r.criteria.reject_within.count()) / 1e6},
        {"max_failed", r.rules.max_failed},
        {"max_served_drop", r.rules.max_served_drop}}},
      {"mix", mix},
      {"steps", steps},
      {"buffers",
       {{"success", b.success},
        {"success_capacity_rps", b.success_capacity_rps},
        {"success_is_lower_bound", b.success_is_lower_bound},
        {"failure", b.failure},
        {"graceful_limit_rps", b.graceful_limit_rps},
        {"failure_is_lower_bound", b.failure_is_lower_bound},
        {"explanation", b.explanation}}},
      {"utilization_source", {{"scope", r.signal_scope}, {"signal", r.signal}, {"threshold", r.threshold}}},
      {"client",
       {{"connections_opened", r.client.connections_opened},
        {"peak_connections", r.client.peak_connections},
        {"connect_errors", r.client.connect_errors},
        {"send_lag_ms", {{"p50", static_cast<double>(r.client.send_lag_p50_ns) / 1e6},
                         {"p99", static_cast<double>(r.client.send_lag_p99_ns) / 1e6},
                         {"max", static_cast<double>(r.client.send_lag_max_ns) / 1e6}}},
        {"first_error", r.client.first_error}}},
      {"interrupted", r.interrupted},
      {"verdict", {{"passed", r.verdict.passed}, {"checks", checks}}},
  };
  if (r.time_to_shed)
    out["time_to_shed"] = {{"first_rejection_s", optional_json(r.time_to_shed->first_rejection)},
                           {"signal_over_threshold_s", optional_json(r.time_to_shed->signal_over_threshold)}};
  if (r.retry_mode != RetryMode::none) out["retries"] = retries_json(r);
  if (r.instances.size() > 1) out["instances"] = instances_json(r);
  return out.dump(2);
}

namespace {

// The chart's geometry: sizes, the two axes' ranges and where a step sits.
constexpr double kW = 960, kTop = 60, kPlotH = 300, kLeft = 70, kRight = 70, kGap = 90, kClassH = 170;
constexpr const char* kServed = "#2e7d32";
constexpr const char* kRejected = "#f9a825";
constexpr const char* kFailed = "#c62828";
constexpr const char* kRetried = "#00897b";

struct SvgLayout {
  std::size_t n = 0;  // steps
  double slot = 0, bar = 0, height = 0;
  double ymax = 1;  // requests per second, left axis
  double umax = 1;  // utilization, right axis

  explicit SvgLayout(const RunReport& r) : n(r.steps.size()) {
    const double plot_w = kW - kLeft - kRight;
    slot = n ? plot_w / static_cast<double>(n) : plot_w;
    bar = slot * 0.6;
    height = kTop + kPlotH + kGap + kClassH + 60;
    for (const auto& s : r.steps) ymax = std::max({ymax, s.offered_rps, s.served_rps + s.rejected_rps + s.failed_rps});
    for (std::size_t i = 0; i < r.retries.size() && i < n; ++i)
      ymax = std::max(ymax, r.steps[i].offered_rps * r.retries[i].all.amplification());
    ymax = nice_ceiling(ymax * 1.05);
    for (const auto& s : r.steps)
      umax = std::max({umax, s.endpoint_utilization.mean.value_or(0), s.node_utilization.mean.value_or(0)});
    umax = nice_ceiling(umax);
  }
  double y_of(double v) const { return kTop + kPlotH - v / ymax * kPlotH; }
  double uy_of(double v) const { return kTop + kPlotH - v / umax * kPlotH; }
  double x_of(std::size_t i) const { return kLeft + slot * (static_cast<double>(i) + 0.5); }
};

// The document's start, the title and the figures line.
std::string svg_head(const RunReport& r, const SvgLayout& l) {
  std::string s = fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                      "font-family=\"sans-serif\" font-size=\"12\">\n",
                      kW, l.height, kW, l.height);
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + fmt("%.0f", kLeft) + "\" y=\"24\" font-size=\"16\">" +
       xml_escape("headroomctl buffer " + r.target + " (" + r.mode + ")") + "</text>\n";
  s += "<text x=\"" + fmt("%.0f", kLeft) + "\" y=\"44\">" +
       xml_escape(fmt("success buffer %s%.2f, failure buffer %s%.2f, baseline %.0f req/s, verdict ",
                      r.buffers.success_is_lower_bound ? ">= " : "", r.buffers.success,
                      r.buffers.failure_is_lower_bound ? ">= " : "", r.buffers.failure, r.baseline_rps) +
                  (r.verdict.passed ? "PASS" : "FAIL")) +
       "</text>\n";
  return s;
}

// The upper panel's axes and grid.
std::string svg_axes(const SvgLayout& l) {
  std::string s;
  for (int i = 0; i <= 4; ++i) {
    const double v = l.ymax * i / 4, y = l.y_of(v);
    s += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", kLeft, y, kW - kRight, y);
    s += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", kLeft - 6, y + 4, v);
    s += fmt("<text x=\"%.1f\" y=\"%.1f\" fill=\"#1565c0\">%.2f</text>\n", kW - kRight + 6, l.uy_of(l.umax * i / 4) + 4,
             l.umax * i / 4);
  }
  s += fmt("<text x=\"14\" y=\"%.1f\" transform=\"rotate(-90 14 %.1f)\" text-anchor=\"middle\">requests per second</text>\n",
           kTop + kPlotH / 2, kTop + kPlotH / 2);
  s += fmt("<text x=\"%.1f\" y=\"%.1f\" transform=\"rotate(90 %.1f %.1f)\" text-anchor=\"middle\" fill=\"#1565c0\">utilization</text>\n",
           kW - 14, kTop + kPlotH / 2, kW - 14, kTop + kPlotH / 2);
  return s;
}

// Per step: what became of the offered rate as a stacked bar, the offered
// rate as a dashed outline, and the step's label.
std::string svg_step_bars(const RunReport& r, const SvgLayout& l) {
  std::string s;
  for (std::size_t i = 0; i < l.n; ++i) {
    const auto& st = r.steps[i];
    const double x = l.x_of(i) - l.bar / 2;
    double base = 0;
    for (const auto& [v, color, what] : {std::tuple{st.served_rps, kServed, "served"},
                                         std::tuple{st.rejected_rps, kRejected, "rejected"},
                                         std::tuple{st.failed_rps, kFailed, "failed"}}) {
      if (v > 0)
        s += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s %.0f req/s</title></rect>\n",
                 x, l.y_of(base + v), l.bar, l.y_of(base) - l.y_of(base + v), color, what, v);
      base += v;
    }
    s += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\" stroke-dasharray=\"4 2\">"
             "<title>offered %.0f req/s</title></rect>\n",
             x, l.y_of(st.offered_rps), l.bar, l.y_of(0) - l.y_of(st.offered_rps), st.offered_rps);
    s += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", l.x_of(i), kTop + kPlotH + 16,
             xml_escape(step_label(st.step)).c_str());
  }
  return s;
}

// --retries: per step, what the clients sent with their retries (the offered
// rate times the step's amplification) as a dotted outline over the offered
// one, and the amplification above it.
std::string svg_retry_outlines(const RunReport& r, const SvgLayout& l) {
  std::string s;
  for (std::size_t i = 0; i < l.n && i < r.retries.size(); ++i) {
    const auto& st = r.steps[i];
    const double amplification = r.retries[i].all.amplification();
    const double sent = st.offered_rps * amplification;
    const double x = l.x_of(i) - l.bar / 2;
    s += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
             "stroke-dasharray=\"1 3\"><title>offered with retries %.0f req/s (%.2fx)</title></rect>\n",
             x, l.y_of(sent), l.bar, l.y_of(0) - l.y_of(sent), kRetried, sent, amplification);
    s += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\">%.2fx</text>\n", l.x_of(i), l.y_of(sent) - 4,
             kRetried, amplification);
  }
  return s;
}

// The endpoint's and the node's mean utilization per step, on the right axis.
std::string svg_utilization_lines(const RunReport& r, const SvgLayout& l) {
  std::string s;
  for (const auto& [which, color, name] : {std::tuple{0, "#1565c0", "endpoint"}, std::tuple{1, "#6a1b9a", "node"}}) {
    std::string points;
    for (std::size_t i = 0; i < l.n; ++i) {
      const auto& u = which == 0 ? r.steps[i].endpoint_utilization : r.steps[i].node_utilization;
      if (u.mean) points += fmt("%.1f,%.1f ", l.x_of(i), l.uy_of(*u.mean));
    }
    if (!points.empty())
      s += fmt("<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"><title>%s utilization</title></polyline>\n",
               points.c_str(), color, name);
  }
  return s;
}

std::string svg_legend(const RunReport& r) {
  std::string s;
  double lx = kLeft;
  const double ly = kTop + kPlotH + 36;
  for (const auto& [color, name] : {std::pair{kServed, "served"}, std::pair{kRejected, "rejected"}, std::pair{kFailed, "failed"},
                                    std::pair{"#1565c0", "endpoint utilization"}, std::pair{"#6a1b9a", "node utilization"}}) {
    s += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx,
             ly - 10, color, lx + 16, ly, name);
    lx += 40 + 8 * static_cast<double>(std::string_view(name).size());
  }
  s += fmt("<text x=\"%.1f\" y=\"%.1f\">dashed: offered</text>\n", lx, ly);
  if (r.retry_mode != RetryMode::none)
    s += fmt("<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">dotted: offered with retries (--retries %s)</text>\n", lx + 110,
             ly, kRetried, std::string(retry_mode_name(r.retry_mode)).c_str());
  return s;
}

// The lower panel: one thin stacked bar of shares per class in each step.
std::string svg_class_panel(const RunReport& r, const SvgLayout& l) {
  const std::size_t classes = r.mix.size();
  const double top2 = kTop + kPlotH + kGap;
  std::string s = fmt("<text x=\"%.1f\" y=\"%.1f\">per priority, share of offered (most important left)</text>\n", kLeft, top2 - 8);
  const double cw = classes ? l.bar / static_cast<double>(classes) : l.bar;
  for (std::size_t i = 0; i < l.n; ++i) {
    for (std::size_t k = 0; k < classes && k < r.steps[i].by_class.size(); ++k) {
      const auto& c = r.steps[i].by_class[k];
      const double x = l.x_of(i) - l.bar / 2 + cw * static_cast<double>(k);
      double base = 0;
      for (const auto& [v, color] : {std::pair{c.served_share(), kServed}, std::pair{c.rejected_share(), kRejected},
                                     std::pair{c.failed_share(), kFailed}}) {
        if (v > 0)
          s += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s %s: %.1f %%</title></rect>\n",
                   x, top2 + kClassH * (1 - base - v), std::max(1.0, cw - 1), kClassH * v, color,
                   xml_escape(r.mix[k].name).c_str(), xml_escape(step_label(r.steps[i].step)).c_str(), v * 100);
        base += v;
      }
    }
    s += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", l.x_of(i), top2 + kClassH + 16,
             xml_escape(step_label(r.steps[i].step)).c_str());
  }
  std::string names;
  for (std::size_t k = 0; k < classes; ++k) names += (k ? ", " : "") + r.mix[k].name;
  s += fmt("<text x=\"%.1f\" y=\"%.1f\">bars left to right in each step: %s</text>\n", kLeft, top2 + kClassH + 36,
           xml_escape(names).c_str());
  return s;
}

}  // namespace

// Two panels. Above: per step, the offered rate as an outline and what became
// of it as a stacked bar (served, rejected, failed), with --retries what the
// clients sent with their retries as a dotted outline, with the endpoint's and
// the node's mean utilization as lines on a 0..max axis at the right. Below:
// per step and priority, the shares served, rejected and failed.
std::string render_svg(const RunReport& r) {
  const SvgLayout layout(r);
  return svg_head(r, layout) + svg_axes(layout) + svg_step_bars(r, layout) + svg_retry_outlines(r, layout) +
         svg_utilization_lines(r, layout) + svg_legend(r) + svg_class_panel(r, layout) + "</svg>\n";
}

}  // namespace headroom::ctl::buffer
