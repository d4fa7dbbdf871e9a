#include "agent/config.h"
#include "probes/cgroup.h"

namespace headroom::agent {

std::optional<ConfigError> check_config_on_this_machine(const Config& config, const std::string& file) {
  if (config.cgroup.empty()) return std::nullopt;
  auto cg = probes::CgroupProbe::open(config.sys_root, config.cgroup, config.cgroup_version);
  if (cg) return std::nullopt;
  ConfigError e;
  e.file = file;
  e.key = "node.cgroup";
  e.message = cg.error().message;
  return e;
}

}  // namespace headroom::agent
