// SPDX-License-Identifier: Apache-2.0
// "Log once when it starts failing, once when it recovers": a failure that
// repeats every tick (a full disk, a file Envoy's directory lost, a probe the
// kernel does not offer) must not fill the journal, and its end must be seen.
#pragma once

#include <spdlog/spdlog.h>

#include <utility>

namespace headroom::agent {

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

}  // namespace headroom::agent
