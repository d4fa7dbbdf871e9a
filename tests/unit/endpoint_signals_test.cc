// SPDX-License-Identifier: Apache-2.0
// Endpoint signals, pure: the histogram arithmetic shared with the eBPF
// program (probes/ebpf/endpoint_abi.h), counters -> intervals -> a sliding
// window of signals (agent/signals/endpoint_signals.h), and the reports built from
// them (agent/signals/report_builder.h). No kernel, no root, no clock: every time is
// simulated.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "agent/config/config.h"
#include "agent/signals/endpoint_signals.h"
#include "agent/signals/report_builder.h"
#include "headroom/orca/report.h"
#include "probes/endpoint_probe.h"

namespace headroom::agent {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kU32Max = std::numeric_limits<uint32_t>::max();
constexpr int64_t kMs = 1'000'000;
constexpr uint32_t kBuckets = HR_HIST_BUCKETS;
constexpr uint32_t kTop = HR_HIST_BUCKETS - 1;

uint32_t bucket(uint64_t ns) { return hr_hist_bucket(ns); }
uint64_t lower(uint32_t b) { return hr_hist_lower_ns(b); }

// Deterministic pseudo-random numbers (64-bit LCG, high bits).
struct Lcg {
  uint64_t state;
  uint64_t next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state;
  }
  double uniform() { return static_cast<double>(next() >> 11) / 9007199254740992.0; }  // [0, 1)
};

// ===========================================================================
// 1. Histogram arithmetic (endpoint_abi.h)

TEST(HistBucket, LayoutConstants) {
  EXPECT_EQ(kBuckets, 592u);
  EXPECT_EQ(lower(0), 0u);
  EXPECT_EQ(lower(HR_HIST_SUB), 4096u) << "one bucket per 256 ns unit below 4.096 us";
}

TEST(HistBucket, SpecificValues) {
  struct Case {
    const char* name;
    uint64_t ns;
    uint32_t bucket;
    uint64_t lower;  // lower bound of that bucket
  } cases[] = {
      {"0", 0, 0, 0},
      {"255 ns: still the first unit", 255, 0, 0},
      {"256 ns: the second unit", 256, 1, 256},
      {"4095 ns: the last linear bucket", 4095, 15, 3840},
      {"4096 ns: the first log-linear bucket", 4096, 16, 4096},
      {"8191 ns", 8191, 31, 7936},
      {"8192 ns: next octave, bucket twice as wide", 8192, 32, 8192},
      {"1 ms", 1'000'000, 142, 983'040},
      {"10 ms", 10'000'000, 195, 9'961'472},
      {"1 s", 1'000'000'000, 301, 973'078'528},
      {"last value below the top bucket", (31ull << 43) - 1, kTop - 1, 30ull << 43},
      {"first value of the top bucket", 31ull << 43, kTop, 31ull << 43},
      {"2^48 ns = 2^40 units", 1ull << 48, kTop, 31ull << 43},
      {"2^62 ns", 1ull << 62, kTop, 31ull << 43},
      {"u64 max", kU64Max, kTop, 31ull << 43},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(bucket(c.ns), c.bucket) << c.name;
    EXPECT_EQ(lower(c.bucket), c.lower) << c.name;
    EXPECT_LE(lower(bucket(c.ns)), c.ns) << c.name;
  }
}

TEST(HistBucket, EveryBoundaryMapsBackToItsBucket) {
  for (uint32_t b = 0; b < kBuckets; ++b) {
    EXPECT_EQ(bucket(lower(b)), b) << "lower bound of bucket " << b;
    if (b + 1 < kBuckets) {
      ASSERT_LT(lower(b), lower(b + 1)) << "bounds strictly increase at " << b;
      EXPECT_EQ(bucket(lower(b + 1) - 1), b) << "last value of bucket " << b;
    }
  }
}

TEST(HistBucket, BucketWidthAtMostOneSixteenthOfLowerAbove4us) {
  for (uint32_t b = 0; b + 1 < kBuckets; ++b) {
    const uint64_t width = lower(b + 1) - lower(b);
    if (b < HR_HIST_SUB) {
      EXPECT_EQ(width, 256u) << "linear bucket " << b;
    } else {
      EXPECT_LE(width * 16, lower(b)) << "bucket " << b << " [" << lower(b) << ", " << lower(b + 1) << ")";
    }
  }
}

// Values swept densely at the bottom, geometrically to 2^64, around every
// power of two and pseudo-randomly: each lands in a bucket that contains it,
// and the bucket never decreases as the value grows.
TEST(HistBucket, EveryValueInsideItsBucketAndMonotonic) {
  std::vector<uint64_t> values;
  for (uint64_t v = 0; v < 70'000; ++v) values.push_back(v);
  for (double v = 70'000; v < 1.8e19; v *= 1.003) values.push_back(static_cast<uint64_t>(v));
  for (int k = 1; k < 64; ++k) {
    const uint64_t p = 1ull << k;
    values.insert(values.end(), {p - 1, p, p + 1});
  }
  Lcg rng{42};
  for (int i = 0; i < 20'000; ++i) values.push_back(rng.next() >> (rng.next() % 64));
  values.push_back(kU64Max);
  std::sort(values.begin(), values.end());

  uint32_t prev = 0;
  for (uint64_t v : values) {
    const uint32_t b = bucket(v);
    ASSERT_LT(b, kBuckets) << v;
    ASSERT_LE(lower(b), v) << v << " in bucket " << b;
    if (b < kTop) {
      ASSERT_LT(v, lower(b + 1)) << v << " in bucket " << b;
    }
    ASSERT_GE(b, prev) << "bucket decreased at " << v;
    prev = b;
  }
  EXPECT_EQ(prev, kTop) << "the sweep reached the top bucket";
}

// ===========================================================================
// 2a. interval_between

probes::EndpointTotals totals(uint64_t completed, uint64_t errors, uint64_t aborted, uint64_t over_target,
                              uint64_t over_max, uint64_t busy_ns, uint64_t inflight_age_ns = 0) {
  probes::EndpointTotals t;
  t.stats.completed = completed;
  t.stats.errors = errors;
  t.stats.aborted = aborted;
  t.stats.over_target = over_target;
  t.stats.over_max = over_max;
  t.stats.busy_ns = busy_ns;
  t.inflight_age_ns = inflight_age_ns;
  return t;
}

TEST(IntervalBetween, CounterDifferencesIncludingWrapAround) {
  struct Case {
    const char* name;
    probes::EndpointTotals prev, cur;
    uint64_t completed, errors, aborted, over_target, over_max;
  } cases[] = {
      {"zero", totals(0, 0, 0, 0, 0, 0), totals(0, 0, 0, 0, 0, 0), 0, 0, 0, 0, 0},
      {"plain", totals(100, 5, 2, 10, 1, 0), totals(350, 9, 7, 40, 3, 0), 250, 4, 5, 30, 2},
      {"every counter wraps", totals(kU64Max - 4, kU64Max, kU64Max - 1, kU64Max - 9, kU64Max, 0),
       totals(5, 2, 3, 10, 0, 0), 10, 3, 5, 20, 1},
      {"completed exactly at the wrap", totals(kU64Max, 0, 0, 0, 0, 0), totals(0, 0, 0, 0, 0, 0), 1, 0, 0, 0, 0},
  };
  for (const auto& c : cases) {
    const auto got = interval_between(c.prev, 0, c.cur, 100 * kMs);
    EXPECT_EQ(got.completed, c.completed) << c.name;
    EXPECT_EQ(got.errors, c.errors) << c.name;
    EXPECT_EQ(got.aborted, c.aborted) << c.name;
    EXPECT_EQ(got.over_target, c.over_target) << c.name;
    EXPECT_EQ(got.over_max, c.over_max) << c.name;
    EXPECT_DOUBLE_EQ(got.seconds, 0.1) << c.name;
  }
}

TEST(IntervalBetween, Seconds) {
  struct Case {
    int64_t prev_ns, cur_ns;
    double seconds;
  } cases[] = {
      {0, 100 * kMs, 0.1},
      {5'000'000'000, 6'500'000'000, 1.5},
      {7 * kMs, 7 * kMs, 0.0},         // no time passed
      {9 * kMs, 8 * kMs, 0.0},         // clock went backwards: not an interval of negative length
  };
  const auto t = totals(0, 0, 0, 0, 0, 0);
  for (const auto& c : cases)
    EXPECT_DOUBLE_EQ(interval_between(t, c.prev_ns, t, c.cur_ns).seconds, c.seconds) << c.prev_ns << " -> " << c.cur_ns;
}

// busy_ns is the integral of the number of requests in flight over the
// interval: the latencies of the requests that ended, plus the growth of the
// ages of those still in flight.
TEST(IntervalBetween, BusyIsTheInFlightIntegral) {
  struct Case {
    const char* name;
    uint64_t prev_busy, cur_busy, prev_age, cur_age;
    double busy;
  } cases[] = {
      {"nothing", 0, 0, 0, 0, 0},
      {"only ended requests", 1'000, 51'000, 0, 0, 50'000},
      {"one request in flight the whole 100 ms", 0, 0, 20 * kMs, 120 * kMs, 100 * kMs},
      {"a 4 ms old request that ended at 5 ms", 0, 5 * kMs, 4 * kMs, 0, 1 * kMs},
      {"ended + in-flight growth", 1'000, 3'000, 500, 800, 2'300},
      {"busy counter wraps", kU64Max - 99, 100, 0, 0, 200},
      {"busy wraps, in-flight shrinks", kU64Max - 999'999, 5'000'000, 4'000'000, 1'000'000, 3'000'000},
      {"in-flight entries vanished (LRU): never negative", 0, 0, 1'000'000, 0, 0},
  };
  for (const auto& c : cases) {
    const auto prev = totals(0, 0, 0, 0, 0, c.prev_busy, c.prev_age);
    const auto cur = totals(0, 0, 0, 0, 0, c.cur_busy, c.cur_age);
    EXPECT_DOUBLE_EQ(interval_between(prev, 0, cur, 100 * kMs).busy_ns, c.busy) << c.name;
  }
}

TEST(IntervalBetween, HistogramDifferencesWrapModulo2To32AndListOnlyNonZeroBuckets) {
  auto prev = totals(10, 0, 0, 0, 0, 0);
  auto cur = totals(30, 0, 0, 0, 0, 0);
  for (auto& c : prev.hist) c = 1'000;
  cur.hist = prev.hist;
  prev.hist[3] = kU32Max - 1;  // wraps: 0xfffffffe -> 3 is 5 more
  cur.hist[3] = 3;
  cur.hist[200] += 10;
  prev.hist[kTop] = kU32Max;  // wraps to exactly 0 -> 5
  cur.hist[kTop] = 4;
  const auto got = interval_between(prev, 0, cur, 100 * kMs);
  const std::vector<std::pair<uint32_t, uint32_t>> expected = {{3, 5}, {200, 10}, {kTop, 5}};
  EXPECT_EQ(got.hist, expected);
}

TEST(IntervalBetween, NoCompletionsNoHistogram) {
  // The probe re-reads the histogram only when `completed` moved, so a
  // histogram without completions is stale and must not count.
  auto prev = totals(10, 0, 0, 0, 0, 0);
  auto cur = totals(10, 0, 4, 4, 0, 0);
  cur.hist[50] = 7;
  const auto got = interval_between(prev, 0, cur, 100 * kMs);
  EXPECT_TRUE(got.hist.empty());
  EXPECT_EQ(got.aborted, 4u);
}

// ===========================================================================
// 2b. histogram_quantile_ns

double midpoint(uint32_t b) { return (static_cast<double>(lower(b)) + static_cast<double>(lower(b + 1))) / 2; }

TEST(HistogramQuantile, NothingCountedIsNullopt) {
  EXPECT_FALSE(histogram_quantile_ns({}, 0.5));
  EXPECT_FALSE(histogram_quantile_ns(std::vector<uint64_t>(kBuckets, 0), 0.5));
  EXPECT_FALSE(histogram_quantile_ns(std::vector<uint64_t>(kBuckets, 0), 0.99));
}

TEST(HistogramQuantile, NearestRankMidpointTable) {
  std::vector<uint64_t> one(kBuckets, 0);
  one[3] = 1;
  std::vector<uint64_t> two(kBuckets, 0);
  two[0] = 1;
  two[20] = 1;
  std::vector<uint64_t> skewed(kBuckets, 0);  // 90 in bucket 100, 9 in 150, 1 in 300
  skewed[100] = 90;
  skewed[150] = 9;
  skewed[300] = 1;
  std::vector<uint64_t> top(kBuckets, 0);
  top[kTop] = 3;
  struct Case {
    const char* name;
    const std::vector<uint64_t>* counts;
    double q;
    double expected;
  } cases[] = {
      {"single sample, p50", &one, 0.5, 896},  // (768 + 1024) / 2
      {"single sample, p99", &one, 0.99, 896},
      {"two samples, p50 is the first", &two, 0.5, 128},
      {"two samples, p51 is the second", &two, 0.51, midpoint(20)},
      {"q = 0 is the smallest sample", &two, 0.0, 128},
      {"q = 1 is the largest sample", &two, 1.0, midpoint(20)},
      {"q below 0 clamps", &two, -3.0, 128},
      {"q above 1 clamps", &two, 7.0, midpoint(20)},
      {"skewed p50", &skewed, 0.5, midpoint(100)},
      {"skewed p90 is rank 90", &skewed, 0.9, midpoint(100)},
      {"skewed p91 is rank 91", &skewed, 0.91, midpoint(150)},
      {"skewed p99 is rank 99", &skewed, 0.99, midpoint(150)},
      {"skewed p99.5 is rank 100", &skewed, 0.995, midpoint(300)},
      {"top bucket has no upper bound: its lower bound", &top, 0.5, static_cast<double>(lower(kTop))},
  };
  for (const auto& c : cases) {
    const auto got = histogram_quantile_ns(*c.counts, c.q);
    ASSERT_TRUE(got) << c.name;
    EXPECT_DOUBLE_EQ(*got, c.expected) << c.name;
  }
}

TEST(HistogramQuantile, NearestRankOverDistinctBuckets) {
  // Sample i (1..n) alone in bucket 100 + i: the q quantile is sample ceil(q n).
  for (uint64_t n : {1u, 2u, 3u, 7u, 10u, 99u, 100u, 101u, 200u, 333u}) {
    std::vector<uint64_t> counts(kBuckets, 0);
    for (uint64_t i = 1; i <= n; ++i) counts[100 + i] = 1;
    for (double q : {0.5, 0.9, 0.99}) {
      auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(n)));
      rank = std::max<uint64_t>(rank, 1);
      const auto got = histogram_quantile_ns(counts, q);
      ASSERT_TRUE(got);
      EXPECT_DOUBLE_EQ(*got, midpoint(static_cast<uint32_t>(100 + rank))) << "n=" << n << " q=" << q;
    }
  }
}

// Synthetic latencies bucketed the way the kernel does: each estimate is
// within half a bucket, i.e. within 1/32 of the exact nearest-rank value.
TEST(HistogramQuantile, KnownDistributionsWithinBucketError) {
  struct Dist {
    const char* name;
    std::vector<uint64_t> ns;
  };
  std::vector<Dist> dists;
  Lcg rng{7};
  {
    Dist d{"log-uniform 20 us .. 2 s", {}};
    for (int i = 0; i < 10'000; ++i) d.ns.push_back(static_cast<uint64_t>(20e3 * std::pow(1e5, rng.uniform())));
    dists.push_back(std::move(d));
  }
  {
    Dist d{"exponential, mean 5 ms, from 10 us", {}};
    for (int i = 0; i < 10'000; ++i)
      d.ns.push_back(10'000 + static_cast<uint64_t>(-5e6 * std::log(1.0 - rng.uniform())));
    dists.push_back(std::move(d));
  }
  {
    Dist d{"bimodal: 95% ~2 ms, 5% ~400 ms", {}};
    for (int i = 0; i < 10'000; ++i) {
      const bool slow = rng.uniform() < 0.05;
      d.ns.push_back(static_cast<uint64_t>((slow ? 400e6 : 2e6) * (0.8 + 0.4 * rng.uniform())));
    }
    dists.push_back(std::move(d));
  }
  {
    Dist d{"uniform 1 ms .. 10 ms, 137 samples", {}};
    for (int i = 0; i < 137; ++i) d.ns.push_back(static_cast<uint64_t>(1e6 + 9e6 * rng.uniform()));
    dists.push_back(std::move(d));
  }
  {
    Dist d{"constant 10 ms", std::vector<uint64_t>(500, 10'000'000)};
    dists.push_back(std::move(d));
  }
  for (auto& d : dists) {
    std::vector<uint64_t> counts(kBuckets, 0);
    for (uint64_t v : d.ns) counts[bucket(v)]++;
    std::sort(d.ns.begin(), d.ns.end());
    for (double q : {0.5, 0.9, 0.99, 0.999}) {
      auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(d.ns.size())));
      const double exact = static_cast<double>(d.ns[std::max<std::size_t>(rank, 1) - 1]);
      const auto got = histogram_quantile_ns(counts, q);
      ASSERT_TRUE(got) << d.name;
      EXPECT_LE(std::abs(*got - exact), exact / 32) << d.name << " q=" << q << " exact=" << exact << " got=" << *got;
    }
  }
}

// ===========================================================================
// 2c. EndpointWindow

EndpointConfig endpoint(uint32_t max_concurrency = 0, std::chrono::nanoseconds target = 10ms,
                        std::chrono::nanoseconds max = 100ms) {
  EndpointConfig e;
  e.name = "api";
  e.port = 8080;
  e.path = "/play";
  e.target = target;
  e.max = max;
  e.max_concurrency = max_concurrency;
  return e;
}

EndpointInterval iv(double seconds, uint64_t completed, uint64_t over_target = 0, uint64_t over_max = 0,
                    uint64_t aborted = 0, uint64_t errors = 0, double busy_ns = 0) {
  EndpointInterval i;
  i.seconds = seconds;
  i.completed = completed;
  i.errors = errors;
  i.aborted = aborted;
  i.over_target = over_target;
  i.over_max = over_max;
  i.busy_ns = busy_ns;
  return i;
}

TEST(EndpointWindow, EmptyWindowHasNoSignals) {
  EndpointWindow w(10);
  const auto s = w.signals(endpoint(8));
  EXPECT_EQ(s.rps, 0);
  EXPECT_EQ(s.eps, 0);
  EXPECT_EQ(s.inflight_avg, 0);
  EXPECT_FALSE(s.p50_ms);
  EXPECT_FALSE(s.share_over_target);
  EXPECT_FALSE(s.share_over_max);
  EXPECT_EQ(s.window_requests, 0u);
  ASSERT_TRUE(s.concurrency) << "declared: present, 0";
  EXPECT_EQ(*s.concurrency, 0);
}

TEST(EndpointWindow, RatesAreOverTheLastNIntervalsOnly) {
  EndpointWindow w(3);
  // An early burst that must leave the window.
  w.add(iv(0.1, 1000, 0, 0, 0, 500), 0, 0, 0);
  w.add(iv(0.1, 10, 0, 0, 1, 1), 0, 0, 0);
  w.add(iv(0.1, 20, 0, 0, 2, 2), 0, 0, 0);
  w.add(iv(0.2, 30, 0, 0, 3, 3), 0, 0, 0);
  const auto s = w.signals(endpoint());
  EXPECT_DOUBLE_EQ(s.window_seconds, 0.4);
  EXPECT_DOUBLE_EQ(s.rps, 60 / 0.4);
  EXPECT_DOUBLE_EQ(s.eps, 6 / 0.4);
  EXPECT_EQ(s.window_requests, 66u) << "completed + aborted";
}

TEST(EndpointWindow, CapacityZeroMeansOneInterval) {
  EndpointWindow w(0);
  w.add(iv(0.1, 50), 0, 0, 0);
  w.add(iv(0.1, 10), 0, 0, 0);
  EXPECT_DOUBLE_EQ(w.signals(endpoint()).rps, 100);
}

TEST(EndpointWindow, InflightAverageFromBusyAndInflightNowFromTheLastSnapshot) {
  struct Case {
    const char* name;
    std::vector<std::pair<double, double>> seconds_busy;
    double avg;
  } cases[] = {
      {"idle", {{0.1, 0}}, 0},
      {"one request all along", {{0.1, 0.1e9}}, 1},
      {"two then four", {{0.1, 0.2e9}, {0.1, 0.4e9}}, 3},
      {"uneven intervals", {{0.3, 0.3e9}, {0.1, 0.5e9}}, 2},
      {"only the last 2 count", {{0.1, 9e9}, {0.1, 0.1e9}, {0.1, 0.3e9}}, 2},
  };
  for (const auto& c : cases) {
    EndpointWindow w(2);
    uint64_t n = 0;
    for (const auto& [sec, busy] : c.seconds_busy) w.add(iv(sec, 1, 0, 0, 0, 0, busy), ++n, 0, 0);
    const auto s = w.signals(endpoint());
    EXPECT_DOUBLE_EQ(s.inflight_avg, c.avg) << c.name;
    EXPECT_DOUBLE_EQ(s.inflight_now, static_cast<double>(n)) << c.name;
  }
}

TEST(EndpointWindow, SharesTable) {
  struct Add {
    EndpointInterval interval;
    uint64_t inflight, inflight_over_target, inflight_over_max;
  };
  struct Case {
    const char* name;
    std::vector<Add> adds;
    std::optional<double> target, max;
  } cases[] = {
      {"no requests yet: absent", {{iv(0.1, 0), 0, 0, 0}}, std::nullopt, std::nullopt},
      {"in flight but not late yet: absent", {{iv(0.1, 0), 5, 0, 0}}, std::nullopt, std::nullopt},
      {"all fast", {{iv(0.1, 100), 0, 0, 0}}, 0.0, 0.0},
      {"a quarter over target, 5% over max", {{iv(0.1, 100, 25, 5), 0, 0, 0}}, 0.25, 0.05},
      {"aborted requests count as ended", {{iv(0.1, 60, 10, 0, 40), 0, 0, 0}}, 0.1, 0.0},
      {"late in-flight requests join both sides", {{iv(0.1, 90, 0, 0), 20, 10, 0}}, 0.1, 0.0},
      {"each share has its own denominator",
       {{iv(0.1, 80, 20, 10), 30, 20, 5}},
       (20.0 + 20) / (80 + 20),
       (10.0 + 5) / (80 + 5)},
      {"summed over the window",
       {{iv(0.1, 100, 10, 0), 0, 0, 0}, {iv(0.1, 100, 30, 2), 0, 0, 0}},
       40.0 / 200,
       2.0 / 200},
      {"only in-flight requests, all late: 1.0", {{iv(0.1, 0), 7, 7, 3}}, 1.0, 1.0},
      {"the in-flight figures are the last snapshot's, not summed",
       {{iv(0.1, 10), 50, 50, 0}, {iv(0.1, 10), 10, 5, 0}},
       5.0 / 25,
       0.0},
  };
  for (const auto& c : cases) {
    EndpointWindow w(4);
    for (const auto& a : c.adds) w.add(a.interval, a.inflight, a.inflight_over_target, a.inflight_over_max);
    const auto s = w.signals(endpoint());
    ASSERT_EQ(s.share_over_target.has_value(), c.target.has_value()) << c.name;
    ASSERT_EQ(s.share_over_max.has_value(), c.max.has_value()) << c.name;
    if (c.target) {
      EXPECT_DOUBLE_EQ(*s.share_over_target, *c.target) << c.name;
    }
    if (c.max) {
      EXPECT_DOUBLE_EQ(*s.share_over_max, *c.max) << c.name;
    }
  }
}

TEST(EndpointWindow, ShareHoldsItsLastValueWhileTheWindowHasNothing) {
  constexpr std::size_t kN = 3;
  EndpointWindow w(kN);
  w.add(iv(0.1, 100, 25, 10), 0, 0, 0);
  for (std::size_t i = 0; i < 5 * kN; ++i) {
    w.add(iv(0.1, 0), 0, 0, 0);
    const auto s = w.signals(endpoint());
    ASSERT_TRUE(s.share_over_target) << i;
    ASSERT_TRUE(s.share_over_max) << i;
    EXPECT_DOUBLE_EQ(*s.share_over_target, 0.25) << i;
    EXPECT_DOUBLE_EQ(*s.share_over_max, 0.10) << i;
    if (i + 1 >= kN) {  // the requests have left the window
      EXPECT_EQ(s.rps, 0) << i;
      EXPECT_EQ(s.window_requests, 0u) << i;
    }
  }
  // Requests again: the share follows them, it is not stuck.
  w.add(iv(0.1, 100), 0, 0, 0);
  EXPECT_DOUBLE_EQ(*w.signals(endpoint()).share_over_target, 0.0);
}

TEST(EndpointWindow, PercentilesOfTheWindowsCompletions) {
  EndpointWindow w(2);
  auto with_hist = [](uint64_t n, uint64_t latency_ns) {
    auto i = iv(0.1, n);
    i.hist.emplace_back(bucket(latency_ns), static_cast<uint32_t>(n));
    return i;
  };
  w.add(with_hist(1000, 900 * kMs), 0, 0, 0);  // leaves the window
  w.add(with_hist(90, 2 * kMs), 0, 0, 0);
  w.add(with_hist(10, 50 * kMs), 0, 0, 0);
  const auto s = w.signals(endpoint());
  ASSERT_TRUE(s.p50_ms && s.p90_ms && s.p99_ms);
  EXPECT_DOUBLE_EQ(*s.p50_ms, midpoint(bucket(2 * kMs)) / 1e6);
  EXPECT_DOUBLE_EQ(*s.p90_ms, midpoint(bucket(2 * kMs)) / 1e6);
  EXPECT_DOUBLE_EQ(*s.p99_ms, midpoint(bucket(50 * kMs)) / 1e6);
  EXPECT_NEAR(*s.p50_ms, 2.0, 2.0 / 32);
  EXPECT_NEAR(*s.p99_ms, 50.0, 50.0 / 32);
}

TEST(EndpointWindow, ConcurrencyOnlyWhenDeclared) {
  struct Case {
    uint32_t max_concurrency;
    std::optional<double> expected;
  } cases[] = {{0, std::nullopt}, {1, 1.0}, {4, 1.0}, {6, 1.0}, {8, 0.75}, {64, 6.0 / 64}};
  EndpointWindow w(2);
  w.add(iv(0.1, 10, 0, 0, 0, 0, 0.6e9), 6, 0, 0);  // 6 in flight on average
  for (const auto& c : cases) {
    const auto s = w.signals(endpoint(c.max_concurrency));
    ASSERT_EQ(s.concurrency.has_value(), c.expected.has_value()) << c.max_concurrency;
    if (c.expected) {
      EXPECT_DOUBLE_EQ(*s.concurrency, *c.expected) << c.max_concurrency;
    }
  }
}

// A server simulated one millisecond at a time, keeping the kernel's
// cumulative counters exactly as endpoint.bpf.c does. The counters start
// near their wrap points so every difference crosses one.
class SimulatedServer {
 public:
  SimulatedServer(uint64_t target_ns, uint64_t max_ns) : target_(target_ns), max_(max_ns) {
    auto& s = t_.stats;
    s.completed = kU64Max - 1000;
    s.errors = kU64Max - 3;
    s.aborted = kU64Max - 2;
    s.over_target = kU64Max - 5;
    s.over_max = kU64Max;
    s.busy_ns = kU64Max - 1'000'000;
    for (auto& c : t_.hist) c = kU32Max - 7;
    snapshot();
  }

  // Healthy: one request a millisecond, each answered in 5 ms except every
  // 50th (15 ms: over the target of the tests, under the max).
  void healthy(int ms) {
    for (int i = 0; i < ms; ++i) {
      now_ += kMs;
      end(static_cast<uint64_t>(++n_ % 50 == 0 ? 15 * kMs : 5 * kMs), true);
    }
    snapshot();
  }

  // Stopped answering: requests keep coming, none completes; clients give up
  // after `client_timeout_ns` (0: never) and close the connection.
  void stopped(int ms, uint64_t client_timeout_ns) {
    for (int i = 0; i < ms; ++i) {
      now_ += kMs;
      starts_.push_back(now_);
      while (client_timeout_ns > 0 && !starts_.empty() &&
             static_cast<uint64_t>(now_ - starts_.front()) >= client_timeout_ns) {
        end(static_cast<uint64_t>(now_ - starts_.front()), false);
        starts_.pop_front();
      }
    }
    snapshot();
  }

  const probes::EndpointTotals& totals() const { return t_; }
  int64_t now() const { return now_; }

 private:
  void end(uint64_t latency, bool completed) {
    auto& s = t_.stats;
    if (completed) {
      ++s.completed;
      ++t_.hist[bucket(latency)];
    } else {
      ++s.aborted;
    }
    s.busy_ns += latency;
    if (latency > target_) ++s.over_target;
    if (latency > max_) ++s.over_max;
  }
  void snapshot() {
    t_.inflight = starts_.size();
    t_.inflight_over_target = t_.inflight_over_max = t_.inflight_age_ns = 0;
    for (int64_t s : starts_) {
      const auto age = static_cast<uint64_t>(now_ - s);
      t_.inflight_age_ns += age;
      if (age > target_) ++t_.inflight_over_target;
      if (age > max_) ++t_.inflight_over_max;
    }
  }

  uint64_t target_, max_;
  probes::EndpointTotals t_;
  int64_t now_ = 1'000'000'000'000;
  uint64_t n_ = 0;
  std::deque<int64_t> starts_;
};

// Kernel counters -> interval_between -> EndpointWindow, once per tick.
class Pipeline {
 public:
  Pipeline(const SimulatedServer& server, std::size_t n)
      : server_(server), window_(n), prev_(server.totals()), prev_ns_(server.now()) {}
  EndpointSignals tick(const EndpointConfig& e) {
    const auto& cur = server_.totals();
    window_.add(interval_between(prev_, prev_ns_, cur, server_.now()), cur.inflight, cur.inflight_over_target,
                cur.inflight_over_max);
    prev_ = cur;
    prev_ns_ = server_.now();
    return window_.signals(e);
  }

 private:
  const SimulatedServer& server_;
  EndpointWindow window_;
  probes::EndpointTotals prev_;
  int64_t prev_ns_;
};

TEST(EndpointWindow, HealthyServerThroughThePipeline) {
  const auto e = endpoint(8, 10ms, 100ms);
  SimulatedServer server(10 * kMs, 100 * kMs);
  Pipeline p(server, 10);
  EndpointSignals s;
  for (int i = 0; i < 25; ++i) {
    server.healthy(100);
    s = p.tick(e);
  }
  EXPECT_DOUBLE_EQ(s.rps, 1000);
  EXPECT_EQ(s.eps, 0);
  EXPECT_DOUBLE_EQ(s.window_seconds, 1.0);
  EXPECT_EQ(s.window_requests, 1000u);
  ASSERT_TRUE(s.share_over_target && s.share_over_max);
  EXPECT_DOUBLE_EQ(*s.share_over_target, 0.02);
  EXPECT_DOUBLE_EQ(*s.share_over_max, 0.0);
  // 980 x 5 ms + 20 x 15 ms of latency per second: 5.2 in flight on average.
  EXPECT_DOUBLE_EQ(s.inflight_avg, 5.2);
  EXPECT_DOUBLE_EQ(s.inflight_last, 5.2);
  ASSERT_TRUE(s.concurrency);
  EXPECT_DOUBLE_EQ(*s.concurrency, 5.2 / 8);
  ASSERT_TRUE(s.p50_ms && s.p99_ms);
  EXPECT_NEAR(*s.p50_ms, 5.0, 5.0 / 32);
  EXPECT_NEAR(*s.p99_ms, 15.0, 15.0 / 32);
}

// The collapse: a healthy server stops answering while requests keep coming.
// The miss shares only rise, reach exactly 1.0 within max(threshold, window)
// and stay there for as long as the server stays stopped.
TEST(EndpointWindow, CollapseDrivesSharesToOneAndKeepsThemThere) {
  struct Case {
    const char* name;
    std::size_t n;  // window, in 100 ms intervals
    int64_t target_ms, max_ms;
    uint64_t client_timeout_ms;  // 0: clients wait forever
  } cases[] = {
      {"1 s window, clients give up after 300 ms", 10, 10, 100, 300},
      {"1 s window, clients wait", 10, 10, 100, 0},
      {"300 ms window", 3, 10, 100, 0},
      {"single-interval window", 1, 10, 100, 250},
      {"threshold longer than the window", 3, 500, 1000, 2500},
  };
  constexpr int kTickMs = 100;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto e = endpoint(0, std::chrono::milliseconds(c.target_ms), std::chrono::milliseconds(c.max_ms));
    SimulatedServer server(static_cast<uint64_t>(c.target_ms * kMs), static_cast<uint64_t>(c.max_ms * kMs));
    Pipeline p(server, c.n);
    EndpointSignals s;
    for (std::size_t i = 0; i < 3 * c.n + 2; ++i) {
      server.healthy(kTickMs);
      s = p.tick(e);
    }
    ASSERT_TRUE(s.share_over_target && s.share_over_max);
    ASSERT_LT(*s.share_over_target, 0.05) << "healthy before the collapse";
    ASSERT_EQ(*s.share_over_max, 0.0);

    // Within max(threshold, window): the threshold rounded up to ticks, plus
    // the tick in which the first request ages past it.
    const auto n = static_cast<int>(c.n);
    const int target_by = std::max(n, static_cast<int>(c.target_ms) / kTickMs + 1);
    const int max_by = std::max(n, static_cast<int>(c.max_ms) / kTickMs + 1);
    double last_target = *s.share_over_target, last_max = *s.share_over_max;
    double last_inflight = s.inflight_now;
    int target_at = -1, max_at = -1;
    const int ticks = std::max(target_by, max_by) + 4 * n + 10;
    for (int i = 1; i <= ticks; ++i) {
      server.stopped(kTickMs, c.client_timeout_ms * static_cast<uint64_t>(kMs));
      s = p.tick(e);
      ASSERT_TRUE(s.share_over_target && s.share_over_max) << "tick " << i;
      EXPECT_GE(*s.share_over_target, last_target) << "share_over_target fell at collapse tick " << i;
      EXPECT_GE(*s.share_over_max, last_max) << "share_over_max fell at collapse tick " << i;
      EXPECT_LE(*s.share_over_target, 1.0) << i;
      if (c.client_timeout_ms == 0) {
        EXPECT_GT(s.inflight_now, last_inflight) << "the load only grows: tick " << i;
      }
      last_target = *s.share_over_target;
      last_max = *s.share_over_max;
      last_inflight = s.inflight_now;
      if (target_at < 0 && *s.share_over_target == 1.0) target_at = i;
      if (max_at < 0 && *s.share_over_max == 1.0) max_at = i;
      if (target_at > 0) {
        EXPECT_EQ(*s.share_over_target, 1.0) << "left 1.0 at tick " << i;
      }
      if (max_at > 0) {
        EXPECT_EQ(*s.share_over_max, 1.0) << "left 1.0 at tick " << i;
      }
      if (i >= n) {
        EXPECT_EQ(s.rps, 0) << "no completions left in the window at tick " << i;
        EXPECT_FALSE(s.p50_ms) << i;
      }
    }
    ASSERT_GT(target_at, 0) << "share_over_target never reached 1.0";
    ASSERT_GT(max_at, 0) << "share_over_max never reached 1.0";
    EXPECT_LE(target_at, target_by);
    EXPECT_LE(max_at, max_by);
    EXPECT_GT(s.inflight_avg, 1.0) << "the integral sees the pile-up";
  }
}

// ===========================================================================
// 2d. window_intervals, endpoint_composite

TEST(WindowIntervals, Table) {
  using std::chrono::nanoseconds;
  struct Case {
    nanoseconds interval, smoothing;
    std::size_t expected;
  } cases[] = {
      {100ms, 1s, 10},   {100ms, 0ns, 1},  {100ms, 100ms, 1}, {100ms, 50ms, 1},
      {100ms, 250ms, 3}, {100ms, 240ms, 2}, {1s, 60s, 60},    {0ns, 1s, 1},
      {-5ms, 1s, 1},     {250ms, 1s, 4},   {30ms, 1s, 33},
  };
  for (const auto& c : cases)
    EXPECT_EQ(window_intervals(c.interval, c.smoothing), c.expected)
        << c.interval.count() << "ns / " << c.smoothing.count() << "ns";
}

TEST(EndpointComposite, LargestAvailable) {
  struct Case {
    const char* name;
    std::optional<double> target, max, concurrency;
    std::optional<double> expected;
  } cases[] = {
      {"nothing", std::nullopt, std::nullopt, std::nullopt, std::nullopt},
      {"target only", 0.3, std::nullopt, std::nullopt, 0.3},
      {"max only", std::nullopt, 0.2, std::nullopt, 0.2},
      {"concurrency only", std::nullopt, std::nullopt, 0.7, 0.7},
      {"target largest", 0.9, 0.4, 0.1, 0.9},
      {"max largest", 0.1, 0.4, 0.3, 0.4},
      {"concurrency largest", 0.1, 0.0, 0.8, 0.8},
      {"all zero is zero, not absent", 0.0, 0.0, std::nullopt, 0.0},
      {"concurrency above 1 is kept", 0.5, 0.1, 1.75, 1.75},
  };
  for (const auto& c : cases) {
    EndpointSignals s;
    s.share_over_target = c.target;
    s.share_over_max = c.max;
    s.concurrency = c.concurrency;
    EXPECT_EQ(endpoint_composite(s), c.expected) << c.name;
  }
}

TEST(ConcurrencyShare, BoundedShareOfTheDeclaredMaximum) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    const char* name;
    double avg, end;  // time-averaged over the interval, at its end
    uint32_t max_concurrency;
    std::optional<double> expected;
  } cases[] = {
      {"not declared: no signal", 5, 5, 0, std::nullopt},
      {"idle", 0, 0, 16, 0.0},
      {"light load: the average, not the end's 0", 0.4, 0, 16, 0.025},
      {"the average, not the end's 3", 8, 3, 16, 0.5},
      {"the average, not the end's 30", 12.8, 30, 16, 0.8},
      {"the declared maximum in use", 16, 2, 16, 1.0},
      {"a queue: bounded", 17, 17, 16, 1.0},
      {"a queue of 100: still 1, not 7.25", 116, 120, 16, 1.0},
      {"a queue that drained: the end", 29, 5, 16, 5.0 / 16},
      {"a queue that drained completely", 29, 0, 16, 0.0},
      {"a queue draining, still above the maximum at the end", 40, 20, 16, 1.0},
      {"max_concurrency 1", 0.5, 0, 1, 0.5},
      {"max_concurrency 1, busy", 1, 1, 1, 1.0},
      {"a large maximum", 3, 3, 1000000, 3e-6},
      {"negative: 0", -1, 0, 16, 0.0},
      {"NaN average: 0", nan, 0, 16, 0.0},
      {"NaN end: the average", 20, nan, 16, 1.0},
      {"infinite: 1", inf, inf, 16, 1.0},
  };
  for (const auto& c : cases) EXPECT_EQ(concurrency_share(c.avg, c.end, c.max_concurrency), c.expected) << c.name;
}

// The signal follows the last interval, not the window, and once a queue
// was there, no more than the count at its end: a queue that has emptied
// stops shedding at the next report, while inflight_avg still remembers it
// for the rest of the window.
TEST(EndpointWindow, ConcurrencyFollowsTheLastInterval) {
  const auto e = endpoint(16);
  EndpointWindow w(5);
  struct Step {
    double inflight;  // time-average over the 100 ms interval
    uint64_t at_end;  // in flight at its end
    double expected_concurrency, expected_avg;
  } steps[] = {
      {0.4, 0, 0.025, 0.4},      // baseline: the average
      {8, 29, 0.5, 4.2},         // a queue starts: the average
      {29, 58, 1.0, 12.47},      // bounded at 1
      {58, 5, 5.0 / 16, 23.85},  // drained but for 5: the end, the window's average lags
      {20, 0, 0.0, 23.08},       // drained
      {1, 2, 1.0 / 16, 23.2},    // the baseline's interval left the window
  };
  for (const auto& st : steps) {
    w.add(iv(0.1, 100, 0, 0, 0, 0, st.inflight * 0.1e9), st.at_end, 0, 0);
    const auto s = w.signals(e);
    ASSERT_TRUE(s.concurrency);
    EXPECT_DOUBLE_EQ(*s.concurrency, st.expected_concurrency) << st.inflight << ", " << st.at_end << " at the end";
    EXPECT_DOUBLE_EQ(s.inflight_last, st.inflight);
    EXPECT_NEAR(s.inflight_avg, st.expected_avg, 0.01) << st.inflight;
  }
  // A queue still there at the end, but not read yet: 2 read, 30 pending.
  w.add(iv(0.1, 100, 0, 0, 0, 0, 40 * 0.1e9), 2, 0, 0, 30);
  EXPECT_DOUBLE_EQ(*w.signals(e).concurrency, 1.0) << "the requests not read yet are in flight at the end too";
  w.add(iv(0.1, 100, 0, 0, 0, 0, 40 * 0.1e9), 2, 0, 0, 6);
  EXPECT_DOUBLE_EQ(*w.signals(e).concurrency, 8.0 / 16);
}

// ===========================================================================
// 3. Reports

ReportMeta meta(bool stopped = false) {
  ReportMeta m;
  m.timestamp_ms = 1'700'000'000'123;
  m.seq = 42;
  m.interval_ms = 100;
  m.stopped = stopped;
  return m;
}

void expect_meta(const orca::Report& r, bool stopped) {
  const auto md = orca::metadata_of(r);
  ASSERT_TRUE(md) << md.error().message;
  EXPECT_EQ(md->timestamp_ms, 1'700'000'000'123);
  EXPECT_EQ(md->seq, 42u);
  EXPECT_EQ(md->interval_ms, 100);
  EXPECT_EQ(md->stopped, stopped);
  EXPECT_EQ(r.named_metrics().contains(std::string(orca::kStoppedKey)), stopped);
}

std::vector<std::string> keys(const google::protobuf::Map<std::string, double>& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m) out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

EndpointSignals full_signals() {
  EndpointSignals s;
  s.rps = 1234.5;
  s.eps = 3.25;
  s.inflight_now = 7;
  s.inflight_avg = 5.5;
  s.p50_ms = 4.8;
  s.p90_ms = 9.5;
  s.p99_ms = 31.0;
  s.share_over_target = 0.125;
  s.share_over_max = 0.0625;
  s.concurrency = 5.5 / 64;
  s.window_requests = 12345;
  s.window_seconds = 1.0;
  return s;
}

TEST(EndpointReport, WithSignals) {
  const auto e = endpoint(64, 10ms, 500ms);
  const auto s = full_signals();
  const auto r = build_endpoint_report(e, &s, meta());
  ASSERT_TRUE(orca::validate_report(r)) << orca::validate_report(r).error().message;
  expect_meta(r, false);

  EXPECT_EQ(keys(r.utilization()),
            (std::vector<std::string>{"concurrency", "latency.slo_max", "latency.slo_target"}));
  EXPECT_DOUBLE_EQ(r.utilization().at("latency.slo_target"), 0.125);
  EXPECT_DOUBLE_EQ(r.utilization().at("latency.slo_max"), 0.0625);
  EXPECT_DOUBLE_EQ(r.utilization().at("concurrency"), 5.5 / 64);
  EXPECT_DOUBLE_EQ(r.application_utilization(), 0.125) << "the largest";
  EXPECT_DOUBLE_EQ(r.rps_fractional(), 1234.5);
  EXPECT_DOUBLE_EQ(r.eps(), 3.25);
  EXPECT_EQ(r.cpu_utilization(), 0);
  EXPECT_EQ(r.mem_utilization(), 0);

  struct Named {
    const char* key;
    double value;
  } named[] = {
      {"headroom.inflight", 7},
      {"headroom.inflight.avg", 5.5},
      {"headroom.concurrency", 5.5 / 64},
      {"headroom.latency.p50_ms", 4.8},
      {"headroom.latency.p90_ms", 9.5},
      {"headroom.latency.p99_ms", 31.0},
      {"headroom.window.requests", 12345},
      {"headroom.window.seconds", 1.0},
      {"headroom.slo.target_ms", 10},
      {"headroom.slo.max_ms", 500},
  };
  for (const auto& n : named) {
    ASSERT_TRUE(r.named_metrics().contains(std::string(n.key))) << n.key;
    EXPECT_DOUBLE_EQ(r.named_metrics().at(std::string(n.key)), n.value) << n.key;
  }
  EXPECT_FALSE(r.named_metrics().contains(std::string(kEbpfUnavailableKey)));
}

TEST(EndpointReport, UtilizationTable) {
  struct Case {
    const char* name;
    uint32_t max_concurrency;
    std::optional<double> target, max, concurrency;
    std::vector<std::string> keys;
    double u_target, u_max, u_concurrency;  // expected utilization values (when keyed)
    double app;
  } cases[] = {
      {"no concurrency declared: no key", 0, 0.3, 0.1, std::nullopt,
       {"latency.slo_max", "latency.slo_target"}, 0.3, 0.1, 0, 0.3},
      {"concurrency the largest", 8, 0.3, 0.1, 0.75,
       {"concurrency", "latency.slo_max", "latency.slo_target"}, 0.3, 0.1, 0.75, 0.75},
      {"concurrency above 1: clamped in utilization, composite keeps it", 8, 0.3, 0.1, 2.5,
       {"concurrency", "latency.slo_max", "latency.slo_target"}, 0.3, 0.1, 1.0, 2.5},
      {"shares above 1 clamp", 0, 1.5, 1.25, std::nullopt, {"latency.slo_max", "latency.slo_target"}, 1.0, 1.0, 0,
       1.5},
      {"no requests yet: no share keys", 8, std::nullopt, std::nullopt, 0.25, {"concurrency"}, 0, 0, 0.25, 0.25},
      {"nothing at all", 0, std::nullopt, std::nullopt, std::nullopt, {}, 0, 0, 0, 0},
  };
  for (const auto& c : cases) {
    EndpointSignals s;
    s.share_over_target = c.target;
    s.share_over_max = c.max;
    s.concurrency = c.concurrency;
    const auto r = build_endpoint_report(endpoint(c.max_concurrency), &s, meta());
    ASSERT_TRUE(orca::validate_report(r)) << c.name;
    EXPECT_EQ(keys(r.utilization()), c.keys) << c.name;
    for (const auto& [k, v] : r.utilization()) {
      EXPECT_GE(v, 0.0) << c.name << " " << k;
      EXPECT_LE(v, 1.0) << c.name << " " << k;
    }
    if (c.target) {
      EXPECT_DOUBLE_EQ(r.utilization().at("latency.slo_target"), c.u_target) << c.name;
    }
    if (c.max) {
      EXPECT_DOUBLE_EQ(r.utilization().at("latency.slo_max"), c.u_max) << c.name;
    }
    if (c.concurrency) {
      EXPECT_DOUBLE_EQ(r.utilization().at("concurrency"), c.u_concurrency) << c.name;
    }
    EXPECT_EQ(r.named_metrics().contains("headroom.concurrency"), c.concurrency.has_value()) << c.name;
    EXPECT_DOUBLE_EQ(r.application_utilization(), c.app) << c.name;
  }
}

TEST(EndpointReport, FromAWindowWithoutDeclaredConcurrency) {
  EndpointWindow w(10);
  w.add(iv(0.1, 100, 4, 1, 0, 2, 0.5e9), 3, 0, 0);
  const auto e = endpoint(0, 10ms, 100ms);
  const auto s = w.signals(e);
  const auto r = build_endpoint_report(e, &s, meta(true));
  ASSERT_TRUE(orca::validate_report(r));
  expect_meta(r, true);
  EXPECT_EQ(keys(r.utilization()), (std::vector<std::string>{"latency.slo_max", "latency.slo_target"}));
  EXPECT_DOUBLE_EQ(r.utilization().at("latency.slo_target"), 0.04);
  EXPECT_DOUBLE_EQ(r.utilization().at("latency.slo_max"), 0.01);
  EXPECT_DOUBLE_EQ(r.application_utilization(), 0.04);
  EXPECT_DOUBLE_EQ(r.rps_fractional(), 1000);
  EXPECT_DOUBLE_EQ(r.eps(), 20);
  EXPECT_DOUBLE_EQ(r.named_metrics().at("headroom.inflight"), 3);
  EXPECT_DOUBLE_EQ(r.named_metrics().at("headroom.inflight.avg"), 5);
  EXPECT_FALSE(r.named_metrics().contains("headroom.concurrency"));
  EXPECT_FALSE(r.named_metrics().contains("headroom.latency.p50_ms")) << "no histogram in the interval";
  EXPECT_DOUBLE_EQ(r.named_metrics().at("headroom.slo.target_ms"), 10);
  EXPECT_DOUBLE_EQ(r.named_metrics().at("headroom.slo.max_ms"), 100);
}

TEST(EndpointReport, WithoutSignalsOnlyMetadataAndUnavailable) {
  for (bool stopped : {false, true}) {
    const auto r = build_endpoint_report(endpoint(64), nullptr, meta(stopped));
    ASSERT_TRUE(orca::validate_report(r));
    expect_meta(r, stopped);
    EXPECT_TRUE(r.utilization().empty());
    EXPECT_EQ(r.application_utilization(), 0);
    EXPECT_EQ(r.rps_fractional(), 0);
    EXPECT_EQ(r.eps(), 0);
    std::vector<std::string> expected = {std::string(kEbpfUnavailableKey), std::string(orca::kIntervalMsKey),
                                         std::string(orca::kSeqKey), std::string(orca::kTimestampMsKey)};
    if (stopped) expected.emplace_back(orca::kStoppedKey);
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(keys(r.named_metrics()), expected);
    EXPECT_EQ(r.named_metrics().at(std::string(kEbpfUnavailableKey)), 1.0);
  }
}

TEST(NodeReport, EndpointSignalJoinsOnlyWithIncludeEndpoints) {
  struct Case {
    const char* name;
    bool include_endpoints;
    CompositeMethod method;
    double endpoint_value;
    bool keyed;
    double utilization;  // of "endpoint.api", when keyed
    double app;
  } cases[] = {
      {"off: ignored even when the largest", false, CompositeMethod::max, 0.9, false, 0, 0.5},
      {"on: the largest wins", true, CompositeMethod::max, 0.9, true, 0.9, 0.9},
      {"on: smaller than cpu", true, CompositeMethod::max, 0.2, true, 0.2, 0.5},
      {"on: above 1 clamps in utilization, not in the composite", true, CompositeMethod::max, 1.5, true, 1.0, 1.5},
      {"off, mean", false, CompositeMethod::mean, 0.7, false, 0, 0.4},
      {"on, mean", true, CompositeMethod::mean, 0.7, true, 0.7, 0.5},
  };
  for (const auto& c : cases) {
    Config config;
    config.include_endpoints = c.include_endpoints;
    config.composite = c.method;
    NodeSample sample;
    sample.signals["cpu"] = 0.5;
    sample.signals["memory"] = 0.3;
    sample.signals["endpoint.api"] = c.endpoint_value;
    sample.signals["bogus"] = 0.99;  // neither enabled nor an endpoint: never published
    sample.raw["headroom.cpu.busy"] = 0.5;
    const auto r = build_node_report(sample, config, meta());
    ASSERT_TRUE(orca::validate_report(r)) << c.name;
    expect_meta(r, false);
    EXPECT_EQ(r.utilization().contains("endpoint.api"), c.keyed) << c.name;
    if (c.keyed) {
      EXPECT_DOUBLE_EQ(r.utilization().at("endpoint.api"), c.utilization) << c.name;
    }
    EXPECT_FALSE(r.utilization().contains("bogus")) << c.name;
    EXPECT_DOUBLE_EQ(r.utilization().at("cpu"), 0.5) << c.name;
    EXPECT_DOUBLE_EQ(r.cpu_utilization(), 0.5) << c.name;
    EXPECT_DOUBLE_EQ(r.mem_utilization(), 0.3) << c.name;
    EXPECT_DOUBLE_EQ(r.application_utilization(), c.app) << c.name;
    EXPECT_DOUBLE_EQ(r.named_metrics().at("headroom.cpu.busy"), 0.5) << c.name;
  }
}

}  // namespace
}  // namespace headroom::agent
