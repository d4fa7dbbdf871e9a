// SPDX-License-Identifier: Apache-2.0
#include "agent/ctl/tune_validate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace headroom::ctl::tune {
namespace {

namespace b = buffer;

std::string format(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, value);
  return buf;
}

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

Measure measure(std::string what, double value, double limit, bool at_least, std::string unit = "") {
  const bool passed = at_least ? value >= limit - 1e-12 : value <= limit + 1e-12;
  return Measure{std::move(what), value, limit, at_least, passed, std::move(unit)};
}

Criterion criterion(std::string name, std::vector<Measure> measures) {
  Criterion c{std::move(name), true, std::move(measures)};
  for (const auto& m : c.measures) c.passed = c.passed && m.passed;
  return c;
}

std::optional<std::size_t> step_of(const std::vector<b::StepResult>& steps, b::StepKind kind) {
  for (std::size_t i = 0; i < steps.size(); ++i)
    if (steps[i].step.kind == kind) return i;
  return std::nullopt;
}

std::vector<b::Step> plan_steps(const std::vector<b::StepResult>& steps) {
  std::vector<b::Step> out;
  for (const auto& s : steps) out.push_back(s.step);
  return out;
}

// The anchor of a signal's scaling: its baseline level when that is below
// the file's shed_start, else 0 (scaling towards a level already over the
// start would not move the start).
double anchor(const ShedEntry& e, const std::map<std::string, double>& levels) {
  const auto it = levels.find(e.signal);
  const double level = it == levels.end() ? 0 : std::max(0.0, it->second);
  return level < e.thresholds.shed_start ? level : 0;
}

// The thresholds judged: the file's, or --signal's defaults when it has none.
std::vector<ShedEntry> judged_entries(const SpikeFacts& f) {
  if (!f.shed.empty()) return f.shed;
  return {ShedEntry{f.signal, orca::default_thresholds(f.signal)}};
}

Criterion spike_received(const SpikeFacts& f, const b::StepResult& spike, const StepWindow& w, const Limits& l) {
  const double planned = spike.step.rate;
  std::vector<Measure> m{measure("sent / planned rate", planned > 0 ? spike.offered_rps / planned : 0, l.min_sent, true, "%")};
  if (auto rps = max_reading(f.readings, "rps", w.begin_ns, w.end_ns))
    m.push_back(measure("report rps max / planned rate", planned > 0 ? *rps / planned : 0, l.min_report_rps, true, "%"));
  return criterion("spike_received", std::move(m));
}

// The spike absorbed: success + failure >= the spike as sent over the
// baseline, less one. As sent, not as planned: with every step graceful the
// failure buffer ends at the spike's offered rate (buffers.md), which an
// open-loop client meets to within a request or two; spike_received judges
// how far the sending was from the plan. A millionth allows the rounding.
Criterion buffers(const SpikeFacts& f, const b::StepResult& spike, const Limits& l) {
  const double sent = f.buffers.baseline_rps > 0 ? spike.offered_rps / f.buffers.baseline_rps : l.spike;
  const double limit = std::min(l.spike, sent) - 1 - 1e-6;
  return criterion("buffers", {measure("success + failure buffer", f.buffers.success + f.buffers.failure, limit, true),
                               measure("success buffer", f.buffers.success, l.expect_success_buffer, true)});
}

Criterion graceful_rejection(const b::StepResult& spike, const Limits& l) {
  return criterion("graceful_rejection",
                   {measure("failed / offered", spike.all.failed_share(), l.max_failed, false, "%"),
                    measure("rejections p99", ms(spike.all.rejected_latency.p99), ms(l.reject_within.count()), false, "ms")});
}

Criterion served_within_slo(const SpikeFacts& f, const b::StepResult& spike, const Limits& l) {
  std::vector<Measure> m;
  for (const auto& [name, at_least] : l.expect_served)
    for (std::size_t k = 0; k < f.mix.size() && k < spike.by_class.size(); ++k)
      if (f.mix[k].name == name) m.push_back(measure(name + " served / offered", spike.by_class[k].served_share(), at_least, true, "%"));
  const auto slow = spike.all.failed_by[static_cast<std::size_t>(b::FailReason::over_slo)];
  const auto answered = spike.all.served + slow;
  m.push_back(measure("2xx slower than max", answered > 0 ? static_cast<double>(slow) / static_cast<double>(answered) : 0,
                      l.max_slow, false, "%"));
  return criterion("served_within_slo", std::move(m));
}

Criterion no_baseline_shedding(const b::StepResult& baseline, const Limits& l) {
  return criterion("no_baseline_shedding",
                   {measure("baseline rejected / offered", baseline.all.rejected_share(), l.max_baseline_rejected, false, "%")});
}

// Shedding starts too late: the signal highest during the spike before the
// first rejection, and its start lowered to halfway between its baseline
// level and min(that value, shed_start); critical_start keeps its place
// between the start and all_shed, as tune search moves it (scale_shed).
Suggestion too_late(const SpikeFacts& f, const std::vector<StepWindow>& w, std::size_t base, std::size_t spike) {
  Suggestion s{Cause::too_late, "", std::nullopt, std::nullopt, std::nullopt, ""};
  const int64_t until = f.first_rejection_s ? w[spike].begin_ns + static_cast<int64_t>(*f.first_rejection_s * 1e9)
                                            : w[spike].end_ns;
  const auto entries = judged_entries(f);
  const ShedEntry* chosen = nullptr;
  for (const auto& e : entries) {
    auto v = max_reading(f.readings, e.signal, w[spike].begin_ns, std::max(until, w[spike].begin_ns + 1));
    if (v && (!s.value || *v > *s.value)) {
      s.value = v;
      s.signal = e.signal;
      chosen = &e;
    }
  }
  if (chosen == nullptr) {
    s.text = "shedding starts too late: lower shed_start and critical_start (no report was read during the spike to "
             "say which signal)";
    return s;
  }
  std::map<std::string, double> levels;
  if (auto lv = max_reading(f.readings, s.signal, w[base].measured_ns, w[base].end_ns)) levels[s.signal] = *lv;
  const double a = anchor(*chosen, levels);
  const auto& t = chosen->thresholds;
  const double proposed = a + 0.5 * std::max(0.0, std::min(*s.value, t.shed_start) - a);
  const double place = (t.critical_start - t.shed_start) / (t.all_shed - t.shed_start);
  s.shed_start = proposed;
  s.critical_start = proposed + place * (t.all_shed - proposed);
  s.text = "shedding starts too late: " + s.signal + " reached " + format("%.3g", *s.value) + " during the spike " +
           (f.first_rejection_s ? "before the first rejection" : "(nothing was rejected)") + "; lower its shed_start " +
           format("%.3g", t.shed_start) + " to " + format("%.3g", *s.shed_start) + " and critical_start " +
           format("%.3g", t.critical_start) + " to " + format("%.3g", *s.critical_start);
  return s;
}

// Shedding starts too early: the signal whose baseline max is highest
// against its shed_start, and a start above it: L + 0.2 (1 - L).
Suggestion too_early(const SpikeFacts& f, const std::vector<StepWindow>& w, std::size_t base) {
  Suggestion s{Cause::too_early, "", std::nullopt, std::nullopt, std::nullopt, ""};
  double worst = -1;
  const auto entries = judged_entries(f);
  const ShedEntry* chosen = nullptr;
  for (const auto& e : entries) {
    auto v = max_reading(f.readings, e.signal, w[base].measured_ns, w[base].end_ns);
    if (v && *v / std::max(e.thresholds.shed_start, 1e-9) > worst) {
      worst = *v / std::max(e.thresholds.shed_start, 1e-9);
      s.value = v;
      s.signal = e.signal;
      chosen = &e;
    }
  }
  if (chosen == nullptr) {
    s.text = "shedding starts too early: raise shed_start above the baseline's level (no report was read during the "
             "baseline to say which signal)";
    return s;
  }
  const auto& t = chosen->thresholds;
  const double l = *s.value;
  s.shed_start = l < 1 ? l + 0.2 * (1 - l) : l + 0.05;
  s.critical_start = t.critical_start > *s.shed_start ? t.critical_start : *s.shed_start + 0.5 * (t.all_shed - *s.shed_start);
  s.text = "shedding starts too early: " + s.signal + " reached " + format("%.3g", l) + " at the baseline (shed_start " +
           format("%.3g", t.shed_start) + "); raise shed_start above it, e.g. to " + format("%.3g", *s.shed_start);
  return s;
}

}  // namespace

std::string_view cause_name(Cause cause) noexcept {
  switch (cause) {
    case Cause::none: return "none";
    case Cause::not_received: return "not_received";
    case Cause::too_early: return "too_early";
    case Cause::too_late: return "too_late";
    case Cause::capacity: return "capacity";
  }
  return "?";
}

std::vector<StepWindow> step_windows(const std::vector<b::Step>& steps) {
  std::vector<StepWindow> out;
  int64_t t = 0;
  for (const auto& s : steps) {
    out.push_back(StepWindow{t, t + s.settle.count(), t + s.duration.count()});
    t += s.duration.count();
  }
  return out;
}

std::optional<double> max_reading(const std::vector<Reading>& readings, const std::string& signal, int64_t from_ns,
                                  int64_t to_ns) {
  std::optional<double> best;
  for (const auto& r : readings) {
    if (r.at_ns < from_ns || r.at_ns >= to_ns) continue;
    std::optional<double> v;
    if (signal == "rps") {
      v = r.rps;
    } else if (auto it = r.signals.find(signal); it != r.signals.end()) {
      v = it->second;
    }
    if (v && (!best || *v > *best)) best = v;
  }
  return best;
}

Judgement judge(const SpikeFacts& f, const Limits& l) {
  Judgement j;
  const auto base = step_of(f.steps, b::StepKind::baseline);
  const auto spike = step_of(f.steps, b::StepKind::spike);
  if (!base || !spike) {
    j.cause = Cause::not_received;
    j.criteria.push_back(criterion("spike_received", {measure("sent / planned rate", 0, l.min_sent, true, "%")}));
    j.suggestion = Suggestion{Cause::not_received, "", {}, {}, {}, "the run has no spike step (it was interrupted?): no verdict on the file"};
    return j;
  }
  const auto w = step_windows(plan_steps(f.steps));
  const auto& sp = f.steps[*spike];
  j.criteria = {spike_received(f, sp, w[*spike], l), buffers(f, sp, l), graceful_rejection(sp, l),
                served_within_slo(f, sp, l), no_baseline_shedding(f.steps[*base], l)};
  auto failed = [&](std::string_view name) {
    for (const auto& c : j.criteria)
      if (c.name == name) return !c.passed;
    return false;
  };
  j.passed = std::all_of(j.criteria.begin(), j.criteria.end(), [](const Criterion& c) { return c.passed; });
  if (j.passed) return j;
  if (failed("spike_received")) {
    j.cause = Cause::not_received;
    j.suggestion = Suggestion{Cause::not_received, "", {}, {}, {},
                              "the client could not send the spike (" + format("%.0f", sp.offered_rps) + " of " +
                                  format("%.0f", sp.step.rate) +
                                  " req/s planned, or the endpoint's report did not see it): no verdict on the file; "
                                  "lower --baseline or --spike, or run the client where it has CPU to spare"};
  } else if (failed("no_baseline_shedding")) {
    j.cause = Cause::too_early;
    j.suggestion = too_early(f, w, *base);
  } else if (failed("served_within_slo") || failed("graceful_rejection")) {
    j.cause = Cause::too_late;
    j.suggestion = too_late(f, w, *base, *spike);
  } else {
    j.cause = Cause::capacity;
    j.suggestion = Suggestion{Cause::capacity, "", {}, {}, {},
                              "the instance cannot absorb a " + format("%g", l.spike) + "x spike at this baseline "
                              "(success + failure buffer " + format("%.2f", f.buffers.success + f.buffers.failure) +
                                  ", success buffer " + format("%.2f", f.buffers.success) +
                                  "): scale out, or lower --spike"};
  }
  return j;
}

std::vector<ShedEntry> scale_shed(const std::vector<ShedEntry>& file, const std::map<std::string, double>& levels,
                                  double s) {
  std::vector<ShedEntry> out;
  for (const auto& e : file) {
    const double a = anchor(e, levels);
    const double all = e.thresholds.all_shed;
    // CRITICAL's place in what lies between the start and all_shed, as in the file.
    const double place = (e.thresholds.critical_start - e.thresholds.shed_start) / (all - e.thresholds.shed_start);
    ShedEntry n = e;
    n.thresholds.shed_start = std::clamp(a + s * (e.thresholds.shed_start - a), 0.0, a + 0.99 * (all - a));
    n.thresholds.critical_start = n.thresholds.shed_start + place * (all - n.thresholds.shed_start);
    out.push_back(n);
  }
  return out;
}

double max_position(const std::vector<ShedEntry>& file, const std::map<std::string, double>& levels) {
  double s_max = 1;
  bool any = false;
  for (const auto& e : file) {
    const double a = anchor(e, levels);
    const double span = e.thresholds.shed_start - a;
    if (span <= 0) continue;
    const double s = 0.99 * (e.thresholds.all_shed - a) / span;
    s_max = any ? std::min(s_max, s) : s;
    any = true;
  }
  return std::max(s_max, 1.0);
}

std::optional<std::size_t> best_run(const std::vector<SearchRun>& runs) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].cause != Cause::none) continue;
    const auto& r = runs[i];
    if (!best || r.success_buffer > runs[*best].success_buffer + 1e-9 ||
        (std::abs(r.success_buffer - runs[*best].success_buffer) <= 1e-9 && r.s > runs[*best].s))
      best = i;
  }
  return best;
}

NextStep next_position(const std::vector<SearchRun>& runs, double s_max, int max_runs) {
  if (runs.empty()) return {1.0, "the file as it is (s = 1)"};
  if (static_cast<int>(runs.size()) >= max_runs) return {std::nullopt, "--max-spikes (" + std::to_string(max_runs) + ") runs done"};
  std::optional<double> pass, early, late, other;
  for (const auto& r : runs) {
    switch (r.cause) {
      case Cause::none: pass = std::max(pass.value_or(r.s), r.s); break;
      case Cause::too_early: early = std::max(early.value_or(r.s), r.s); break;
      case Cause::too_late: late = std::min(late.value_or(r.s), r.s); break;
      default: other = std::min(other.value_or(r.s), r.s); break;
    }
  }
  NextStep next;
  if (pass) {
    std::optional<double> above;  // the lowest failing position above the best pass
    for (const auto& r : runs)
      if (r.cause != Cause::none && r.s > *pass) above = std::min(above.value_or(r.s), r.s);
    if (above) {
      if (*above - *pass < kMinBracket) return {std::nullopt, "the bracket [" + format("%.3g", *pass) + ", " + format("%.3g", *above) + "] is narrower than 0.05"};
      next = {(*pass + *above) / 2, "later shedding: halfway between the pass at " + format("%.3g", *pass) + " and the fail at " + format("%.3g", *above)};
    } else {
      if (*pass >= s_max - 1e-9) return {std::nullopt, "the thresholds cannot start later (s = " + format("%.3g", s_max) + " keeps critical_start below all_shed)"};
      next = {std::min(*pass * 1.5, s_max), "later shedding: 1.5 x the pass at " + format("%.3g", *pass)};
    }
  } else if (other) {
    return {std::nullopt, "a fail that thresholds cannot fix"};
  } else if (late) {
    const double lo = early.value_or(0);
    if (*late - lo < kMinBracket) return {std::nullopt, "the bracket [" + format("%.3g", lo) + ", " + format("%.3g", *late) + "] is narrower than 0.05"};
    next = {(lo + *late) / 2, "shedding too late at " + format("%.3g", *late) + ": bisect [" + format("%.3g", lo) + ", " + format("%.3g", *late) + "]"};
  } else {
    if (*early >= s_max - 1e-9) return {std::nullopt, "the thresholds cannot start later (s = " + format("%.3g", s_max) + " keeps critical_start below all_shed)"};
    next = {std::min(*early * 1.5, s_max), "shedding too early at " + format("%.3g", *early) + ": 1.5 x"};
  }
  for (const auto& r : runs)
    if (std::abs(r.s - *next.s) < 1e-6) return {std::nullopt, "position " + format("%.3g", r.s) + " already run"};
  return next;
}

}  // namespace headroom::ctl::tune
