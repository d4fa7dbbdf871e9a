// SPDX-License-Identifier: Apache-2.0
// Endpoint counters -> endpoint signals. Pure: the kernel's cumulative
// counters at two instants make one interval; a sliding window of intervals
// (agent.smoothing long) gives rates, percentiles and SLO miss shares.
//
// Miss shares count a request as soon as it is late: the window's ended
// requests (completed or aborted) that were over the threshold, plus the
// requests in flight now that are already older than it. When the service
// stops answering, completions leave the window and the in-flight requests
// age past the threshold, so the share reaches 1.0 within max(threshold,
// window) and stays there while the service stays stopped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "agent/config/config.h"
#include "probes/endpoint_probe.h"

namespace headroom::agent {

// What happened between two snapshots of one endpoint.
struct EndpointInterval {
  double seconds = 0;
  uint64_t completed = 0, errors = 0, aborted = 0;
  uint64_t over_target = 0, over_max = 0;  // of the completed and aborted
  double busy_ns = 0;                      // integral of requests in flight over the interval
  std::vector<std::pair<uint32_t, uint32_t>> hist;  // (bucket, completions), non-zero buckets only
};

// Counters are cumulative and wrap; differences are taken modulo 2^64/2^32.
EndpointInterval interval_between(const probes::EndpointTotals& prev, int64_t prev_ns,
                                  const probes::EndpointTotals& cur, int64_t cur_ns);

// The latency that stands for a kernel histogram bucket's requests: its
// midpoint (the open top bucket: its lower bound).
double histogram_bucket_midpoint_ns(uint32_t bucket);

// The latency below which `q` of the counted requests fall, from counts indexed
// by histogram bucket: the midpoint of the bucket that holds the nearest-rank
// sample (the top bucket: its lower bound). nullopt without counts.
std::optional<double> histogram_quantile_ns(const std::vector<uint64_t>& counts, double q);

struct EndpointSignals {
  double rps = 0;             // completed requests per second over the window
  double eps = 0;             // 5xx responses per second over the window
  double inflight_now = 0;    // requests in flight at the last snapshot
  double inflight_avg = 0;    // time-average over the window
  double inflight_last = 0;   // time-average over the last interval
  double pending = 0;         // requests on the port the server has not read yet
  std::optional<double> p50_ms, p90_ms, p99_ms;  // of the window's completions
  std::optional<double> share_over_target, share_over_max;  // absent until the first request
  std::optional<double> concurrency;  // concurrency_share(inflight_last, inflight_now + pending), when declared
  uint64_t window_requests = 0;       // completed + aborted in the window
  double window_seconds = 0;
};

class EndpointWindow {
 public:
  explicit EndpointWindow(std::size_t intervals) : capacity_(intervals < 1 ? 1 : intervals) {}

  // Adds an interval; `inflight` and `pending` are the snapshot taken at its end.
  void add(EndpointInterval interval, uint64_t inflight, uint64_t inflight_over_target,
           uint64_t inflight_over_max, uint64_t pending = 0);
  EndpointSignals signals(const EndpointConfig& endpoint) const;
  // The interval added last; null before the first.
  const EndpointInterval* newest() const { return slots_.empty() ? nullptr : &slots_.back(); }

 private:
  std::size_t capacity_;
  std::deque<EndpointInterval> slots_;
  uint64_t inflight_ = 0, inflight_over_target_ = 0, inflight_over_max_ = 0, pending_ = 0;
  // With nothing in the window, the last shares stay (a service that stopped
  // answering and lost its clients does not look healthy).
  std::optional<double> share_target_, share_max_;
};

// The concurrency signal: requests in flight as a share of the declared
// max_concurrency, bounded to [0, 1]; nullopt when none is declared (0).
// In flight is the count time-averaged over the last interval; when that
// exceeds max_concurrency, the count at the interval's end if lower (both
// with the requests not read yet).
//
// In flight counts the requests queued at the server too, so past
// max_concurrency it measures a queue, which grows for as long as demand
// exceeds capacity: unbounded, it would pass every shedding threshold,
// CRITICAL's included. A queue the shedder has emptied must stop counting at
// the next report, or the shedder keeps shedding everything while the server
// idles: hence the last interval rather than the window, and the count at
// its end once a queue was there. Below max_concurrency the average alone
// (a single count is noisy). docs/shedding.md has the measurements.
std::optional<double> concurrency_share(double inflight_avg, double inflight_end, uint32_t max_concurrency);

// Number of intervals in the window: smoothing / interval, at least 1.
std::size_t window_intervals(std::chrono::nanoseconds interval, std::chrono::nanoseconds smoothing);

// The endpoint's composite: the largest of its available signals.
std::optional<double> endpoint_composite(const EndpointSignals& s);

}  // namespace headroom::agent
