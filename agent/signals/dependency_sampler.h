// SPDX-License-Identifier: Apache-2.0
// The dependencies' sampler: owns the eBPF dependency probe when the
// configuration declares dependencies and agent.ebpf is not "off", and turns
// each snapshot into finished signals, once per tick: snapshot (probes/) ->
// interval -> window -> DependencySignals (dependency_signals.h). When the
// probe cannot run, it says why once and the dependency reports carry
// headroom.ebpf.unavailable; nothing else is affected.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/dependency_signals.h"
#include "probes/dependency_probe.h"
#include "publishers/failure_latch.h"

namespace headroom::agent {

// What the probe is told of a [[dependency]]: an IPv4 address as IPv4-mapped
// IPv6, no address for "any host". Pure.
probes::DependencySpec dependency_spec(const DependencyConfig& dependency);

class DependencySampler {
 public:
  // Never fails: a probe that cannot load leaves unavailable() set.
  explicit DependencySampler(const Config& config);
  // Tests: the snapshots come from `read` (given the tick's time) instead of
  // a probe (none is loaded).
  using Reader = std::function<Result<void>(probes::DependencySnapshot&, int64_t now_ns)>;
  DependencySampler(const Config& config, Reader read);
  // Says how the HTTP/2 walks fared, when an http2 dependency was measured.
  ~DependencySampler();
  DependencySampler(const DependencySampler&) = delete;
  DependencySampler& operator=(const DependencySampler&) = delete;

  // Reads the probe; the first call only records the baseline. A read that
  // fails leaves this tick's dependencies without signals, keeps the probe
  // and tries again next tick (the first good read after it spans the gap).
  void sample(int64_t monotonic_ns);

  struct Dependency {
    DependencyConfig config;
    DependencyWindow window;
    // The window's signals after the last sample; nullopt before the
    // baseline and while the probe does not run.
    std::optional<DependencySignals> signals;
    // The last sample added an interval to the window (window.newest()).
    bool counted = false;
  };
  const std::vector<Dependency>& dependencies() const { return dependencies_; }

  // Why there are no signals ("" when the probe runs or is off).
  const std::string& unavailable() const { return unavailable_; }
  bool running() const { return probe_ != nullptr || static_cast<bool>(read_); }
  bool off() const { return off_; }
  // Wanted (dependencies declared, agent.ebpf not "off") and not attached.
  bool failed() const { return !dependencies_.empty() && !off_ && !running(); }
  bool read_failing() const { return read_latch_.failing(); }
  // For the status line: "eBPF on (kind)", "eBPF off", "eBPF unavailable: why".
  std::string status() const;
  // Once the sampler is in force: what it measures, or why it cannot (once).
  void announce() const;

 private:
  Result<void> read(probes::DependencySnapshot& into, int64_t now_ns);

  std::vector<Dependency> dependencies_;
  std::unique_ptr<probes::DependencyProbe> probe_;
  Reader read_;  // tests only
  std::string unavailable_;
  bool off_ = false;
  probes::DependencySnapshot prev_, cur_;
  bool have_prev_ = false;
  FailureLatch read_latch_, table_latch_;
  std::string read_error_;
};

}  // namespace headroom::agent
