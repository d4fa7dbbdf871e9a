// SPDX-License-Identifier: Apache-2.0
// The endpoint probe's reading half: every endpoint's counters from the
// per-CPU maps, and the requests in flight from each attached set's table
// (the socket set's memory-mapped slots, the syscall set's hash map, the
// HTTP/2 connections), each accounted at the caller's time.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <functional>
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

  const auto now = static_cast<uint64_t>(now_ns);
  out.at_ns = now_ns;
  out.inflight_unclaimed = 0;
  uint64_t used = 0;
  auto account = [&](const hr_inflight& r) {
    ++used;
    account_inflight(r, now, specs_, cache_, out.inflight_unclaimed);
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
  for (std::size_t i = 0; i < specs_.size(); ++i) copy_totals(cache_[i], out.endpoints[i]);
  return {};
}

Result<void> EndpointProbe::read_counters() {
  const int stats_fd = bpf_map__fd(skel_->obj->maps.stats);
  const int hist_fd = bpf_map__fd(skel_->obj->maps.hist);
  // Every endpoint's counters in one system call where the kernel can (5.6+).
  const std::size_t n = specs_.size();
  const auto ncpu = static_cast<std::size_t>(ncpu_);
  stats_all_.resize(n * ncpu);
  bool batched = false;
  if (batch_stats_) {
    uint32_t count = static_cast<uint32_t>(n), out_batch = 0;
    stats_keys_.resize(n);
    const int r = bpf_map_lookup_batch(stats_fd, nullptr, &out_batch, stats_keys_.data(), stats_all_.data(), &count,
                                       nullptr);
    if ((r == 0 || errno == ENOENT) && count == n) {
      batched = true;
    } else {
      batch_stats_ = false;  // one key at a time from now on
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto idx = static_cast<uint32_t>(i);
    const hr_stats* per_cpu = nullptr;
    if (batched) {
      per_cpu = &stats_all_[i * ncpu];
    } else {
      if (bpf_map_lookup_elem(stats_fd, &idx, stats_buf_.data()) != 0)
        return Error{errno, std::string("cannot read the eBPF stats map: ") + std::strerror(errno)};
      per_cpu = stats_buf_.data();
    }
    hr_stats sum{};
    for (std::size_t cpu = 0; cpu < ncpu; ++cpu) {
      const auto& s = per_cpu[cpu];
      sum.completed += s.completed;
      sum.errors += s.errors;
      sum.over_target += s.over_target;
      sum.over_max += s.over_max;
      sum.aborted += s.aborted;
      sum.busy_ns += s.busy_ns;
    }
    auto& c = cache_[i];
    if (sum.completed != c.stats.completed) {  // the histogram only moves with completions
      if (bpf_map_lookup_elem(hist_fd, &idx, hist_buf_.data()) != 0)
        return Error{errno, std::string("cannot read the eBPF histogram map: ") + std::strerror(errno)};
      c.hist.fill(0);
      for (const auto& h : hist_buf_)
        for (std::size_t b = 0; b < HR_HIST_BUCKETS; ++b) c.hist[b] += h.counts[b];
    }
    c.stats = sum;
    c.inflight = c.inflight_over_target = c.inflight_over_max = c.inflight_age_ns = 0;
    c.pending = c.pending_over_target = c.pending_over_max = 0;
  }
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
                      std::vector<EndpointTotals>& totals, uint64_t& unclaimed) {
  const uint64_t age = hr_server_time(&r, now_ns);
  auto pending = [&](std::size_t i) {
    auto& c = totals[i];
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
  auto& c = totals[r.ep];
  ++c.inflight;
  c.inflight_age_ns += age;
  if (age > specs[r.ep].target_ns) ++c.inflight_over_target;
  if (age > specs[r.ep].max_ns) ++c.inflight_over_max;
}

}  // namespace headroom::probes
