// SPDX-License-Identifier: Apache-2.0
// Every node signal in one table: its key (node.orca's utilization key,
// headroom/orca/names.h), what it means, and how it is sampled and normalized
// (the function that opens its probe, whose sample() turns readings into the
// fraction through normalize.h). NodeSampler runs the enabled rows in table
// order; the configuration's list of valid signals is the table's keys.
//
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "publishers/failure_latch.h"
#include "headroom/orca/names.h"
#include "headroom/orca/result.h"
#include "probes/cgroup.h"
#include "probes/host.h"

namespace headroom::agent {

struct Config;

struct NodeSample {
  // Available signals by utilization key. "cpu" is demand over capacity and may
  // exceed 1; every other value is in [0, 1]. A signal that is disabled,
  // unavailable, or still waiting for its baseline reading is absent.
  std::map<std::string, double, std::less<>> signals;
  // Raw figures published in named_metrics ("headroom.cpu.busy", ...).
  std::map<std::string, double, std::less<>> raw;
};

// Signals currently unavailable, with the reason (the first error seen). Each
// signal's change is logged once when it goes and once when it comes back.
class Availability {
 public:
  // `quiet`: record without logging, when another line already says why (the
  // cgroup's own, for the signals read from it).
  void mark(FailureLatch& latch, std::string_view key, const Error* error, bool quiet = false);
  const std::map<std::string, std::string, std::less<>>& reasons() const { return reasons_; }

 private:
  std::map<std::string, std::string, std::less<>> reasons_;
};

// What one sampling step hands each signal: the clock, the cgroup reading the
// signals share (read once per step), and where results go.
struct SampleContext {
  int64_t now_ns = 0;
  probes::CgroupProbe* cgroup = nullptr;                    // null: the host is measured
  const probes::CgroupReading* cgroup_reading = nullptr;  // null: no cgroup, or it could not be read
  const Error* cgroup_error = nullptr;                      // why it could not be read
  Availability* availability = nullptr;

  // Results. Entries of a NodeSample kept across ticks are overwritten in
  // place; NodeSampler drops those not written this step.
  void signal(std::string_view key, double value);
  void raw(std::string_view key, double value);

  NodeSample* out = nullptr;
  std::array<std::string_view, 16> written_signals{}, written_raw{};
  std::size_t n_signals = 0, n_raw = 0;
};

// One enabled signal's probe and the state it keeps between steps.
class SignalProbe {
 public:
  virtual ~SignalProbe() = default;
  virtual void sample(SampleContext& context) = 0;
};

struct NodeSignal;
using OpenSignal = std::unique_ptr<SignalProbe> (*)(const Config& config, const NodeSignal& row);

struct NodeSignal {
  std::string_view key;
  std::string_view description;
  OpenSignal open;
  // Pressure signals: the PSI file, and the cgroup v2's own.
  probes::Resource resource = probes::Resource::cpu;
  std::optional<probes::PressureReading> probes::CgroupReading::*cgroup_pressure = nullptr;
  std::optional<Error> probes::CgroupReading::*cgroup_pressure_error = nullptr;
};

std::unique_ptr<SignalProbe> open_cpu(const Config& config, const NodeSignal& row);
std::unique_ptr<SignalProbe> open_memory(const Config& config, const NodeSignal& row);
std::unique_ptr<SignalProbe> open_pressure(const Config& config, const NodeSignal& row);

inline constexpr NodeSignal kNodeSignalTable[] = {
    {orca::kSignalCpu,
     "CPU demand over capacity: busy share plus run-queue delay (host) or the cgroup's usage over its quota plus "
     "its cpu.pressure or throttling; may exceed 1",
     open_cpu},
    {orca::kSignalMemory, "memory in use: 1 - MemAvailable/MemTotal, or the cgroup's memory.current over its limit",
     open_memory},
    {orca::kSignalCpuPressure, "share of time some task waited for CPU (PSI some)", open_pressure,
     probes::Resource::cpu, &probes::CgroupReading::cpu_pressure,
     &probes::CgroupReading::cpu_pressure_error},
    {orca::kSignalMemoryPressure, "share of time some task stalled on memory (PSI some)", open_pressure,
     probes::Resource::memory, &probes::CgroupReading::memory_pressure,
     &probes::CgroupReading::memory_pressure_error},
    {orca::kSignalIoPressure, "share of time some task stalled on I/O (PSI some)", open_pressure,
     probes::Resource::io, &probes::CgroupReading::io_pressure,
     &probes::CgroupReading::io_pressure_error},
};

// The table's keys are node.orca's signal keys, in their order.
inline constexpr bool kTableHasEverySignalInOrder = [] {
  if (std::size(kNodeSignalTable) != std::size(orca::kNodeSignalKeys)) return false;
  for (std::size_t i = 0; i < std::size(kNodeSignalTable); ++i)
    if (kNodeSignalTable[i].key != orca::kNodeSignalKeys[i]) return false;
  return true;
}();
static_assert(kTableHasEverySignalInOrder, "kNodeSignalTable must have one row per orca::kNodeSignalKeys, in order");
using orca::kNodeSignalKeys;

}  // namespace headroom::agent
