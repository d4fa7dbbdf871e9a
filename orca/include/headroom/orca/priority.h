// SPDX-License-Identifier: Apache-2.0
// Priority travels with the call (docs/retries.md): a server reads a request's
// priority once, from its header, keeps it for the work that request causes
// (a thread-local PriorityScope) and stamps it on the calls that work makes.
// Such a call may be less important than the request (a non-critical lookup
// that enriches a critical answer), never more: an upgrade means the edge
// classified the request wrong, so it is refused and counted, and the call
// keeps the request's priority.
//
//   PRIORITY 1 IS THE MOST IMPORTANT, 100 THE LEAST IMPORTANT (as shedder.h).
//
// The scope and outgoing_priority() are the request path: thread_local state
// and one relaxed atomic add on a refusal; no allocation, no lock. Work handed
// to another thread does not take the scope along: open one there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "headroom/orca/shedder.h"  // Bucket, bucket_of_priority, priority_range

namespace headroom::orca {

// The request header that carries the priority, in and out.
inline constexpr std::string_view kPriorityHeader = "x-priority";

// What a priority header's value says: a level, and whether the value named a
// bucket as a whole ("BULK") rather than a level ("80").
struct HeaderPriority {
  int priority = 0;          // 1..100
  bool bucket_name = false;  // the value was a bucket's name
};

// A number 1..100 or a bucket's name (any case, '-' for '_': parse_bucket),
// ASCII whitespace around it trimmed. A bucket's name reads as the bucket's
// least important level (BULK 100, CRITICAL 25): the name claims no finer
// level, and reading it as the bucket's first would upgrade every call it
// stamps. Numbers outside 1..100 are refused rather than clamped (a typo must
// not become the most important priority), as are a sign, a fraction, an
// exponent ("1e2"), empty text and anything else: nullopt.
std::optional<HeaderPriority> parse_priority_value(std::string_view text) noexcept;
// The level alone.
std::optional<int> parse_priority_header(std::string_view text) noexcept;

// The parsed priority, or default_priority (clamped to 1..100) when the header
// was missing or unreadable.
int priority_or_default(std::optional<int> parsed, int default_priority) noexcept;

// The header's value for a priority (clamped to 1..100), e.g. "40".
std::string format_priority_header(int priority);

// Makes `priority` (clamped to 1..100) the calling thread's current priority
// until destroyed; scopes nest, and the end of one restores the priority
// before it. Only the thread that made it may end it (RAII on the stack).
class PriorityScope {
 public:
  explicit PriorityScope(int priority) noexcept;
  ~PriorityScope();
  PriorityScope(const PriorityScope&) = delete;
  PriorityScope& operator=(const PriorityScope&) = delete;

 private:
  int previous_;  // 0: no scope was open
};

// The calling thread's current priority; fallback when no scope is open.
int current_priority(int fallback) noexcept;

// What a PriorityScope does, as a value, for interfaces that cannot hold one
// (the C interface's begin/end pair): makes `priority` the calling thread's
// current priority (clamped to 1..100; 0 or less: none, as with no scope
// open) and returns the one before it (0: none).
int exchange_current_priority(int priority) noexcept;

// The priority to stamp on an outgoing call made by the current work:
//   no request                          the current priority
//   a request at or below it (>= it)    the request (a downgrade)
//   a more important request (< it)     refused: the current priority, and
//                                       priority_upgrades_refused() counts it
// Requests are clamped to 1..100 first. Without a scope the current priority
// is the least important level (100): work that no request caused claims no
// importance, so a request for more is an upgrade.
int outgoing_priority(std::optional<int> requested = {}) noexcept;

// Upgrades refused since the process started, by every thread.
uint64_t priority_upgrades_refused() noexcept;

}  // namespace headroom::orca
