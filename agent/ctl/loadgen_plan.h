// SPDX-License-Identifier: Apache-2.0
// The load engine's schedule (agent/ctl/loadgen.h): the options checked, and
// when each request of each phase leaves. Pure arithmetic, so that the
// engine's loop only follows it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
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

// Where a request goes among `instances` instances. First attempts go round
// robin, each request class on its own cursor, so that every instance gets
// its share of every class (one cursor would tie a class to an instance
// whenever the mix's period and the instance count share a factor): the
// k-th first attempt of class c (k from 0) goes to instance (k + c) mod n.
// A retry goes to the instance after the one its failed attempt went to,
// so never to the same one when there are several.
inline uint8_t first_instance(uint64_t k, uint8_t request_class, std::size_t instances) {
  return static_cast<uint8_t>(instances > 1 ? (k + request_class) % instances : 0);
}
inline uint8_t next_instance(uint8_t failed, std::size_t instances) {
  return static_cast<uint8_t>(instances > 1 ? (failed + 1u) % instances : 0);
}

// Each phase's schedule, or an error naming the option that cannot run (no
// classes, a negative rate, max_connections < 1, a header with CR/LF, too
// many instances, ...).
headroom::Result<std::vector<PhasePlan>> plan(const Options& options);

// The retries the caller asked for (RetryHooks::after), earliest first.
class RetryQueue {
 public:
  bool empty() const { return heap_.empty(); }
  int64_t next_due() const { return heap_.top().due_ns; }  // not empty
  // The next attempt of `ended` (same first attempt, phase and class), due
  // at `due_ns`, to the next of `instances` instances (next_instance).
  void push(const Record& ended, int64_t due_ns, std::size_t instances = 1);
  // Takes the earliest as its record, scheduled at its due time but never
  // before `not_before_ns` (the last record's: deadlines stay in order).
  Record pop(int64_t not_before_ns);
  void clear() { heap_ = {}; }

 private:
  struct Pending {
    int64_t due_ns = 0;
    Record record;
    bool operator>(const Pending& o) const { return due_ns > o.due_ns; }
  };
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> heap_;
};

}  // namespace headroom::ctl::loadgen
