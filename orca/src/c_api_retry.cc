// SPDX-License-Identifier: Apache-2.0
// The C interface over retry.h and retry_budget.h. Every entry point that
// can allocate catches everything: an exception crossing into C is
// undefined behaviour.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "headroom/orca/headroom_orca.h"
#include "headroom/orca/retry.h"
#include "headroom/orca/retry_budget.h"

namespace orca = headroom::orca;

// The C values are the C++ enum's values.
static_assert(HEADROOM_RETRY == static_cast<int>(orca::RetryDecision::retry));
static_assert(HEADROOM_RETRY_DENY_BUDGET == static_cast<int>(orca::RetryDecision::deny_budget));
static_assert(HEADROOM_RETRY_DENY_DIALS_COUNT == static_cast<int>(orca::RetryDecision::deny_dials_count));
static_assert(HEADROOM_RETRY_DENY_DIALS_WAIT == static_cast<int>(orca::RetryDecision::deny_dials_wait));
static_assert(HEADROOM_RETRY_DENY_TARGET_SHEDDING == static_cast<int>(orca::RetryDecision::deny_target_shedding));
static_assert(sizeof(headroom_retry_budget_options::max_ratio) / sizeof(double) == orca::kBucketCount);

struct headroom_retry_budget {
  explicit headroom_retry_budget(const orca::RetryBudgetOptions& options) : budget(options) {}
  orca::RetryBudget budget;
};

namespace {

void set_error(char* err, std::size_t errlen, std::string_view message) {
  if (err == nullptr || errlen == 0) return;
  const std::size_t n = std::min(message.size(), errlen - 1);
  std::memcpy(err, message.data(), n);
  err[n] = '\0';
}

headroom_retry_dials to_c(const orca::RetryDials& d) {
  headroom_retry_dials c{};
  c.max_retries = d.max_retries;
  c.retry_after_seconds = d.retry_after_seconds;
  return c;
}

orca::RetryDials from_c(const headroom_retry_dials& c) {
  return orca::RetryDials{c.max_retries, c.retry_after_seconds};
}

orca::RetryBudgetOptions budget_options_from(const headroom_retry_budget_options& c) {
  orca::RetryBudgetOptions o;
  // Zero (or less) is "the default": a caller zeroes what it leaves alone.
  if (c.slots > 0) o.slots = c.slots;
  if (c.window_ms > 0) o.window_ms = c.window_ms;
  // Below 0 is "none"; NaN is passed on, for validation to name.
  if (c.min_retries_per_second != 0)
    o.min_retries_per_second = c.min_retries_per_second < 0 ? 0 : c.min_retries_per_second;
  if (c.heavy_shed > 0 || std::isnan(c.heavy_shed)) o.heavy_shed = c.heavy_shed;
  if (c.dials_ttl_ms > 0) o.dials_ttl_ms = c.dials_ttl_ms;
  if (c.struct_size >= offsetof(headroom_retry_budget_options, max_ratio) + sizeof c.max_ratio &&
      c.set_max_ratio != 0)
    for (std::size_t b = 0; b < orca::kBucketCount; ++b) o.max_ratio[b] = c.max_ratio[b];
  return o;
}

}  // namespace

extern "C" {

int headroom_retry_dials_for(int priority, double shed_probability, headroom_retry_dials* out) {
  if (out == nullptr) return -EINVAL;
  *out = to_c(orca::retry_dials(priority, shed_probability));
  return 0;
}

int headroom_retry_dials_format(const headroom_retry_dials* dials, char* buf, size_t buflen) {
  if (dials == nullptr || (buf == nullptr && buflen > 0)) return -EINVAL;
  try {
    const std::string s = orca::format_retry_dials(from_c(*dials));
    if (buflen > 0) set_error(buf, buflen, s);  // copies and terminates, like snprintf
    return static_cast<int>(s.size());
  } catch (...) {
    return -ENOMEM;
  }
}

int headroom_retry_dials_parse(const char* text, size_t len, headroom_retry_dials* out, char* err, size_t errlen) {
  set_error(err, errlen, "");
  if (text == nullptr || out == nullptr) {
    set_error(err, errlen, "headroom_retry_dials_parse: NULL argument");
    return -EINVAL;
  }
  try {
    const auto d = orca::parse_retry_dials(std::string_view(text, len));
    if (!d) {
      set_error(err, errlen, d.error().message);
      return -EBADMSG;
    }
    *out = to_c(*d);
    return 0;
  } catch (...) {
    set_error(err, errlen, "out of memory");
    return -ENOMEM;
  }
}

int headroom_retry_after_header_seconds(const headroom_retry_dials* dials) {
  if (dials == nullptr) return -EINVAL;
  return orca::retry_after_header_seconds(from_c(*dials));
}

headroom_retry_budget* headroom_retry_budget_create(const headroom_retry_budget_options* options, char* err,
                                                    size_t errlen) {
  set_error(err, errlen, "");
  try {
    orca::RetryBudgetOptions o;
    if (options != nullptr) {
      constexpr std::size_t kMinSize = offsetof(headroom_retry_budget_options, dials_ttl_ms) + sizeof(int64_t);
      if (options->struct_size < kMinSize) {
        set_error(err, errlen, "headroom_retry_budget_create: options->struct_size is " +
                                   std::to_string(options->struct_size) + ", less than the " +
                                   std::to_string(kMinSize) + " bytes of its first fields: set it to "
                                   "sizeof(headroom_retry_budget_options)");
        return nullptr;
      }
      o = budget_options_from(*options);
    }
    if (auto r = orca::validate_retry_budget_options(o); !r) {
      set_error(err, errlen, "headroom_retry_budget_create: " + r.error().message);
      return nullptr;
    }
    return new headroom_retry_budget(o);
  } catch (...) {
    set_error(err, errlen, "headroom_retry_budget_create: out of memory");
    return nullptr;
  }
}

void headroom_retry_budget_destroy(headroom_retry_budget* budget) { delete budget; }

void headroom_retry_budget_first_attempt(headroom_retry_budget* budget, int64_t now_ns) {
  if (budget != nullptr) budget->budget.record_first_attempt(now_ns);
}

int headroom_retry_budget_may_retry(headroom_retry_budget* budget, int priority, int retry_number, int64_t now_ns,
                                    int64_t failed_at_ns) {
  if (budget == nullptr) return -EINVAL;
  return static_cast<int>(budget->budget.may_retry(priority, retry_number, now_ns, failed_at_ns));
}

int headroom_retry_budget_record_dials(headroom_retry_budget* budget, int priority, const headroom_retry_dials* dials,
                                       int64_t now_ns) {
  if (budget == nullptr || dials == nullptr) return -EINVAL;
  budget->budget.record_dials(priority, from_c(*dials), now_ns);
  return 0;
}

int headroom_retry_budget_update_probabilities(headroom_retry_budget* budget, const double probability[4],
                                               int stale) {
  if (budget == nullptr || probability == nullptr) return -EINVAL;
  budget->budget.update_target_probabilities({probability[0], probability[1], probability[2], probability[3]},
                                             stale != 0);
  return 0;
}

int headroom_retry_budget_window(const headroom_retry_budget* budget, int64_t now_ns, int64_t* first_attempts,
                                 int64_t* retries) {
  if (budget == nullptr || first_attempts == nullptr || retries == nullptr) return -EINVAL;
  const orca::RetryWindow w = budget->budget.window(now_ns);
  *first_attempts = w.first_attempts;
  *retries = w.retries;
  return 0;
}

}  // extern "C"
