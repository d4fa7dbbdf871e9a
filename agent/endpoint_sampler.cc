// SPDX-License-Identifier: Apache-2.0
#include "agent/endpoint_sampler.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace headroom::agent {

EndpointSampler::EndpointSampler(const Config& config) {
  const std::size_t window = window_intervals(config.interval, config.smoothing);
  std::vector<probes::EndpointSpec> specs;
  for (const auto& e : config.endpoints) {
    endpoints_.push_back({e, EndpointWindow(window), std::nullopt, false});
    specs.push_back({e.port, e.path, static_cast<uint64_t>(e.target.count()), static_cast<uint64_t>(e.max.count())});
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
  probes::EndpointProbeOptions options;
  options.proc_root = config.proc_root;
  options.sys_root = config.sys_root;
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
  auto probe = probes::EndpointProbe::open(specs, options);
  if (!probe) {
    fail(probe.error().message);
    return;
  }
  probe_ = std::move(probe.value());
  spdlog::info("eBPF endpoint probe attached ({}{}; {} endpoint(s); maps {:.1f} MiB; {} server process(es) found)",
               probe_->attach_kind(),
               probe_->sees_arrival() ? ", request arrival seen"
                                      : ", no sock:sk_data_ready (kernel < 6.6): requests start when read",
               endpoints_.size(), static_cast<double>(probe_->map_bytes()) / (1 << 20),
               probe_->traced_processes());
}

void EndpointSampler::fail(const std::string& why) {
  unavailable_ = why;
  spdlog::error("endpoint latency signals unavailable: {}. The node's signals are still published; the endpoint "
                "reports carry headroom.ebpf.unavailable = 1",
                why);
}

std::string EndpointSampler::status() const {
  if (endpoints_.empty()) return "no endpoints";
  if (probe_) return "eBPF on (" + probe_->attach_kind() + ")";
  return off_ ? "eBPF off" : "eBPF unavailable";
}

void EndpointSampler::sample(int64_t monotonic_ns) {
  (void)monotonic_ns;  // the snapshot carries the kernel clock's time
  for (auto& e : endpoints_) e.counted = false;
  if (!probe_) return;
  if (auto r = probe_->read(cur_); !r) {
    fail("reading the eBPF maps failed: " + r.error().message);
    probe_.reset();
    for (auto& e : endpoints_) e.signals.reset();
    return;
  }
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
  std::swap(prev_, cur_);
  have_prev_ = true;
}

}  // namespace headroom::agent
