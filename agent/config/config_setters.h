// SPDX-License-Identifier: Apache-2.0
// Each key's setter (the key table in agent/config/config_keys.cc names
// them): a setter sees a value of the row's type, checked before it runs,
// checks only its range and stores it; false after reporting an error. The
// messages say what is wrong and what to write instead. Internal to the
// configuration code.
#pragma once

#include <string>
#include <string_view>

#include "agent/config/config_reader.h"

namespace headroom::agent {

// The words a key takes, for its setter, its messages and its row's
// "allowed" text; each indexed by its enum (LogLevel, EbpfMode,
// CompositeMethod, UnsafeDirAction).
inline constexpr std::string_view kLogLevelNames[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
inline constexpr std::string_view kEbpfModes[] = {"auto", "off"};
inline constexpr std::string_view kCompositeNames[] = {"max", "mean"};
inline constexpr std::string_view kUnsafeDirActions[] = {"refuse", "warn"};
inline constexpr std::string_view kUnknownAuthorityChoices[] = {"node", "error"};
inline constexpr std::string_view kEnvoyFileExample = "\"/run/orca/envoy/node.pressure\"";

// [agent]
bool set_interval(KeyValue& v);
bool set_smoothing(KeyValue& v);
bool set_path(KeyValue& v, std::string& into, std::string_view example);
bool set_log_level(KeyValue& v);
bool set_ebpf(KeyValue& v);
bool set_unsafe_orca_dir(KeyValue& v);
// [node]
bool set_cgroup(KeyValue& v);
bool set_cgroup_version(KeyValue& v);
bool set_signals(KeyValue& v);
bool set_composite(KeyValue& v);
bool set_weights(KeyValue& v);
// [[envoy]]
bool set_envoy_scope(KeyValue& v);
bool set_envoy_value(KeyValue& v);
bool set_envoy_file(KeyValue& v);
bool set_envoy_neutral(KeyValue& v);
// [[endpoint]]
bool set_endpoint_name(KeyValue& v);
bool set_endpoint_port(KeyValue& v);
bool set_endpoint_path(KeyValue& v);
bool set_endpoint_protocol(KeyValue& v);
bool set_endpoint_target(KeyValue& v);
bool set_endpoint_max(KeyValue& v);
bool set_max_concurrency(KeyValue& v);
// [prometheus]
bool set_prometheus_listen(KeyValue& v);
bool set_prometheus_textfile(KeyValue& v);
bool set_textfile_interval(KeyValue& v);
// [oob]
bool set_oob_listen(KeyValue& v);
bool set_oob_max_streams(KeyValue& v);
bool set_unknown_authority(KeyValue& v);
bool set_oob_default_interval(KeyValue& v);

}  // namespace headroom::agent
