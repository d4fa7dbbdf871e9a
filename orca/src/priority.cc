// SPDX-License-Identifier: Apache-2.0
#include "headroom/orca/priority.h"

#include <atomic>
#include <charconv>
#include <system_error>

#include "headroom/orca/text.h"

namespace headroom::orca {
namespace {

// 0: no scope open on this thread.
thread_local int t_current = 0;

std::atomic<uint64_t> g_upgrades_refused{0};

}  // namespace

std::optional<HeaderPriority> parse_priority_value(std::string_view text) noexcept {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  if (const auto bucket = parse_bucket(text)) return HeaderPriority{priority_range(*bucket).last, true};
  // Digits only: from_chars would take a leading '-', and "1e2" stops at 'e'.
  for (const char c : text)
    if (c < '0' || c > '9') return std::nullopt;
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;  // too many digits for an int
  if (n < kMostImportantPriority || n > kLeastImportantPriority) return std::nullopt;
  return HeaderPriority{n, false};
}

std::optional<int> parse_priority_header(std::string_view text) noexcept {
  const auto value = parse_priority_value(text);
  if (!value) return std::nullopt;
  return value->priority;
}

int priority_or_default(std::optional<int> parsed, int default_priority) noexcept {
  return parsed ? clamp_priority(*parsed) : clamp_priority(default_priority);
}

std::string format_priority_header(int priority) { return std::to_string(clamp_priority(priority)); }

PriorityScope::PriorityScope(int priority) noexcept : previous_(t_current) { t_current = clamp_priority(priority); }

PriorityScope::~PriorityScope() { t_current = previous_; }

int current_priority(int fallback) noexcept { return t_current != 0 ? t_current : fallback; }

int exchange_current_priority(int priority) noexcept {
  const int previous = t_current;
  t_current = priority <= 0 ? 0 : clamp_priority(priority);
  return previous;
}

int outgoing_priority(std::optional<int> requested) noexcept {
  const int current = current_priority(kLeastImportantPriority);
  if (!requested) return current;
  const int wanted = clamp_priority(*requested);
  if (wanted >= current) return wanted;  // as important or less: a downgrade passes
  g_upgrades_refused.fetch_add(1, std::memory_order_relaxed);
  return current;
}

uint64_t priority_upgrades_refused() noexcept { return g_upgrades_refused.load(std::memory_order_relaxed); }

}  // namespace headroom::orca
