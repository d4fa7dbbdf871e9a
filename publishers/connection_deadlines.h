// SPDX-License-Identifier: Apache-2.0
// What a listener keeps of its connections so that idle, trickling or
// half-open clients can neither exhaust it nor hold it (docs/reliability.md,
// "Listeners under a connection flood"): every connection must complete a
// request within `deadline` of being accepted or of its previous request
// (a short header deadline like Go's ReadHeaderTimeout, which a client
// sending a byte a second does not reset, and an idle keep-alive timeout in
// one), and when `cap` connections are open a new one closes the oldest
// waiting one instead of being refused.
//
// Pure bookkeeping over ids and times; the listener does the closing.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace headroom::publishers {

class ConnectionDeadlines {
 public:
  using Clock = std::chrono::steady_clock;
  using Id = uint64_t;

  ConnectionDeadlines(std::size_t cap, std::chrono::milliseconds deadline) : cap_(cap), deadline_(deadline) {}

  // A connection accepted at `now`. Over the cap: the connection to close,
  // the one armed longest ago (not yet closed by an earlier eviction).
  std::optional<Id> accepted(Id id, Clock::time_point now);
  // It completed a request at `now`: its deadline starts again.
  void requested(Id id, Clock::time_point now);
  // It is gone (whoever closed it).
  void closed(Id id);
  // Those whose deadline passed at `now`, each returned once.
  std::vector<Id> expired(Clock::time_point now);

  std::size_t open() const { return index_.size(); }
  std::size_t cap() const { return cap_; }
  std::chrono::milliseconds deadline() const { return deadline_; }

 private:
  struct Entry {
    Id id;
    Clock::time_point armed;
    bool closing = false;  // evicted or expired: returned once, kept until closed()
  };
  std::size_t cap_;
  std::chrono::milliseconds deadline_;
  std::list<Entry> by_age_;  // armed longest ago first
  std::unordered_map<Id, std::list<Entry>::iterator> index_;
  std::size_t closing_ = 0;
};

// The connection cap of a listener from the process's RLIMIT_NOFILE soft
// limit: `wanted`, lowered to a `share` of the descriptors (the other
// listeners, the eBPF maps, the report files need theirs), at least 16.
std::size_t connection_cap(uint64_t nofile_soft, std::size_t wanted, double share);

}  // namespace headroom::publishers
