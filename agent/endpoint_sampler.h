// SPDX-License-Identifier: Apache-2.0
// The endpoints' sampler: owns the eBPF probe when the configuration declares
// endpoints, and turns each snapshot into finished signals, once per tick:
// snapshot (probes/) -> interval -> window -> EndpointSignals
// (endpoint_signals.h). Everything downstream only reads them. When
// the probe cannot run, it says why once and the endpoints stay "latency
// signals unavailable"; the node's signals are not affected.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/config.h"
#include "agent/endpoint_signals.h"
#include "probes/endpoint_probe.h"

namespace headroom::agent {

class EndpointSampler {
 public:
  // Never fails: a probe that cannot load leaves unavailable() set.
  explicit EndpointSampler(const Config& config);

  // Reads the probe; the first call only records the baseline.
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

  // Why there are no latency signals ("" when the probe runs or is off).
  const std::string& unavailable() const { return unavailable_; }
  bool running() const { return probe_ != nullptr; }
  // For the status line: "eBPF on (tp_btf)", "eBPF off", "eBPF unavailable".
  std::string status() const;
  probes::EndpointProbe* probe() { return probe_.get(); }

 private:
  void fail(const std::string& why);

  std::vector<Endpoint> endpoints_;
  std::unique_ptr<probes::EndpointProbe> probe_;
  std::string unavailable_;
  bool off_ = false;
  probes::EndpointSnapshot prev_, cur_;
  bool have_prev_ = false;
};

}  // namespace headroom::agent
