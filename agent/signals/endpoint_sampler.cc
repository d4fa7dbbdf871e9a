// SPDX-License-Identifier: Apache-2.0
#include "agent/signals/endpoint_sampler.h"

#include "agent/signals/normalize.h"
#include "headroom/orca/clock.h"
#include "probes/host.h"
#include "probes/own_pid.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>

namespace headroom::agent {

namespace {

// This process's PID as the kernel sees it, from proc_root: what the probe
// never traces and whose network namespace is the "host" instance. Why it
// may be wrong is said once per process, not at each reload.
pid_t own_pid(const std::string& proc_root) {
  static std::atomic<bool> warned{false};
  probes::OwnPid own = probes::own_pid(proc_root);
  if (!own.warning.empty() && !warned.exchange(true)) spdlog::warn("{}", own.warning);
  return own.pid;
}

ResourceRoots resource_roots(const Config& config) {
  ResourceRoots r;
  r.proc_root = config.proc_root;
  r.sys_root = config.sys_root;
  r.version = config.cgroup_version;
  const long ncpu = ::sysconf(_SC_NPROCESSORS_ONLN);
  r.host_ncpu = ncpu > 0 ? static_cast<unsigned>(ncpu) : 1;
  if (auto m = probes::MemInfoProbe(config.proc_root).read(); m) r.host_memory_bytes = m->total_bytes;
  r.alpha = ewma_alpha(config.interval.count(), config.smoothing.count());
  if (!config.endpoints.empty()) r.self = own_pid(config.proc_root);
  return r;
}

}  // namespace

EndpointSampler::EndpointSampler(const Config& config, Reader read)
    : instances_(config, resource_roots(config)), read_(std::move(read)) {
  const std::size_t window = window_intervals(config.interval, config.smoothing);
  for (const auto& e : config.endpoints) endpoints_.push_back({e, EndpointWindow(window), std::nullopt, false});
}

EndpointSampler::EndpointSampler(const Config& config) : instances_(config, resource_roots(config)) {
  const std::size_t window = window_intervals(config.interval, config.smoothing);
  std::vector<probes::EndpointSpec> specs;
  for (const auto& e : config.endpoints) {
    endpoints_.push_back({e, EndpointWindow(window), std::nullopt, false});
    specs.push_back({e.port, e.path, static_cast<uint64_t>(e.target.count()), static_cast<uint64_t>(e.max.count()),
                     e.protocol == EndpointProtocol::http2 ? probes::Protocol::http2 : probes::Protocol::http1});
  }
  if (endpoints_.empty()) return;
  if (config.ebpf == EbpfMode::off) {
    off_ = true;
    unavailable_ = "agent.ebpf is \"off\"";
    spdlog::warn("endpoint latency signals are off (agent.ebpf = \"off\" or --no-ebpf): {} endpoint report(s) "
                 "carry headroom.ebpf.unavailable = 1",
                 endpoints_.size());
    return;
  }
  http2_ = std::any_of(config.endpoints.begin(), config.endpoints.end(),
                       [](const EndpointConfig& e) { return e.protocol == EndpointProtocol::http2; });
  probes::EndpointProbeOptions options;
  options.proc_root = config.proc_root;
  options.sys_root = config.sys_root;
  options.instance_bound = config.endpoint_instances;
  options.self = instances_.roots().self;
  // HEADROOM_EBPF_PROGRAMS=sockets|syscalls|raw restricts the program set:
  // for tests, benchmarks and diagnosing a kernel.
  if (const char* set = std::getenv("HEADROOM_EBPF_PROGRAMS")) {
    auto programs = probes::parse_program_set(set);
    if (!programs) {
      fail("HEADROOM_EBPF_PROGRAMS: " + programs.error().message);
      return;
    }
    options.programs = *programs;
  }
  // HEADROOM_TEST_EBPF_READ_FAULT=FILE: while FILE exists, every read of
  // the maps fails (tests of a failing read, docs/endpoints.md).
  if (const char* fault = std::getenv("HEADROOM_TEST_EBPF_READ_FAULT")) options.fail_reads_while = fault;
  auto probe = probes::EndpointProbe::open(specs, options);
  if (!probe) {
    fail(probe.error().message);
    return;
  }
  probe_ = std::move(probe.value());
  if (!probe_->load_failures().empty())
    spdlog::warn("eBPF endpoint probe: a better program set did not load ({}); {} attached instead, which costs "
                 "more per request or measures less. Report it with the kernel version",
                 probe_->load_failures(), probe_->attach_kind());
  const bool http2 = http2_;
  spdlog::info("eBPF endpoint probe attached ({}{}; {} endpoint(s); maps {:.1f} MiB{}; {} server process(es) found)",
               probe_->attach_kind(),
               probe_->sees_arrival() ? ", request arrival seen"
                                      : ", no sock:sk_data_ready (kernel < 6.6): requests start when read",
               endpoints_.size(), static_cast<double>(probe_->map_bytes()) / (1 << 20),
               http2 ? fmt::format(" + {:.1f} KiB per HTTP/2 connection, up to {}",
                                   static_cast<double>(sizeof(hr_h2_conn)) / 1024, HR_MAX_H2_CONNS)
                     : std::string(),
               probe_->traced_processes());
}

void EndpointSampler::fail(const std::string& why) { unavailable_ = why; }

void EndpointSampler::announce() const {
  if (!failed()) return;
  spdlog::error("endpoint latency signals unavailable: {}. The node's signals are still published; the endpoint "
                "reports carry headroom.ebpf.unavailable = 1",
                unavailable_);
}

std::string EndpointSampler::status() const {
  if (endpoints_.empty()) return "no endpoints";
  if (!running()) return off_ ? "eBPF off" : "eBPF unavailable";
  std::string s = "eBPF on (" + (probe_ ? probe_->attach_kind() : std::string("test")) + ")";
  if (read_failing()) s += ", reading its maps failing since " + utc_time(read_failing_since_ms_) + ": " + read_error_;
  if (table_full()) s += ", in-flight table full";
  return s;
}

Result<void> EndpointSampler::read(probes::EndpointSnapshot& into) { return read_(into); }

void EndpointSampler::note_table(const probes::EndpointSnapshot& s) {
  if (s.table_size == 0) return;
  // Full from 7/8: the socket set's slots are searched 8 at a time from a
  // hashed position, so about a third of new requests find no room there
  // (it never fills beyond about 93 %); the syscall set's map loses
  // requests only at 100 %. Not full again below 3/4, so that a table at
  // the edge does not log every tick.
  if (s.table_used * 8 >= s.table_size * 7) {
    table_latch_.fail(spdlog::level::warn,
                      "the eBPF in-flight table is full ({} of {} requests): requests that find no room in it are "
                      "not counted by the endpoint signals until it drains",
                      s.table_used, s.table_size);
  } else if (s.table_used * 4 < s.table_size * 3) {
    table_latch_.ok("the eBPF in-flight table has room again ({} of {} requests)", s.table_used, s.table_size);
  }
}

EndpointSampler::~EndpointSampler() {
  if (!http2_ || !probe_ || !have_prev_) return;
  const hr_h2_stats& h = prev_.h2;
  spdlog::info("HTTP/2 frame parsers since the probe was loaded: {} frames, {} frame headers split between two "
               "system calls (handled), {} desyncs, {} resyncs, {} streams not measured (slot taken or no "
               "connection entry), {} header blocks not walked whole",
               h.frames, h.split_headers, h.desyncs, h.resyncs, h.dropped, h.hpack_lost);
}

void EndpointSampler::sample(int64_t monotonic_ns) {
  for (auto& e : endpoints_) e.counted = false;
  if (!running()) return;
  // The probe's requests age at the tick's time (the clock of
  // bpf_ktime_get_ns()); tests' readers bring their own.
  if (auto r = probe_ ? probe_->read(cur_, monotonic_ns) : read(cur_); !r) {
    // The probe stays: a read that failed once may succeed next tick. prev_
    // stays the last good snapshot; this tick's endpoints are unavailable.
    ++failed_reads_;
    if (read_latch_.fail(spdlog::level::err,
                         "reading the eBPF maps failed: {}. The endpoint reports carry headroom.ebpf.unavailable = 1 "
                         "until a read succeeds; retrying every interval",
                         r.error().message)) {
      read_error_ = r.error().message;
      read_failing_since_ms_ = orca::unix_now_ms();
    }
    for (auto& e : endpoints_) e.signals.reset();
    instances_.unavailable();
    return;
  }
  if (read_latch_.ok("reading the eBPF maps works again after {} failed read(s); the endpoint signals are back",
                     failed_reads_)) {
    failed_reads_ = 0;
    read_error_.clear();
  }
  note_table(cur_);
  if (have_prev_) {
    for (std::size_t i = 0; i < endpoints_.size(); ++i) {
      const auto& a = prev_.endpoints[i];
      const auto& b = cur_.endpoints[i];
      auto& e = endpoints_[i];
      // Requests waiting to be read are late like those being served.
      e.window.add(interval_between(a, prev_.at_ns, b, cur_.at_ns), b.inflight,
                   b.inflight_over_target + b.pending_over_target, b.inflight_over_max + b.pending_over_max,
                   b.pending);
      e.signals = e.window.signals(e.config);
      e.counted = true;
    }
  }
  instances_.sample(have_prev_ ? &prev_ : nullptr, cur_, monotonic_ns, [this](uint32_t endpoint, uint32_t netns) {
    if (probe_) (void)probe_->forget_instance(endpoint, netns);
  });
  std::swap(prev_, cur_);
  have_prev_ = true;
}

}  // namespace headroom::agent
