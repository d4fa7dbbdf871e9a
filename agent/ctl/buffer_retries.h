// SPDX-License-Identifier: Apache-2.0
// `headroomctl buffer --retries` (docs/buffers.md): clients that send a
// rejected or failed request again. The policy of each mode (when the next
// attempt leaves, or why it does not), the dials read from an answer, the
// client that applies a mode to the engine's hooks (loadgen::RetryHooks) and
// counts what it held back, and the figures per step and priority: first
// attempts, retries, amplification, retries suppressed.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "agent/ctl/buffer_model.h"
#include "agent/ctl/loadgen.h"
#include "headroom/orca/result.h"
#include "headroom/orca/retry.h"
#include "headroom/orca/retry_budget.h"

namespace headroom::ctl::buffer {

enum class RetryMode : uint8_t {
  none,       // no retries: today's behaviour
  immediate,  // again at once, up to --max-retries
  backoff,    // after 50 ms x 2^(k-1), full jitter, up to --max-retries
  dials,      // as the answer's x-headroom-retry (or Retry-After) says
  budget,     // backoff, through one orca::RetryBudget for the target
};
// "none", "immediate", "backoff", "dials", "budget"; the error names --retries.
Result<RetryMode> parse_retry_mode(std::string_view text);
std::string_view retry_mode_name(RetryMode mode) noexcept;

// Why a retry the client could have sent was not: the mode's own limits,
// then, in budget mode, RetryBudget's decisions.
enum class Suppressed : uint8_t {
  max_retries,       // --max-retries reached
  no_dials,          // dials mode: the answer carried neither x-headroom-retry nor Retry-After
  dials_count,       // past the answer's maxRetries (dials mode), or RetryBudget's deny_dials_count
  dials_wait,        // RetryBudget's deny_dials_wait
  budget,            // RetryBudget's deny_budget
  target_shedding,   // RetryBudget's deny_target_shedding
};
inline constexpr std::size_t kSuppressedReasons = 6;
// "max_retries", "no_dials", "dials_count", "dials_wait", "budget", "target_shedding".
std::string_view suppressed_name(Suppressed reason) noexcept;
Suppressed suppressed_of(orca::RetryDecision decision) noexcept;  // not `retry`

// The backoff before retry k (1 for the first): full jitter, uniform in
// [0, 50 ms x 2^(k-1)); `uniform` is in [0, 1). The exponent stops at 2^10.
inline constexpr int64_t kBackoffBaseNs = 50'000'000;
int64_t backoff_delay_ns(int retry_number, double uniform) noexcept;

// What an answer said about retrying it: its x-headroom-retry dials, or,
// without them, its Retry-After read as dials with --max-retries retries.
// Retry-After is delta-seconds or an HTTP-date; a date is counted from the
// answer's own Date header, or, without one, from `now_unix_s` (the client's
// wall clock), and a date already past means at once. Empty: neither header,
// or one that does not parse (a client reads dials strictly: a malformed one
// invites nothing). `response` is the whole response; only the final
// response's head (after any 1xx) is read.
std::optional<orca::RetryDials> dials_of_response(std::string_view response, int max_retries, int64_t now_unix_s);

// An HTTP-date (RFC 9110: "Sun, 06 Nov 1994 08:49:37 GMT", or the obsolete
// "Sunday, 06-Nov-94 08:49:37 GMT" and "Sun Nov  6 08:49:37 1994") as Unix
// seconds; empty for anything else.
std::optional<int64_t> parse_http_date(std::string_view text);

// Whether an attempt asks for a retry at all: any answer but a 2xx (a
// rejection, another status), a timeout, a refused or closed connection, a
// malformed answer. A slow 2xx is an answer and is not retried; a cancelled
// attempt is not.
bool wants_retry(const loadgen::Record& attempt) noexcept;

// The policy, pure: after attempt `retry_number - 1` of a request failed,
// when its retry number `retry_number` leaves (delay_ns), or why it does not.
struct RetryChoice {
  int64_t delay_ns = -1;  // >= 0: retry after this; -1: none (see reason)
  Suppressed reason = Suppressed::max_retries;
};
RetryChoice choose_retry(RetryMode mode, int retry_number, int max_retries,
                         const std::optional<orca::RetryDials>& dials, double uniform) noexcept;

// Retries per step (the first attempt's) and priority.
struct RetryCounts {
  int64_t first_attempts = 0;
  int64_t retries = 0;
  std::array<int64_t, kSuppressedReasons> suppressed{};  // indexed by Suppressed
  int64_t suppressed_total() const noexcept;
  // (first attempts + retries) / first attempts; 1 when nothing was offered.
  double amplification() const noexcept;
};
struct StepRetries {
  RetryCounts all;
  std::vector<RetryCounts> by_class;  // indexed like the mix
};

// Applies a mode to a run: the engine's hooks, and what they held back.
// One per run; the engine calls it from its one thread.
class RetryClient {
 public:
  struct Settings {
    RetryMode mode = RetryMode::none;
    int max_retries = 3;
    std::vector<int> priorities;  // per request class: its numeric priority (budget mode)
    uint64_t seed = 1;            // the jitter's
  };
  explicit RetryClient(Settings settings);

  // Hooks that call this client; it must outlive the run. None for mode none.
  loadgen::RetryHooks hooks();
  // The target's report for the budget's report rule (budget mode only).
  void update_target(const orca::Report& report, const orca::ShedderConfig& config, bool stale) noexcept;
  // The retries held back so far, each with the record index of its first attempt.
  struct Held {
    uint32_t first = 0;
    Suppressed reason = Suppressed::max_retries;
  };
  const std::vector<Held>& suppressed() const { return suppressed_; }

 private:
  int64_t after(const loadgen::Record& ended, std::string_view response, int64_t now_ns);
  bool admit(const loadgen::Record& retry, int64_t now_ns);

  Settings s_;
  std::unique_ptr<orca::RetryBudget> budget_;
  std::mt19937_64 rng_;
  std::vector<Held> suppressed_;
  // Budget mode: when the attempt each pending retry follows failed, by its
  // first attempt's record index (one pending retry per request at a time).
  std::unordered_map<uint32_t, int64_t> failed_at_;
};

// The engine's records with each first attempt's outcome: its last
// attempt's, its latency counted from the first attempt's scheduled time.
// One record per first attempt, in schedule order; analyze() judges them as
// it judges a run without retries.
std::vector<loadgen::Record> first_attempt_outcomes(const std::vector<loadgen::Record>& records);

// First attempts and retries per step and class, counted like analyze()
// counts (the first attempt's step, after its settle; cancelled attempts
// nowhere), with the retries the client held back, in their first attempt's.
std::vector<StepRetries> retry_counts(const std::vector<Step>& steps, std::size_t classes,
                                      const std::vector<loadgen::Record>& records,
                                      const std::vector<RetryClient::Held>& suppressed);

}  // namespace headroom::ctl::buffer
