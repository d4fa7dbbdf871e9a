// SPDX-License-Identifier: Apache-2.0
// The endpoint probe's reading half: every endpoint's counters from the
// per-CPU maps, and the requests in flight from each attached set's table
// (the socket set's memory-mapped slots, the syscall set's hash map, the
// HTTP/2 connections), each accounted at the caller's time.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <iterator>
#include <string>

#include "probes/endpoint_probe.h"
#include "probes/endpoint_skeleton.h"

namespace headroom::probes {

namespace {

// Into a snapshot this probe filled before (or an empty one): a histogram
// changes only with the completed count read with it, so the 2.4 KiB are
// copied only when that count moved.
void copy_totals(const EndpointTotals& from, EndpointTotals& to) {
  static_assert(sizeof(EndpointTotals) ==
                    sizeof(hr_stats) + sizeof(EndpointTotals::hist) + 7 * sizeof(uint64_t),
                "copy_totals copies every field");
  if (to.stats.completed != from.stats.completed) to.hist = from.hist;
  to.stats = from.stats;
  to.inflight = from.inflight;
  to.inflight_over_target = from.inflight_over_target;
  to.inflight_over_max = from.inflight_over_max;
  to.inflight_age_ns = from.inflight_age_ns;
  to.pending = from.pending;
  to.pending_over_target = from.pending_over_target;
  to.pending_over_max = from.pending_over_max;
}

}  // namespace

Result<void> EndpointProbe::read(EndpointSnapshot& out, int64_t now_ns) {
  if (read_fault_) {
    if (auto r = read_fault_(); !r) return r.error();
  }
  out.endpoints.resize(specs_.size());
  if (auto r = read_counters(); !r) return r.error();
  if (auto r = read_listeners(); !r) return r.error();

  const auto now = static_cast<uint64_t>(now_ns);
  out.at_ns = now_ns;
  out.inflight_unclaimed = 0;
  uint64_t used = 0;
  auto account = [&](const hr_inflight& r) {
    ++used;
    account_inflight(
        r, now, specs_, [&](std::size_t ep) -> EndpointTotals& { return instance_totals(static_cast<uint32_t>(ep), r.netns); },
        out.inflight_unclaimed);
  };
  // Each attached set's table; with both, the fuller one is reported.
  out.table_used = out.table_size = 0;
  auto table = [&](uint64_t size) {
    if (out.table_size == 0 || used * out.table_size > out.table_used * size) {
      out.table_used = used;
      out.table_size = size;
    }
    used = 0;
  };
  if (skel_->slots != nullptr) {
    if (auto r = read_slots(account); !r) return r.error();
    table(skel_->nslots);
  }
  if (syscalls_) {
    if (auto r = walk_inflight_map(account); !r) return r.error();
    table(bpf_map__max_entries(skel_->obj->maps.inflight));
  }
  out.h2_streams = out.h2_connections = 0;
  if (has_http2_) {
    if (auto r = walk_h2_streams(now, account, out); !r) return r.error();
    out.h2_streams = used;  // streams live in their connections' entries, not in an in-flight table
  }
  sum_endpoints();
  for (std::size_t i = 0; i < specs_.size(); ++i) copy_totals(cache_[i], out.endpoints[i]);
  out.instances.resize(inst_cache_.size());
  std::size_t k = 0;
  for (const auto& [key, totals] : inst_cache_) {
    auto& o = out.instances[k++];
    if (o.endpoint != key.first || o.netns != key.second) o.totals = EndpointTotals{};
    o.endpoint = key.first;
    o.netns = key.second;
    copy_totals(totals, o.totals);
  }
  out.listeners = listeners_;
  out.instances_lost = __atomic_load_n(&skel_->obj->bss->instances_lost, __ATOMIC_RELAXED);
  return {};
}

EndpointTotals& EndpointProbe::instance_totals(uint32_t endpoint, uint32_t netns) {
  auto it = inst_cache_.find({endpoint, netns});
  if (it != inst_cache_.end()) return it->second;
  // Requests in flight of an instance none of whose requests has ended yet:
  // under the bound, it is one; past it, they go to the overflow instance.
  const auto first = inst_cache_.lower_bound({endpoint, 0});
  const auto last = inst_cache_.lower_bound({endpoint + 1, 0});
  const auto count = static_cast<std::size_t>(std::distance(first, last));
  const bool has_overflow = first != last && first->first.second == HR_INSTANCE_OVERFLOW;
  if (count - (has_overflow ? 1 : 0) >= instance_bound_) netns = HR_INSTANCE_OVERFLOW;
  return inst_cache_[{endpoint, netns}];
}

// Each endpoint's totals: what its forgotten instances counted, plus its
// instances' (their requests in flight were accounted into them). A
// histogram is summed again only when the endpoint's completed count moved.
void EndpointProbe::sum_endpoints() {
  const std::size_t n = specs_.size();
  std::vector<uint64_t> completed(n);
  for (std::size_t i = 0; i < n; ++i) completed[i] = retired_[i].stats.completed;
  for (const auto& [key, t] : inst_cache_) completed[key.first] += t.stats.completed;
  std::vector<bool> moved(n);
  for (std::size_t i = 0; i < n; ++i) {
    moved[i] = completed[i] != cache_[i].stats.completed;
    auto& c = cache_[i];
    const auto& r = retired_[i];
    c.stats = r.stats;
    if (moved[i]) c.hist = r.hist;
    c.inflight = c.inflight_over_target = c.inflight_over_max = c.inflight_age_ns = 0;
    c.pending = c.pending_over_target = c.pending_over_max = 0;
  }
  for (const auto& [key, t] : inst_cache_) {
    auto& c = cache_[key.first];
    c.stats.completed += t.stats.completed;
    c.stats.errors += t.stats.errors;
    c.stats.over_target += t.stats.over_target;
    c.stats.over_max += t.stats.over_max;
    c.stats.aborted += t.stats.aborted;
    c.stats.busy_ns += t.stats.busy_ns;
    c.inflight += t.inflight;
    c.inflight_over_target += t.inflight_over_target;
    c.inflight_over_max += t.inflight_over_max;
    c.inflight_age_ns += t.inflight_age_ns;
    c.pending += t.pending;
    c.pending_over_target += t.pending_over_target;
    c.pending_over_max += t.pending_over_max;
    if (moved[key.first])
      for (std::size_t b = 0; b < HR_HIST_BUCKETS; ++b) c.hist[b] += t.hist[b];
  }
}

Result<void> EndpointProbe::read_counters() {
  const int fd = bpf_map__fd(skel_->obj->maps.instances);
  const auto ncpu = static_cast<std::size_t>(ncpu_);
  // Every instance's counters, a batch at a time (kernels 5.6+), the batch
  // sized so that its buffer stays near 64 KiB whatever the CPU count (a
  // value is 2.4 KiB per CPU).
  const auto kBatch = static_cast<uint32_t>(std::clamp<std::size_t>((64u << 10) / (sizeof(hr_inst) * ncpu), 1, 64));
  inst_keys_.resize(kBatch);
  inst_vals_.resize(kBatch * ncpu);
  for (auto& [key, t] : inst_cache_) {
    t.inflight = t.inflight_over_target = t.inflight_over_max = t.inflight_age_ns = 0;
    t.pending = t.pending_over_target = t.pending_over_max = 0;
  }
  auto one = [&](const hr_inst_key& key, const hr_inst* per_cpu) {
    if (key.ep >= specs_.size()) return;
    hr_stats sum{};
    for (std::size_t cpu = 0; cpu < ncpu; ++cpu) {
      const auto& s = per_cpu[cpu].stats;
      sum.completed += s.completed;
      sum.errors += s.errors;
      sum.over_target += s.over_target;
      sum.over_max += s.over_max;
      sum.aborted += s.aborted;
      sum.busy_ns += s.busy_ns;
    }
    auto& c = inst_cache_[{key.ep, key.netns}];
    if (sum.completed != c.stats.completed) {  // the histogram only moves with completions
      c.hist.fill(0);
      for (std::size_t cpu = 0; cpu < ncpu; ++cpu)
        for (std::size_t b = 0; b < HR_HIST_BUCKETS; ++b) c.hist[b] += per_cpu[cpu].hist.counts[b];
    }
    c.stats = sum;
  };
  hr_inst_key pos{};
  bool first = true;
  for (;;) {
    uint32_t count = kBatch;
    const int r = bpf_map_lookup_batch(fd, first ? nullptr : &pos, &pos, inst_keys_.data(), inst_vals_.data(),
                                       &count, nullptr);
    const int err = r != 0 ? errno : 0;
    if (r != 0 && err != ENOENT) {
      if (!first || (err != EINVAL && err != ENOTSUP && err != EOPNOTSUPP))
        return Error{err, std::string("cannot read the eBPF instances map: ") + std::strerror(err)};
      // kernels before 5.6: one key at a time
      hr_inst_key key{}, next{};
      const void* prev = nullptr;
      while (bpf_map_get_next_key(fd, prev, &next) == 0) {
        if (bpf_map_lookup_elem(fd, &next, inst_vals_.data()) == 0) one(next, inst_vals_.data());
        key = next;
        prev = &key;
      }
      break;
    }
    for (uint32_t k = 0; k < count; ++k) one(inst_keys_[k], &inst_vals_[k * ncpu]);
    first = false;
    if (err == ENOENT) break;
  }
  return {};
}

Result<void> EndpointProbe::read_listeners() {
  const int fd = bpf_map__fd(skel_->obj->maps.listeners);
  listeners_.clear();
  hr_listen_key key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    hr_listener v{};
    if (bpf_map_lookup_elem(fd, &next, &v) == 0)
      listeners_.push_back({next.netns, static_cast<uint16_t>(next.port), static_cast<pid_t>(v.tgid), v.listeners});
    key = next;
    prev = &key;
  }
  std::sort(listeners_.begin(), listeners_.end(), [](const ListenerState& a, const ListenerState& b) {
    return std::pair(a.netns, a.port) < std::pair(b.netns, b.port);
  });
  return {};
}

std::size_t EndpointProbe::traced_processes() const {
  const int fd = bpf_map__fd(skel_->obj->maps.procs);
  uint32_t key = 0, next = 0;
  std::size_t n = 0;
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    ++n;
    key = next;
    prev = &key;
  }
  return n;
}

// The socket set: the refresh program marks what each request's socket says
// now (read or not), then the slots are read in place.
Result<void> EndpointProbe::read_slots(const std::function<void(const hr_inflight&)>& account) {
  uint64_t args[1] = {0};
  bpf_test_run_opts run{};
  run.sz = sizeof run;
  run.ctx_in = args;
  run.ctx_size_in = sizeof args;
  if (bpf_prog_test_run_opts(bpf_program__fd(skel_->obj->progs.hr_sock_refresh), &run) != 0)
    return Error{errno, std::string("cannot refresh the requests in flight (eBPF test run): ") + std::strerror(errno)};
  for (std::size_t i = 0; i < skel_->nslots; ++i) {
    // The kernel writes the slots while this reads them: a request that
    // ends meanwhile reads as free or with start_ns 0, one that starts may
    // be missed until the next read.
    const hr_slot& slot = skel_->slots[i];
    if (__atomic_load_n(&slot.sk, __ATOMIC_RELAXED) == 0) continue;
    hr_inflight r{};
    std::memcpy(&r, &slot.r, sizeof r);
    if (r.start_ns == 0) continue;
    r.flags = static_cast<__u16>(r.flags | __atomic_load_n(&slot.seen, __ATOMIC_RELAXED));
    account(r);
  }
  return {};
}

// The syscall set: a batch walk of the inflight map, sized by what is in
// flight, not by the open connections.
Result<void> EndpointProbe::walk_inflight_map(const std::function<void(const hr_inflight&)>& account) {
  const int fd = bpf_map__fd(skel_->obj->maps.inflight);
  constexpr uint32_t kBatch = 256;
  keys_.resize(kBatch);
  vals_.resize(kBatch);
  uint64_t batch_pos = 0;
  bool first = true;
  bool batch_ok = true;
  for (;;) {
    uint32_t count = kBatch;
    const int r = bpf_map_lookup_batch(fd, first ? nullptr : &batch_pos, &batch_pos, keys_.data(), vals_.data(),
                                       &count, nullptr);
    const int err = r != 0 ? errno : 0;
    if (r != 0 && err != ENOENT) {
      if (first && (err == EINVAL || err == ENOTSUP || err == EOPNOTSUPP)) batch_ok = false;
      else return Error{err, std::string("cannot read the eBPF inflight map: ") + std::strerror(err)};
      break;
    }
    for (uint32_t k = 0; k < count; ++k) account(vals_[k]);
    first = false;
    if (err == ENOENT) break;
  }
  if (!batch_ok) {  // kernels before 5.6: one key at a time
    uint64_t key = 0, next = 0;
    const void* prev = nullptr;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
      hr_inflight v{};
      if (bpf_map_lookup_elem(fd, &next, &v) == 0) account(v);
      key = next;
      prev = &key;
    }
  }
  return {};
}

// HTTP/2: each connection's streams in flight, as requests of its endpoint
// (a stream whose request the client has not finished waits for the client:
// its time stops at its latest piece, as a request in pieces does), and its
// unread bytes as one pending request (their streams are not known yet).
Result<void> EndpointProbe::walk_h2_streams(uint64_t now_ns, const std::function<void(const hr_inflight&)>& account,
                                            EndpointSnapshot& out) {
  const int fd = bpf_map__fd(skel_->obj->maps.h2conns);
  constexpr uint32_t kBatch = 32;
  keys_.resize(kBatch);
  h2_vals_.resize(kBatch);
  auto one = [&](const hr_h2_conn& c) {
    ++out.h2_connections;
    if (c.unread_since != 0 && c.unread_since <= now_ns) {  // requests the server has not read: pending
      hr_inflight r{};
      r.start_ns = r.last_ns = c.unread_since;
      r.ep = HR_PENDING;
      r.port = c.port;
      r.netns = c.netns;
      r.flags = HR_F_WAITING;
      account(r);
    }
    for (const auto& s : c.s) {
      if (s.sid == 0 || s.start_ns == 0 || s.start_ns > now_ns) continue;
      hr_inflight r{};
      r.start_ns = s.start_ns;
      r.last_ns = s.last_ns;
      r.paused_ns = static_cast<__u64>(s.paused_us) * 1000;
      r.ep = c.ep;
      r.port = c.port;
      r.netns = c.netns;
      if (s.sid & HR_H2_BODY) r.flags = HR_F_PIECES | HR_F_DRAINED;
      account(r);
    }
  };
  uint64_t pos = 0;
  bool first = true;
  for (;;) {
    uint32_t count = kBatch;
    const int r =
        bpf_map_lookup_batch(fd, first ? nullptr : &pos, &pos, keys_.data(), h2_vals_.data(), &count, nullptr);
    const int err = r != 0 ? errno : 0;
    if (r != 0 && err != ENOENT) {
      if (!first || (err != EINVAL && err != ENOTSUP && err != EOPNOTSUPP))
        return Error{err, std::string("cannot read the eBPF HTTP/2 connections map: ") + std::strerror(err)};
      // kernels before 5.6: one key at a time
      uint64_t key = 0, next = 0;
      const void* prev = nullptr;
      hr_h2_conn v{};
      while (bpf_map_get_next_key(fd, prev, &next) == 0) {
        if (bpf_map_lookup_elem(fd, &next, &v) == 0) one(v);
        key = next;
        prev = &key;
      }
      break;
    }
    for (uint32_t k = 0; k < count; ++k) one(h2_vals_[k]);
    first = false;
    if (err == ENOENT) break;
  }
  std::vector<hr_h2_stats> per_cpu(static_cast<std::size_t>(ncpu_));
  const uint32_t zero = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->obj->maps.h2_stats), &zero, per_cpu.data()) != 0)
    return Error{errno, std::string("cannot read the eBPF HTTP/2 counters: ") + std::strerror(errno)};
  out.h2 = {};
  for (const auto& s : per_cpu) {
    out.h2.frames += s.frames;
    out.h2.split_headers += s.split_headers;
    out.h2.desyncs += s.desyncs;
    out.h2.resyncs += s.resyncs;
    out.h2.dropped += s.dropped;
    out.h2.hpack_lost += s.hpack_lost;
  }
  return {};
}

void account_inflight(const hr_inflight& r, uint64_t now_ns, const std::vector<EndpointSpec>& specs,
                      const std::function<EndpointTotals&(std::size_t)>& totals_of, uint64_t& unclaimed) {
  const uint64_t age = hr_server_time(&r, now_ns);
  auto pending = [&](std::size_t i) {
    auto& c = totals_of(i);
    ++c.pending;
    c.inflight_age_ns += age;  // outstanding for the client: part of the in-flight integral
    if (age > specs[i].target_ns) ++c.pending_over_target;
    if (age > specs[i].max_ns) ++c.pending_over_max;
  };
  if (r.ep == HR_PENDING) {  // its path not read yet: every endpoint of the port
    for (std::size_t i = 0; i < specs.size(); ++i)
      if (specs[i].port == r.port) pending(i);
    return;
  }
  if (r.ep >= specs.size()) {
    ++unclaimed;
    return;
  }
  if (r.flags & HR_F_WAITING) {  // its endpoint is known already
    pending(r.ep);
    return;
  }
  auto& c = totals_of(r.ep);
  ++c.inflight;
  c.inflight_age_ns += age;
  if (age > specs[r.ep].target_ns) ++c.inflight_over_target;
  if (age > specs[r.ep].max_ns) ++c.inflight_over_max;
}

void account_inflight(const hr_inflight& r, uint64_t now_ns, const std::vector<EndpointSpec>& specs,
                      std::vector<EndpointTotals>& totals, uint64_t& unclaimed) {
  account_inflight(r, now_ns, specs, [&](std::size_t i) -> EndpointTotals& { return totals[i]; }, unclaimed);
}

}  // namespace headroom::probes
