#include "agent/sampler.h"

#include <spdlog/spdlog.h>

#include "agent/normalize.h"

namespace headroom::agent {
namespace {
constexpr std::string_view kCgroupSignal = "cgroup";
}

NodeSampler::NodeSampler(const Config& c)
    : want_cpu_(c.signal_enabled(kSignalCpu)),
      want_memory_(c.signal_enabled(kSignalMemory)),
      want_cpu_pressure_(c.signal_enabled(kSignalCpuPressure)),
      want_memory_pressure_(c.signal_enabled(kSignalMemoryPressure)),
      want_io_pressure_(c.signal_enabled(kSignalIoPressure)),
      host_cpu_(c.proc_root),
      schedstat_(c.proc_root),
      meminfo_(c.proc_root),
      cpu_pressure_(c.proc_root, probes::Resource::cpu),
      memory_pressure_(c.proc_root, probes::Resource::memory),
      io_pressure_(c.proc_root, probes::Resource::io) {}

Result<std::unique_ptr<NodeSampler>> NodeSampler::create(const Config& config) {
  std::unique_ptr<NodeSampler> s(new NodeSampler(config));
  if (!config.cgroup.empty()) {
    auto cg = probes::CgroupProbe::open(config.sys_root, config.cgroup, config.cgroup_version);
    if (!cg) return cg.error();
    s->cgroup_ = std::make_unique<probes::CgroupProbe>(std::move(cg.value()));
  }
  return s;
}

void NodeSampler::mark(std::string_view signal, const Error* error, bool quiet) {
  auto it = unavailable_.find(signal);
  if (error != nullptr) {
    if (it == unavailable_.end()) {
      if (!quiet) spdlog::warn("{} unavailable: {}", signal, error->message);
      unavailable_.emplace(std::string(signal), error->message);
    }
  } else if (it != unavailable_.end()) {
    if (!quiet) spdlog::info("{} available again", signal);
    unavailable_.erase(it);
  }
}

NodeSample NodeSampler::sample(int64_t now_ns) {
  NodeSample out;
  auto elapsed = [now_ns](int64_t then) { return now_ns - then; };

  // The host's /proc/stat gives the CPU count even when a cgroup is measured.
  std::optional<probes::HostCpuReading> host;
  if (want_cpu_) {
    auto r = host_cpu_.read();
    if (!cgroup_) mark(kSignalCpu, r ? nullptr : &r.error());
    if (r) host = *r;
  }

  std::optional<probes::CgroupReading> cg;
  if (cgroup_) {
    auto r = cgroup_->read();
    // cpu and memory come from the cgroup: they share its fate and its one log line.
    mark(kCgroupSignal, r ? nullptr : &r.error());
    if (want_cpu_) mark(kSignalCpu, r ? nullptr : &r.error(), /*quiet=*/true);
    if (want_memory_) mark(kSignalMemory, r ? nullptr : &r.error(), /*quiet=*/true);
    if (r) cg = *r;
  }

  std::optional<probes::MemInfoReading> mem;
  if (want_memory_) {
    auto r = meminfo_.read();
    if (!cgroup_) mark(kSignalMemory, r ? nullptr : &r.error());
    if (r) mem = *r;
  }

  // Pressure: a cgroup v2 has its own pressure files; the host's otherwise
  // (cgroup v1 has none). Counters from two sources are never subtracted.
  const bool cgroup_pressure = cgroup_ && cgroup_->version() == probes::CgroupVersion::v2;
  auto pressure = [&](bool wanted, std::string_view key, probes::PressureProbe& probe,
                      std::optional<probes::PressureReading> probes::CgroupReading::*member,
                      Previous<probes::PressureReading>& prev) {
    if (!wanted) return;
    std::optional<probes::PressureReading> reading;
    if (cgroup_pressure) {
      if (cg && (*cg).*member) {
        reading = (*cg).*member;
        mark(key, nullptr);
      } else {
        // When the whole cgroup failed, its one log line already says why.
        Error e = logic_error(cg ? "the cgroup " + cgroup_->directory() + " has no " + std::string(key) + " file"
                                 : "the cgroup could not be read");
        mark(key, &e, /*quiet=*/!cg);
      }
    } else {
      auto r = probe.read();
      mark(key, r ? nullptr : &r.error());
      if (r) reading = *r;
    }
    if (!reading) {
      prev.reading.reset();
      return;
    }
    if (prev.reading) {
      if (auto f = pressure_fraction(prev.reading->some.total_us, reading->some.total_us, elapsed(prev.at_ns)))
        out.signals.emplace(key, *f);
    }
    prev = {reading, now_ns};
  };
  pressure(want_cpu_pressure_, kSignalCpuPressure, cpu_pressure_, &probes::CgroupReading::cpu_pressure,
           prev_cpu_pressure_);
  pressure(want_memory_pressure_, kSignalMemoryPressure, memory_pressure_, &probes::CgroupReading::memory_pressure,
           prev_memory_pressure_);
  pressure(want_io_pressure_, kSignalIoPressure, io_pressure_, &probes::CgroupReading::io_pressure,
           prev_io_pressure_);

  // CPU.
  if (want_cpu_ && cgroup_) {
    if (cg) {
      const unsigned host_ncpu = host ? host->ncpu : 0;
      const double capacity = cgroup_cpu_capacity(host_ncpu, cg->cpu.quota_cpus, cg->cpu.cpuset_cpus);
      out.raw.emplace(orca::kMetricCpuCapacity, capacity);
      if (prev_cgroup_.reading) {
        const auto& p = *prev_cgroup_.reading;
        const int64_t dt = elapsed(prev_cgroup_.at_ns);
        auto busy = cgroup_cpu_fraction(p.cpu.usage_usec, cg->cpu.usage_usec, dt, capacity);
        // Demand beyond the allocation: the share of time the cgroup's tasks waited
        // for CPU (its cpu.pressure), or was throttled when it has no PSI.
        std::optional<double> saturation;
        if (cg->cpu_pressure && p.cpu_pressure)
          saturation = pressure_fraction(p.cpu_pressure->some.total_us, cg->cpu_pressure->some.total_us, dt);
        else
          saturation = throttled_fraction(p.cpu.throttled_usec, cg->cpu.throttled_usec, dt);
        if (busy) {
          out.raw.emplace(orca::kMetricCpuBusy, *busy);
          out.raw.emplace(orca::kMetricCpuSaturation, saturation.value_or(0.0));
          out.signals.emplace(kSignalCpu, *busy + saturation.value_or(0.0));
        }
      }
    }
  } else if (want_cpu_ && host) {
    out.raw.emplace(orca::kMetricCpuCapacity, static_cast<double>(host->ncpu));
    out.raw.emplace(orca::kMetricProcsRunning, host->procs_running > 0 ? host->procs_running - 1.0 : 0.0);
    out.raw.emplace(orca::kMetricProcsBlocked, static_cast<double>(host->procs_blocked));

    // Run-queue delay where the kernel accounts it (CONFIG_SCHEDSTATS), else the
    // sampled number of runnable tasks beyond the CPU count.
    std::optional<double> saturation;
    if (schedstat_usable_) {
      auto s = schedstat_.read();
      if (s) {
        if (prev_schedstat_.reading)
          saturation = run_delay_excess(*prev_schedstat_.reading, *s, elapsed(prev_schedstat_.at_ns));
        prev_schedstat_ = {*s, now_ns};
      } else {
        schedstat_usable_ = false;
        spdlog::info("run-queue delay is not accounted by this kernel ({}); CPU saturation uses the run-queue length",
                     s.error().message);
      }
    }
    if (!schedstat_usable_) saturation = runnable_excess(host->procs_running, host->ncpu);
    if (prev_cpu_.reading) {
      if (auto busy = cpu_busy_fraction(prev_cpu_.reading->total, host->total)) {
        out.raw.emplace(orca::kMetricCpuBusy, *busy);
        out.raw.emplace(orca::kMetricCpuSaturation, saturation.value_or(0.0));
        out.signals.emplace(kSignalCpu, *busy + saturation.value_or(0.0));
      }
    }
    prev_cpu_ = {*host, now_ns};
  }
  if (cg) prev_cgroup_ = {*cg, now_ns};
  if (cgroup_ && !cg) prev_cgroup_.reading.reset();

  // Memory: a level, not a rate; available from the first sample.
  if (want_memory_) {
    std::optional<double> m;
    if (cg) {
      m = cgroup_memory_fraction(cg->memory, mem ? mem->total_bytes : 0);
      out.raw.emplace(orca::kMetricMemoryUsedBytes, static_cast<double>(cg->memory.current_bytes));
    } else if (!cgroup_ && mem) {
      m = memory_fraction(*mem);
      out.raw.emplace(orca::kMetricMemoryUsedBytes, static_cast<double>(mem->total_bytes - std::min(mem->available_bytes, mem->total_bytes)));
    }
    if (m) out.signals.emplace(kSignalMemory, *m);
  }
  return out;
}

}  // namespace headroom::agent
