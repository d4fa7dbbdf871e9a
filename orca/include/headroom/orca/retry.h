// SPDX-License-Identifier: Apache-2.0
// Retry dials: what a shed answer tells the client about retrying it,
// `{"maxRetries": N, "retryAfterSeconds": S}` (docs/retries.md). A server
// that sheds a request picks the dials from the request's priority and the
// shed probability it shed with: the harder it sheds, the fewer retries it
// invites and the longer it asks the client to wait. More important
// priorities may retry sooner and more often.
//
//   PRIORITY 1 IS THE MOST IMPORTANT, 100 THE LEAST IMPORTANT (as shedder.h).
//
// The client side reads the dials strictly: a hostile or buggy server must
// not be able to invite a retry storm (maxRetries is capped at
// kMaxRetriesCap) nor freeze a client forever (retryAfterSeconds is capped at
// kMaxRetryAfterSeconds). retry_budget.h keeps the dials and applies them.
//
// Pure functions, noexcept where nothing allocates; format and parse
// allocate (off the request path: once per shed answer).
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "headroom/orca/result.h"
#include "headroom/orca/shedder.h"  // Bucket, bucket_of_priority

namespace headroom::orca {

// The response header a shed answer carries the dials in, in the wire form
// below (format_retry_dials), beside HTTP's Retry-After.
inline constexpr std::string_view kRetryDialsHeader = "x-headroom-retry";

// What a shed answer says: retry this call at most max_retries more times,
// and not before retry_after_seconds from the answer.
struct RetryDials {
  int max_retries = 0;
  double retry_after_seconds = 0.0;
};

// The caps a client applies to dials it receives (parse_retry_dials) and a
// server to dials it sends (retry_dials, format_retry_dials).
inline constexpr int kMaxRetriesCap = 10;
inline constexpr double kMaxRetryAfterSeconds = 3600.0;  // an hour

// One bucket's dials when nothing is shed (p = 0).
struct RetryDialsBase {
  int max_retries = 1;
  double retry_after_seconds = 1.0;
};

// The defaults, indexed by Bucket: a less important bucket gets fewer
// retries and waits longer.
//   CRITICAL     2 retries  0.5 s
//   DEGRADED     1          1 s
//   BEST_EFFORT  1          2 s
//   BULK         0          5 s
std::array<RetryDialsBase, kBucketCount> default_retry_dials_base() noexcept;

struct RetryDialsOptions {
  std::array<RetryDialsBase, kBucketCount> buckets = default_retry_dials_base();
  // How much longer the wait grows at p = 1: base x (1 + wait_growth x p).
  double wait_growth = 3.0;
};

// Every field in range (max_retries 0..kMaxRetriesCap, retry_after_seconds
// finite, > 0 and at most kMaxRetryAfterSeconds, wait_growth finite, 0..100),
// and ordered so that a less important bucket never gets more retries nor a
// shorter wait than a more important one. The error names the field:
// "buckets[BULK].max_retries (3) must be at most buckets[BEST_EFFORT].max_retries (1) ...".
Result<void> validate_retry_dials_options(const RetryDialsOptions& options);

// The dials of a request of `bucket` shed with probability p:
//   max_retries          ceil(base.max_retries x (1 - p)), so 0 at p = 1
//   retry_after_seconds  base.retry_after_seconds x (1 + wait_growth x p),
//                        at most kMaxRetryAfterSeconds
// p is clamped to [0, 1]; NaN counts as 1 (no evidence is no invitation).
// The ceiling forgives rounding (1e-9): 2 x (1 - 0.5) is 1, not 2. Meant for
// validated options; whatever they hold, the result is within the caps.
RetryDials retry_dials(Bucket bucket, double shed_probability, const RetryDialsOptions& options = {}) noexcept;
// The same for a numeric priority, 1 (most important) to 100 (clamped).
RetryDials retry_dials(int priority, double shed_probability, const RetryDialsOptions& options = {}) noexcept;

// A shed decision with what its answer says (item 1 of docs/retries.md's
// server side): drop when random01 < the probability (NaN never drops, as
// Shedder::should_drop), and then the dials for that priority at that
// probability, so that the answer's dials are always those of the
// probability the request was dropped at.
struct ShedVerdict {
  bool drop = false;
  RetryDials dials;  // retry_dials(priority, probability) when drop; zero otherwise
};
ShedVerdict shed_verdict(double probability, double random01, int priority,
                         const RetryDialsOptions& options = {}) noexcept;
// The same from a shedder's current probability for the priority.
ShedVerdict shed_verdict(const Shedder& shedder, double random01, int priority,
                         const RetryDialsOptions& options = {}) noexcept;

// The dials within the caps: max_retries in 0..kMaxRetriesCap,
// retry_after_seconds in 0..kMaxRetryAfterSeconds (NaN reads as the cap: the
// most cautious reading).
RetryDials clamp_retry_dials(const RetryDials& dials) noexcept;

// The wire form, e.g. {"maxRetries":1,"retryAfterSeconds":2.5}, of the dials
// clamped first; the seconds in the shortest form that reads back exactly.
std::string format_retry_dials(const RetryDials& dials);

// Reads exactly that JSON object: both keys, in any order, each once, no
// other key; whitespace between tokens; numbers in JSON's grammar. Fails,
// saying what is wrong, on anything else: garbage, a missing, repeated or
// unknown key, a negative or fractional maxRetries, a negative
// retryAfterSeconds, a number too large for a double (1e999), text longer
// than kMaxRetryDialsText. Values past the caps are clamped to them
// (maxRetries 1e308 reads 10): the server asked for more than a client grants.
inline constexpr std::size_t kMaxRetryDialsText = 256;
Result<RetryDials> parse_retry_dials(std::string_view text);

// HTTP's Retry-After counts whole seconds: the wait rounded up, at least 1
// when the wait is above 0, 0 when it is 0; within the cap (NaN reads as it).
int retry_after_header_seconds(const RetryDials& dials) noexcept;

// ------------------------------------------------------------------- gRPC
// A shed gRPC call ends with a status and trailing metadata instead of an
// HTTP answer. gRPC's clients retry by a retryPolicy in their service config
// (gRFC A6), and they honour the server's pushback in the trailer
// grpc-retry-pushback-ms: a non-negative integer of milliseconds is when to
// retry (it replaces the policy's backoff for that retry), a negative or
// unreadable value says "do not retry". The policy's maxAttempts still
// bounds the attempts, and only a status in its retryableStatusCodes is
// retried at all.

// The status of a shed gRPC answer: RESOURCE_EXHAUSTED (8), the code gRPC
// itself gives when a server is temporarily out of resources. Not
// UNAVAILABLE, which clients see for broken connections and servers that
// stop, and often retry for those: a shed answer is retried only by a
// client that lists RESOURCE_EXHAUSTED (docs/retries.md, "gRPC").
inline constexpr int kShedGrpcStatus = 8;

inline constexpr std::string_view kGrpcPushbackTrailer = "grpc-retry-pushback-ms";

// The pushback for the dials (clamped first): -1 when max_retries is 0 (do
// not retry), else the wait in milliseconds rounded up (a client never
// retries sooner than the dials say), 0 to 3 600 000.
int grpc_retry_pushback_ms(const RetryDials& dials) noexcept;

struct GrpcTrailer {
  std::string_view key;
  std::string value;
};

// The trailing metadata of a shed gRPC answer for the dials, in this order:
//   grpc-retry-pushback-ms  grpc_retry_pushback_ms(dials), e.g. "2500" or "-1"
//   x-headroom-retry        format_retry_dials(dials)
std::array<GrpcTrailer, 2> grpc_shed_trailers(const RetryDials& dials);

}  // namespace headroom::orca
