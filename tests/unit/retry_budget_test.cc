// SPDX-License-Identifier: Apache-2.0
// The retry budget: its options, the budget rule per bucket at the
// documented counts, the window sliding, the dials' count, wait and expiry,
// the target's report, a client with little traffic, and threads.
#include "headroom/orca/retry_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace headroom::orca {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kT0 = 50 * kS;  // the caller's monotonic clock
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void first_attempts(RetryBudget& b, int n, int64_t now) {
  for (int i = 0; i < n; ++i) b.record_first_attempt(now);
}

// Retries of `priority` at now until one is refused: how many went.
int retries_until_refused(RetryBudget& b, int priority, int64_t now) {
  int n = 0;
  while (b.may_retry(priority, 1, now) == RetryDecision::retry) {
    if (++n > 1'000'000) break;
  }
  return n;
}

// ---------------------------------------------------------------- options

TEST(RetryBudgetOptions, DefaultsAreValidAndOrdered) {
  const RetryBudgetOptions o;
  ASSERT_TRUE(validate_retry_budget_options(o));
  EXPECT_EQ(o.max_ratio, (std::array<double, kBucketCount>{0.10, 0.075, 0.05, 0.025}));
  EXPECT_EQ(o.window_ms, 10'000);
  EXPECT_EQ(o.slots, 10);
  EXPECT_EQ(o.dials_ttl_ms, 30'000);
}

TEST(RetryBudgetOptions, ErrorsNameTheField) {
  struct Case {
    void (*edit)(RetryBudgetOptions&);
    const char* expect;
  };
  const Case cases[] = {
      {[](RetryBudgetOptions& o) { o.max_ratio[3] = 0.2; },
       "max_ratio[BULK] (0.2) must be at most max_ratio[BEST_EFFORT] (0.05)"},
      {[](RetryBudgetOptions& o) { o.max_ratio[0] = 1.5; }, "max_ratio[CRITICAL] (1.5) must be 0 to 1"},
      {[](RetryBudgetOptions& o) { o.max_ratio[1] = kNaN; }, "max_ratio[DEGRADED] (nan)"},
      {[](RetryBudgetOptions& o) { o.max_ratio[2] = -0.1; }, "max_ratio[BEST_EFFORT] (-0.1)"},
      {[](RetryBudgetOptions& o) { o.min_retries_per_second = -1; }, "min_retries_per_second (-1) must be 0 to 1e6"},
      {[](RetryBudgetOptions& o) { o.window_ms = 0; }, "window_ms (0) must be 1 to 3600000"},
      {[](RetryBudgetOptions& o) { o.window_ms = 3'600'001; }, "window_ms (3600001)"},
      {[](RetryBudgetOptions& o) { o.slots = 0; }, "slots (0) must be 1 to 64"},
      {[](RetryBudgetOptions& o) { o.slots = 65; }, "slots (65) must be 1 to 64"},
      {[](RetryBudgetOptions& o) {
         o.window_ms = 5;
         o.slots = 10;
       },
       "slots (10) must be at most window_ms (5)"},
      {[](RetryBudgetOptions& o) { o.heavy_shed = 0; }, "heavy_shed (0) must be greater than 0 and at most 1"},
      {[](RetryBudgetOptions& o) { o.heavy_shed = 1.5; }, "heavy_shed (1.5)"},
      {[](RetryBudgetOptions& o) { o.dials_ttl_ms = -5; }, "dials_ttl_ms (-5) must be 1 to 3600000"},
  };
  for (const Case& c : cases) {
    RetryBudgetOptions o;
    c.edit(o);
    auto r = validate_retry_budget_options(o);
    ASSERT_FALSE(r) << c.expect;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos) << r.error().message;
    EXPECT_FALSE(RetryBudget::create(o));
  }
  EXPECT_TRUE(RetryBudget::create(RetryBudgetOptions{}));
}

TEST(RetryBudget, DecisionNames) {
  EXPECT_EQ(retry_decision_name(RetryDecision::retry), "retry");
  EXPECT_EQ(retry_decision_name(RetryDecision::deny_budget), "deny_budget");
  EXPECT_EQ(retry_decision_name(RetryDecision::deny_dials_count), "deny_dials_count");
  EXPECT_EQ(retry_decision_name(RetryDecision::deny_dials_wait), "deny_dials_wait");
  EXPECT_EQ(retry_decision_name(RetryDecision::deny_target_shedding), "deny_target_shedding");
}

// ---------------------------------------------------------------- the budget rule

TEST(RetryAllowance, Table) {
  struct Case {
    double ratio;
    int64_t firsts;
    double min;
    int64_t allowance;
  };
  const Case cases[] = {{0.10, 1000, 10, 110}, {0.075, 1000, 10, 85}, {0.05, 1000, 10, 60}, {0.025, 1000, 10, 35},
                        {0.025, 1000, 0, 25},  {0.1, 0, 10, 10},      {0.1, 0, 0, 0},       {0.1, 19, 0, 1},
                        {0.1, 9, 0.5, 1},      {0.0, 5000, 0, 0},     {0.3, 10, 0, 3},      {1.0, 7, 0, 7}};
  for (const Case& c : cases)
    EXPECT_EQ(retry_allowance(c.ratio, c.firsts, c.min), c.allowance) << c.ratio << " x " << c.firsts << " + " << c.min;
}

TEST(RetryBudget, BucketsStopInOrderAtTheDocumentedCounts) {
  RetryBudget b;
  first_attempts(b, 1000, kT0);
  // min_retries = 1/s x 10 s = 10. BULK stops at 0.025 x 1000 + 10 = 35 retries in the window.
  EXPECT_EQ(retries_until_refused(b, 100, kT0), 35);
  EXPECT_EQ(b.may_retry(76, 1, kT0), RetryDecision::deny_budget);
  // BEST_EFFORT goes on to 60, DEGRADED to 85, CRITICAL to 110.
  EXPECT_EQ(retries_until_refused(b, 60, kT0), 25);
  EXPECT_EQ(b.may_retry(100, 1, kT0), RetryDecision::deny_budget);
  EXPECT_EQ(retries_until_refused(b, 30, kT0), 25);
  EXPECT_EQ(b.may_retry(51, 1, kT0), RetryDecision::deny_budget);
  EXPECT_EQ(retries_until_refused(b, 1, kT0), 25);
  EXPECT_EQ(b.may_retry(Bucket::CRITICAL, 1, kT0), RetryDecision::deny_budget);
  EXPECT_EQ(b.window(kT0).first_attempts, 1000);
  EXPECT_EQ(b.window(kT0).retries, 110);
  // More first attempts make room again: 10 more give CRITICAL one.
  first_attempts(b, 10, kT0);
  EXPECT_EQ(retries_until_refused(b, 1, kT0), 1);
}

TEST(RetryBudget, AmplificationStaysWithinTheCriticalRatio) {
  // Every call fails and retries as often as allowed (up to 3 times),
  // priorities spread over all buckets, 10 000 calls over 5 s.
  RetryBudget b;
  int64_t firsts = 0, retries = 0;
  for (int i = 0; i < 10'000; ++i) {
    const int64_t now = kT0 + static_cast<int64_t>(i) * 500'000;
    b.record_first_attempt(now);
    ++firsts;
    for (int r = 1; r <= 3 && b.may_retry(i % 100 + 1, r, now) == RetryDecision::retry; ++r) ++retries;
  }
  EXPECT_LE(retries, retry_allowance(0.10, firsts, 10));
  EXPECT_GT(retries, static_cast<int64_t>(0.05 * static_cast<double>(firsts)));  // the budget is used, not shut
}

TEST(RetryBudget, LittleTrafficStillRetriesAFew) {
  RetryBudget b;
  // No first attempts at all: min_retries_per_second x window = 10 retries.
  EXPECT_EQ(retries_until_refused(b, 100, kT0), 10);
  EXPECT_EQ(b.may_retry(1, 1, kT0), RetryDecision::deny_budget);  // shared: the 10 are spent
  RetryBudgetOptions o;
  o.min_retries_per_second = 0.5;
  o.window_ms = 4000;
  o.slots = 4;
  RetryBudget half(o);
  EXPECT_EQ(retries_until_refused(half, 1, kT0), 2);
  o.min_retries_per_second = 0;
  RetryBudget none(o);
  EXPECT_EQ(none.may_retry(1, 1, kT0), RetryDecision::deny_budget);
  none.record_first_attempt(kT0);
  EXPECT_EQ(none.may_retry(1, 1, kT0), RetryDecision::deny_budget);  // 0.1 x 1 rounds down
  first_attempts(none, 9, kT0);
  EXPECT_EQ(none.may_retry(1, 1, kT0), RetryDecision::retry);  // 0.1 x 10 = 1
}

// ---------------------------------------------------------------- the window

TEST(RetryBudget, OldSlotsAreForgottenAfterTheWindow) {
  RetryBudget b;  // 10 slots of 1 s
  first_attempts(b, 1000, kT0);
  EXPECT_EQ(retries_until_refused(b, 100, kT0 + 500 * kMs), 35);
  // 9.9 s on, the first slot is still in the window.
  EXPECT_EQ(b.window(kT0 + 9900 * kMs).first_attempts, 1000);
  EXPECT_EQ(b.window(kT0 + 9900 * kMs).retries, 35);
  EXPECT_EQ(b.may_retry(100, 1, kT0 + 9900 * kMs), RetryDecision::deny_budget);
  // 10 s on, it slid out: only min_retries is left, and the 35 retries went with it.
  EXPECT_EQ(b.window(kT0 + 10 * kS).first_attempts, 0);
  EXPECT_EQ(b.window(kT0 + 10 * kS).retries, 0);
  EXPECT_EQ(retries_until_refused(b, 100, kT0 + 10 * kS), 10);
}

TEST(RetryBudget, TheWindowSlidesSlotBySlot) {
  RetryBudget b;
  for (int s = 0; s < 10; ++s) first_attempts(b, 100, kT0 + s * kS);  // 100 per second
  EXPECT_EQ(b.window(kT0 + 9 * kS).first_attempts, 1000);
  EXPECT_EQ(b.window(kT0 + 10 * kS).first_attempts, 900);
  EXPECT_EQ(b.window(kT0 + 15 * kS).first_attempts, 400);
  EXPECT_EQ(b.window(kT0 + 19 * kS).first_attempts, 0);
  // A slot written again in a later epoch counts from 0, not from its old count.
  first_attempts(b, 7, kT0 + 12 * kS);
  EXPECT_EQ(b.window(kT0 + 12 * kS).first_attempts, 7 + 700);
}

TEST(RetryBudget, ALongGapResetsEverything) {
  RetryBudget b;
  first_attempts(b, 1000, kT0);
  EXPECT_EQ(retries_until_refused(b, 1, kT0), 110);
  // An hour on, the slot indexes come round again, but their epochs are old.
  const int64_t later = kT0 + 3600 * kS;
  EXPECT_EQ(b.window(later).first_attempts, 0);
  EXPECT_EQ(b.window(later).retries, 0);
  EXPECT_EQ(retries_until_refused(b, 1, later), 10);
}

TEST(RetryBudget, AClockBeforeZeroAndALaggingCaller) {
  RetryBudget b;
  first_attempts(b, 100, -3 * kS / 2);  // a clock may start anywhere
  EXPECT_EQ(b.window(-kS).first_attempts, 100);
  EXPECT_EQ(b.window(0).first_attempts, 100);
  // A caller a window behind another thread neither counts nor clobbers the newer slot.
  first_attempts(b, 50, kT0);
  ASSERT_EQ(b.may_retry(1, 1, kT0), RetryDecision::retry);
  b.record_first_attempt(kT0 - 10 * kS);
  EXPECT_EQ(b.window(kT0).first_attempts, 50);
  EXPECT_EQ(b.may_retry(1, 1, kT0 - 10 * kS), RetryDecision::deny_budget);
  EXPECT_EQ(b.window(kT0).retries, 1);
}

// ---------------------------------------------------------------- the dials rule

TEST(RetryBudget, DialsCountAndWaitPerBucket) {
  RetryBudget b;
  first_attempts(b, 1000, kT0);
  b.record_dials(1, RetryDials{1, 2.0}, kT0);
  // Asked at the failure (the three-argument form): wait.
  EXPECT_EQ(b.may_retry(1, 1, kT0), RetryDecision::deny_dials_wait);
  EXPECT_EQ(b.may_retry(1, 1, kT0 + kS, kT0), RetryDecision::deny_dials_wait);
  EXPECT_EQ(b.may_retry(1, 1, kT0 + 2 * kS - 1, kT0), RetryDecision::deny_dials_wait);
  EXPECT_EQ(b.may_retry(1, 1, kT0 + 2 * kS, kT0), RetryDecision::retry);
  EXPECT_EQ(b.may_retry(1, 2, kT0 + 3 * kS, kT0), RetryDecision::deny_dials_count);
  EXPECT_EQ(b.may_retry(20, 0, kT0 + 3 * kS, kT0), RetryDecision::retry);  // retry_number below 1 reads 1
  // A failure time after now reads now.
  EXPECT_EQ(b.may_retry(1, 1, kT0 + 3 * kS, kT0 + 9 * kS), RetryDecision::deny_dials_wait);
  // Other buckets have no dials.
  EXPECT_EQ(b.may_retry(26, 5, kT0 + kS), RetryDecision::retry);
  // maxRetries 0: no retry at all.
  b.record_dials(100, RetryDials{0, 0.0}, kT0);
  EXPECT_EQ(b.may_retry(100, 1, kT0 + kS, kT0), RetryDecision::deny_dials_count);
  // New dials replace the old ones.
  b.record_dials(1, RetryDials{3, 0.5}, kT0 + 4 * kS);
  EXPECT_EQ(b.may_retry(1, 3, kT0 + 4 * kS), RetryDecision::deny_dials_wait);
  EXPECT_EQ(b.may_retry(1, 3, kT0 + 4500 * kMs, kT0 + 4 * kS), RetryDecision::retry);
  EXPECT_EQ(b.may_retry(1, 4, kT0 + 4500 * kMs, kT0 + 4 * kS), RetryDecision::deny_dials_count);
}

TEST(RetryBudget, TheWaitIsTheCallsOwnNotPushedBackByLaterAnswers) {
  // A bucket shed all along: every 100 ms another call's answer brings the
  // same dials (one retry after 1 s). A call that failed at kT0 may go at
  // kT0 + 1 s however many answers came since; were the wait counted from
  // the latest answer, no call of a bucket shed all along would ever retry.
  RetryBudget b;
  first_attempts(b, 1000, kT0);
  for (int64_t t = kT0; t <= kT0 + 2 * kS; t += 100 * kMs) b.record_dials(40, RetryDials{1, 1.0}, t);
  EXPECT_EQ(b.may_retry(40, 1, kT0 + kS - 1, kT0), RetryDecision::deny_dials_wait);
  EXPECT_EQ(b.may_retry(40, 1, kT0 + kS, kT0), RetryDecision::retry);
  EXPECT_EQ(b.may_retry(40, 1, kT0 + 2 * kS, kT0 + kS), RetryDecision::retry);
  EXPECT_EQ(b.may_retry(40, 1, kT0 + 2 * kS, kT0 + 1500 * kMs), RetryDecision::deny_dials_wait);
  // A later answer's longer wait applies, from the call's own failure.
  b.record_dials(40, RetryDials{1, 5.0}, kT0 + 2 * kS);
  EXPECT_EQ(b.may_retry(40, 1, kT0 + 3 * kS, kT0 + 1500 * kMs), RetryDecision::deny_dials_wait);
  EXPECT_EQ(b.may_retry(40, 1, kT0 + 6500 * kMs, kT0 + 1500 * kMs), RetryDecision::retry);
}

TEST(RetryBudget, DialsAreForgottenAfterTheirTtl) {
  RetryBudget b;  // dials_ttl_ms 30 000
  first_attempts(b, 1000, kT0);
  b.record_dials(60, RetryDials{0, 3600}, kT0);
  EXPECT_EQ(b.may_retry(60, 1, kT0 + 30 * kS - 1), RetryDecision::deny_dials_count);
  first_attempts(b, 1000, kT0 + 30 * kS);
  EXPECT_EQ(b.may_retry(60, 1, kT0 + 30 * kS), RetryDecision::retry);
}

TEST(RetryBudget, HostileDialsAreClamped) {
  RetryBudget b;
  first_attempts(b, 1000, kT0);
  b.record_dials(1, RetryDials{1000, 1e12}, kT0);  // capped: 10 retries, an hour's wait, but the TTL is 30 s
  EXPECT_EQ(b.may_retry(1, 11, kT0 + 29 * kS), RetryDecision::deny_dials_count);
  EXPECT_EQ(b.may_retry(1, 10, kT0 + 29 * kS, kT0), RetryDecision::deny_dials_wait);
  EXPECT_EQ(b.may_retry(1, 11, kT0 + 30 * kS), RetryDecision::retry);  // forgotten
  b.record_dials(1, RetryDials{1, kNaN}, std::numeric_limits<int64_t>::max() - 5);  // no overflow
  EXPECT_EQ(b.may_retry(1, 1, std::numeric_limits<int64_t>::max() - 4), RetryDecision::deny_dials_wait);
}

// ---------------------------------------------------------------- the report rule

TEST(RetryBudget, HeavyShedDeniesStaleIsIgnored) {
  RetryBudget b;
  first_attempts(b, 1000, kT0);
  b.update_target_probabilities({0.0, 0.49, 0.5, 0.9}, false);
  EXPECT_EQ(b.may_retry(1, 1, kT0), RetryDecision::retry);
  EXPECT_EQ(b.may_retry(26, 1, kT0), RetryDecision::retry);
  EXPECT_EQ(b.may_retry(51, 1, kT0), RetryDecision::deny_target_shedding);
  EXPECT_EQ(b.may_retry(100, 1, kT0), RetryDecision::deny_target_shedding);
  // The report rule comes before the dials.
  b.record_dials(100, RetryDials{0, 1}, kT0);
  EXPECT_EQ(b.may_retry(100, 1, kT0), RetryDecision::deny_target_shedding);
  // A stale report denies nothing; the dials still do.
  b.update_target_probabilities({1, 1, 1, 1}, true);
  EXPECT_EQ(b.may_retry(51, 1, kT0), RetryDecision::retry);
  EXPECT_EQ(b.may_retry(100, 1, kT0), RetryDecision::deny_dials_count);
  // NaN reads as 1.
  b.update_target_probabilities({kNaN, 0, 0, 0}, false);
  EXPECT_EQ(b.may_retry(1, 1, kT0), RetryDecision::deny_target_shedding);
}

TEST(RetryBudget, FromTheTargetsReport) {
  RetryBudget b;
  first_attempts(b, 1000, kT0);
  const ShedderConfig config;  // application_utilization 0.6 / 0.8 / 1.5
  Report r;
  r.set_application_utilization(0.78);
  // BULK and BEST_EFFORT are shed entirely at 0.78, DEGRADED under half, CRITICAL not at all.
  ASSERT_EQ(shed_probability(r, Bucket::BEST_EFFORT, config, false), 1.0);
  ASSERT_LT(shed_probability(r, Bucket::DEGRADED, config, false), 0.5);
  b.update_target(r, config, false);
  EXPECT_EQ(b.may_retry(100, 1, kT0), RetryDecision::deny_target_shedding);
  EXPECT_EQ(b.may_retry(51, 1, kT0), RetryDecision::deny_target_shedding);
  EXPECT_EQ(b.may_retry(50, 1, kT0), RetryDecision::retry);
  EXPECT_EQ(b.may_retry(1, 1, kT0), RetryDecision::retry);
  r.set_application_utilization(1.5);
  b.update_target(r, config, false);
  EXPECT_EQ(b.may_retry(1, 1, kT0), RetryDecision::deny_target_shedding);
  b.update_target(r, config, true);  // stale: ignored
  EXPECT_EQ(b.may_retry(1, 1, kT0), RetryDecision::retry);
  EXPECT_EQ(b.may_retry(100, 1, kT0), RetryDecision::retry);
}

// ---------------------------------------------------------------- threads

TEST(RetryBudget, EightThreadsNeverExceedTheBound) {
  RetryBudget b;
  constexpr int kThreads = 8;
  constexpr int kCalls = 20'000;
  std::atomic<int64_t> granted{0};
  std::atomic<int64_t> per_bucket[kBucketCount] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      int64_t mine = 0;
      for (int i = 0; i < kCalls; ++i) {
        // Within one slot: every thread's clock in the same second.
        const int64_t now = kT0 + static_cast<int64_t>(i) * 10'000 + t;
        b.record_first_attempt(now);
        const int priority = (i * 7 + t * 13) % 100 + 1;
        if (b.may_retry(priority, 1, now) == RetryDecision::retry) {
          ++mine;
          per_bucket[static_cast<int>(bucket_of_priority(priority))].fetch_add(1);
        }
      }
      granted.fetch_add(mine);
    });
  for (auto& th : threads) th.join();
  const int64_t firsts = int64_t{kThreads} * kCalls;
  const int64_t bound = retry_allowance(0.10, firsts, 10);
  const RetryWindow w = b.window(kT0 + kS / 2);
  EXPECT_EQ(w.first_attempts, firsts);
  EXPECT_EQ(w.retries, granted.load()) << "every granted retry is counted once";
  EXPECT_LE(granted.load(), bound);
  // The budget is used: retries keep coming while firsts grow, so most of it goes.
  EXPECT_GT(granted.load(), bound * 8 / 10);
  // BULK never got past its own share of the totals.
  EXPECT_LE(per_bucket[3].load(), retry_allowance(0.025, firsts, 10));
}

TEST(RetryBudget, EightThreadsFillTheBudgetExactly) {
  // 100 000 first attempts, then only retries, far more than the budget
  // holds: it is filled exactly, never past it, however the threads interleave.
  RetryBudget b;
  first_attempts(b, 100'000, kT0);
  const int64_t bound = retry_allowance(0.10, 100'000, 10);
  ASSERT_EQ(bound, 10'010);
  std::atomic<int64_t> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      int64_t mine = 0;
      for (int i = 0; i < 5000; ++i) mine += b.may_retry(1 + t % 25, 1, kT0 + i) == RetryDecision::retry ? 1 : 0;
      granted.fetch_add(mine);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(granted.load(), bound);
  EXPECT_EQ(b.window(kT0).retries, bound);
}

}  // namespace
}  // namespace headroom::orca
