// SPDX-License-Identifier: Apache-2.0
// "Log once when it starts failing, once when it recovers": a failure that
// repeats every tick (a full disk, a file Envoy's directory lost, a probe the
// kernel does not offer) must not fill the journal, and its end must be seen.
#pragma once

#include <spdlog/spdlog.h>
#include <time.h>

#include <cstdint>
#include <string>
#include <utility>

namespace headroom {

class FailureLatch {
 public:
  // Records a failure; logs the message at `level` only when the state changes
  // (level::off: record without logging). True when it changed.
  template <class... Args>
  bool fail(spdlog::level::level_enum level, spdlog::format_string_t<Args...> fmt, Args&&... args) {
    if (failing_) return false;
    failing_ = true;
    if (level != spdlog::level::off) spdlog::log(level, fmt, std::forward<Args>(args)...);
    return true;
  }
  // Records a success; logs the message at info only when it ends a failure.
  template <class... Args>
  bool ok(spdlog::format_string_t<Args...> fmt, Args&&... args) {
    if (!failing_) return false;
    failing_ = false;
    spdlog::info(fmt, std::forward<Args>(args)...);
    return true;
  }
  // Records a success without a word (a failure someone else already reported).
  bool ok_quietly() { return std::exchange(failing_, false); }
  bool failing() const { return failing_; }

 private:
  bool failing_ = false;
};

// Unix milliseconds (orca::unix_now_ms) as UTC for a status line: "2026-12-02T14:05:03Z".
inline std::string utc_time(int64_t unix_ms) {
  const time_t secs = static_cast<time_t>(unix_ms / 1000);
  tm t{};
  ::gmtime_r(&secs, &t);
  char buf[32];
  const std::size_t n = ::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &t);
  return std::string(buf, n);
}

}  // namespace headroom
