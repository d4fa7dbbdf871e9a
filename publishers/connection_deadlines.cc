// SPDX-License-Identifier: Apache-2.0
#include "publishers/connection_deadlines.h"

#include <algorithm>

namespace headroom::publishers {

std::optional<ConnectionDeadlines::Id> ConnectionDeadlines::accepted(Id id, Clock::time_point now) {
  if (auto it = index_.find(id); it != index_.end()) closed(id);  // an id reused: the old one is gone
  by_age_.push_back(Entry{id, now});
  index_[id] = std::prev(by_age_.end());
  if (index_.size() - closing_ <= cap_) return std::nullopt;
  for (auto& e : by_age_) {
    if (e.closing || e.id == id) continue;
    e.closing = true;
    ++closing_;
    return e.id;
  }
  return std::nullopt;
}

void ConnectionDeadlines::requested(Id id, Clock::time_point now) {
  auto it = index_.find(id);
  if (it == index_.end() || it->second->closing) return;
  it->second->armed = now;
  by_age_.splice(by_age_.end(), by_age_, it->second);
}

void ConnectionDeadlines::closed(Id id) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  if (it->second->closing) --closing_;
  by_age_.erase(it->second);
  index_.erase(it);
}

std::vector<ConnectionDeadlines::Id> ConnectionDeadlines::expired(Clock::time_point now) {
  std::vector<Id> out;
  for (auto& e : by_age_) {
    if (now - e.armed < deadline_) break;  // armed in order: the rest are younger
    if (e.closing) continue;
    e.closing = true;
    ++closing_;
    out.push_back(e.id);
  }
  return out;
}

std::size_t connection_cap(uint64_t nofile_soft, std::size_t wanted, double share) {
  const auto by_limit = static_cast<std::size_t>(static_cast<double>(nofile_soft) * share);
  return std::max<std::size_t>(16, std::min(wanted, by_limit));
}

}  // namespace headroom::publishers
