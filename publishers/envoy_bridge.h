// SPDX-License-Identifier: Apache-2.0
// The Envoy overload-manager bridge: one number from a report, written as the
// text file Envoy's injected resource monitor reads
// (envoy.resource_monitors.injected_resource, field `filename`).
//
// What Envoy needs, and why this looks the way it does:
//  - the file holds one decimal number in [0, 1]; anything else (out of range,
//    unparsable) makes the monitor report a failure until the next update;
//  - Envoy re-reads the file only after inotify reports IN_MOVED_TO for its
//    name in the parent directory, so every update is a rename onto the name
//    (orca::ReportFileWriter), never an in-place write;
//  - Envoy keeps the last value for ever if the writer goes away, so a clean
//    stop writes a neutral value (see docs/envoy.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "headroom/orca/report_writer.h"
#include "headroom/orca/result.h"
#include "headroom/orca/report.h"
#include "publishers/envoy_bridge_config.h"
#include "publishers/failure_latch.h"
#include "publishers/publisher.h"

namespace headroom::publishers {

// Which number of node.orca the bridge publishes.
struct EnvoyValue {
  enum class Kind { application_utilization, cpu_utilization, mem_utilization, utilization };
  Kind kind = Kind::application_utilization;
  std::string key;  // the utilization map key, for Kind::utilization only

  bool operator==(const EnvoyValue&) const = default;
};

// "application_utilization", "cpu_utilization", "mem_utilization" or
// "utilization.<key>" (e.g. "utilization.cpu.pressure"). Only the syntax is
// checked here; the configuration checks that the key is a known signal.
std::optional<EnvoyValue> parse_envoy_value(std::string_view text);
std::string envoy_value_name(const EnvoyValue& value);

// The chosen number of a node.orca, or nullopt when it does not carry it.
// Presence follows the report's proto3 fields, which have none:
// cpu_utilization exists only alongside utilization["cpu"],
// mem_utilization alongside utilization["memory"], application_utilization
// only when at least one signal is in utilization.
std::optional<double> select_envoy_value(const orca::Report& report, const EnvoyValue& value);

// What Envoy is given: the value clamped to [0, 1] (+inf -> 1, -inf -> 0);
// absent or NaN -> `neutral`. `neutral` must itself be in [0, 1].
double envoy_pressure(std::optional<double> value, double neutral);

// "0.734512\n": fixed notation, at most 6 decimals with trailing zeros dropped
// ("0.05", "1", "0"), never an exponent or a sign, newline-terminated (Envoy's
// absl::SimpleAtod strips surrounding ASCII whitespace). `pressure` in [0, 1].
std::string format_envoy_pressure(double pressure);

struct EnvoyBridgeOptions {
  std::string file;  // absolute path of the file Envoy watches
  EnvoyValue value;
  double neutral = 0.0;  // written on stop; also used for absent values
  bool fsync = false;
};

class EnvoyBridge {
 public:
  // Creates the file's directory (mode 0755) when missing, checks that it is
  // writable, and removes temporaries of this file left by a crashed writer
  // (only this file's: the directory may be shared with other programs).
  static Result<EnvoyBridge> open(EnvoyBridgeOptions options);

  // Writes the pressure chosen from node.orca. On failure the previous file
  // stays as it was. Recreates the directory if it was removed.
  Result<void> publish(const orca::Report& node);
  // Writes the neutral value (clean stop, or this bridge was removed).
  Result<void> publish_neutral();
  // Writes `pressure` (clamped to [0, 1]; NaN -> neutral).
  Result<void> write_pressure(double pressure);

  const std::string& file() const { return options_.file; }
  const EnvoyBridgeOptions& options() const { return options_; }

 private:
  EnvoyBridge(EnvoyBridgeOptions options, orca::ReportFileWriter writer, std::string name)
      : options_(std::move(options)), writer_(std::move(writer)), name_(std::move(name)) {}

  EnvoyBridgeOptions options_;
  orca::ReportFileWriter writer_;  // on the file's directory
  std::string name_;               // the file's base name
};

// One [[envoy]] entry as a publisher: the node's value every tick, the
// neutral value on stop and when a reload no longer configures its file.
// Failures are logged once per change; they never hold up node.orca.
class EnvoyPublisher final : public Publisher {
 public:
  // One publisher per [[envoy]] entry, in file order; `fsync`: agent.fsync.
  static Result<Publishers> build(const std::vector<EnvoyBridgeConfig>& bridges, bool fsync);

  Result<void> publish(const Tick& tick) override;
  void stop(const Tick& final) override;
  void retire() override;
  void announce() const override;

  std::string_view name() const override { return "envoy"; }
  const std::string& target() const override { return bridge_.file(); }

 private:
  explicit EnvoyPublisher(EnvoyBridge bridge) : bridge_(std::move(bridge)) {}
  Result<void> logged(Result<void> r);

  EnvoyBridge bridge_;
  FailureLatch failing_;
};

}  // namespace headroom::publishers
