// SPDX-License-Identifier: Apache-2.0
// An endpoint's instances: which servers listen on its port, in which network
// namespace, in which cgroup, and under which name their report goes
// (endpoint.<name>@<instance>.orca, orca/names.h instance_scope()).
//
// Instance id. The servers of one network namespace are one instance. Its id
// comes from the cgroup path of one of its servers (the unified "0::" path
// under cgroup v2, the cpu hierarchy's path under v1), first rule that applies:
//   1. A Kubernetes pod: the pod UID, when a component of the path shows one.
//      cgroupfs driver: a component "pod<uid>" below a "kubepods..." component,
//        /kubepods/burstable/pod6f1c2d3e-aaaa-bbbb-cccc-1234567890ab/0123abcd
//        -> 6f1c2d3e-aaaa-bbbb-cccc-1234567890ab;
//      systemd driver: a component "kubepods[-<qos>]-pod<uid>.slice", the UID's
//        dashes written as underscores, turned back into dashes,
//        /kubepods.slice/kubepods-burstable.slice/
//        kubepods-burstable-pod6f1c2d3e_aaaa_bbbb_cccc_1234567890ab.slice/cri-containerd-0123.scope
//        -> 6f1c2d3e-aaaa-bbbb-cccc-1234567890ab.
//      The UID is hexadecimal digits and dashes (a UUID, or a static pod's
//      32-digit hash); anything else is not taken for one.
//   2. "host" when the servers are in the agent's own network namespace (a
//      host-network server, the one instance of the host namespace).
//   3. The leaf name of the cgroup path, when it is not the root cgroup:
//      /system.slice/docker-<id>.scope -> docker-<id>.scope.
//   4. "netns-<inode>", the inode of the network namespace (what
//      `readlink /proc/PID/ns/net` shows as net:[inode]).
// An id holds only [A-Za-z0-9._-]; every other character is replaced by '_'.
//
// Start-up scan (scan_listeners). Servers that were running before the agent
// are found in /proc, in every network namespace: the processes of the proc
// root are grouped by the inode of their network namespace (/proc/PID/ns/net);
// per namespace, /proc/<one of its pids>/net/tcp and net/tcp6 are read once
// and the sockets in state LISTEN (st 0A) on the endpoints' local ports are
// counted per port; a port's holder is the first process of that namespace
// (lowest pid) with an fd whose link reads socket:[<inode of one of the port's
// sockets>]. Fds are read only until every port of the namespace has a
// holder; processes that cannot be read (gone, another user's without
// CAP_SYS_PTRACE) are skipped. A namespace without a process (one only
// bind-mounted, as `ip netns add` leaves it) has no server to find.
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

// /proc/PID/cgroup. v2: the line "0::/path" gives the unified path; v1: a line
// "N:ctrl1,ctrl2:/path" gives each controller its path, named hierarchies
// ("name=systemd") included. A hybrid host has both.
struct ProcCgroups {
  std::optional<std::string> unified;
  std::map<std::string, std::string, std::less<>> controllers;  // v1 controller -> path
};

// Errors name the line ("line 2 \"x\": ...") for the caller to put the file in
// front. A path the kernel marks " (deleted)" (a removed v2 cgroup) is kept
// without the mark.
Result<ProcCgroups> parse_proc_cgroup(std::string_view text);

// The path to read `controller` ("cpu", "memory", or any v1 controller name)
// at. v1: "cpu" is the hierarchy holding cpuacct (where the usage is), else
// cpu; others their own hierarchy. v2: the unified path, whatever the
// controller. automatic: the v1 hierarchy when there is one (a hybrid host
// keeps its controllers in v1), else the unified path. nullopt when the
// cgroups have no such path.
std::optional<std::string> controller_path(const ProcCgroups& cgroups, CgroupVersion version,
                                           std::string_view controller);

// The instance id of a server in cgroup `cgroup_path` and network namespace
// `netns`, `host_netns` when that is the agent's own (the rule above).
std::string instance_id(std::string_view cgroup_path, uint32_t netns, bool host_netns);

// The inode of <proc_root>/<pid>/ns/net ("net:[4026531840]" -> 4026531840).
// Errors name the path.
Result<uint32_t> netns_of(const std::string& proc_root, pid_t pid);

// A socket in state LISTEN of /proc/net/tcp or tcp6 on one of the ports.
struct ListeningSocket {
  uint16_t port = 0;
  uint64_t inode = 0;
};
// The LISTEN sockets of a /proc/PID/net/tcp or tcp6 text on `ports`, in the
// file's order. Errors name the line.
Result<std::vector<ListeningSocket>> parse_tcp_listeners(std::string_view text, const std::set<uint16_t>& ports);

// The servers on one port in one network namespace.
struct ListeningServer {
  uint32_t netns = 0;     // inode of the network namespace
  uint16_t port = 0;
  pid_t pid = 0;          // a process holding one of the sockets; 0 when none could be read
  int32_t listeners = 0;  // LISTEN sockets on the port (SO_REUSEPORT, IPv4 and IPv6 apart)

  bool operator==(const ListeningServer&) const = default;
};

// Every port of `ports` with a LISTEN socket, in every network namespace that
// has a process under `proc_root` (the scan above); sorted by netns, then port.
std::vector<ListeningServer> scan_listeners(const std::string& proc_root, const std::set<uint16_t>& ports);

// Which end of a TCP connection socket_holders matches a port at.
enum class SocketEnd { local, remote };

// The processes under proc_root holding a TCP socket (any state) whose local
// or remote port is one of `ports`, in the network namespaces of PID 1 and of
// this process (/proc/1/net/tcp{,6}, /proc/net/tcp{,6}); `skip` is left out
// (0: none). Reads other users' /proc/<pid>/fd: root, else their processes
// are not found.
std::vector<pid_t> socket_holders(const std::string& proc_root, const std::set<uint32_t>& ports, SocketEnd end,
                                  pid_t skip);

}  // namespace headroom::probes
