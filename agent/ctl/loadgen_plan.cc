// SPDX-License-Identifier: Apache-2.0
// The load engine's schedule (agent/ctl/loadgen_plan.h).
#include "agent/ctl/loadgen_plan.h"

#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

namespace headroom::ctl::loadgen {
namespace {

bool has_ctl(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

}  // namespace

headroom::Result<std::vector<PhasePlan>> plan(const Options& o) {
  if (o.classes.empty()) return logic_error("loadgen: no request classes");
  if (o.classes.size() > 256) return logic_error("loadgen: more than 256 request classes");
  if (o.phases.size() > 65536) return logic_error("loadgen: more than 65536 phases");
  if (o.max_connections < 1) return logic_error("loadgen: max_connections must be at least 1");
  if (o.timeout.count() <= 0) return logic_error("loadgen: timeout must be positive");
  if (o.more_instances.size() + 1 > kMaxInstances)
    return logic_error("loadgen: more than " + std::to_string(kMaxInstances) + " instances of the target");
  for (std::size_t i = 0; i <= o.more_instances.size(); ++i) {
    const Target& t = i == 0 ? o.target : o.more_instances[i - 1];
    if ((t.addr.ss_family != AF_INET && t.addr.ss_family != AF_INET6) || t.addr_len == 0 || t.addr_len > sizeof t.addr)
      return logic_error("loadgen: the target address is not an IPv4 or IPv6 socket address");
    if (t.path.empty() || has_ctl(t.path) || t.path.find(' ') != std::string::npos)
      return logic_error("loadgen: bad request target '" + t.path + "'");
    if (has_ctl(t.host_header)) return logic_error("loadgen: bad Host header");
  }
  bool any_value = false;
  for (const auto& c : o.classes) {
    if (!(c.weight > 0) || !std::isfinite(c.weight))
      return logic_error("loadgen: a request class's weight must be a positive number");
    if (has_ctl(c.header_value)) return logic_error("loadgen: bad priority header value");
    any_value = any_value || !c.header_value.empty();
  }
  if (any_value && (o.priority_header.empty() || has_ctl(o.priority_header) ||
                    o.priority_header.find_first_of(": \t") != std::string::npos))
    return logic_error("loadgen: bad priority header name '" + o.priority_header + "'");

  std::vector<PhasePlan> plans;
  int64_t start = 0;
  uint64_t total = 0;
  for (const auto& ph : o.phases) {
    if (!(ph.rate >= 0) || !std::isfinite(ph.rate)) return logic_error("loadgen: a phase's rate must be >= 0");
    if (ph.duration.count() < 0) return logic_error("loadgen: a phase's duration must be >= 0");
    PhasePlan p;
    p.start_ns = start;
    const int64_t d = ph.duration.count();
    if (ph.rate > 0 && d > 0) {
      p.interval_ns = 1e9 / ph.rate;
      // The requests k with k * interval < duration, by the same arithmetic
      // that schedules them.
      const double estimate = std::ceil(static_cast<double>(d) / p.interval_ns);
      if (estimate > static_cast<double>(kMaxRequests)) return logic_error("loadgen: too many requests");
      uint64_t n = static_cast<uint64_t>(estimate);
      while (n > 0 && offset_ns(n - 1, p.interval_ns) >= d) --n;
      while (offset_ns(n, p.interval_ns) < d) ++n;
      p.count = n;
    }
    total += p.count;
    if (total > kMaxRequests) return logic_error("loadgen: too many requests");
    plans.push_back(p);
    start += d;
  }
  return plans;
}

void RetryQueue::push(const Record& ended, int64_t due_ns, std::size_t instances) {
  Record next;
  next.instance = next_instance(ended.instance, instances);
  next.phase = ended.phase;
  next.request_class = ended.request_class;
  next.attempt = static_cast<uint8_t>(ended.attempt + 1);
  next.first = ended.first;
  heap_.push(Pending{due_ns, next});
}

Record RetryQueue::pop(int64_t not_before_ns) {
  Pending p = heap_.top();
  heap_.pop();
  p.record.scheduled_ns = std::max(p.due_ns, not_before_ns);
  return p.record;
}

}  // namespace headroom::ctl::loadgen
