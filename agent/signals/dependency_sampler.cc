// SPDX-License-Identifier: Apache-2.0
#include "agent/signals/dependency_sampler.h"

#include <arpa/inet.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "probes/program_set.h"

namespace headroom::agent {

probes::DependencySpec dependency_spec(const DependencyConfig& d) {
  probes::DependencySpec s;
  if (!d.host.empty()) {
    in6_addr a{};
    in_addr v4{};
    // The configuration holds a checked IP literal: IPv4 text for IPv4.
    if (::inet_pton(AF_INET, d.host.c_str(), &v4) == 1) {
      a.s6_addr[10] = 0xff;
      a.s6_addr[11] = 0xff;
      std::memcpy(&a.s6_addr[12], &v4, 4);
    } else {
      (void)::inet_pton(AF_INET6, d.host.c_str(), &a);
    }
    s.address = a;
  }
  s.port = d.port;
  s.target_ns = static_cast<uint64_t>(d.target.count());
  s.max_ns = static_cast<uint64_t>(d.max.count());
  s.protocol = d.protocol == DependencyProtocol::http2     ? probes::DependencyProtocol::http2
               : d.protocol == DependencyProtocol::generic ? probes::DependencyProtocol::generic
                                                           : probes::DependencyProtocol::http1;
  s.caller_cgroup = d.callers_cgroup;
  s.caller_process = d.callers_process;
  s.errors.status_5xx = (d.errors & kDependencyError5xx) != 0;
  s.errors.status_4xx = (d.errors & kDependencyError4xx) != 0;
  s.errors.connect = (d.errors & kDependencyErrorConnect) != 0;
  s.errors.reset = (d.errors & kDependencyErrorReset) != 0;
  return s;
}

DependencySampler::DependencySampler(const Config& config, Reader read) : read_(std::move(read)) {
  const std::size_t window = window_intervals(config.interval, config.smoothing);
  for (const auto& d : config.dependencies) dependencies_.push_back({d, DependencyWindow(window), std::nullopt, false});
}

DependencySampler::~DependencySampler() {
  if (!running() || !have_prev_) return;
  const bool http2 = std::any_of(dependencies_.begin(), dependencies_.end(), [](const Dependency& d) {
    return d.config.protocol == DependencyProtocol::http2;
  });
  if (!http2) return;
  const probes::DependencyHttp2Counts& h = prev_.http2;
  spdlog::info("HTTP/2 dependency walks since the probe was loaded: {} frames, {} streams measured, {} not measured "
               "(entry or slot taken), {} desyncs, {} resyncs, {} streams given up with the server's frames lost, {} "
               "connections whose header blocks could not be followed",
               h.frames, h.streams, h.dropped, h.desyncs, h.resyncs, h.lost, h.hpack_lost);
}

DependencySampler::DependencySampler(const Config& config) {
  const std::size_t window = window_intervals(config.interval, config.smoothing);
  std::vector<probes::DependencySpec> specs;
  for (const auto& d : config.dependencies) {
    dependencies_.push_back({d, DependencyWindow(window), std::nullopt, false});
    specs.push_back(dependency_spec(d));
  }
  if (dependencies_.empty()) return;
  if (config.ebpf == EbpfMode::off) {
    off_ = true;
    unavailable_ = "agent.ebpf is \"off\"";
    return;
  }
  probes::DependencyProbeOptions options;
  options.proc_root = config.proc_root;
  options.sys_root = config.sys_root;
  // The same restriction of the program set as the endpoint probe's.
  if (const char* set = std::getenv("HEADROOM_EBPF_PROGRAMS")) {
    auto programs = probes::parse_program_set(set);
    if (!programs) {
      unavailable_ = "HEADROOM_EBPF_PROGRAMS: " + programs.error().message;
      return;
    }
    options.programs = *programs;
  }
  if (const char* fault = std::getenv("HEADROOM_TEST_EBPF_READ_FAULT")) options.fail_reads_while = fault;
  auto probe = probes::DependencyProbe::open(specs, options);
  if (!probe) {
    unavailable_ = probe.error().message;
    return;
  }
  probe_ = std::move(probe.value());
}

void DependencySampler::announce() const {
  if (dependencies_.empty()) return;
  if (off_) {
    spdlog::warn("dependency signals are off (agent.ebpf = \"off\" or --no-ebpf): {} dependency report(s) carry "
                 "headroom.ebpf.unavailable = 1",
                 dependencies_.size());
  } else if (failed()) {
    spdlog::error("dependency signals unavailable: {}. The other reports are still published; the dependency "
                  "reports carry headroom.ebpf.unavailable = 1",
                  unavailable_);
  } else if (probe_) {
    spdlog::info("eBPF dependency probe attached ({}; {} dependency(ies); maps {:.1f} MiB): outbound calls' "
                 "latency, concurrency and errors, seen from the callers",
                 probe_->attach_kind(), dependencies_.size(), static_cast<double>(probe_->map_bytes()) / (1 << 20));
    if (!probe_->load_failures().empty())
      spdlog::warn("eBPF dependency probe: a better program set did not load ({}); {} attached instead, which "
                   "costs more per call or measures less. Report it with the kernel version",
                   probe_->load_failures(), probe_->attach_kind());
  }
}

std::string DependencySampler::status() const {
  if (dependencies_.empty()) return "no dependencies";
  if (!running()) return off_ ? "eBPF off" : "eBPF unavailable: " + unavailable_;
  std::string s = "eBPF on (" + (probe_ ? probe_->attach_kind() : std::string("test")) + ")";
  if (read_failing()) s += ", reading its maps failing: " + read_error_;
  return s;
}

Result<void> DependencySampler::read(probes::DependencySnapshot& into, int64_t now_ns) {
  if (probe_) return probe_->read(into, now_ns);
  return read_(into, now_ns);
}

void DependencySampler::sample(int64_t monotonic_ns) {
  for (auto& d : dependencies_) d.counted = false;
  if (!running()) return;
  if (auto r = read(cur_, monotonic_ns); !r) {
    // prev_ stays the last good snapshot; this tick's dependencies are unavailable.
    if (read_latch_.fail(spdlog::level::err,
                         "reading the eBPF dependency maps failed: {}. The dependency reports carry "
                         "headroom.ebpf.unavailable = 1 until a read succeeds; retrying every interval",
                         r.error().message))
      read_error_ = r.error().message;
    for (auto& d : dependencies_) d.signals.reset();
    return;
  }
  if (read_latch_.ok("reading the eBPF dependency maps works again; the dependency signals are back"))
    read_error_.clear();
  if (cur_.table_size > 0) {
    // As the endpoints' table: full from 7/8, room again below 3/4.
    if (cur_.table_used * 8 >= cur_.table_size * 7)
      table_latch_.fail(spdlog::level::warn,
                        "the eBPF dependency call table is full ({} of {} calls): calls that find no room are not "
                        "counted until it drains",
                        cur_.table_used, cur_.table_size);
    else if (cur_.table_used * 4 < cur_.table_size * 3)
      table_latch_.ok("the eBPF dependency call table has room again ({} of {} calls)", cur_.table_used,
                      cur_.table_size);
  }
  // A snapshot that does not hold every dependency is no measure of them:
  // unavailable this tick, as after a failed read.
  if (cur_.dependencies.size() != dependencies_.size()) {
    for (auto& d : dependencies_) d.signals.reset();
    return;
  }
  if (have_prev_) {
    for (std::size_t i = 0; i < dependencies_.size(); ++i) {
      auto& d = dependencies_[i];
      const auto& b = cur_.dependencies[i];
      d.window.add(dependency_interval(prev_.dependencies[i], prev_.at_ns, b, cur_.at_ns), b);
      d.signals = d.window.signals(d.config);
      d.counted = true;
    }
  }
  std::swap(prev_, cur_);
  have_prev_ = true;
}

}  // namespace headroom::agent
