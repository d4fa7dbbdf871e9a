// SPDX-License-Identifier: Apache-2.0
#include "agent/signals/signals.h"

#include <algorithm>
#include <utility>

#include "agent/config/config.h"
#include "agent/signals/normalize.h"

namespace headroom::agent {

void Availability::mark(FailureLatch& latch, std::string_view key, const Error* error, bool quiet) {
  if (error != nullptr) {
    if (latch.fail(quiet ? spdlog::level::off : spdlog::level::warn, "{} unavailable: {}", key, error->message))
      reasons_.emplace(std::string(key), error->message);
  } else if (quiet ? latch.ok_quietly() : latch.ok("{} available again", key)) {
    if (auto it = reasons_.find(key); it != reasons_.end()) reasons_.erase(it);
  }
}

namespace {

template <std::size_t N>
void put(std::map<std::string, double, std::less<>>& map, std::array<std::string_view, N>& written, std::size_t& n,
         std::string_view key, double value) {
  if (auto it = map.find(key); it != map.end())
    it->second = value;
  else
    map.emplace(std::string(key), value);
  if (n < N) written[n++] = key;
}

template <class Reading>
struct Previous {
  std::optional<Reading> reading;
  int64_t at_ns = 0;
};

// A signal read from one controller of the cgroup: a controller missing or
// unreadable gives its own line (and `missing` remembers it, for the line
// when it comes back); a cgroup that failed as a whole has its one line, so
// the signal is marked quietly then. `why` is the reading's reason for the
// controller's part, null when there is no reading.
void mark_controller(SampleContext& ctx, FailureLatch& latch, std::string_view key, const std::optional<Error>* why,
                     bool& missing) {
  if (why != nullptr && *why) {
    // Already unavailable with the whole cgroup (a group being made, one
    // hierarchy after another): no line of its own now, so none when it is back.
    if (!ctx.availability->reasons().contains(key)) missing = true;
    ctx.availability->mark(latch, key, &**why);
    return;
  }
  const bool was_missing = why != nullptr && std::exchange(missing, false);
  ctx.availability->mark(latch, key, ctx.cgroup_error, /*quiet=*/!was_missing);
}

// cpu: host or cgroup; the host's /proc/stat gives the CPU count either way.
class CpuSignal final : public SignalProbe {
 public:
  explicit CpuSignal(const Config& c) : host_cpu_(c.proc_root), schedstat_(c.proc_root) {}

  void sample(SampleContext& ctx) override {
    auto r = host_cpu_.read();
    if (ctx.cgroup == nullptr) {
      ctx.availability->mark(latch_, orca::kSignalCpu, r ? nullptr : &r.error());
    } else {
      const auto* cg = ctx.cgroup_reading;
      mark_controller(ctx, latch_, orca::kSignalCpu, cg ? &cg->cpu_error : nullptr, cpu_missing_);
    }
    const probes::HostCpuReading* host = r ? &*r : nullptr;
    if (ctx.cgroup != nullptr)
      sample_cgroup(ctx, host);
    else if (host != nullptr)
      sample_host(ctx, *host);
  }

 private:
  void sample_cgroup(SampleContext& ctx, const probes::HostCpuReading* host) {
    const probes::CgroupReading* cg = ctx.cgroup_reading;
    if (cg == nullptr || !cg->cpu) {
      // Flagged, so that a cpu_utilization of 0 is not taken for an idle cgroup.
      ctx.raw(orca::kMetricCgroupCpuUnavailable, 1.0);
      prev_cgroup_.reading.reset();
      return;
    }
    const probes::CgroupCpuReading& now = *cg->cpu;
    const double capacity = cgroup_cpu_capacity(host ? host->ncpu : 0, now.quota_cpus, now.cpuset_cpus);
    ctx.raw(orca::kMetricCpuCapacity, capacity);
    if (prev_cgroup_.reading) {
      const auto& p = *prev_cgroup_.reading;
      const int64_t dt = ctx.now_ns - prev_cgroup_.at_ns;
      auto busy = cgroup_cpu_fraction(p.cpu->usage_usec, now.usage_usec, dt, capacity);
      // Demand beyond the allocation: the share of time the cgroup's tasks waited
      // for CPU (its cpu.pressure), or was throttled when it has no PSI.
      std::optional<double> saturation;
      if (cg->cpu_pressure && p.cpu_pressure)
        saturation = pressure_fraction(p.cpu_pressure->some.total_us, cg->cpu_pressure->some.total_us, dt);
      else
        saturation = throttled_fraction(p.cpu->throttled_usec, now.throttled_usec, dt);
      if (busy) {
        ctx.raw(orca::kMetricCpuBusy, *busy);
        ctx.raw(orca::kMetricCpuSaturation, saturation.value_or(0.0));
        ctx.signal(orca::kSignalCpu, *busy + saturation.value_or(0.0));
      }
    }
    prev_cgroup_ = {*cg, ctx.now_ns};
  }

  void sample_host(SampleContext& ctx, const probes::HostCpuReading& host) {
    ctx.raw(orca::kMetricCpuCapacity, static_cast<double>(host.ncpu));
    ctx.raw(orca::kMetricProcsRunning, host.procs_running > 0 ? host.procs_running - 1.0 : 0.0);
    ctx.raw(orca::kMetricProcsBlocked, static_cast<double>(host.procs_blocked));

    // Run-queue delay where the kernel accounts it (CONFIG_SCHEDSTATS), else the
    // sampled number of runnable tasks beyond the CPU count.
    std::optional<double> saturation;
    if (schedstat_usable_) {
      auto s = schedstat_.read();
      if (s) {
        if (prev_schedstat_.reading)
          saturation = run_delay_excess(*prev_schedstat_.reading, *s, ctx.now_ns - prev_schedstat_.at_ns);
        prev_schedstat_ = {*s, ctx.now_ns};
      } else {
        schedstat_usable_ = false;
        spdlog::info("run-queue delay is not accounted by this kernel ({}); CPU saturation uses the run-queue length",
                     s.error().message);
      }
    }
    if (!schedstat_usable_) saturation = runnable_excess(host.procs_running, host.ncpu);
    if (prev_cpu_.reading) {
      if (auto busy = cpu_busy_fraction(prev_cpu_.reading->total, host.total)) {
        ctx.raw(orca::kMetricCpuBusy, *busy);
        ctx.raw(orca::kMetricCpuSaturation, saturation.value_or(0.0));
        ctx.signal(orca::kSignalCpu, *busy + saturation.value_or(0.0));
      }
    }
    prev_cpu_ = {host, ctx.now_ns};
  }

  probes::HostCpuProbe host_cpu_;
  probes::SchedStatProbe schedstat_;
  bool schedstat_usable_ = true;
  Previous<probes::HostCpuReading> prev_cpu_;
  Previous<probes::SchedStatReading> prev_schedstat_;
  Previous<probes::CgroupReading> prev_cgroup_;  // always with its cpu
  FailureLatch latch_;
  bool cpu_missing_ = false;  // the cgroup's CPU could not be read at the last sample
};

// memory: a level, not a rate; available from the first sample.
class MemorySignal final : public SignalProbe {
 public:
  explicit MemorySignal(const Config& c) : meminfo_(c.proc_root) {}

  void sample(SampleContext& ctx) override {
    auto mem = meminfo_.read();
    const auto* cg = ctx.cgroup_reading;
    if (ctx.cgroup == nullptr) {
      ctx.availability->mark(latch_, orca::kSignalMemory, mem ? nullptr : &mem.error());
    } else {
      mark_controller(ctx, latch_, orca::kSignalMemory, cg ? &cg->memory_error : nullptr, memory_missing_);
    }
    std::optional<double> m;
    if (cg != nullptr && cg->memory) {
      m = cgroup_memory_fraction(*cg->memory, mem ? mem->total_bytes : 0);
      ctx.raw(orca::kMetricMemoryUsedBytes, static_cast<double>(cg->memory->current_bytes));
    } else if (ctx.cgroup != nullptr) {
      ctx.raw(orca::kMetricCgroupMemoryUnavailable, 1.0);  // mem_utilization 0 is not an empty cgroup
    } else if (mem) {
      m = memory_fraction(*mem);
      ctx.raw(orca::kMetricMemoryUsedBytes,
              static_cast<double>(mem->total_bytes - std::min(mem->available_bytes, mem->total_bytes)));
    }
    if (m) ctx.signal(orca::kSignalMemory, *m);
  }

 private:
  probes::MemInfoProbe meminfo_;
  FailureLatch latch_;
  bool memory_missing_ = false;  // the cgroup's memory could not be read at the last sample
};

// cpu.pressure, memory.pressure, io.pressure: a cgroup v2 has its own pressure
// files; the host's otherwise (cgroup v1 has none). Counters from two sources
// are never subtracted.
class PressureSignal final : public SignalProbe {
 public:
  PressureSignal(const Config& c, const NodeSignal& row) : row_(row), probe_(c.proc_root, row.resource) {}

  void sample(SampleContext& ctx) override {
    const bool cgroup_pressure = ctx.cgroup != nullptr && ctx.cgroup->version() == probes::CgroupVersion::v2;
    std::optional<probes::PressureReading> reading;
    if (cgroup_pressure) {
      const auto* cg = ctx.cgroup_reading;
      if (cg != nullptr && cg->*row_.cgroup_pressure) {
        reading = cg->*row_.cgroup_pressure;
        ctx.availability->mark(latch_, row_.key, nullptr);
      } else if (cg != nullptr && cg->*row_.cgroup_pressure_error) {
        ctx.availability->mark(latch_, row_.key, &*(cg->*row_.cgroup_pressure_error));
      } else {
        // When the whole cgroup failed, its one log line already says why.
        Error e = logic_error(cg ? "the cgroup " + ctx.cgroup->directory() + " has no " + std::string(row_.key) +
                                       " file"
                                 : "the cgroup could not be read");
        ctx.availability->mark(latch_, row_.key, &e, /*quiet=*/cg == nullptr);
      }
    } else {
      auto r = probe_.read();
      ctx.availability->mark(latch_, row_.key, r ? nullptr : &r.error());
      if (r) reading = *r;
    }
    if (!reading) {
      prev_.reading.reset();
      return;
    }
    if (prev_.reading) {
      if (auto f = pressure_fraction(prev_.reading->some.total_us, reading->some.total_us, ctx.now_ns - prev_.at_ns))
        ctx.signal(row_.key, *f);
    }
    prev_ = {reading, ctx.now_ns};
  }

 private:
  const NodeSignal& row_;
  probes::PressureProbe probe_;
  Previous<probes::PressureReading> prev_;
  FailureLatch latch_;
};

}  // namespace

void SampleContext::signal(std::string_view key, double value) {
  put(out->signals, written_signals, n_signals, key, value);
}
void SampleContext::raw(std::string_view key, double value) { put(out->raw, written_raw, n_raw, key, value); }

std::unique_ptr<SignalProbe> open_cpu(const Config& config, const NodeSignal&) {
  return std::make_unique<CpuSignal>(config);
}
std::unique_ptr<SignalProbe> open_memory(const Config& config, const NodeSignal&) {
  return std::make_unique<MemorySignal>(config);
}
std::unique_ptr<SignalProbe> open_pressure(const Config& config, const NodeSignal& row) {
  return std::make_unique<PressureSignal>(config, row);
}

}  // namespace headroom::agent
