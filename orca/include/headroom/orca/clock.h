// SPDX-License-Identifier: Apache-2.0
// The two clocks headroom reads, each in one place. Code that can be tested
// takes the time as an argument; only the edges (the daemon's loop, a
// command's main) call these.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace headroom::orca {

// Unix time now in milliseconds: the clock reports are stamped with
// (headroom.timestamp_ms) and staleness is judged by.
inline int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// CLOCK_MONOTONIC in nanoseconds: the clock of the sampling loop, and of the
// kernel's bpf_ktime_get_ns(), so that request ages compare with it.
inline int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace headroom::orca
