// SPDX-License-Identifier: Apache-2.0
// headroomd: samples this machine and publishes ORCA load reports.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "agent/config/config.h"
#include "agent/daemon/daemon.h"
#include "agent/daemon/logging.h"

namespace {
constexpr int kExitUsage = 64;  // EX_USAGE
}

int main(int argc, char** argv) {
  using namespace headroom::agent;
  CLI::App app{"headroomd: publishes this machine's utilization as ORCA load reports", "headroomd"};
  DaemonOptions opt;
  bool check_only = false;
  std::string orca_dir, proc_root, sys_root, log_level;
  std::vector<std::string> endpoint_specs, dependency_specs;
  auto* config_opt = app.add_option("--config", opt.config_path, "Configuration file")
                         ->default_str(kDefaultConfigPath);
  app.add_flag("--check-config", check_only, "Validate the configuration and exit (78 when invalid)");
  app.add_flag("--once", opt.once, "Sample one interval, publish, exit");
  auto* orca_opt = app.add_option("--orca-dir", orca_dir, "Directory for report files (overrides agent.orca_dir)");
  auto* proc_opt = app.add_option("--proc-root", proc_root, "Root of procfs, e.g. a fixture tree (overrides agent.proc_root)");
  auto* sys_opt = app.add_option("--sys-root", sys_root, "Root of sysfs, e.g. a fixture tree (overrides agent.sys_root)");
  auto* level_opt = app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off");
  // One SPEC per --endpoint (the commas belong to the SPEC); repeatable.
  app.add_option("--endpoint", endpoint_specs,
                 "Declare an endpoint after the file's [[endpoint]]s, e.g. "
                 "name=api,port=8080,path=/play,target=10ms,max=500ms,max_concurrency=64; repeatable")
      ->type_name("SPEC")
      ->allow_extra_args(false);
  app.add_option("--dependency", dependency_specs,
                 "Declare a dependency after the file's [[dependency]]s, e.g. "
                 "name=cache,address=10.0.0.5:6379,protocol=generic,target=2ms,max=50ms; repeatable")
      ->type_name("SPEC")
      ->allow_extra_args(false);
  app.add_flag("--no-ebpf", opt.overrides.no_ebpf, "Never load the eBPF endpoint and dependency probes (overrides agent.ebpf)");
  app.set_version_flag("--version", std::string("headroomd ") + HEADROOM_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }

  opt.config_path_explicit = config_opt->count() > 0;
  if (orca_opt->count() > 0) opt.overrides.orca_dir = orca_dir;
  if (proc_opt->count() > 0) opt.overrides.proc_root = proc_root;
  if (sys_opt->count() > 0) opt.overrides.sys_root = sys_root;
  if (level_opt->count() > 0) {
    auto level = parse_log_level(log_level);
    if (!level) {
      std::fprintf(stderr, "headroomd: --log-level: unknown level \"%s\"; use trace, debug, info, warn, error, critical or off\n",
                   log_level.c_str());
      return kExitUsage;
    }
    opt.overrides.log_level = *level;
  }
  for (const std::string& spec : endpoint_specs) {
    auto parsed = parse_endpoint_flag(spec);
    if (!parsed) {
      std::fprintf(stderr, "headroomd: --endpoint '%s': %s\n", spec.c_str(), parsed.error().to_string().c_str());
      return kExitUsage;
    }
    opt.overrides.endpoints.push_back(std::move(parsed).value());
  }
  for (const std::string& spec : dependency_specs) {
    auto parsed = parse_dependency_flag(spec);
    if (!parsed) {
      std::fprintf(stderr, "headroomd: --dependency '%s': %s\n", spec.c_str(), parsed.error().to_string().c_str());
      return kExitUsage;
    }
    opt.overrides.dependencies.push_back(std::move(parsed).value());
  }
  setup_logging(opt.overrides.log_level.value_or(LogLevel::info));

  if (check_only) {
    auto loaded = load_effective_config(opt);
    if (!loaded) {
      std::fprintf(stderr, "%s\n", loaded.error().to_string().c_str());
      return kExitConfig;
    }
    if (auto r = check_config_on_this_machine(*loaded, opt.config_path); !r) {
      std::fprintf(stderr, "%s\n", r.error().to_string().c_str());
      return kExitConfig;
    }
    std::printf("%s: configuration is valid\n", opt.config_path.c_str());
    return 0;
  }
  return run_daemon(opt);
}
