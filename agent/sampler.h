// The node scope's sampler: owns the probes the configuration enables, keeps the
// previous readings, and turns each new reading into signals through the pure
// functions of normalize.h. The clock is passed in.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "agent/config.h"
#include "headroom/orca/result.h"
#include "probes/cgroup.h"
#include "probes/host.h"

namespace headroom::agent {

struct NodeSample {
  // Available signals by utilization key. "cpu" is demand over capacity and may
  // exceed 1; every other value is in [0, 1]. A signal that is disabled,
  // unavailable, or still waiting for its baseline reading is absent.
  std::map<std::string, double, std::less<>> signals;
  // Raw figures published in named_metrics ("headroom.cpu.busy", ...).
  std::map<std::string, double, std::less<>> raw;
};

class NodeSampler {
 public:
  // Opens the probes. Fails only when the configured cgroup does not exist;
  // a missing host file makes its signal unavailable instead.
  static Result<std::unique_ptr<NodeSampler>> create(const Config& config);

  // Reads every probe. The first call only records a baseline for the rates.
  NodeSample sample(int64_t monotonic_ns);

  // Signals currently unavailable, with the reason (the first error seen).
  const std::map<std::string, std::string, std::less<>>& unavailable() const { return unavailable_; }
  bool uses_cgroup() const { return cgroup_ != nullptr; }

 private:
  NodeSampler(const Config& config);
  // Records the state of one signal; logs once when it becomes unavailable and
  // once when it comes back.
  void mark(std::string_view signal, const Error* error, bool quiet = false);

  template <class Reading>
  struct Previous {
    std::optional<Reading> reading;
    int64_t at_ns = 0;
  };

  bool want_cpu_ = false, want_memory_ = false, want_cpu_pressure_ = false, want_memory_pressure_ = false,
       want_io_pressure_ = false;
  probes::HostCpuProbe host_cpu_;
  probes::SchedStatProbe schedstat_;
  probes::MemInfoProbe meminfo_;
  probes::PressureProbe cpu_pressure_, memory_pressure_, io_pressure_;
  std::unique_ptr<probes::CgroupProbe> cgroup_;
  bool schedstat_usable_ = true;

  Previous<probes::HostCpuReading> prev_cpu_;
  Previous<probes::SchedStatReading> prev_schedstat_;
  Previous<probes::CgroupReading> prev_cgroup_;
  Previous<probes::PressureReading> prev_cpu_pressure_, prev_memory_pressure_, prev_io_pressure_;

  std::map<std::string, std::string, std::less<>> unavailable_;
};

}  // namespace headroom::agent
