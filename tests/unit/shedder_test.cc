// SPDX-License-Identifier: Apache-2.0
// The reference shedder: exact values at known points (table), and the
// properties the model promises checked over a dense grid of utilizations,
// every bucket, every priority and several threshold sets.
#include "headroom/orca/shedder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace headroom::orca {
namespace {

constexpr Bucket kBuckets[] = {Bucket::CRITICAL, Bucket::DEGRADED, Bucket::BEST_EFFORT, Bucket::BULK};
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const SignalThresholds kCpu{0.6, 0.8, 1.5};  // the defaults for the CPU signals

// ---------------------------------------------------------------- table

struct Row {
  double u;
  Bucket bucket;
  double p;
};

TEST(ShedderTable, BucketsWithCpuDefaults) {
  // Windows: BULK [0.6, 0.6667], BEST_EFFORT [0.6667, 0.7333], DEGRADED
  // [0.7333, 0.8], CRITICAL [0.8, 1.5]. x = 1/4, 1/2, 3/4 give 1/64, 1/8, 27/64.
  const double third = 0.2 / 3;
  const Row rows[] = {
      {0.0, Bucket::BULK, 0.0},
      {0.6, Bucket::BULK, 0.0},
      {0.6 + third / 4, Bucket::BULK, 1.0 / 64},
      {0.6 + third / 2, Bucket::BULK, 1.0 / 8},
      {0.65, Bucket::BULK, 27.0 / 64},
      {0.7, Bucket::BULK, 1.0},
      {0.7, Bucket::BEST_EFFORT, 1.0 / 8},  // the middle of the second third
      {0.7, Bucket::DEGRADED, 0.0},
      {0.7, Bucket::CRITICAL, 0.0},
      {0.75, Bucket::DEGRADED, 1.0 / 64},
      {0.8 - third / 2, Bucket::DEGRADED, 1.0 / 8},
      {0.8, Bucket::DEGRADED, 1.0},
      {0.8, Bucket::CRITICAL, 0.0},
      {0.9, Bucket::CRITICAL, 1.0 / 343},  // x = 1/7
      {0.975, Bucket::CRITICAL, 1.0 / 64},
      {1.15, Bucket::CRITICAL, 1.0 / 8},
      {1.325, Bucket::CRITICAL, 27.0 / 64},
      {1.5, Bucket::CRITICAL, 1.0},
      {3.0, Bucket::CRITICAL, 1.0},
  };
  for (const Row& r : rows)
    EXPECT_NEAR(shed_probability(r.u, r.bucket, kCpu), r.p, 1e-12) << "u=" << r.u << " " << bucket_name(r.bucket);
}

TEST(ShedderTable, BoundedSignalDefaults) {
  const SignalThresholds t = default_thresholds("mem_utilization");
  EXPECT_NEAR(shed_probability(0.9, Bucket::CRITICAL, t), 1.0 / 8, 1e-12);   // middle of [0.8, 1.0]
  EXPECT_NEAR(shed_probability(0.85, Bucket::CRITICAL, t), 1.0 / 64, 1e-12);
  EXPECT_EQ(shed_probability(1.0, Bucket::CRITICAL, t), 1.0);
}

TEST(ShedderTable, Priorities) {
  // Non-critical levels are 0.2/75 wide, CRITICAL levels 0.7/25 = 0.028.
  const double w = 0.2 / 75;
  struct PRow {
    double u;
    int priority;
    double p;
  };
  const PRow rows[] = {
      {0.6 + w / 2, 100, 1.0 / 8},      // least important: the very first level
      {0.6 + w, 100, 1.0},
      {0.6 + w, 99, 0.0},
      {0.6 + 1.5 * w, 99, 1.0 / 8},
      {0.6 + 24.5 * w, 76, 1.0 / 8},    // last level of BULK
      {0.6 + 25.5 * w, 75, 1.0 / 8},    // first level of BEST_EFFORT
      {0.8 - w / 2, 26, 1.0 / 8},       // last non-critical level
      {0.814, 25, 1.0 / 8},             // first CRITICAL level [0.8, 0.828]
      {1.486, 1, 1.0 / 8},              // most important: [1.472, 1.5]
      {1.4999, 2, 1.0},
      {1.472, 1, 0.0},
  };
  for (const PRow& r : rows)
    EXPECT_NEAR(shed_probability(r.u, r.priority, kCpu), r.p, 1e-9) << "u=" << r.u << " priority " << r.priority;
}

TEST(ShedderTable, PriorityMapping) {
  EXPECT_EQ(bucket_of_priority(1), Bucket::CRITICAL);
  EXPECT_EQ(bucket_of_priority(25), Bucket::CRITICAL);
  EXPECT_EQ(bucket_of_priority(26), Bucket::DEGRADED);
  EXPECT_EQ(bucket_of_priority(50), Bucket::DEGRADED);
  EXPECT_EQ(bucket_of_priority(51), Bucket::BEST_EFFORT);
  EXPECT_EQ(bucket_of_priority(75), Bucket::BEST_EFFORT);
  EXPECT_EQ(bucket_of_priority(76), Bucket::BULK);
  EXPECT_EQ(bucket_of_priority(100), Bucket::BULK);
  EXPECT_EQ(bucket_of_priority(0), Bucket::CRITICAL);  // clamped
  EXPECT_EQ(bucket_of_priority(-7), Bucket::CRITICAL);
  EXPECT_EQ(bucket_of_priority(1000), Bucket::BULK);
  EXPECT_EQ(priority_range(Bucket::BEST_EFFORT).first, 51);
  EXPECT_EQ(priority_range(Bucket::BEST_EFFORT).last, 75);
  // Out-of-range priorities behave as the nearest valid one.
  for (double u : {0.61, 0.7, 0.9, 1.49}) {
    EXPECT_EQ(shed_probability(u, 0, kCpu), shed_probability(u, 1, kCpu));
    EXPECT_EQ(shed_probability(u, 101, kCpu), shed_probability(u, 100, kCpu));
  }
}

TEST(ShedderTable, Names) {
  EXPECT_EQ(bucket_name(Bucket::BEST_EFFORT), "BEST_EFFORT");
  EXPECT_EQ(parse_bucket("critical"), Bucket::CRITICAL);
  EXPECT_EQ(parse_bucket("Best-Effort"), Bucket::BEST_EFFORT);
  EXPECT_EQ(parse_bucket("BULK"), Bucket::BULK);
  EXPECT_EQ(parse_bucket("bulky"), std::nullopt);
  EXPECT_EQ(parse_bucket(""), std::nullopt);
  EXPECT_EQ(parse_stale_policy("fail-open"), StalePolicy::fail_open);
  EXPECT_EQ(parse_stale_policy("use_last"), StalePolicy::use_last);
  EXPECT_EQ(parse_stale_policy("never"), std::nullopt);
  EXPECT_EQ(stale_policy_name(StalePolicy::use_last), "use_last");
}

TEST(ShedderTable, DefaultThresholds) {
  for (const char* cpu : {"application_utilization", "cpu_utilization", "utilization.cpu"}) {
    const auto t = default_thresholds(cpu);
    EXPECT_EQ(t.shed_start, 0.6) << cpu;
    EXPECT_EQ(t.critical_start, 0.8) << cpu;
    EXPECT_EQ(t.all_shed, 1.5) << cpu;
  }
  for (const char* bounded : {"mem_utilization", "utilization.memory", "utilization.cpu.pressure",
                              "utilization.memory.pressure", "utilization.io.pressure", "utilization.latency.slo_max",
                              "utilization.concurrency"}) {
    const auto t = default_thresholds(bounded);
    EXPECT_EQ(t.shed_start, 0.6) << bounded;
    EXPECT_EQ(t.critical_start, 0.8) << bounded;
    EXPECT_EQ(t.all_shed, 1.0) << bounded;
  }
  const ShedderConfig config;
  ASSERT_EQ(config.signals.size(), 1u);
  EXPECT_EQ(config.signals[0].first, "application_utilization");
  EXPECT_EQ(config.signals[0].second.all_shed, 1.5);
  EXPECT_EQ(config.stale, StalePolicy::fail_open);
  EXPECT_TRUE(validate_config(config).ok());
}

// ---------------------------------------------------------------- properties

std::vector<SignalThresholds> threshold_sets() {
  std::vector<SignalThresholds> sets = {kCpu, {0.6, 0.8, 1.0}, {0.0, 0.75, 1.0}, {0.3, 0.31, 5.0}, {0.5, 0.9, 0.9001}};
  std::mt19937_64 rng(20240601);  // fixed seed: reproducible
  std::uniform_real_distribution<double> d(0.0, 1.0);
  for (int i = 0; i < 20; ++i) {
    const double s = d(rng) * 0.9;
    const double c = s + 0.001 + d(rng) * 0.5;
    sets.push_back({s, c, c + 0.001 + d(rng)});
  }
  for (const auto& t : sets) EXPECT_TRUE(validate_thresholds(t).ok());
  return sets;
}

// u from 0 to 2 in steps of 1/2000, plus every window edge and its neighbours.
std::vector<double> grid(const SignalThresholds& t) {
  std::vector<double> us;
  for (int i = 0; i <= 4000; ++i) us.push_back(i / 2000.0);
  auto add = [&](ShedWindow w) {
    for (double e : {w.start, w.end}) {
      us.push_back(e);
      us.push_back(std::nextafter(e, -kInf));
      us.push_back(std::nextafter(e, kInf));
    }
  };
  for (Bucket b : kBuckets) add(shed_window(b, t));
  for (int p = 1; p <= 100; ++p) add(shed_window(p, t));
  std::sort(us.begin(), us.end());
  return us;
}

TEST(ShedderProperty, RangeAndMonotonicInUtilization) {
  for (const auto& t : threshold_sets()) {
    const auto us = grid(t);
    for (Bucket b : kBuckets) {
      double prev = 0.0;
      for (double u : us) {
        const double p = shed_probability(u, b, t);
        ASSERT_GE(p, 0.0);
        ASSERT_LE(p, 1.0);
        ASSERT_GE(p, prev) << "u=" << u << " " << bucket_name(b);
        prev = p;
      }
    }
    for (int prio = 1; prio <= 100; ++prio) {
      double prev = 0.0;
      for (double u : us) {
        const double p = shed_probability(u, prio, t);
        ASSERT_GE(p, 0.0);
        ASSERT_LE(p, 1.0);
        ASSERT_GE(p, prev) << "u=" << u << " priority " << prio;
        prev = p;
      }
    }
  }
}

TEST(ShedderProperty, LessImportantNeverShedsLess) {
  for (const auto& t : threshold_sets()) {
    for (double u : grid(t)) {
      for (int i = 1; i < kBucketCount; ++i)
        ASSERT_GE(shed_probability(u, kBuckets[i], t), shed_probability(u, kBuckets[i - 1], t))
            << "u=" << u << " " << bucket_name(kBuckets[i]);
      for (int prio = 2; prio <= 100; ++prio)
        ASSERT_GE(shed_probability(u, prio, t), shed_probability(u, prio - 1, t)) << "u=" << u << " priority " << prio;
    }
  }
}

TEST(ShedderProperty, ExactZeroBelowAndOneAbove) {
  for (const auto& t : threshold_sets()) {
    for (double u : grid(t)) {
      for (Bucket b : kBuckets) {
        const auto w = shed_window(b, t);
        if (u <= t.shed_start || u <= w.start) {
          ASSERT_EQ(shed_probability(u, b, t), 0.0) << u;
        }
        if (u >= w.end || u >= t.all_shed) {
          ASSERT_EQ(shed_probability(u, b, t), 1.0) << u;
        }
      }
      for (int prio = 1; prio <= 100; ++prio) {
        const auto w = shed_window(prio, t);
        if (u <= t.shed_start || u <= w.start) {
          ASSERT_EQ(shed_probability(u, prio, t), 0.0) << u;
        }
        if (u >= w.end || u >= t.all_shed) {
          ASSERT_EQ(shed_probability(u, prio, t), 1.0) << u;
        }
      }
    }
    // Strictly inside a window something is shed (x^3 only underflows to 0
    // within a few ulps of the start): 1/8 at the middle.
    for (Bucket b : kBuckets) {
      const auto w = shed_window(b, t);
      EXPECT_NEAR(shed_probability(w.start + (w.end - w.start) / 2, b, t), 1.0 / 8, 1e-9) << bucket_name(b);
    }
    for (int prio = 1; prio <= 100; ++prio) {
      const auto w = shed_window(prio, t);
      EXPECT_NEAR(shed_probability(w.start + (w.end - w.start) / 2, prio, t), 1.0 / 8, 1e-6) << prio;
    }
    // Nothing critical before critical_start, everything at all_shed.
    EXPECT_EQ(shed_probability(t.critical_start, Bucket::CRITICAL, t), 0.0);
    EXPECT_EQ(shed_probability(t.critical_start, 26, t), 1.0);
    EXPECT_EQ(shed_probability(t.all_shed, 1, t), 1.0);
  }
}

TEST(ShedderProperty, EachLevelIsFullyShedBeforeTheNextStarts) {
  for (const auto& t : threshold_sets()) {
    // Windows tile [shed_start, all_shed] with shared edges, least important first.
    EXPECT_EQ(shed_window(Bucket::BULK, t).start, t.shed_start);
    EXPECT_EQ(shed_window(Bucket::DEGRADED, t).end, t.critical_start);
    EXPECT_EQ(shed_window(Bucket::CRITICAL, t).start, t.critical_start);
    EXPECT_EQ(shed_window(Bucket::CRITICAL, t).end, t.all_shed);
    for (int i = 1; i < kBucketCount; ++i)  // kBuckets[i] is less important than kBuckets[i - 1]
      EXPECT_EQ(shed_window(kBuckets[i], t).end, shed_window(kBuckets[i - 1], t).start) << i;
    EXPECT_EQ(shed_window(100, t).start, t.shed_start);
    EXPECT_EQ(shed_window(1, t).end, t.all_shed);
    for (int prio = 1; prio < 100; ++prio) {
      const auto more = shed_window(prio, t), less = shed_window(prio + 1, t);
      EXPECT_EQ(less.end, more.start) << prio;
      EXPECT_LT(more.start, more.end) << prio;
    }
    // A bucket's window is the union of its levels' windows.
    for (Bucket b : kBuckets) {
      const auto r = priority_range(b);
      EXPECT_EQ(shed_window(b, t).start, shed_window(r.last, t).start) << bucket_name(b);
      EXPECT_EQ(shed_window(b, t).end, shed_window(r.first, t).end) << bucket_name(b);
    }
    // And pointwise: wherever a level sheds anything, every less important one sheds all.
    for (double u : grid(t)) {
      for (int i = 1; i < kBucketCount; ++i)
        if (shed_probability(u, kBuckets[i - 1], t) > 0.0) {
          ASSERT_EQ(shed_probability(u, kBuckets[i], t), 1.0) << u;
        }
      for (int prio = 1; prio < 100; ++prio)
        if (shed_probability(u, prio, t) > 0.0) {
          ASSERT_EQ(shed_probability(u, prio + 1, t), 1.0) << u << " " << prio;
        }
    }
  }
}

TEST(ShedderProperty, BadUtilizationNeverCrashesNorGivesNaN) {
  for (const auto& t : threshold_sets()) {
    for (double u : {kNaN, -kNaN, -1.0, -kInf, -0.0, std::numeric_limits<double>::lowest(),
                     -std::numeric_limits<double>::denorm_min()}) {
      for (Bucket b : kBuckets) EXPECT_EQ(shed_probability(u, b, t), 0.0) << u;
      for (int prio = 1; prio <= 100; ++prio) EXPECT_EQ(shed_probability(u, prio, t), 0.0) << u;
    }
    for (double u : {kInf, std::numeric_limits<double>::max()}) {
      for (Bucket b : kBuckets) EXPECT_EQ(shed_probability(u, b, t), 1.0);
      for (int prio = 1; prio <= 100; ++prio) EXPECT_EQ(shed_probability(u, prio, t), 1.0);
    }
  }
  // Thresholds that skipped validation still give a number in [0, 1].
  for (const SignalThresholds& bad : {SignalThresholds{kNaN, kNaN, kNaN}, SignalThresholds{0.8, 0.6, 0.1},
                                      SignalThresholds{0.5, 0.5, 0.5}, SignalThresholds{-kInf, 0, kInf},
                                      SignalThresholds{-kInf, 0.5, 1.0}, SignalThresholds{0.6, 0.8, kInf}}) {
    for (double u : {kNaN, 0.0, 0.55, 0.7, 2.0}) {
      for (Bucket b : kBuckets) {
        const double p = shed_probability(u, b, bad);
        EXPECT_FALSE(std::isnan(p));
        EXPECT_GE(p, 0.0);
        EXPECT_LE(p, 1.0);
      }
    }
  }
}

TEST(ShedderProperty, InvalidThresholdsNameTheField) {
  struct Bad {
    SignalThresholds t;
    const char* field;
  };
  const Bad bad[] = {
      {{-0.1, 0.8, 1.0}, "shed_start"},     {{kNaN, 0.8, 1.0}, "shed_start"},
      {{kInf, 0.8, 1.0}, "shed_start"},     {{0.6, 0.6, 1.0}, "critical_start"},
      {{0.6, 0.5, 1.0}, "critical_start"},  {{0.6, kNaN, 1.0}, "critical_start"},
      {{0.6, 0.8, 0.8}, "all_shed"},        {{0.6, 0.8, 0.7}, "all_shed"},
      {{0.6, 0.8, kInf}, "all_shed"},       {{0.6, 0.8, kNaN}, "all_shed"},
  };
  for (const Bad& b : bad) {
    const auto r = validate_thresholds(b.t);
    ASSERT_FALSE(r.ok()) << b.field;
    EXPECT_EQ(r.error().message.rfind(b.field, 0), 0u) << r.error().message;
  }
  EXPECT_TRUE(validate_thresholds({0.0, 1e-9, 2e-9}).ok());
  EXPECT_TRUE(validate_thresholds({}).ok());

  ShedderConfig c;
  c.signals = {{"cpu_utilization", kCpu}, {"utilization.io.pressure", {0.6, 0.8, 0.7}}};
  auto r = validate_config(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("signals[1] (utilization.io.pressure): all_shed", 0), 0u) << r.error().message;

  c.signals = {{"cpu_utilization", kCpu}, {"cpu", kCpu}};
  r = validate_config(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("signals[1] (cpu): unknown signal"), std::string::npos) << r.error().message;

  c.signals = {{"utilization.", kCpu}};
  EXPECT_FALSE(validate_config(c).ok());

  c.signals = {{"mem_utilization", kCpu}, {"mem_utilization", kCpu}};
  r = validate_config(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("listed twice"), std::string::npos) << r.error().message;

  c.signals.clear();
  r = validate_config(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("signals"), std::string::npos);

  EXPECT_FALSE(Shedder::create(c).ok());
}

// ---------------------------------------------------------------- reports

Report make_report(double app, double cpu, double mem, std::vector<std::pair<std::string, double>> util = {}) {
  Report r;
  r.set_application_utilization(app);
  r.set_cpu_utilization(cpu);
  r.set_mem_utilization(mem);
  for (auto& [k, v] : util) (*r.mutable_utilization())[k] = v;
  return r;
}

TEST(ShedderReport, SignalValues) {
  const Report r = make_report(0.7, 1.2, 0.4, {{"io.pressure", 0.3}});
  EXPECT_EQ(signal_value(r, "application_utilization"), 0.7);
  EXPECT_EQ(signal_value(r, "cpu_utilization"), 1.2);
  EXPECT_EQ(signal_value(r, "mem_utilization"), 0.4);
  EXPECT_EQ(signal_value(r, "utilization.io.pressure"), 0.3);
  EXPECT_EQ(signal_value(r, "utilization.memory.pressure"), std::nullopt);
  EXPECT_EQ(signal_value(r, "io.pressure"), std::nullopt);
  EXPECT_EQ(signal_value(Report{}, "cpu_utilization"), 0.0);  // unset top-level field
}

TEST(ShedderReport, MaximumOverSignalsAbsentContributesZero) {
  ShedderConfig c;
  c.signals = {{"application_utilization", kCpu},
               {"utilization.memory.pressure", default_thresholds("utilization.memory.pressure")},
               {"utilization.io.pressure", default_thresholds("utilization.io.pressure")}};
  ASSERT_TRUE(validate_config(c).ok());
  const Report r = make_report(0.7, 0.7, 0.2, {{"io.pressure", 0.9}});  // no memory.pressure
  for (Bucket b : kBuckets) {
    const double expected =
        std::max(shed_probability(0.7, b, kCpu), shed_probability(0.9, b, default_thresholds("utilization.io.pressure")));
    EXPECT_EQ(shed_probability(r, b, c, false), expected) << bucket_name(b);
  }
  EXPECT_NEAR(shed_probability(r, Bucket::CRITICAL, c, false), 1.0 / 8, 1e-12);  // io.pressure: middle of [0.8, 1]
  for (int prio = 1; prio <= 100; ++prio)
    EXPECT_EQ(shed_probability(r, prio, c, false),
              std::max(shed_probability(0.7, prio, kCpu), shed_probability(0.9, prio, SignalThresholds{})));
  // A report without any configured signal sheds nothing.
  ShedderConfig only_absent;
  only_absent.signals = {{"utilization.concurrency", {}}};
  for (Bucket b : kBuckets) EXPECT_EQ(shed_probability(r, b, only_absent, false), 0.0);
}

TEST(ShedderReport, StaleNeverShedsCritical) {
  for (StalePolicy policy : {StalePolicy::fail_open, StalePolicy::use_last}) {
    ShedderConfig c;
    c.stale = policy;
    for (double u : {0.0, 0.7, 0.9, 1.2, 1.5, 10.0}) {
      const Report r = make_report(u, u, 0.1);
      EXPECT_EQ(shed_probability(r, Bucket::CRITICAL, c, true), 0.0) << u;
      for (int prio = 1; prio <= 25; ++prio) EXPECT_EQ(shed_probability(r, prio, c, true), 0.0) << u << " " << prio;
      for (Bucket b : {Bucket::DEGRADED, Bucket::BEST_EFFORT, Bucket::BULK}) {
        const double fresh = shed_probability(r, b, c, false);
        EXPECT_EQ(shed_probability(r, b, c, true), policy == StalePolicy::fail_open ? 0.0 : fresh) << u;
      }
      for (int prio = 26; prio <= 100; ++prio) {
        const double fresh = shed_probability(r, prio, c, false);
        EXPECT_EQ(shed_probability(r, prio, c, true), policy == StalePolicy::fail_open ? 0.0 : fresh) << u;
      }
    }
  }
}

TEST(ShedderReport, NaNInAnUnvalidatedReport) {
  ShedderConfig c;
  c.signals = {{"cpu_utilization", kCpu}, {"utilization.cpu", kCpu}};
  const Report r = make_report(kNaN, kNaN, kNaN, {{"cpu", -3.0}});
  for (Bucket b : kBuckets) EXPECT_EQ(shed_probability(r, b, c, false), 0.0);
}

TEST(ShedderReport, Summary) {
  ShedderConfig c;
  c.signals = {{"application_utilization", kCpu}, {"utilization.io.pressure", SignalThresholds{}}};
  const Report r = make_report(0.7, 0.7, 0.2);
  const auto s = summarize_shedding(r, c, false);
  ASSERT_EQ(s.signals.size(), 2u);
  EXPECT_EQ(s.signals[0].name, "application_utilization");
  EXPECT_EQ(s.signals[0].value, 0.7);
  EXPECT_EQ(s.signals[1].value, std::nullopt);
  for (Bucket b : kBuckets) {
    const auto i = static_cast<std::size_t>(b);
    EXPECT_EQ(s.probability[i], shed_probability(r, b, c, false));
    EXPECT_EQ(s.signals[1].probability[i], 0.0);
  }
  EXPECT_EQ(s.probability[static_cast<std::size_t>(Bucket::BULK)], 1.0);
  EXPECT_NEAR(s.probability[static_cast<std::size_t>(Bucket::BEST_EFFORT)], 1.0 / 8, 1e-12);

  const auto stale = summarize_shedding(r, c, true);
  EXPECT_TRUE(stale.stale);
  for (double p : stale.probability) EXPECT_EQ(p, 0.0);
  EXPECT_EQ(stale.signals[0].probability, s.signals[0].probability) << "per signal: before the policy";
}

// ---------------------------------------------------------------- Shedder

TEST(ShedderClass, MatchesTheFreeFunctions) {
  ShedderConfig c;
  c.signals = {{"cpu_utilization", kCpu}, {"utilization.memory", SignalThresholds{}}};
  c.stale = StalePolicy::use_last;
  auto made = Shedder::create(c);
  ASSERT_TRUE(made.ok()) << made.error().message;
  Shedder& s = *made;
  for (Bucket b : kBuckets) EXPECT_EQ(s.probability(b), 0.0) << "nothing known yet";
  for (double u : {0.3, 0.62, 0.7, 0.79, 0.9, 1.3, 2.0}) {
    const Report r = make_report(0.0, u, 0.0, {{"memory", u / 2}});
    for (bool stale : {false, true}) {
      s.update(r, stale);
      EXPECT_EQ(s.stale(), stale);
      for (Bucket b : kBuckets) EXPECT_EQ(s.probability(b), shed_probability(r, b, c, stale)) << u;
      for (int prio = 1; prio <= 100; ++prio)
        EXPECT_EQ(s.probability(prio), shed_probability(r, prio, c, stale)) << u << " " << prio;
    }
  }
  EXPECT_EQ(s.probability(0), s.probability(1));
  EXPECT_EQ(s.probability(500), s.probability(100));
}

TEST(ShedderClass, ShouldDrop) {
  Shedder s;  // default config: application_utilization, fail_open
  s.update(make_report(0.7, 0.7, 0.1), false);
  EXPECT_TRUE(s.should_drop(0.0, Bucket::BULK));
  EXPECT_TRUE(s.should_drop(std::nextafter(1.0, 0.0), Bucket::BULK));
  EXPECT_TRUE(s.should_drop(0.1, Bucket::BEST_EFFORT));   // p = 1/8
  EXPECT_FALSE(s.should_drop(0.2, Bucket::BEST_EFFORT));
  EXPECT_FALSE(s.should_drop(0.0, Bucket::DEGRADED));      // p = 0 drops nothing
  EXPECT_FALSE(s.should_drop(0.0, Bucket::CRITICAL));
  EXPECT_TRUE(s.should_drop(0.5, 90));
  EXPECT_FALSE(s.should_drop(0.0, 10));
  EXPECT_FALSE(s.should_drop(kNaN, Bucket::BULK)) << "NaN fails open";

  s.mark_stale();  // the file could not be read again: fail open
  for (Bucket b : kBuckets) EXPECT_FALSE(s.should_drop(0.0, b));
  s.update(make_report(0.7, 0.7, 0.1), false);
  EXPECT_TRUE(s.should_drop(0.0, Bucket::BULK));
}

TEST(ShedderClass, UpdateAtJudgesStaleness) {
  Report r = make_report(2.0, 2.0, 0.1);
  auto& nm = *r.mutable_named_metrics();
  const int64_t t0 = 1'700'000'000'000;
  nm[std::string(kTimestampMsKey)] = static_cast<double>(t0);
  nm[std::string(kSeqKey)] = 3;
  nm[std::string(kIntervalMsKey)] = 100;
  ShedderConfig c;
  c.stale = StalePolicy::use_last;
  auto s = Shedder::create(c);
  ASSERT_TRUE(s.ok());
  s->update_at(r, t0 + 100);
  EXPECT_FALSE(s->stale());
  EXPECT_EQ(s->probability(Bucket::CRITICAL), 1.0);
  s->update_at(r, t0 + 60'000);
  EXPECT_TRUE(s->stale());
  EXPECT_EQ(s->probability(Bucket::CRITICAL), 0.0);
  EXPECT_EQ(s->probability(Bucket::DEGRADED), 1.0) << "use_last";
}

}  // namespace
}  // namespace headroom::orca
