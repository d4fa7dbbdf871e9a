// SPDX-License-Identifier: Apache-2.0
// The client's prioritized retry budget for one target (docs/retries.md):
// over all calls from this client to the target, the retries and the first
// attempts of a sliding window. Three rules, per priority bucket:
//
//  - budget: a retry of bucket b goes when, counting it, the window's
//    retries stay within max_ratio[b] x first attempts + min_retries. While
//    the ratio is low (one bad server) every bucket retries; as it rises
//    BULK stops first, then BEST_EFFORT, DEGRADED, CRITICAL last. The
//    defaults bound the amplification at 1.1x (CRITICAL's 0.10);
//  - dials: the latest dials a shed answer of the target carried for the
//    bucket (retry.h): no retry past their max_retries, none before their
//    retry_after has passed since the answer; forgotten after dials_ttl_ms;
//  - report: the target's own ORCA report, through the shedder's
//    shed_probability: a bucket it sheds at heavy_shed or more retries
//    nothing. A stale report is ignored (the budget and the dials still apply).
//
//   PRIORITY 1 IS THE MOST IMPORTANT, 100 THE LEAST IMPORTANT (as shedder.h).
//
// Bounded memory: fixed arrays, no allocation after construction. The
// window is `slots` time slots; each counter is one word tagged with the
// slot's epoch (now / slot width), so a slot last written a window ago reads
// as empty and the first writer of a new epoch claims it with a
// compare-and-swap. No mutex, no clock read, no system call: the caller
// passes now_ns from its monotonic clock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>

#include "headroom/orca/report.h"
#include "headroom/orca/result.h"
#include "headroom/orca/retry.h"
#include "headroom/orca/shedder.h"  // Bucket, bucket_of_priority, ShedderConfig

namespace headroom::orca {

inline constexpr int kMaxRetryBudgetSlots = 64;

// The defaults, indexed by Bucket: 0.10, 0.075, 0.05, 0.025.
std::array<double, kBucketCount> default_retry_max_ratio() noexcept;

struct RetryBudgetOptions {
  // Retries per first attempt over the window, per bucket; a less important
  // bucket's is at most the one before it. 0 to 1.
  std::array<double, kBucketCount> max_ratio = default_retry_max_ratio();
  // Retries any bucket may make regardless of the ratio, per second of the
  // window (1 over 10 s: 10): a client with little traffic still retries.
  double min_retries_per_second = 1.0;
  int64_t window_ms = 10'000;  // 1 ms to an hour
  int slots = 10;              // 1 to kMaxRetryBudgetSlots; a slot is at least 1 ms
  double heavy_shed = 0.5;     // the report rule: (0, 1]
  int64_t dials_ttl_ms = 30'000;  // 1 ms to an hour
};

// Every field in range, max_ratio ordered; the error names the field:
// "max_ratio[BULK] (0.2) must be at most max_ratio[BEST_EFFORT] (0.05) ...".
Result<void> validate_retry_budget_options(const RetryBudgetOptions& options);

// The budget rule, pure: whether a retry of a bucket with `max_ratio` may go
// when the window holds `retries` and `first_attempts`:
//   retries + 1 <= floor(max_ratio x first_attempts + min_retries + 1e-9)
// (the slack forgives rounding: 0.025 x 1000 is 25).
int64_t retry_allowance(double max_ratio, int64_t first_attempts, double min_retries) noexcept;

// What may_retry says. Only `retry` retries.
enum class RetryDecision : int {
  retry = 0,                 // counted as a retry of the window
  deny_budget = 1,           // the window's retries reached the bucket's share
  deny_dials_count = 2,      // retry_number past the dials' max_retries
  deny_dials_wait = 3,       // the dials' retry_after has not passed yet
  deny_target_shedding = 4,  // the target's report sheds the bucket heavily
};
// "retry", "deny_budget", "deny_dials_count", "deny_dials_wait", "deny_target_shedding".
std::string_view retry_decision_name(RetryDecision d) noexcept;

// The window's totals, for tools and tests.
struct RetryWindow {
  int64_t first_attempts = 0;
  int64_t retries = 0;
};

// Thread safety: every member may be called from any number of threads at
// once. A may_retry racing record_dials or update_target sees the old or the
// new value of each (the count and the wait are separate words). Not
// movable: create() hands out a unique_ptr.
class RetryBudget {
 public:
  RetryBudget();
  explicit RetryBudget(const RetryBudgetOptions& options);  // options must be valid
  // Fails with validate_retry_budget_options' message.
  static Result<std::unique_ptr<RetryBudget>> create(const RetryBudgetOptions& options);

  RetryBudget(const RetryBudget&) = delete;
  RetryBudget& operator=(const RetryBudget&) = delete;

  // Every call's first attempt.
  void record_first_attempt(int64_t now_ns) noexcept;

  // After a failed attempt: may the call try again now? retry_number is 1
  // for the call's first retry (below 1 reads 1). failed_at_ns is when the
  // attempt it follows failed (its answer came, or it timed out): the
  // dials' wait is the call's own, counted from there, so dials that other
  // calls keep bringing do not push it back (a later one's wait applies,
  // from this call's failure). A failed_at_ns after now_ns reads now_ns. The
  // rules in this order: report, dials' count, dials' wait, budget; `retry`
  // is counted. Without failed_at_ns: the attempt failed just now.
  RetryDecision may_retry(int priority, int retry_number, int64_t now_ns, int64_t failed_at_ns) noexcept {
    return may_retry(bucket_of_priority(priority), retry_number, now_ns, failed_at_ns);
  }
  RetryDecision may_retry(int priority, int retry_number, int64_t now_ns) noexcept {
    return may_retry(bucket_of_priority(priority), retry_number, now_ns, now_ns);
  }
  RetryDecision may_retry(Bucket bucket, int retry_number, int64_t now_ns, int64_t failed_at_ns) noexcept;
  RetryDecision may_retry(Bucket bucket, int retry_number, int64_t now_ns) noexcept {
    return may_retry(bucket, retry_number, now_ns, now_ns);
  }

  // The dials of a shed answer for a call of `priority`, received at now_ns
  // (clamped to the caps). Replaces the bucket's earlier dials.
  void record_dials(int priority, const RetryDials& dials, int64_t now_ns) noexcept {
    record_dials(bucket_of_priority(priority), dials, now_ns);
  }
  void record_dials(Bucket bucket, const RetryDials& dials, int64_t now_ns) noexcept;

  // The target's report: each bucket's shed probability through the
  // shedder's shed_probability(report, bucket, config, stale). stale: the
  // report rule denies nothing until a fresh one.
  void update_target(const Report& report, const ShedderConfig& config, bool stale) noexcept;
  // The same from the probabilities, indexed by Bucket (NaN reads as 1).
  void update_target_probabilities(const std::array<double, kBucketCount>& probability, bool stale) noexcept;

  RetryWindow window(int64_t now_ns) const noexcept;
  const RetryBudgetOptions& options() const noexcept { return options_; }

 private:
  int64_t epoch_of(int64_t now_ns) const noexcept;
  // The window ending at epoch `e` (in slot `idx`): its first attempts, and
  // its retries outside the slot of `e` (`current`: the retries of that slot).
  RetryWindow sum(int64_t e, int idx, int64_t* current) const noexcept;
  bool take_retry(Bucket bucket, int64_t now_ns) noexcept;

  RetryBudgetOptions options_;
  int64_t slot_ns_ = 0;
  int64_t dials_ttl_ns_ = 0;
  double min_retries_ = 0;
  // Read on every decision, written only by updates and record_dials.
  std::array<std::atomic<bool>, kBucketCount> shedding_{};
  std::array<std::atomic<int64_t>, kBucketCount> dials_expiry_{};      // forgotten from then on
  std::array<std::atomic<int64_t>, kBucketCount> dials_wait_ns_{};     // retry_after
  std::array<std::atomic<int>, kBucketCount> dials_count_{};           // max_retries
  // The window: a word per slot, its epoch (tagged) << 32 | count.
  alignas(64) std::array<std::atomic<uint64_t>, kMaxRetryBudgetSlots> firsts_{};
  alignas(64) std::array<std::atomic<uint64_t>, kMaxRetryBudgetSlots> retries_{};
};

}  // namespace headroom::orca
