// SPDX-License-Identifier: Apache-2.0
// What names an endpoint instance and where its resources are: a server's
// network namespace and cgroup, from /proc (docs/endpoints.md, "Instances").
//
// An instance is the servers of one network namespace serving an
// endpoint's port. Its id, stable for as long as the instance lives and
// readable in a file name (endpoint.<name>@<id>.orca):
//   1. the pod UID, where the server's cgroup path shows one: cgroupfs
//      ".../kubepods/burstable/pod<uid>/<container>" or systemd
//      ".../kubepods-burstable-pod<uid with _ for ->.slice/..." (the
//      underscores become dashes again);
//   2. "host" for the agent's own network namespace (host-network servers);
//   3. the leaf of the server's cgroup path ("docker-<id>.scope",
//      "api.service") when it is not the root cgroup;
//   4. "netns-<inode>" otherwise.
// Characters other than A-Z a-z 0-9 . _ - become '_'; at most 100 bytes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "headroom/orca/result.h"
#include "probes/cgroup.h"

namespace headroom::probes {

// /proc/PID/cgroup: one line per hierarchy, "ID:CONTROLLERS:PATH".
struct ProcCgroups {
  std::optional<std::string> unified;         // v2's "0::PATH"
  std::map<std::string, std::string> v1;      // each v1 controller (and "name=..." hierarchy) -> PATH
};
Result<ProcCgroups> parse_proc_cgroup(std::string_view text);

// The path of `controller` ("cpu" or "memory") for the hierarchy version
// the host mounts: v2, the unified path; v1, the hierarchy holding
// cpuacct (else cpu) or memory. nullopt: the process is in none.
std::optional<std::string> controller_path(const ProcCgroups& groups, CgroupVersion version,
                                           std::string_view controller);

// The instance id rule above (pure).
std::string instance_id(std::string_view cgroup_path, uint32_t netns, bool host_netns);

// The inode of a process's network namespace: readlink <proc_root>/<pid>/ns/net, "net:[N]".
Result<uint32_t> netns_of(const std::string& proc_root, pid_t pid);

// Listening TCP sockets on `ports`, in every network namespace the
// processes under proc_root are in, with a process holding each (the
// start-up scan of servers older than the agent). Unreadable processes are
// skipped (without root, only the agent's own user's are seen).
struct ListeningServer {
  uint32_t netns = 0;
  uint16_t port = 0;
  pid_t pid = 0;
  int32_t listeners = 0;
};
std::vector<ListeningServer> scan_listeners(const std::string& proc_root, const std::set<uint16_t>& ports);

}  // namespace headroom::probes
