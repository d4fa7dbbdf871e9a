// SPDX-License-Identifier: Apache-2.0
#include "agent/ctl/buffer_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "headroom/orca/shedder.h"
#include "headroom/orca/text.h"

namespace headroom::ctl::buffer {

namespace {

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  std::size_t from = 0;
  while (true) {
    const auto at = text.find(sep, from);
    out.push_back(trim(text.substr(from, at == std::string_view::npos ? std::string_view::npos : at - from)));
    if (at == std::string_view::npos) break;
    from = at + 1;
  }
  return out;
}

std::optional<double> parse_number(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

std::string format(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a);
  return buf;
}

// Thousands separated by a thin space, as the docs print figures.
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ' ';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

double seconds(nanoseconds d) { return static_cast<double>(d.count()) / 1e9; }

Latency latency_of(std::vector<int64_t>& values) {
  Latency l;
  if (values.empty()) return l;
  std::sort(values.begin(), values.end());
  // Nearest rank: the smallest value with at least q of the sample at or below it.
  auto rank = [&](double q) {
    const auto n = values.size();
    auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n)));
    i = std::clamp<std::size_t>(i, 1, n);
    return values[i - 1];
  };
  l.p50 = rank(0.50);
  l.p90 = rank(0.90);
  l.p99 = rank(0.99);
  l.max = values.back();
  return l;
}

bool is_load_step(StepKind kind) { return kind != StepKind::recovery; }

}  // namespace

// ---------------------------------------------------------------- the plan

Result<std::vector<MixEntry>> parse_mix(std::string_view text) {
  std::vector<MixEntry> mix;
  if (trim(text).empty()) return logic_error("--mix: empty; give NAME=SHARE pairs, e.g. CRITICAL=25,BULK=75");
  for (const auto item : split(text, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string_view::npos)
      return logic_error("--mix: \"" + std::string(item) + "\" is not NAME=SHARE (e.g. CRITICAL=25 or 90=10)");
    const auto name = trim(item.substr(0, eq));
    const auto share = parse_number(trim(item.substr(eq + 1)));
    if (!share || *share <= 0)
      return logic_error("--mix: the share of \"" + std::string(name) + "\" must be a number above 0, got \"" +
                         std::string(trim(item.substr(eq + 1))) + "\"");
    MixEntry entry;
    entry.share = *share;
    if (const auto bucket = orca::parse_bucket(name)) {
      entry.name = std::string(orca::bucket_name(*bucket));
      entry.priority = orca::priority_range(*bucket).first;
    } else if (const auto p = parse_number(name); p && *p == std::floor(*p) && *p >= 1 && *p <= 100) {
      entry.priority = static_cast<int>(*p);
      entry.name = std::to_string(entry.priority);
    } else {
      return logic_error("--mix: \"" + std::string(name) +
                         "\" is neither a bucket (CRITICAL, DEGRADED, BEST_EFFORT, BULK) nor a priority 1..100");
    }
    for (const auto& other : mix)
      if (other.name == entry.name) return logic_error("--mix: \"" + entry.name + "\" is listed twice");
    mix.push_back(std::move(entry));
  }
  const double total = std::accumulate(mix.begin(), mix.end(), 0.0, [](double s, const MixEntry& e) { return s + e.share; });
  for (auto& e : mix) e.share /= total;
  std::stable_sort(mix.begin(), mix.end(), [](const MixEntry& a, const MixEntry& b) { return a.priority < b.priority; });
  return mix;
}

std::string_view step_kind_name(StepKind kind) noexcept {
  switch (kind) {
    case StepKind::ramp: return "ramp";
    case StepKind::baseline: return "baseline";
    case StepKind::spike: return "spike";
    case StepKind::recovery: return "recovery";
  }
  return "?";
}

Result<std::vector<double>> parse_multiples(std::string_view text) {
  std::vector<double> out;
  for (const auto item : split(text, ',')) {
    auto v = parse_number(item.ends_with('x') ? item.substr(0, item.size() - 1) : item);
    if (!v || *v <= 0)
      return logic_error("--ramp: \"" + std::string(item) + "\" is not a multiple above 0 (e.g. --ramp 1,1.5,2,3)");
    if (!out.empty() && *v <= out.back())
      return logic_error("--ramp: multiples must ascend, but " + std::string(item) + " follows " + format("%g", out.back()));
    out.push_back(*v);
  }
  return out;
}

Result<std::vector<Step>> ramp_steps(const RampSpec& spec, double baseline_rps) {
  if (!(baseline_rps > 0)) return logic_error("--baseline: must be above 0 requests per second");
  if (spec.multiples.empty()) return logic_error("--ramp: at least one multiple");
  if (spec.step <= nanoseconds::zero()) return logic_error("--step: must be longer than 0");
  if (spec.settle < nanoseconds::zero() || spec.settle >= spec.step)
    return logic_error("--settle: must be shorter than --step (" + format("%gs", seconds(spec.step)) + ")");
  std::vector<Step> steps;
  for (const double m : spec.multiples)
    steps.push_back(Step{StepKind::ramp, m, m * baseline_rps, spec.step, spec.settle});
  return steps;
}

Result<std::vector<Step>> spike_steps(const SpikeSpec& spec, double baseline_rps) {
  if (!(baseline_rps > 0)) return logic_error("--baseline: must be above 0 requests per second");
  if (!(spec.multiple > 1)) return logic_error("--spike: the spike must be above the baseline (a multiple > 1, e.g. 4)");
  if (spec.before <= nanoseconds::zero()) return logic_error("--before: the baseline before the spike must last longer than 0");
  if (spec.length <= nanoseconds::zero()) return logic_error("--spike-for: the spike must last longer than 0");
  if (spec.after < nanoseconds::zero()) return logic_error("--after: must not be negative");
  if (spec.settle < nanoseconds::zero() || spec.settle >= spec.before || (spec.after > nanoseconds::zero() && spec.settle >= spec.after))
    return logic_error("--settle: must be shorter than --before and --after");
  std::vector<Step> steps;
  steps.push_back(Step{StepKind::baseline, 1, baseline_rps, spec.before, spec.settle});
  steps.push_back(Step{StepKind::spike, spec.multiple, spec.multiple * baseline_rps, spec.length, nanoseconds::zero()});
  if (spec.after > nanoseconds::zero())
    steps.push_back(Step{StepKind::recovery, 1, baseline_rps, spec.after, spec.settle});
  return steps;
}

std::vector<loadgen::Phase> phases_of(const std::vector<Step>& steps) {
  std::vector<loadgen::Phase> phases;
  for (const auto& s : steps) phases.push_back(loadgen::Phase{s.duration, s.rate});
  return phases;
}

double peak_rate(const std::vector<Step>& steps) noexcept {
  double peak = 0;
  for (const auto& s : steps) peak = std::max(peak, s.rate);
  return peak;
}

nanoseconds total_duration(const std::vector<Step>& steps) noexcept {
  nanoseconds total{0};
  for (const auto& s : steps) total += s.duration;
  return total;
}

std::string describe_plan(const std::vector<Step>& steps, const std::vector<MixEntry>& mix, std::string_view target) {
  double requests = 0, low = steps.empty() ? 0 : steps.front().rate;
  for (const auto& s : steps) {
    requests += s.rate * seconds(s.duration);
    low = std::min(low, s.rate);
  }
  std::string out = std::to_string(steps.size()) + (steps.size() == 1 ? " step, " : " steps, ") +
                    format("%g s, ", seconds(total_duration(steps))) + grouped(std::llround(low)) + " to " +
                    grouped(std::llround(peak_rate(steps))) + " req/s, " + grouped(std::llround(requests)) +
                    " requests to " + std::string(target) + " (";
  for (std::size_t i = 0; i < mix.size(); ++i)
    out += (i ? ", " : "") + mix[i].name + " " + format("%.3g %%", mix[i].share * 100);
  out += ")";
  return out;
}

// ---------------------------------------------------------------- judging requests

std::string_view fail_reason_name(FailReason reason) noexcept {
  switch (reason) {
    case FailReason::none: return "none";
    case FailReason::over_slo: return "over_slo";
    case FailReason::slow_reject: return "slow_reject";
    case FailReason::status: return "status";
    case FailReason::timeout: return "timeout";
    case FailReason::connect: return "connect";
    case FailReason::closed: return "closed";
    case FailReason::bad_response: return "bad_response";
  }
  return "?";
}

namespace {
// A response with a reject status, however slow (judge() says whether it was graceful).
bool has_reject_status(const loadgen::Record& r, const Criteria& c) noexcept {
  return r.outcome == loadgen::Outcome::response &&
         std::find(c.reject_statuses.begin(), c.reject_statuses.end(), r.status) != c.reject_statuses.end();
}
}  // namespace

Judged judge(const loadgen::Record& r, const Criteria& c) noexcept {
  using loadgen::Outcome;
  switch (r.outcome) {
    case Outcome::cancelled: return {Fate::cancelled, FailReason::none};
    case Outcome::timeout: return {Fate::failed, FailReason::timeout};
    case Outcome::connect_error: return {Fate::failed, FailReason::connect};
    case Outcome::closed: return {Fate::failed, FailReason::closed};
    case Outcome::bad_response: return {Fate::failed, FailReason::bad_response};
    case Outcome::response: break;
  }
  if (r.status >= 200 && r.status < 300)
    return r.latency_ns <= c.slo.count() ? Judged{Fate::served, FailReason::none} : Judged{Fate::failed, FailReason::over_slo};
  if (has_reject_status(r, c))
    return r.latency_ns <= c.reject_within.count() ? Judged{Fate::rejected, FailReason::none}
                                                   : Judged{Fate::failed, FailReason::slow_reject};
  return {Fate::failed, FailReason::status};
}

std::vector<InstanceCounts> instance_counts(const std::vector<std::string>& targets,
                                            const std::vector<loadgen::Record>& records, const Criteria& criteria) {
  std::vector<InstanceCounts> out(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) out[i].target = targets[i];
  for (const auto& r : records) {
    const Judged j = judge(r, criteria);
    if (r.instance >= out.size() || j.fate == Fate::cancelled) continue;
    InstanceCounts& c = out[r.instance];
    ++c.attempts;
    ++(j.fate == Fate::served ? c.served : j.fate == Fate::rejected ? c.rejected : c.failed);
  }
  return out;
}

// ---------------------------------------------------------------- per step

namespace {
double share(int64_t part, int64_t whole) { return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0; }
}  // namespace
double Counts::served_share() const noexcept { return share(served, offered); }
double Counts::rejected_share() const noexcept { return share(rejected, offered); }
double Counts::failed_share() const noexcept { return share(failed, offered); }

std::vector<StepResult> analyze(const std::vector<Step>& steps, std::size_t classes,
                                const std::vector<loadgen::Record>& records, const Criteria& criteria,
                                const std::vector<UtilizationSample>& samples) {
  std::vector<StepResult> out(steps.size());
  std::vector<int64_t> begin(steps.size()), end(steps.size());
  int64_t t = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    out[i].step = steps[i];
    out[i].by_class.resize(classes);
    begin[i] = t + steps[i].settle.count();
    t += steps[i].duration.count();
    end[i] = t;
    out[i].measured_seconds = static_cast<double>(end[i] - begin[i]) / 1e9;
  }
  // Latencies per (step, class) and per step, for served and rejected.
  std::vector<std::vector<std::vector<int64_t>>> served_lat(steps.size(), std::vector<std::vector<int64_t>>(classes)),
      rejected_lat = served_lat;
  for (const auto& r : records) {
    if (r.phase >= steps.size() || r.request_class >= classes) continue;
    if (r.scheduled_ns < begin[r.phase]) continue;  // settling
    const Judged j = judge(r, criteria);
    if (j.fate == Fate::cancelled) continue;
    for (Counts* c : {&out[r.phase].all, &out[r.phase].by_class[r.request_class]}) {
      ++c->offered;
      switch (j.fate) {
        case Fate::served: ++c->served; break;
        case Fate::rejected: ++c->rejected; break;
        case Fate::failed:
          ++c->failed;
          ++c->failed_by[static_cast<std::size_t>(j.reason)];
          break;
        case Fate::cancelled: break;
      }
    }
    if (j.fate == Fate::served) served_lat[r.phase][r.request_class].push_back(r.latency_ns);
    if (has_reject_status(r, criteria)) rejected_lat[r.phase][r.request_class].push_back(r.latency_ns);
  }
  for (std::size_t i = 0; i < steps.size(); ++i) {
    std::vector<int64_t> all_served, all_rejected;
    for (std::size_t k = 0; k < classes; ++k) {
      all_served.insert(all_served.end(), served_lat[i][k].begin(), served_lat[i][k].end());
      all_rejected.insert(all_rejected.end(), rejected_lat[i][k].begin(), rejected_lat[i][k].end());
      out[i].by_class[k].served_latency = latency_of(served_lat[i][k]);
      out[i].by_class[k].rejected_latency = latency_of(rejected_lat[i][k]);
    }
    out[i].all.served_latency = latency_of(all_served);
    out[i].all.rejected_latency = latency_of(all_rejected);
    const double s = out[i].measured_seconds > 0 ? out[i].measured_seconds : 1;
    out[i].offered_rps = static_cast<double>(out[i].all.offered) / s;
    out[i].served_rps = static_cast<double>(out[i].all.served) / s;
    out[i].rejected_rps = static_cast<double>(out[i].all.rejected) / s;
    out[i].failed_rps = static_cast<double>(out[i].all.failed) / s;
    // Utilization over the measured part of the step.
    double esum = 0, nsum = 0;
    int en = 0, nn = 0;
    for (const auto& u : samples) {
      if (u.at_ns < begin[i] || u.at_ns >= end[i]) continue;
      if (u.endpoint) {
        esum += *u.endpoint;
        ++en;
        out[i].endpoint_utilization.max = std::max(out[i].endpoint_utilization.max.value_or(*u.endpoint), *u.endpoint);
      }
      if (u.node) {
        nsum += *u.node;
        ++nn;
        out[i].node_utilization.max = std::max(out[i].node_utilization.max.value_or(*u.node), *u.node);
      }
    }
    if (en) out[i].endpoint_utilization.mean = esum / en;
    if (nn) out[i].node_utilization.mean = nsum / nn;
  }
  return out;
}

// ---------------------------------------------------------------- buffers

Buffers compute_buffers(const std::vector<StepResult>& steps, double baseline_rps, const BufferRules& rules) {
  Buffers b;
  b.baseline_rps = baseline_rps;
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < steps.size(); ++i)
    if (is_load_step(steps[i].step.kind) && steps[i].all.offered > 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t c) { return steps[a].offered_rps < steps[c].offered_rps; });
  if (order.empty() || !(baseline_rps > 0)) {
    b.explanation = "no step offered any request";
    return b;
  }
  // Walk up the offered rate while steps stay graceful.
  double best = 0;
  bool saturated = false;  // some step did not serve everything it was offered
  for (const std::size_t i : order) {
    const auto& s = steps[i];
    const bool harmed = s.all.failed_share() > rules.max_failed;
    const bool fell = best > 0 && s.served_rps < (1 - rules.max_served_drop) * best;
    best = std::max(best, s.served_rps);
    if (s.all.served_share() < 1 - rules.max_failed) saturated = true;
    if (harmed || fell) {
      b.first_failing = i;
      break;
    }
    b.last_graceful = i;
  }
  b.success_capacity_rps = best;
  b.success_is_lower_bound = !saturated;
  b.success = std::max(0.0, best / baseline_rps - 1);
  if (!b.last_graceful) {
    b.explanation = "the lowest step (" + format("%.0f", steps[order.front()].offered_rps) +
                    " req/s) was already not handled gracefully";
    b.failure = 0;
    return b;
  }
  const auto& g = steps[*b.last_graceful];
  if (!b.first_failing) {
    b.graceful_limit_rps = g.offered_rps;
    b.failure_is_lower_bound = true;
  } else {
    // What the service still handled gracefully (served + rejected) at the
    // first failing step, plus the failure allowance, bracketed by the two
    // steps: the rate at which graceful handling ends.
    // When it failed by serving less (rejecting what it could have served),
    // its rejections were not graceful: the limit is the last graceful step.
    const auto& f = steps[*b.first_failing];
    const bool fell = f.served_rps < (1 - rules.max_served_drop) * best;
    const double handled = f.served_rps + f.rejected_rps + rules.max_failed * f.offered_rps;
    b.graceful_limit_rps = fell ? g.offered_rps : std::clamp(handled, g.offered_rps, std::max(g.offered_rps, f.offered_rps));
  }
  b.failure = std::max(0.0, (b.graceful_limit_rps - b.success_capacity_rps) / baseline_rps);
  b.explanation = "served at most " + format("%.0f", best) + " req/s" +
                  (b.success_is_lower_bound ? " (everything offered: capacity not reached)" : "") +
                  "; graceful up to " + format("%.0f", b.graceful_limit_rps) + " req/s offered" +
                  (b.failure_is_lower_bound ? " (no step failed: the limit is higher)"
                                            : ", failing at " + format("%.0f", steps[*b.first_failing].offered_rps) +
                                                  " req/s");
  return b;
}

// ---------------------------------------------------------------- time to shed

TimeToShed time_to_shed(const std::vector<Step>& steps, const std::vector<loadgen::Record>& records,
                        const Criteria& criteria, const std::vector<UtilizationSample>& samples, double threshold) {
  TimeToShed t;
  int64_t start = 0;
  std::optional<std::size_t> spike;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind == StepKind::spike) {
      spike = i;
      break;
    }
    start += steps[i].duration.count();
  }
  if (!spike) return t;
  for (const auto& r : records) {
    if (r.phase != *spike) continue;
    if (has_reject_status(r, criteria)) {
      t.first_rejection = static_cast<double>(r.scheduled_ns - start) / 1e9;
      break;
    }
  }
  const int64_t end = start + steps[*spike].duration.count();
  for (const auto& u : samples)
    if (u.at_ns >= start && u.at_ns < end && u.endpoint && *u.endpoint >= threshold) {
      t.signal_over_threshold = static_cast<double>(u.at_ns - start) / 1e9;
      break;
    }
  return t;
}

// ---------------------------------------------------------------- the verdict

Result<std::pair<std::string, double>> parse_served_expectation(std::string_view text, const std::vector<MixEntry>& mix) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos)
    return logic_error("--expect-served: \"" + std::string(text) + "\" is not NAME=PERCENT (e.g. CRITICAL=99)");
  auto name = trim(text.substr(0, eq));
  auto pct_text = trim(text.substr(eq + 1));
  if (pct_text.ends_with('%')) pct_text.remove_suffix(1);
  const auto pct = parse_number(pct_text);
  if (!pct || *pct < 0 || *pct > 100)
    return logic_error("--expect-served: the percentage of \"" + std::string(name) + "\" must be 0..100");
  std::string canonical(name);
  if (const auto bucket = orca::parse_bucket(name)) canonical = std::string(orca::bucket_name(*bucket));
  for (const auto& e : mix)
    if (e.name == canonical) return std::make_pair(canonical, *pct / 100);
  return logic_error("--expect-served: \"" + std::string(name) + "\" is not in --mix");
}

Verdict judge_run(const std::vector<StepResult>& steps, const std::vector<MixEntry>& mix, const Buffers& buffers,
                  const Expectations& ex, const BufferRules& rules, const loadgen::RunResult& run) {
  Verdict v;
  auto add = [&](std::string name, bool passed, std::string detail) {
    v.passed = v.passed && passed;
    v.checks.push_back(Check{std::move(name), passed, std::move(detail)});
  };
  const bool answered = std::any_of(run.records.begin(), run.records.end(),
                                    [](const loadgen::Record& r) { return r.outcome == loadgen::Outcome::response; });
  add("the target answered", answered,
      answered ? "yes" : (run.first_error.empty() ? "no request got a response" : run.first_error));
  auto bound = [](double value, bool lower) { return (lower ? "at least " : "") + format("%.2f", value); };
  if (ex.success_buffer)
    add("success buffer >= " + format("%.2f", *ex.success_buffer), buffers.success >= *ex.success_buffer - 1e-9,
        "measured " + bound(buffers.success, buffers.success_is_lower_bound));
  if (ex.failure_buffer)
    add("failure buffer >= " + format("%.2f", *ex.failure_buffer), buffers.failure >= *ex.failure_buffer - 1e-9,
        "measured " + bound(buffers.failure, buffers.failure_is_lower_bound));
  for (const auto& [name, at_least] : ex.served) {
    int64_t o = 0, s = 0;
    for (std::size_t k = 0; k < mix.size(); ++k)
      if (mix[k].name == name)
        for (const auto& st : steps) {
          o += st.by_class[k].offered;
          s += st.by_class[k].served;
        }
    const double got = share(s, o);
    add(name + " served >= " + format("%.4g %%", at_least * 100), o > 0 && got >= at_least - 1e-12,
        format("%.2f %%", got * 100) + " of " + std::to_string(o));
  }
  if (ex.spike) {
    for (const auto& s : steps) {
      if (s.step.kind == StepKind::spike) {
        const double planned = s.step.rate * s.measured_seconds;
        const bool sent = static_cast<double>(s.all.offered) >= 0.95 * planned;
        const bool on_time = run.send_lag_p99_ns <= 50'000'000;
        add("the spike was sent", sent && on_time,
            std::to_string(s.all.offered) + " of " + format("%.0f", planned) + " planned, send lag p99 " +
                format("%.1f ms", static_cast<double>(run.send_lag_p99_ns) / 1e6));
      }
      if (is_load_step(s.step.kind))
        add(std::string(step_kind_name(s.step.kind)) + " handled gracefully (failed <= " +
                format("%.3g %%", rules.max_failed * 100) + ")",
            s.all.failed_share() <= rules.max_failed,
            format("%.2f %% failed", s.all.failed_share() * 100));
      else
        add("recovered (served >= " + format("%.3g %%", (1 - rules.max_failed) * 100) + ")",
            s.all.served_share() >= 1 - rules.max_failed, format("%.2f %% served", s.all.served_share() * 100));
    }
  }
  return v;
}

}  // namespace headroom::ctl::buffer
