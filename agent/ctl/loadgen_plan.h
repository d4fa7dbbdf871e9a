// SPDX-License-Identifier: Apache-2.0
// The load engine's schedule (agent/ctl/loadgen.h): the options checked, and
// when each request of each phase leaves. Pure arithmetic, so that the
// engine's loop only follows it.
#pragma once

#include <cstdint>
#include <vector>

#include "agent/ctl/loadgen.h"
#include "headroom/orca/result.h"

namespace headroom::ctl::loadgen {

// The schedule of one phase: request k leaves at start_ns + k * interval.
struct PhasePlan {
  int64_t start_ns = 0;
  double interval_ns = 0;
  uint64_t count = 0;
};

// Request k's offset from its phase's start, the one rounding every caller uses.
inline int64_t offset_ns(uint64_t k, double interval_ns) {
  return static_cast<int64_t>(static_cast<double>(k) * interval_ns);
}

// At most this many requests in one run (the records' indices stay 32-bit).
inline constexpr uint64_t kMaxRequests = uint64_t{1} << 31;

// Each phase's schedule, or an error naming the option that cannot run (no
// classes, a negative rate, max_connections < 1, a header with CR/LF, ...).
headroom::Result<std::vector<PhasePlan>> plan(const Options& options);

}  // namespace headroom::ctl::loadgen
