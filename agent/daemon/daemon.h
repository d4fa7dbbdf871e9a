// SPDX-License-Identifier: Apache-2.0
// headroomd's main loop: sample every interval, publish, answer signals.
//   SIGTERM, SIGINT: publish a final report marked stopped, exit 0.
//   SIGHUP: reload the configuration; an invalid one is rejected and the running
//           configuration stays in force.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config.h"

namespace headroom::agent {

// Command-line values that take precedence over the file, also after a reload.
struct Overrides {
  std::optional<std::string> orca_dir, proc_root, sys_root;
  std::optional<LogLevel> log_level;
  std::vector<EndpointConfig> endpoints;  // --endpoint, appended after the file's [[endpoint]]s
  std::vector<DependencyConfig> dependencies;  // --dependency, after the file's [[dependency]]s
  bool no_ebpf = false;                   // --no-ebpf: agent.ebpf = "off"
};
void apply_overrides(Config& config, const Overrides& overrides);

struct DaemonOptions {
  std::string config_path = kDefaultConfigPath;
  // When the path was not given on the command line, a missing file means
  // "run with the defaults" rather than an error.
  bool config_path_explicit = false;
  Overrides overrides;
  bool once = false;  // sample one interval, publish, exit
};

// Loads the configuration named by the options, with the overrides applied.
Result<Config> load_effective_config(const DaemonOptions& options);

// Runs until stopped; returns the process exit code.
int run_daemon(const DaemonOptions& options);

}  // namespace headroom::agent
