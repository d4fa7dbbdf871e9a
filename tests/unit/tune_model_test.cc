// SPDX-License-Identifier: Apache-2.0
// `headroomctl tune recommend`'s rules without I/O (agent/ctl/tune_model.h):
// peak steps, the weighted mean of window percentiles, histogram quantiles,
// the thresholds from an expected level, durations with 3 significant
// digits, the query step, and the recommendation per endpoint.
#include "agent/ctl/tune_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "agent/config/config.h"

namespace headroom::ctl::tune {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// -- thresholds ----------------------------------------------------------------

struct LevelCase {
  double level;
  std::string_view signal;
  double shed_start, critical_start, all_shed;
};

class Thresholds : public ::testing::TestWithParam<LevelCase> {};

TEST_P(Thresholds, StartAtLPlusAFifthOfTheRestCriticalAtThreeFifths) {
  const LevelCase& c = GetParam();
  const orca::SignalThresholds t = thresholds_for_level(c.level, c.signal);
  EXPECT_DOUBLE_EQ(t.shed_start, c.shed_start) << c.level;
  EXPECT_DOUBLE_EQ(t.critical_start, c.critical_start) << c.level;
  EXPECT_DOUBLE_EQ(t.all_shed, c.all_shed) << c.level;
  EXPECT_TRUE(orca::validate_thresholds(t)) << c.level;
}

const LevelCase kLevelCases[] = {
    {0.5, kShedCpu, 0.6, 0.8, 1.5},  // autoscale at 50 %: shed from 60 %, CRITICAL from 80 %
    {0.7, kShedCpu, 0.76, 0.88, 1.5},
    {0.1, kShedSloTarget, 0.28, 0.64, 1.0},
    {0.01, kShedSloMax, 0.208, 0.604, 1.0},
    {0.0, kShedConcurrency, 0.2, 0.6, 1.0},
    {1.2, kShedSloTarget, 0.96, 0.98, 1.0},  // clamped to 0.95: the order holds
    {-1, kShedSloTarget, 0.2, 0.6, 1.0},
    {kNaN, kShedCpu, 0.6, 0.8, 1.5},  // unknown: 0.5
};
INSTANTIATE_TEST_SUITE_P(Table, Thresholds, ::testing::ValuesIn(kLevelCases));

// -- histogram quantiles ------------------------------------------------------------

// 10 000 requests: 100 up to 5 ms, 900 more to 10 ms, 4 000 to 25 ms, 4 000
// to 50 ms, 950 to 100 ms, 50 beyond.
const Histogram kKnown{{0.005, 0.01, 0.025, 0.05, 0.1, kInf}, {100, 1000, 5000, 9000, 9950, 10000}};

struct QuantileCase {
  double q;
  double expected;
};
class HistogramQuantile : public ::testing::TestWithParam<QuantileCase> {};

TEST_P(HistogramQuantile, InterpolatesInsideTheBucketAsPrometheusDoes) {
  const auto got = histogram_quantile(kKnown, GetParam().q);
  ASSERT_TRUE(got.has_value());
  EXPECT_NEAR(*got, GetParam().expected, 1e-12) << GetParam().q;
}

const QuantileCase kQuantileCases[] = {
    {0.005, 0.0025},                         // rank 50 of the first bucket's 100, from 0
    {0.05, 0.005 + 0.005 * 400.0 / 900},     // rank 500: 400 into (5, 10] ms
    {0.5, 0.025},                            // rank 5000: the top of (10, 25] ms
    {0.9, 0.05},                             // rank 9000: the top of (25, 50] ms
    {0.99, 0.05 + 0.05 * 900.0 / 950},       // rank 9900: 900 of 950 into (50, 100] ms
    {0.999, 0.1},                            // in +Inf: the highest finite bound
};
INSTANTIATE_TEST_SUITE_P(Table, HistogramQuantile, ::testing::ValuesIn(kQuantileCases));

TEST(HistogramQuantile, NoneWithoutRequests) {
  EXPECT_FALSE(histogram_quantile({{0.1, kInf}, {0, 0}}, 0.9));
  EXPECT_FALSE(histogram_quantile({}, 0.9));
}

// -- weighted mean, peaks, plain quantiles -------------------------------------------

TEST(WeightedMean, WeighsEachValueAndSkipsWhatHasNoWeightOrValue) {
  EXPECT_DOUBLE_EQ(*weighted_mean({{1, 1}, {3, 3}}), 2.5);
  EXPECT_DOUBLE_EQ(*weighted_mean({{1, 1}, {kNaN, 5}, {100, 0}, {3, 3}, {7, kNaN}}), 2.5);
  EXPECT_DOUBLE_EQ(*weighted_mean({{0.04, 1000}, {0.02, 10}}), (40.0 + 0.2) / 1010);
  EXPECT_FALSE(weighted_mean({{1, 0}, {kNaN, 1}}));
  EXPECT_FALSE(weighted_mean({}));
}

TEST(PeakSteps, StepsAtLeastTheShareOfTheBusiest) {
  EXPECT_THAT(peak_steps({1, 10, 8, kNaN, 7.9, 9}, 0.8), ElementsAre(1, 2, 5));
  EXPECT_THAT(peak_steps({1, 10, 8, kNaN, 7.9, 9}, 1.0), ElementsAre(1));
  EXPECT_THAT(peak_steps({1, 10, 8}, 0.05), ElementsAre(0, 1, 2));
  EXPECT_TRUE(peak_steps({0, 0, kNaN}, 0.8).empty());
  EXPECT_TRUE(peak_steps({}, 0.8).empty());
}

TEST(ValueQuantile, InterpolatesBetweenRanksAndSkipsNaN) {
  EXPECT_DOUBLE_EQ(*value_quantile({5, 1, kNaN, 3, 2, 4}, 0.5), 3);
  EXPECT_NEAR(*value_quantile({1, 2, 3, 4, 5}, 0.99), 4.96, 1e-12);
  EXPECT_DOUBLE_EQ(*value_quantile({0.3}, 0.99), 0.3);
  EXPECT_FALSE(value_quantile({kNaN}, 0.5));
}

// -- durations -------------------------------------------------------------------------

struct DurationCase {
  double seconds;
  const char* text;
};
class Duration3 : public ::testing::TestWithParam<DurationCase> {};

TEST_P(Duration3, ThreeSignificantDigitsTheConfigurationReads) {
  const DurationCase& c = GetParam();
  const std::string text = format_duration_3(c.seconds);
  EXPECT_EQ(text, c.text) << c.seconds;
  const auto parsed = agent::parse_duration(text);
  ASSERT_TRUE(parsed.has_value()) << text;
  if (c.seconds >= 1e-9) {
    EXPECT_NEAR(static_cast<double>(parsed->count()) / 1e9, c.seconds, c.seconds * 0.006) << text;
  }
}

const DurationCase kDurationCases[] = {
    {0.0379, "37.9ms"},   {0.03791234, "37.9ms"}, {1.25, "1.25s"},   {0.00085, "850us"},  {0.0641, "64.1ms"},
    {0.1, "100ms"},       {0.0005, "500us"},      {0.9997, "1s"},    {0.0099995, "10ms"}, {12e-9, "12ns"},
    {1.5e-10, "1ns"},     {2.5e-6, "2.5us"},      {1.234e-6, "1.23us"}, {42.0, "42s"},     {1234.0, "1230s"},
    {0.0, "1ns"},
};
INSTANTIATE_TEST_SUITE_P(Table, Duration3, ::testing::ValuesIn(kDurationCases));

// -- the step ----------------------------------------------------------------------------

TEST(ChooseStep, FiveMinutesBeyondADayFifteenSecondsWithinAndNeverTooManyPoints) {
  using std::chrono::hours;
  using std::chrono::seconds;
  EXPECT_EQ(choose_step(hours(24 * 7), std::nullopt), seconds(300));
  EXPECT_EQ(choose_step(hours(1), std::nullopt), seconds(15));
  EXPECT_EQ(choose_step(hours(24), std::nullopt), seconds(15));  // 5761 points
  // 7 days at 15 s would be 40 321 points: raised to 55 s (10 997 points).
  EXPECT_EQ(choose_step(hours(24 * 7), seconds(15)), seconds(55));
  EXPECT_EQ(choose_step(hours(24 * 90), std::nullopt), seconds(707));
  EXPECT_EQ(choose_step(seconds(60), seconds(0)), seconds(1));
  for (auto since : {hours(1), hours(24), hours(24 * 7), hours(24 * 365)}) {
    const auto step = choose_step(since, seconds(1));
    EXPECT_LE(since / step + 1, 11'000) << since.count();
  }
}

// -- the recommendation --------------------------------------------------------------

// Ten steps of 60 s: the peak is steps 3, 4 and 5 (>= 80 % of 100 req/s).
EndpointHistory ten_steps() {
  EndpointHistory h;
  h.name = "play";
  h.step_seconds = 60;
  h.rate = {10, 20, 30, 90, 100, 85, 40, kNaN, 20, 10};
  h.window_quantiles[0.9] = {0.01, 0.01, 0.01, 0.030, 0.040, 0.050, 0.01, kNaN, 0.01, 0.01};
  h.window_quantiles[0.99] = {0.02, 0.02, 0.02, 0.060, 0.080, 0.090, 0.02, kNaN, 0.02, 0.02};
  h.window_requests = {100, 200, 300, 900, 1000, 850, 400, kNaN, 200, 100};
  h.signals[std::string(kShedSloTarget)] = {0, 0, 0, 0.05, 0.30, 0.12, 0, kNaN, 0, 0};
  return h;
}

TEST(Recommend, TargetAndMaxAreTheWindowPercentilesAtPeakWeightedByTheirRequests) {
  const std::vector<double> cpu = {0.1, 0.2, 0.2, 0.45, 0.55, 0.5, 0.3, kNaN, 0.2, 0.1};
  const Recommendation r = recommend(ten_steps(), cpu, false, Options{});
  ASSERT_TRUE(r.ok) << r.note;
  EXPECT_EQ(r.peak_steps, 3u);
  EXPECT_DOUBLE_EQ(r.peak_rate, 100);
  EXPECT_DOUBLE_EQ(r.requests_at_peak, (90 + 100 + 85) * 60.0);
  EXPECT_EQ(r.method, "window percentiles");
  const double target = (0.030 * 900 + 0.040 * 1000 + 0.050 * 850) / 2750;
  const double max = (0.060 * 900 + 0.080 * 1000 + 0.090 * 850) / 2750;
  EXPECT_DOUBLE_EQ(r.target_seconds, target);
  EXPECT_DOUBLE_EQ(r.max_seconds, max * 1.5);  // --max-margin 1.5
  EXPECT_EQ(r.target, "39.8ms");
  EXPECT_EQ(r.max, "115ms");
  ASSERT_EQ(r.signals.size(), 3u);
  EXPECT_EQ(r.signals[0].signal, kShedCpu);
  EXPECT_DOUBLE_EQ(*r.signals[0].p50, 0.5);
  EXPECT_DOUBLE_EQ(r.signals[0].thresholds.shed_start, 0.6);
  EXPECT_DOUBLE_EQ(r.signals[0].thresholds.critical_start, 0.8);
  // The shares' levels are those of the recommended SLO, whatever the share
  // observed under the old one (slo_target's p99 at peak was 0.2964): 1 - q
  // plus 2.326 standard deviations of a window of the peak's mean 916.7 requests.
  const double n = (900 + 1000 + 850) / 3.0;
  EXPECT_EQ(r.signals[1].signal, kShedSloTarget);
  EXPECT_NEAR(*r.signals[1].p99, 0.2964, 1e-9);
  EXPECT_NEAR(r.signals[1].level, 0.1 + 2.326 * std::sqrt(0.1 * 0.9 / n), 1e-12);
  EXPECT_NEAR(r.signals[1].level, 0.12305, 1e-5);
  EXPECT_DOUBLE_EQ(r.signals[1].thresholds.shed_start, 0.298);  // L + 0.2 (1 - L), to 3 decimals
  EXPECT_EQ(r.signals[2].signal, kShedSloMax);
  EXPECT_FALSE(r.signals[2].p50);
  EXPECT_NEAR(r.signals[2].level, 0.01 + 2.326 * std::sqrt(0.01 * 0.99 / n), 1e-12);
}

TEST(Recommend, ALatencyShareLevelIsItsSharePlusAWindowsSpread) {
  struct Row {
    double share, n, want;
  };
  for (const Row& row : {Row{0.1, 100, 0.1 + 2.326 * 0.03}, Row{0.1, 10000, 0.1 + 2.326 * 0.003},
                         Row{0.01, 99, 0.01 + 2.326 * 0.01}, Row{0.1, 0.5, 0.1}, Row{0.1, kNaN, 0.1},
                         Row{0, 100, 0}}) {
    SCOPED_TRACE(row.n);
    EXPECT_NEAR(latency_share_level(row.share, row.n), row.want, 1e-12);
  }
  // Without window counts the level is 1 - q.
  EndpointHistory h = ten_steps();
  h.window_requests.clear();
  h.window_quantiles.clear();
  h.histogram_steps.assign(10, Histogram{{0.01, 0.1, kInf}, {0, 20000, 20000}});
  const Recommendation r = recommend(h, {}, false, Options{});
  ASSERT_TRUE(r.ok) << r.note;
  EXPECT_NEAR(r.signals[1].level, 0.1, 1e-12);
  EXPECT_NEAR(r.signals[2].level, 0.01, 1e-12);
}

TEST(Recommend, ConcurrencyOnlyWithMaxConcurrencyAtItsObservedP99OrAHalf) {
  EXPECT_EQ(recommend(ten_steps(), {}, false, Options{}).signals.size(), 3u);
  const Recommendation r = recommend(ten_steps(), {}, true, Options{});
  ASSERT_EQ(r.signals.size(), 4u);
  EXPECT_EQ(r.signals[3].signal, kShedConcurrency);
  EXPECT_DOUBLE_EQ(r.signals[3].level, 0.5);
  EXPECT_DOUBLE_EQ(r.signals[3].thresholds.critical_start, 0.8);
}

TEST(Recommend, TheHistogramAtPeakWhenThereAreNoWindowPercentiles) {
  EndpointHistory h = ten_steps();
  h.window_quantiles.clear();
  h.histogram_steps.assign(10, Histogram{{0.005, 0.01, 0.025, 0.05, 0.1, kInf}, {1, 1, 1, 1, 1, 1}});
  // The peak steps' increases add up to kKnown; the others must not count.
  h.histogram_steps[3] = {kKnown.le, {50, 500, 2500, 4500, 4975, 5000}};
  h.histogram_steps[4] = {kKnown.le, {50, 500, 2500, 4500, 4975, 5000}};
  h.histogram_steps[5] = {kKnown.le, {0, 0, 0, 0, 0, 0}};
  const Recommendation r = recommend(h, {}, false, Options{});
  ASSERT_TRUE(r.ok) << r.note;
  EXPECT_EQ(r.method, "histogram");
  EXPECT_DOUBLE_EQ(r.requests_at_peak, 10000);  // the histogram's count, not rate x step
  EXPECT_NEAR(r.target_seconds, 0.05, 1e-12);
  EXPECT_NEAR(r.max_seconds, (0.05 + 0.05 * 900.0 / 950) * 1.5, 1e-12);
  EXPECT_EQ(r.target, "50ms");
  EXPECT_EQ(r.max, "146ms");
  Options no_margin;
  no_margin.max_margin = 1;
  EXPECT_EQ(recommend(h, {}, false, no_margin).max, "97.4ms");
}

TEST(Recommend, TooFewSamplesAtPeakIsANoteWithTheCountAndTheMinimum) {
  EndpointHistory h = ten_steps();
  h.rate = {0.1, 0.2, 0.3, 0.9, 1.0, 0.85, 0.4, kNaN, 0.2, 0.1};
  const Recommendation r = recommend(h, {}, false, Options{});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.note, "165 requests at peak, fewer than --min-samples 1000: no recommendation");
  Options fewer;
  fewer.min_samples = 100;
  EXPECT_TRUE(recommend(h, {}, false, fewer).ok);
}

TEST(Recommend, NoRequestsAtAllIsNoHistory) {
  EndpointHistory h;
  h.name = "idle";
  h.rate = {0, 0, kNaN};
  const Recommendation r = recommend(h, {}, false, Options{});
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.note, HasSubstr("no history for endpoint idle"));
}

TEST(Recommend, MaxIsNeverBelowTarget) {
  EndpointHistory h = ten_steps();
  Options o;
  o.target_quantile = 0.99;
  o.max_quantile = 0.9;  // the command refuses this; the model still keeps max >= target
  const Recommendation r = recommend(h, {}, false, o);
  ASSERT_TRUE(r.ok);
  EXPECT_GE(r.max_seconds, r.target_seconds);
}

}  // namespace
}  // namespace headroom::ctl::tune
