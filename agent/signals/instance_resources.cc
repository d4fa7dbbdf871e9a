// SPDX-License-Identifier: Apache-2.0
#include "agent/signals/instance_resources.h"

#include <fstream>
#include <sstream>

#include "agent/signals/normalize.h"
#include "probes/instance.h"

namespace headroom::agent {

namespace {

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{ENOENT, path + ": cannot be read (the process is gone)"};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

void InstanceResources::follow(const ResourceRoots& roots, pid_t pid, uint32_t netns, int64_t now_ns) {
  if (pid == pid_ && probe_ && now_ns - followed_ns_ < kRecheckNs) return;
  const bool same = pid == pid_ && probe_;
  followed_ns_ = now_ns;
  if (same) {
    // The same process, looked at again: only a cgroup that changed is reopened.
    std::ifstream in(roots.proc_root + "/" + std::to_string(pid) + "/cgroup");
    std::ostringstream text;
    text << in.rdbuf();
    auto groups = probes::parse_proc_cgroup(text.str());
    if (groups && probes::controller_path(*groups, roots.version, "cpu").value_or(path_) == path_) return;
  }
  pid_ = pid;
  probe_.reset();
  prev_.reset();
  cpu_.reset();
  memory_.reset();
  cpu_why_.clear();
  if (pid <= 0) {
    why_ = "no server process known";
    return;
  }
  const std::string proc = roots.proc_root + "/" + std::to_string(pid);
  auto ns = probes::netns_of(roots.proc_root, pid);
  if (!ns) {
    why_ = ns.error().message;
    return;
  }
  if (*ns != netns) {
    why_ = "process " + std::to_string(pid) + " is now in network namespace " + std::to_string(*ns) +
           ", not the instance's " + std::to_string(netns) + " (its pid was reused)";
    return;
  }
  auto text = read_text(proc + "/cgroup");
  if (!text) {
    why_ = text.error().message;
    return;
  }
  auto groups = probes::parse_proc_cgroup(*text);
  if (!groups) {
    why_ = proc + "/cgroup: " + groups.error().message;
    return;
  }
  const probes::CgroupVersion version = roots.version;
  const auto cpu = probes::controller_path(*groups, version, "cpu");
  if (!cpu) {
    why_ = proc + "/cgroup names no cpu controller's cgroup";
    return;
  }
  probes::CgroupPaths paths;
  paths.cpu = *cpu;
  paths.memory = probes::controller_path(*groups, version, "memory").value_or(std::string());
  auto probe = probes::CgroupProbe::open(roots.sys_root, paths, version);
  if (!probe) {
    why_ = probe.error().message;
    return;
  }
  path_ = *cpu;
  probe_ = std::make_unique<probes::CgroupProbe>(std::move(probe.value()));
  why_.clear();
}

void InstanceResources::sample(const ResourceRoots& roots, int64_t now_ns) {
  if (!probe_) return;
  auto r = probe_->read();
  if (!r) {
    // A cgroup that disappears (its pod deleted): the instance says so until
    // its server is followed again.
    why_ = r.error().message;
    cpu_why_.clear();
    probe_.reset();
    prev_.reset();
    cpu_.reset();
    memory_.reset();
    return;
  }
  if (!r->cpu) {
    // Its CPU alone missing: the node's stands in (endpoint_scopes.cc), its
    // memory is still its own.
    cpu_why_ = r->cpu_error ? r->cpu_error->message : "its CPU cannot be read";
    prev_.reset();
    cpu_.reset();
  } else {
    cpu_why_.clear();
    const double capacity = cgroup_cpu_capacity(roots.host_ncpu, r->cpu->quota_cpus, r->cpu->cpuset_cpus);
    if (prev_) {
      const auto busy = cgroup_cpu_fraction(prev_->usage_usec, r->cpu->usage_usec, now_ns - prev_ns_, capacity);
      if (busy) cpu_ = cpu_ ? *cpu_ + roots.alpha * (*busy - *cpu_) : *busy;
    }
    prev_ = *r->cpu;
    prev_ns_ = now_ns;
  }
  memory_.reset();
  if (r->memory) memory_ = cgroup_memory_fraction(*r->memory, roots.host_memory_bytes);
}

}  // namespace headroom::agent
