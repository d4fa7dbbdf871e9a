// SPDX-License-Identifier: Apache-2.0
#include "headroom/orca/retry_budget.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace headroom::orca {
namespace {

constexpr int64_t kNsPerMs = 1'000'000;
constexpr int64_t kMaxMs = 3'600'000;  // an hour: longer is a configuration mistake
constexpr double kAllowanceSlack = 1e-9;
constexpr uint64_t kCountMask = 0xffff'ffffu;
constexpr int64_t kNone = std::numeric_limits<int64_t>::min();

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string ratio_field(int b) { return "max_ratio[" + std::string(bucket_name(static_cast<Bucket>(b))) + "]"; }

// A caller may pass any int64_t as the time: signed overflow must decide nothing.
int64_t sat_add(int64_t a, int64_t b) noexcept {
  int64_t r = 0;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

// A slot word: bit 63 set once written, the epoch's low 31 bits, the count
// in the low 32 bits. A word never written (0) is of no epoch.
constexpr uint32_t kUsedBit = 0x8000'0000u;
uint32_t tag_of(uint64_t word) noexcept { return static_cast<uint32_t>(word >> 32); }
uint32_t tag_of_epoch(int64_t epoch) noexcept { return kUsedBit | (static_cast<uint32_t>(epoch) & ~kUsedBit); }
uint64_t word_of(int64_t epoch, uint64_t count) noexcept {
  return static_cast<uint64_t>(tag_of_epoch(epoch)) << 32 | count;
}
// The slot of epoch e (e may be negative: a caller's clock may start anywhere).
int slot_of(int64_t e, int slots) noexcept {
  const int64_t m = e % slots;
  return static_cast<int>(m < 0 ? m + slots : m);
}
// Whether a word's tag is a later epoch than e: the caller's clock is a
// window behind another thread's (or wrapped, 2^31 slots on).
bool later(uint64_t word, int64_t e) noexcept {
  if ((tag_of(word) & kUsedBit) == 0) return false;
  return static_cast<int32_t>((tag_of(word) << 1) - (tag_of_epoch(e) << 1)) > 0;  // 31-bit serial arithmetic
}

// Counts one in the slot word of epoch e: a stale epoch's word is claimed
// (count 1), a later one is left alone, a full count saturates. The current
// epoch's word takes an add, which unlike a compare-and-swap never fails
// and retries when threads contend; should another thread claim the slot
// for the next epoch in between, the call counts in that one (it was at
// the boundary).
void bump(std::atomic<uint64_t>& slot, int64_t e) noexcept {
  uint64_t w = slot.load(std::memory_order_relaxed);
  if (tag_of(w) == tag_of_epoch(e) && (w & kCountMask) < kCountMask / 2) {
    slot.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  for (;;) {
    uint64_t next = 0;
    if (tag_of(w) == tag_of_epoch(e)) {
      if ((w & kCountMask) == kCountMask) return;
      next = w + 1;
    } else if (later(w, e)) {
      return;
    } else {
      next = word_of(e, 1);
    }
    if (slot.compare_exchange_weak(w, next, std::memory_order_relaxed)) return;
  }
}

}  // namespace

std::array<double, kBucketCount> default_retry_max_ratio() noexcept { return {0.10, 0.075, 0.05, 0.025}; }

Result<void> validate_retry_budget_options(const RetryBudgetOptions& o) {
  for (int b = 0; b < kBucketCount; ++b) {
    const double r = o.max_ratio[static_cast<std::size_t>(b)];
    if (!std::isfinite(r) || r < 0 || r > 1)
      return logic_error(ratio_field(b) + " (" + num(r) + ") must be 0 to 1: retries per first attempt");
    if (b > 0 && r > o.max_ratio[static_cast<std::size_t>(b - 1)])
      return logic_error(ratio_field(b) + " (" + num(r) + ") must be at most " + ratio_field(b - 1) + " (" +
                         num(o.max_ratio[static_cast<std::size_t>(b - 1)]) +
                         "): a less important bucket stops retrying first");
  }
  if (!std::isfinite(o.min_retries_per_second) || o.min_retries_per_second < 0 || o.min_retries_per_second > 1e6)
    return logic_error("min_retries_per_second (" + num(o.min_retries_per_second) + ") must be 0 to 1e6");
  if (o.window_ms < 1 || o.window_ms > kMaxMs)
    return logic_error("window_ms (" + std::to_string(o.window_ms) + ") must be 1 to 3600000 (an hour)");
  if (o.slots < 1 || o.slots > kMaxRetryBudgetSlots)
    return logic_error("slots (" + std::to_string(o.slots) + ") must be 1 to " + std::to_string(kMaxRetryBudgetSlots));
  if (o.window_ms < o.slots)
    return logic_error("slots (" + std::to_string(o.slots) + ") must be at most window_ms (" +
                       std::to_string(o.window_ms) + "): a slot is at least 1 ms");
  if (!std::isfinite(o.heavy_shed) || !(o.heavy_shed > 0) || o.heavy_shed > 1)
    return logic_error("heavy_shed (" + num(o.heavy_shed) + ") must be greater than 0 and at most 1");
  if (o.dials_ttl_ms < 1 || o.dials_ttl_ms > kMaxMs)
    return logic_error("dials_ttl_ms (" + std::to_string(o.dials_ttl_ms) + ") must be 1 to 3600000 (an hour)");
  return {};
}

int64_t retry_allowance(double max_ratio, int64_t first_attempts, double min_retries) noexcept {
  const double a = std::floor(max_ratio * static_cast<double>(first_attempts) + min_retries + kAllowanceSlack);
  return !(a > 0) ? 0 : a >= 9e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(a);
}

std::string_view retry_decision_name(RetryDecision d) noexcept {
  switch (d) {
    case RetryDecision::retry: return "retry";
    case RetryDecision::deny_budget: return "deny_budget";
    case RetryDecision::deny_dials_count: return "deny_dials_count";
    case RetryDecision::deny_dials_wait: return "deny_dials_wait";
    case RetryDecision::deny_target_shedding: return "deny_target_shedding";
  }
  return "unknown";
}

RetryBudget::RetryBudget() : RetryBudget(RetryBudgetOptions{}) {}

RetryBudget::RetryBudget(const RetryBudgetOptions& options) : options_(options) {
  slot_ns_ = options_.window_ms * kNsPerMs / options_.slots;
  dials_ttl_ns_ = options_.dials_ttl_ms * kNsPerMs;
  min_retries_ = options_.min_retries_per_second * static_cast<double>(options_.window_ms) / 1000.0;
  for (int b = 0; b < kBucketCount; ++b) {
    dials_expiry_[static_cast<std::size_t>(b)].store(kNone, std::memory_order_relaxed);
    dials_wait_ns_[static_cast<std::size_t>(b)].store(0, std::memory_order_relaxed);
  }
  // The slot words start at 0, of no epoch (value-initialized arrays).
}

Result<std::unique_ptr<RetryBudget>> RetryBudget::create(const RetryBudgetOptions& options) {
  if (auto r = validate_retry_budget_options(options); !r) return std::move(r).error();
  return std::make_unique<RetryBudget>(options);
}

int64_t RetryBudget::epoch_of(int64_t now_ns) const noexcept {
  const int64_t q = now_ns / slot_ns_;
  return (now_ns % slot_ns_ < 0) ? q - 1 : q;  // floor, for clocks before 0
}

RetryWindow RetryBudget::sum(int64_t e, int idx, int64_t* current) const noexcept {
  const int n = options_.slots;
  RetryWindow w;
  // Slot idx holds epoch e - k when its tag says so; anything else is stale.
  for (int k = 0; k < n; ++k) {
    const uint32_t tag = tag_of_epoch(e - k);
    const uint64_t f = firsts_[static_cast<std::size_t>(idx)].load(std::memory_order_relaxed);
    const uint64_t r = retries_[static_cast<std::size_t>(idx)].load(std::memory_order_relaxed);
    if (tag_of(f) == tag) w.first_attempts += static_cast<int64_t>(f & kCountMask);
    if (tag_of(r) == tag) (k == 0 ? *current : w.retries) += static_cast<int64_t>(r & kCountMask);
    idx = idx == 0 ? n - 1 : idx - 1;
  }
  return w;
}

void RetryBudget::record_first_attempt(int64_t now_ns) noexcept {
  const int64_t e = epoch_of(now_ns);
  bump(firsts_[static_cast<std::size_t>(slot_of(e, options_.slots))], e);
}

// The budget rule: counts the retry when, with it, the window stays within
// the bucket's allowance. The compare-and-swap on the current slot makes the
// check and the count one step: concurrent retries never overshoot.
bool RetryBudget::take_retry(Bucket bucket, int64_t now_ns) noexcept {
  const int64_t e = epoch_of(now_ns);
  const int idx = slot_of(e, options_.slots);
  int64_t current = 0;
  const RetryWindow w = sum(e, idx, &current);
  const int64_t allowance =
      retry_allowance(options_.max_ratio[static_cast<std::size_t>(bucket)], w.first_attempts, min_retries_);
  const int64_t others = w.retries;
  std::atomic<uint64_t>& slot = retries_[static_cast<std::size_t>(idx)];
  uint64_t word = slot.load(std::memory_order_relaxed);
  for (;;) {
    if (later(word, e)) return false;  // a clock a window behind: no slot to count in
    const bool fresh = tag_of(word) == tag_of_epoch(e);
    const uint64_t count = fresh ? (word & kCountMask) : 0;
    if (count == kCountMask || others + static_cast<int64_t>(count) + 1 > allowance) return false;
    if (slot.compare_exchange_weak(word, fresh ? word + 1 : word_of(e, 1), std::memory_order_relaxed)) return true;
  }
}

RetryDecision RetryBudget::may_retry(Bucket bucket, int retry_number, int64_t now_ns, int64_t failed_at_ns) noexcept {
  int b = static_cast<int>(bucket);
  b = b < 0 ? 0 : b >= kBucketCount ? kBucketCount - 1 : b;
  const auto i = static_cast<std::size_t>(b);
  if (shedding_[i].load(std::memory_order_relaxed)) return RetryDecision::deny_target_shedding;
  if (now_ns < dials_expiry_[i].load(std::memory_order_acquire)) {
    if ((retry_number < 1 ? 1 : retry_number) > dials_count_[i].load(std::memory_order_relaxed))
      return RetryDecision::deny_dials_count;
    const int64_t failed_at = failed_at_ns < now_ns ? failed_at_ns : now_ns;
    if (now_ns < sat_add(failed_at, dials_wait_ns_[i].load(std::memory_order_relaxed)))
      return RetryDecision::deny_dials_wait;
  }
  return take_retry(static_cast<Bucket>(b), now_ns) ? RetryDecision::retry : RetryDecision::deny_budget;
}

void RetryBudget::record_dials(Bucket bucket, const RetryDials& dials, int64_t now_ns) noexcept {
  int b = static_cast<int>(bucket);
  b = b < 0 ? 0 : b >= kBucketCount ? kBucketCount - 1 : b;
  const auto i = static_cast<std::size_t>(b);
  const RetryDials d = clamp_retry_dials(dials);
  // The seconds are at most an hour: the nanoseconds fit.
  const auto wait_ns = static_cast<int64_t>(std::ceil(d.retry_after_seconds * 1e9));
  dials_count_[i].store(d.max_retries, std::memory_order_relaxed);
  dials_wait_ns_[i].store(wait_ns, std::memory_order_relaxed);
  dials_expiry_[i].store(sat_add(now_ns, dials_ttl_ns_), std::memory_order_release);
}

void RetryBudget::update_target(const Report& report, const ShedderConfig& config, bool stale) noexcept {
  std::array<double, kBucketCount> p{};
  if (!stale)
    for (int b = 0; b < kBucketCount; ++b)
      p[static_cast<std::size_t>(b)] = shed_probability(report, static_cast<Bucket>(b), config, false);
  update_target_probabilities(p, stale);
}

void RetryBudget::update_target_probabilities(const std::array<double, kBucketCount>& probability,
                                              bool stale) noexcept {
  for (std::size_t b = 0; b < kBucketCount; ++b) {
    const double p = std::isnan(probability[b]) ? 1.0 : probability[b];
    shedding_[b].store(!stale && p >= options_.heavy_shed, std::memory_order_relaxed);
  }
}

RetryWindow RetryBudget::window(int64_t now_ns) const noexcept {
  const int64_t e = epoch_of(now_ns);
  int64_t current = 0;
  RetryWindow w = sum(e, slot_of(e, options_.slots), &current);
  w.retries += current;
  return w;
}

}  // namespace headroom::orca
