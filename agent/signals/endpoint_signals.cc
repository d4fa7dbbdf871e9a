// SPDX-License-Identifier: Apache-2.0
#include "agent/signals/endpoint_signals.h"

#include <algorithm>
#include <cmath>

namespace headroom::agent {

EndpointInterval interval_between(const probes::EndpointTotals& prev, int64_t prev_ns,
                                  const probes::EndpointTotals& cur, int64_t cur_ns) {
  EndpointInterval iv;
  iv.seconds = cur_ns > prev_ns ? static_cast<double>(cur_ns - prev_ns) / 1e9 : 0.0;
  const auto& a = prev.stats;
  const auto& b = cur.stats;
  iv.completed = b.completed - a.completed;
  iv.errors = b.errors - a.errors;
  iv.aborted = b.aborted - a.aborted;
  iv.over_target = b.over_target - a.over_target;
  iv.over_max = b.over_max - a.over_max;
  // Integral of in-flight requests: ended requests' latencies plus the growth
  // of the in-flight requests' ages, I(t) = busy(t) + sum of ages at t.
  const uint64_t ended_busy = b.busy_ns - a.busy_ns;
  iv.busy_ns = static_cast<double>(ended_busy) + static_cast<double>(cur.inflight_age_ns) -
               static_cast<double>(prev.inflight_age_ns);
  if (iv.busy_ns < 0) iv.busy_ns = 0;
  if (iv.completed > 0) {
    for (std::size_t i = 0; i < cur.hist.size(); ++i) {
      const uint32_t d = cur.hist[i] - prev.hist[i];
      if (d != 0) iv.hist.emplace_back(static_cast<uint32_t>(i), d);
    }
  }
  return iv;
}

double histogram_bucket_midpoint_ns(uint32_t bucket) {
  const double lo = static_cast<double>(hr_hist_lower_ns(bucket));
  const double hi = bucket + 1 < HR_HIST_BUCKETS ? static_cast<double>(hr_hist_lower_ns(bucket + 1)) : lo;
  return (lo + hi) / 2;
}

std::optional<double> histogram_quantile_ns(const std::vector<uint64_t>& counts, double q) {
  uint64_t total = 0;
  for (auto c : counts) total += c;
  if (total == 0) return std::nullopt;
  q = std::clamp(q, 0.0, 1.0);
  // nearest rank: the smallest sample with at least q of all at or below it
  auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total)));
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (std::size_t b = 0; b < counts.size(); ++b) {
    seen += counts[b];
    if (seen >= rank) {
      return histogram_bucket_midpoint_ns(static_cast<uint32_t>(b));
    }
  }
  return std::nullopt;
}

void EndpointWindow::add(EndpointInterval interval, uint64_t inflight, uint64_t inflight_over_target,
                         uint64_t inflight_over_max, uint64_t pending) {
  slots_.push_back(std::move(interval));
  pending_ = pending;
  while (slots_.size() > capacity_) slots_.pop_front();
  inflight_ = inflight;
  inflight_over_target_ = inflight_over_target;
  inflight_over_max_ = inflight_over_max;
  uint64_t ended = 0, over_t = 0, over_m = 0;
  for (const auto& s : slots_) {
    ended += s.completed + s.aborted;
    over_t += s.over_target;
    over_m += s.over_max;
  }
  // Each share has its own denominator: the window's ended requests plus the
  // in-flight requests already late for that threshold.
  if (ended + inflight_over_target_ > 0)
    share_target_ = static_cast<double>(over_t + inflight_over_target_) /
                    static_cast<double>(ended + inflight_over_target_);
  if (ended + inflight_over_max_ > 0)
    share_max_ = static_cast<double>(over_m + inflight_over_max_) / static_cast<double>(ended + inflight_over_max_);
}

EndpointSignals EndpointWindow::signals(const EndpointConfig& endpoint) const {
  EndpointSignals s;
  double seconds = 0, busy = 0;
  uint64_t completed = 0, errors = 0, aborted = 0;
  std::vector<uint64_t> hist(HR_HIST_BUCKETS, 0);
  for (const auto& slot : slots_) {
    seconds += slot.seconds;
    busy += slot.busy_ns;
    completed += slot.completed;
    errors += slot.errors;
    aborted += slot.aborted;
    for (const auto& [b, c] : slot.hist) hist[b] += c;
  }
  s.window_seconds = seconds;
  s.window_requests = completed + aborted;
  s.inflight_now = static_cast<double>(inflight_);
  s.pending = static_cast<double>(pending_);
  if (seconds > 0) {
    s.rps = static_cast<double>(completed) / seconds;
    s.eps = static_cast<double>(errors) / seconds;
    s.inflight_avg = busy / (seconds * 1e9);
  }
  auto ms = [](std::optional<double> ns) -> std::optional<double> {
    if (!ns) return std::nullopt;
    return *ns / 1e6;
  };
  s.p50_ms = ms(histogram_quantile_ns(hist, 0.50));
  s.p90_ms = ms(histogram_quantile_ns(hist, 0.90));
  s.p99_ms = ms(histogram_quantile_ns(hist, 0.99));
  s.share_over_target = share_target_;
  s.share_over_max = share_max_;
  if (!slots_.empty() && slots_.back().seconds > 0)
    s.inflight_last = slots_.back().busy_ns / (slots_.back().seconds * 1e9);
  // At the end as in the average: the requests not read yet count too.
  s.concurrency = concurrency_share(s.inflight_last, s.inflight_now + s.pending, endpoint.max_concurrency);
  return s;
}

std::optional<double> concurrency_share(double inflight_avg, double inflight_end, uint32_t max_concurrency) {
  if (max_concurrency == 0) return std::nullopt;
  const double max = static_cast<double>(max_concurrency);
  double inflight = inflight_avg;
  if (inflight_avg > max) inflight = std::min(inflight_avg, inflight_end);  // NaN end: the average
  if (!(inflight > 0)) return 0.0;                                            // NaN too
  return std::min(1.0, inflight / max);
}

std::size_t window_intervals(std::chrono::nanoseconds interval, std::chrono::nanoseconds smoothing) {
  if (interval.count() <= 0 || smoothing <= interval) return 1;
  return static_cast<std::size_t>(std::llround(static_cast<double>(smoothing.count()) /
                                               static_cast<double>(interval.count())));
}

std::optional<double> endpoint_composite(const EndpointSignals& s) {
  std::optional<double> out;
  for (const auto& v : {s.share_over_target, s.share_over_max, s.concurrency})
    if (v) out = out ? std::max(*out, *v) : *v;
  return out;
}

}  // namespace headroom::agent
