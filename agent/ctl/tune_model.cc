// SPDX-License-Identifier: Apache-2.0
#include "agent/ctl/tune_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

namespace headroom::ctl::tune {

std::vector<std::size_t> peak_steps(const std::vector<double>& rate, double share) {
  double top = 0;
  for (double r : rate)
    if (std::isfinite(r)) top = std::max(top, r);
  std::vector<std::size_t> out;
  if (!(top > 0)) return out;
  for (std::size_t i = 0; i < rate.size(); ++i)
    if (std::isfinite(rate[i]) && rate[i] >= share * top) out.push_back(i);
  return out;
}

std::optional<double> weighted_mean(const std::vector<Weighted>& values) {
  double sum = 0, weight = 0;
  for (const auto& v : values) {
    if (!std::isfinite(v.value) || !(v.weight > 0) || !std::isfinite(v.weight)) continue;
    sum += v.value * v.weight;
    weight += v.weight;
  }
  if (!(weight > 0)) return std::nullopt;
  return sum / weight;
}

std::optional<double> histogram_quantile(const Histogram& h, double q) {
  const std::size_t n = std::min(h.le.size(), h.cumulative.size());
  if (n == 0 || !(h.cumulative[n - 1] > 0)) return std::nullopt;
  const double rank = q * h.cumulative[n - 1];
  std::size_t i = 0;
  while (i + 1 < n && h.cumulative[i] < rank) ++i;
  if (std::isinf(h.le[i])) {
    // In +Inf: the highest finite bound is all that is known.
    if (i == 0) return std::nullopt;
    return h.le[i - 1];
  }
  const double lower = i == 0 ? 0.0 : h.le[i - 1];
  const double below = i == 0 ? 0.0 : h.cumulative[i - 1];
  const double in_bucket = h.cumulative[i] - below;
  if (!(in_bucket > 0)) return h.le[i];
  return lower + (h.le[i] - lower) * ((rank - below) / in_bucket);
}

std::optional<double> value_quantile(std::vector<double> values, double q) {
  std::erase_if(values, [](double v) { return std::isnan(v); });
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

orca::SignalThresholds thresholds_for_level(double level, std::string_view signal) {
  const double l = std::isfinite(level) ? std::clamp(level, 0.0, 0.95) : 0.5;
  orca::SignalThresholds t = orca::default_thresholds(signal);
  // Rounded to 3 decimals: the file is read by people; the order holds since
  // the three points are at least 0.01 apart for L <= 0.95.
  const auto round3 = [](double v) { return std::round(v * 1000) / 1000; };
  t.shed_start = round3(l + 0.2 * (1 - l));
  t.critical_start = round3(l + 0.6 * (1 - l));
  return t;
}

std::string format_duration_3(double seconds) {
  struct Unit {
    const char* name;
    double ns;
  };
  static constexpr Unit kUnits[] = {{"s", 1e9}, {"ms", 1e6}, {"us", 1e3}, {"ns", 1}};
  const double ns = seconds * 1e9;
  if (!(ns >= 1)) return "1ns";
  std::size_t u = 0;
  while (u + 1 < std::size(kUnits) && ns / kUnits[u].ns < 1) ++u;
  double v = ns / kUnits[u].ns;
  // 3 significant digits; nanoseconds are whole.
  int decimals = v >= 100 ? 0 : v >= 10 ? 1 : 2;
  if (u + 1 == std::size(kUnits)) decimals = 0;
  double scale = std::pow(10.0, decimals);
  v = std::round(v * scale) / scale;
  if (v >= 1000 && u > 0) {  // 999.7ms rounds to 1000ms: 1s
    --u;
    v = 1;
    decimals = 0;
  } else if (v >= 1000) {  // seconds beyond 999: 3 significant digits, whole
    const double mag = std::pow(10.0, std::floor(std::log10(v)) - 2);
    v = std::round(v / mag) * mag;
    decimals = 0;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string text = buf;
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  return text + kUnits[u].name;
}

std::chrono::seconds choose_step(std::chrono::seconds since, std::optional<std::chrono::seconds> asked) {
  using std::chrono::seconds;
  seconds step = asked ? *asked : (since > std::chrono::hours(24) ? seconds(300) : seconds(15));
  const auto least = static_cast<seconds::rep>(std::ceil(static_cast<double>(since.count()) / (kMaxPointsPerSeries - 1)));
  return std::max({step, seconds(least), seconds(1)});
}

namespace {

std::vector<double> at(const std::vector<double>& series, const std::vector<std::size_t>& steps) {
  std::vector<double> out;
  for (std::size_t i : steps)
    if (i < series.size()) out.push_back(series[i]);
  return out;
}

const std::vector<double>* find_quantile(const EndpointHistory& h, double q) {
  for (const auto& [key, series] : h.window_quantiles)
    if (std::fabs(key - q) < 1e-9) return &series;
  return nullptr;
}

// The q-quantile at peak from the window percentiles, weighted by the
// requests of each step's windows.
std::optional<double> window_quantile_at(const EndpointHistory& h, double q, const std::vector<std::size_t>& peaks) {
  const std::vector<double>* series = find_quantile(h, q);
  if (series == nullptr) return std::nullopt;
  std::vector<Weighted> values;
  for (std::size_t i : peaks) {
    if (i >= series->size()) continue;
    // Without the window requests (an older headroomd), each step counts once.
    const double w = h.window_requests.empty() ? 1.0 : i < h.window_requests.size() ? h.window_requests[i] : std::nan("");
    values.push_back({(*series)[i], w});
  }
  return weighted_mean(values);
}

Histogram histogram_at(const EndpointHistory& h, const std::vector<std::size_t>& peaks) {
  Histogram sum;
  for (std::size_t i : peaks) {
    if (i >= h.histogram_steps.size()) continue;
    const Histogram& s = h.histogram_steps[i];
    if (sum.le.empty()) {
      sum.le = s.le;
      sum.cumulative.assign(s.le.size(), 0);
    }
    if (s.le != sum.le) continue;
    for (std::size_t b = 0; b < s.cumulative.size(); ++b)
      if (std::isfinite(s.cumulative[b])) sum.cumulative[b] += s.cumulative[b];
  }
  return sum;
}

// The mean of the finite values; none: nullopt.
std::optional<double> mean_of(const std::vector<double>& values) {
  double sum = 0;
  std::size_t n = 0;
  for (double v : values)
    if (std::isfinite(v)) {
      sum += v;
      ++n;
    }
  if (n == 0) return std::nullopt;
  return sum / static_cast<double>(n);
}

SignalPlan plan(std::string_view signal, const std::vector<double>& at_peak) {
  SignalPlan p;
  p.signal = std::string(signal);
  p.p50 = value_quantile(at_peak, 0.5);
  p.p99 = value_quantile(at_peak, 0.99);
  return p;
}

void set_level(SignalPlan& p, double level, std::string from) {
  p.level = std::clamp(level, 0.0, 0.95);
  p.level_from = std::move(from);
  p.thresholds = thresholds_for_level(p.level, p.signal);
}

// A latency share's level under the recommended SLO: with the target at the
// q-quantile a share p = 1 - q of the requests is over it at peak by
// construction, and a window of n requests shows that share give or take
// its sampling spread: L = p + 2.326 sqrt(p (1 - p) / n), the share one
// window in a hundred reaches. n is the windows' mean request count at peak
// (unknown: L = p). The share observed at peak is not used: it was measured
// against the SLO in force then, not the one recommended.
void latency_level(SignalPlan& p, double q, const char* which, std::optional<double> window_requests) {
  const double share = 1 - q;
  char text[96];
  if (window_requests && *window_requests >= 1) {
    std::snprintf(text, sizeof text, "1 - %s quantile %g, + its spread in windows of %.0f requests", which, q,
                  *window_requests);
    set_level(p, latency_share_level(share, *window_requests), text);
  } else {
    std::snprintf(text, sizeof text, "1 - %s quantile %g", which, q);
    set_level(p, share, text);
  }
}

}  // namespace

double latency_share_level(double share, double window_requests) {
  if (!(window_requests >= 1)) return share;
  return share + 2.326 * std::sqrt(share * (1 - share) / window_requests);
}

Recommendation recommend(const EndpointHistory& h, const std::vector<double>& node_cpu, bool max_concurrency,
                         const Options& o) {
  Recommendation r;
  r.endpoint = h.name;
  std::vector<std::size_t> peaks;
  if (h.cumulative) {
    if (!h.histogram_steps.empty()) peaks = {0};
  } else {
    peaks = peak_steps(h.rate, o.peak_share);
    for (double v : h.rate)
      if (std::isfinite(v)) r.peak_rate = std::max(r.peak_rate, v);
  }
  if (peaks.empty()) {
    r.note = "no history for endpoint " + h.name + " (no requests in the range)";
    return r;
  }
  r.peak_steps = peaks.size();
  const Histogram hist = histogram_at(h, peaks);
  if (hist.count() > 0) {
    r.requests_at_peak = hist.count();
  } else {
    for (double v : at(h.rate, peaks)) r.requests_at_peak += v * h.step_seconds;
  }
  if (r.requests_at_peak < o.min_samples) {
    r.note = std::to_string(static_cast<long long>(std::llround(r.requests_at_peak))) +
             " requests at peak, fewer than --min-samples " +
             std::to_string(static_cast<long long>(std::llround(o.min_samples))) + ": no recommendation";
    return r;
  }
  auto target = window_quantile_at(h, o.target_quantile, peaks);
  auto max = window_quantile_at(h, o.max_quantile, peaks);
  r.method = "window percentiles";
  if (!target || !max) {
    target = histogram_quantile(hist, o.target_quantile);
    max = histogram_quantile(hist, o.max_quantile);
    r.method = "histogram";
  }
  if (!target || !max || !(*target > 0)) {
    r.note = "no latency data at peak for endpoint " + h.name;
    return r;
  }
  r.ok = true;
  r.target_seconds = *target;
  r.max_seconds = std::max(*max * o.max_margin, *target);
  r.target = format_duration_3(r.target_seconds);
  r.max = format_duration_3(r.max_seconds);

  SignalPlan cpu = plan(kShedCpu, at(node_cpu, peaks));
  set_level(cpu, o.autoscale_cpu, "--autoscale-cpu");
  r.signals.push_back(std::move(cpu));
  const auto signal_at = [&](std::string_view s) {
    auto it = h.signals.find(std::string(s));
    return it == h.signals.end() ? std::vector<double>{} : at(it->second, peaks);
  };
  std::optional<double> window_requests;
  if (!h.window_requests.empty()) window_requests = mean_of(at(h.window_requests, peaks));
  SignalPlan slo_target = plan(kShedSloTarget, signal_at(kShedSloTarget));
  latency_level(slo_target, o.target_quantile, "target", window_requests);
  r.signals.push_back(std::move(slo_target));
  SignalPlan slo_max = plan(kShedSloMax, signal_at(kShedSloMax));
  latency_level(slo_max, o.max_quantile, "max", window_requests);
  r.signals.push_back(std::move(slo_max));
  if (max_concurrency) {
    SignalPlan c = plan(kShedConcurrency, signal_at(kShedConcurrency));
    if (c.p99)
      set_level(c, *c.p99, h.cumulative ? "its value now" : "its p99 at peak");
    else
      set_level(c, 0.5, "0.5 (never observed)");
    r.signals.push_back(std::move(c));
  }
  return r;
}

}  // namespace headroom::ctl::tune
