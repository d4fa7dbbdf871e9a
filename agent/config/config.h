// SPDX-License-Identifier: Apache-2.0
// headroom.toml -> plain structs. parse_config() validates everything, so a
// Config that exists is a Config the agent can run with; --check-config runs
// only this step. The keys, their types, ranges and defaults are one table
// (agent/config/config_keys.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "headroom/orca/names.h"
#include "headroom/orca/result.h"
#include "headroom/orca/shedder.h"
#include "probes/cgroup.h"
#include "publishers/envoy_bridge_config.h"
#include "publishers/oob_config.h"
#include "publishers/prometheus_config.h"

namespace headroom::agent {

inline constexpr const char* kDefaultConfigPath = "/etc/headroom/headroom.toml";
inline constexpr int kExitConfig = 78;     // EX_CONFIG
inline constexpr int kExitCantCreat = 73;  // EX_CANTCREAT: the orca directory is unusable

// Signal keys, as they appear in the report's utilization map (headroom/orca/names.h).
using orca::kSignalCpu;
using orca::kSignalCpuPressure;
using orca::kSignalIoPressure;
using orca::kSignalMemory;
using orca::kSignalMemoryPressure;
// The node signals in table order (agent/signals/signals.h, one row per signal).
inline constexpr auto& kNodeSignals = orca::kNodeSignalKeys;

// node.composite: how application_utilization combines the signals
// (normalize.h's composite()).
enum class CompositeMethod { max, mean };

// Each publisher's own section ([[envoy]], [prometheus], [oob]) is defined
// beside the publisher.
using publishers::EnvoyBridgeConfig;
using publishers::kMaxEnvoyBridges;
using publishers::kMaxOobDefaultInterval;
using publishers::kMaxOobListeners;
using publishers::kMaxOobStreams;
using publishers::kMaxTextfileInterval;
using publishers::kMinOobDefaultInterval;
using publishers::kMinTextfileInterval;
using publishers::OobConfig;
using publishers::PrometheusConfig;

enum class LogLevel { trace, debug, info, warn, error, critical, off };

// One [[endpoint]] (or --endpoint): a TCP listening port on this machine,
// optionally narrowed to an HTTP/1.x path prefix, with its latency SLO. Its
// report is endpoint.<name>.orca (docs/endpoints.md).
inline constexpr std::size_t kMaxEndpoints = 256;          // the eBPF maps are sized for this
inline constexpr std::size_t kMaxPathsPerPort = 16;        // endpoints with a path on one port
inline constexpr std::size_t kMaxEndpointPathBytes = 63;   // path prefix length
inline constexpr std::size_t kMaxEndpointNameBytes = 64;
// target and max: the kernel's histogram resolves latencies up to 2^39 ns
// (about 9 minutes), and a stopped service shows as late only once its
// requests pass the threshold; beyond 10 minutes neither says anything.
inline constexpr std::chrono::nanoseconds kMaxEndpointLatency = std::chrono::minutes(10);
// Every path key: the longest file the agent writes below it (a temporary
// "." + name + ".XXXXXX") must fit PATH_MAX (4096), each component NAME_MAX.
inline constexpr std::size_t kMaxPathBytes = 3840;
inline constexpr std::size_t kMaxPathComponentBytes = 255;

// Signal keys of an endpoint report's utilization map.
using orca::kSignalConcurrency;
using orca::kSignalSloMax;
using orca::kSignalSloTarget;

// [[endpoint]] protocol: how requests are told apart on a connection.
enum class EndpointProtocol {
  http1,  // one request at a time per connection: HTTP/1.x (the default)
  http2,  // cleartext HTTP/2 (h2c, gRPC): many streams per connection
};

struct EndpointConfig {
  std::string name;   // [A-Za-z0-9_.-], 1..64 bytes, unique; not "." or ".."
  uint16_t port = 0;  // 1..65535
  std::string path;   // empty: every request on the port; else starts with '/', printable ASCII, no spaces
  std::chrono::nanoseconds target{0};  // SLO target, > 0
  std::chrono::nanoseconds max{0};     // SLO max, >= target
  uint32_t max_concurrency = 0;        // 0: not declared (no concurrency signal)
  EndpointProtocol protocol = EndpointProtocol::http1;  // every endpoint of a port says the same
  // [[endpoint.shed]]: the reference shedder's function on this endpoint's
  // report, one signal each (headroom/orca/shedder_config.h). Checked here,
  // read by the shedder; headroomd does not use it.
  std::vector<std::pair<std::string, orca::SignalThresholds>> shed{};

  bool operator==(const EndpointConfig&) const = default;
};

// One [[dependency]] (or --dependency): a remote service the node's
// processes call, measured from the calling side (docs/dependencies.md). Its
// report is dependency.<name>.orca.
inline constexpr std::size_t kMaxDependencies = 64;  // the probe's maps are sized for this
inline constexpr std::size_t kMaxDependencyNameBytes = kMaxEndpointNameBytes;
inline constexpr std::size_t kMaxCallerProcessBytes = 15;  // a comm name: TASK_COMM_LEN less the NUL

// [[dependency]] protocol: how calls are told apart on a connection.
enum class DependencyProtocol {
  http1,    // one call at a time per connection, a 5xx status line an error (the default)
  http2,    // cleartext HTTP/2 (gRPC clients): calls are streams
  generic,  // any request/response protocol, one call at a time per connection
};

// The kinds of failed call a dependency's error rule (`errors`) can count.
enum DependencyError : uint32_t {
  kDependencyError5xx = 1,      // an HTTP 5xx answer; for http2 also a grpc-status other than OK
  kDependencyError4xx = 2,      // an HTTP 4xx answer
  kDependencyErrorConnect = 4,  // a connect that failed (refused, timed out, given up)
  kDependencyErrorReset = 8,    // a reset or a close with the call in flight (http2: RST_STREAM too)
};
inline constexpr uint32_t kDependencyErrorsDefault = kDependencyErrorConnect | kDependencyErrorReset | kDependencyError5xx;
inline constexpr uint32_t kDependencyErrorsAll = kDependencyErrorsDefault | kDependencyError4xx;

struct DependencyConfig {
  std::string name;  // as an endpoint's name; unique among dependencies
  // The remote side: an IP literal as the user wrote it, without brackets
  // ("10.0.0.5", "2001:db8::5"), and a port; empty host: any host on port.
  std::string host;
  uint16_t port = 0;
  std::string callers_cgroup;   // empty: any; else an absolute cgroup path
  std::string callers_process;  // empty: any; else a comm name, at most 15 bytes
  DependencyProtocol protocol = DependencyProtocol::http1;
  std::chrono::nanoseconds target{0};  // > 0
  std::chrono::nanoseconds max{0};     // >= target
  uint32_t max_concurrency = 0;        // 0: not declared (no concurrency signal)
  // Which failures count as errors (`errors`): DependencyError bits.
  uint32_t errors = kDependencyErrorsDefault;

  bool operator==(const DependencyConfig&) const = default;
};

// [agent] ebpf: "auto" loads the eBPF endpoint probes when endpoints are
// declared (and degrades to procfs-only with one error when it cannot);
// "off" never loads them (headroomd --no-ebpf).
enum class EbpfMode { automatic, off };

// [agent] unsafe_orca_dir: what to do with an orca_dir that others than the
// agent's user can write into (group- or world-writable without the sticky
// bit on a directory of ours, or owned by another user than root or us):
// such a user could replace or plant the reports proxies shed on.
enum class UnsafeDirAction { refuse, warn };

// agent.interval: every tick reads /proc (and cgroupfs), rewrites every
// report and pings the systemd watchdog. Below 10 ms the agent's own CPU use
// shows in what it measures (a 1 ns interval is a busy loop); above an hour a
// report says nothing a balancer can act on. The packaged unit's watchdog
// (WatchdogSec=5s) wants far less than the upper bound; the unit's
// documentation, not the parser, says so, since the file does not know the
// unit it runs under.
inline constexpr std::chrono::nanoseconds kMinInterval = std::chrono::milliseconds(10);
inline constexpr std::chrono::nanoseconds kMaxInterval = std::chrono::hours(1);
// agent.smoothing: a time constant beyond 10 minutes hides a change in load
// for longer than any balancer waits for it.
inline constexpr std::chrono::nanoseconds kMaxSmoothing = std::chrono::minutes(10);
// Each endpoint's latency window keeps smoothing / interval slots; the cap
// bounds its memory (and the work of each tick) whatever the two keys say.
inline constexpr std::size_t kMaxWindowSlots = 10'000;

// agent.endpoint_instances: the kernel keeps 2.4 KiB per CPU for each.
inline constexpr uint32_t kDefaultEndpointInstances = 256;
inline constexpr int64_t kMaxEndpointInstances = 4096;
inline constexpr std::chrono::seconds kMaxInstanceGrace{3600};

struct Config {
  // [agent]
  std::chrono::nanoseconds interval = std::chrono::milliseconds(100);
  std::chrono::nanoseconds smoothing = std::chrono::milliseconds(500);  // EWMA time constant; 0 = off
  std::string orca_dir = "/run/orca";
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  LogLevel log_level = LogLevel::info;
  bool fsync = false;
  EbpfMode ebpf = EbpfMode::automatic;
  UnsafeDirAction unsafe_orca_dir = UnsafeDirAction::refuse;
  // Instances counted apart per endpoint, and how long a gone instance's
  // report stays (docs/endpoints.md, "Instances").
  uint32_t endpoint_instances = kDefaultEndpointInstances;
  std::chrono::nanoseconds instance_grace = std::chrono::seconds(30);

  // [node]
  std::string cgroup;  // empty: the host; otherwise relative to the cgroup root
  probes::CgroupVersion cgroup_version = probes::CgroupVersion::automatic;
  std::vector<std::string> signals{std::begin(kNodeSignals), std::end(kNodeSignals)};  // every signal
  CompositeMethod composite = CompositeMethod::max;
  std::map<std::string, double> weights;  // signal -> weight in [0, 1]; missing = 1 (1 is not stored)

  // node.include_endpoints: each endpoint's composite joins the node's
  // composite as signal "endpoint.<name>".
  bool include_endpoints = false;

  // [[envoy]]
  std::vector<EnvoyBridgeConfig> envoy;

  // [[endpoint]], then each --endpoint flag
  std::vector<EndpointConfig> endpoints;

  // [[dependency]], then each --dependency flag
  std::vector<DependencyConfig> dependencies;

  // [prometheus]
  PrometheusConfig prometheus;
  // [oob]
  OobConfig oob;

  bool signal_enabled(std::string_view key) const;
  double weight(std::string_view key) const;

  // Member-wise; lets SIGHUP tell whether anything changed, and tests compare.
  bool operator==(const Config&) const = default;
};

// A configuration error is a headroom::Error with file, line, column and key
// set where known; to_string() is "file:line:col: key: message".
//
// Parses and validates TOML text. `file` is used in messages only.
Result<Config> parse_config(std::string_view toml_text, const std::string& file);
// Reads and parses a file; a missing or unreadable file is an error too (its
// code the errno).
Result<Config> load_config(const std::string& path);

// "100ms", "1s", "1.5s", "250us", "2m" -> nanoseconds. Returns nullopt on bad syntax.
std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text);
std::string format_duration(std::chrono::nanoseconds d);

// --endpoint 'name=api,port=8080,path=/play,target=10ms,max=500ms,max_concurrency=64'
// -> one endpoint, checked like an [[endpoint]] table. The error has no file
// or place; its key is the flag's key at fault ("port"), or empty when the
// text as a whole is, so to_string() is "port: must be ...".
Result<EndpointConfig> parse_endpoint_flag(std::string_view text);
// Checks a complete list (file entries then flags): unique names, no two
// endpoints with the same port and path, the limits above. `file` is used in
// messages only.
Result<void> validate_endpoints(const std::vector<EndpointConfig>& endpoints, const std::string& file);

// --dependency 'name=cache,address=10.0.0.5:6379,protocol=generic,target=2ms,max=50ms'
// -> one dependency, checked like a [[dependency]] table; errors as
// parse_endpoint_flag's.
Result<DependencyConfig> parse_dependency_flag(std::string_view text);
// Checks a complete list (file entries then flags): each entry's fields,
// unique names, the limit. `file` is used in messages only.
Result<void> validate_dependencies(const std::vector<DependencyConfig>& dependencies, const std::string& file);

const char* log_level_name(LogLevel level);
std::optional<LogLevel> parse_log_level(std::string_view text);

}  // namespace headroom::agent

namespace headroom::agent {

// What --check-config verifies beyond the text: that the things the
// configuration names exist on this machine (today: node.cgroup).
Result<void> check_config_on_this_machine(const Config& config, const std::string& file);

}  // namespace headroom::agent
