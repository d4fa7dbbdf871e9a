// SPDX-License-Identifier: Apache-2.0
// The endpoints' sampler: owns the eBPF probe when the configuration declares
// endpoints, and turns each snapshot into finished signals, once per tick:
// snapshot (probes/) -> interval -> window -> EndpointSignals
// (endpoint_signals.h). Everything downstream only reads them. When
// the probe cannot run, it says why once and the endpoints stay "latency
// signals unavailable"; the node's signals are not affected.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/endpoint_instances.h"
#include "agent/signals/endpoint_signals.h"
#include "publishers/failure_latch.h"
#include "probes/endpoint_probe.h"

namespace headroom::agent {

class EndpointSampler {
 public:
  // Never fails: a probe that cannot load leaves unavailable() set.
  explicit EndpointSampler(const Config& config);
  // Tests: the snapshots come from `read` instead of a probe (none is loaded).
  using Reader = std::function<Result<void>(probes::EndpointSnapshot&)>;
  EndpointSampler(const Config& config, Reader read);
  // With HTTP/2 endpoints, logs what the frame parsers met since the probe
  // was loaded (frames, split frame headers, desyncs, dropped streams).
  ~EndpointSampler();
  EndpointSampler(const EndpointSampler&) = delete;
  EndpointSampler& operator=(const EndpointSampler&) = delete;

  // Reads the probe; the first call only records the baseline. A read that
  // fails leaves this tick's endpoints without signals ("unavailable"), keeps
  // the probe and tries again next tick; the first good read after it adds
  // one interval from the last good snapshot, so nothing counted meanwhile
  // is lost. Logged once when reads start failing, once when they recover.
  void sample(int64_t monotonic_ns);

  struct Endpoint {
    EndpointConfig config;
    EndpointWindow window;
    // The window's signals after the last sample; nullopt before the
    // baseline and while the probe does not run ("latency signals unavailable").
    std::optional<EndpointSignals> signals;
    // Whether the last sample added an interval to the window
    // (window.newest(): what it counted since the sample before); not after
    // a sample that measured nothing (the baseline, no probe).
    bool counted = false;
  };
  const std::vector<Endpoint>& endpoints() const { return endpoints_; }
  // Each endpoint's instances (endpoint_instances.h), by endpoint and id.
  const std::vector<EndpointInstance>& instances() const { return instances_.instances(); }

  // Why there are no latency signals ("" when the probe runs or is off).
  const std::string& unavailable() const { return unavailable_; }
  // The probe is attached (its reads may still be failing: read_failing()).
  bool running() const { return probe_ != nullptr || read_; }
  // Whether a probe was wanted (endpoints declared, agent.ebpf not "off")
  // and could not be attached: a reload refuses to put such a sampler in
  // place of one that runs.
  bool failed() const { return !endpoints_.empty() && !off_ && !running(); }
  // The last read of the maps failed, since `read_failing_since_ms` (Unix ms).
  bool read_failing() const { return read_latch_.failing(); }
  // The in-flight table was found (nearly) full at the last read.
  bool table_full() const { return table_latch_.failing(); }
  // For the status line: "eBPF on (tp_btf)", "eBPF off", "eBPF unavailable",
  // and a failing read with its first error.
  std::string status() const;
  probes::EndpointProbe* probe() { return probe_.get(); }
  // Once the sampler is in force: a probe that could not be attached says
  // why (once). Not at construction: a reload that is refused for it
  // leaves the running probe in place, and the message would be wrong.
  void announce() const;

 private:
  void fail(const std::string& why);
  Result<void> read(probes::EndpointSnapshot& into);
  void note_table(const probes::EndpointSnapshot& s);

  std::vector<Endpoint> endpoints_;
  InstanceTable instances_;
  std::unique_ptr<probes::EndpointProbe> probe_;
  Reader read_;  // tests only
  std::string unavailable_;
  bool off_ = false;
  bool http2_ = false;  // an endpoint has protocol = "http2"
  probes::EndpointSnapshot prev_, cur_;
  bool have_prev_ = false;
  FailureLatch read_latch_, table_latch_;
  std::string read_error_;  // the first error of the current failure
  int64_t read_failing_since_ms_ = 0;
  uint64_t failed_reads_ = 0;  // in the current failure
};

}  // namespace headroom::agent
