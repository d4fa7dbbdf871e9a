// SPDX-License-Identifier: Apache-2.0
// Which processes are a dependency's callers (DependencySpec::caller_process,
// caller_cgroup): the matching of a process's /proc/PID/comm and
// /proc/PID/cgroup texts is pure; the scan of proc_root is its one I/O.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "headroom/orca/result.h"

namespace headroom::probes {

// A cgroup as /proc/PID/cgroup names it: a hierarchy and a path in it.
struct CallerCgroup {
  bool any_hierarchy = false;            // a path given relative to the cgroup root: any hierarchy's line
  bool unified = false;                  // the v2 hierarchy (the "0::" line)
  std::vector<std::string> controllers;  // a v1 hierarchy's ("cpu", "cpuacct"; "name=systemd")
  std::string path = "/";                // "/" or "/a/b"
};

// From a configured cgroup directory: "<mount>/<hierarchy>/<path>" under a
// v1 mount, "<mount>/<path>" under a v2 one (unified_mount), or a path not
// under the mount ("/a/b"), taken relative to every hierarchy's root.
// hierarchy_name: the v1 hierarchy directory's real name (its symlink's
// target: "cpu" -> "cpu,cpuacct"), given by the caller that can read it.
Result<CallerCgroup> parse_caller_cgroup(std::string_view dir, std::string_view mount, bool unified_mount,
                                         std::string_view hierarchy_name);

// Whether a /proc/PID/cgroup text puts the process in the cgroup or below it.
bool in_caller_cgroup(std::string_view proc_cgroup, const CallerCgroup& want);

struct CallerRule {
  std::string process;  // comm; empty: any
  bool has_cgroup = false;
  CallerCgroup cgroup;
};

// Whether a process (its comm text, its cgroup text) matches the rule.
bool is_caller(const CallerRule& rule, std::string_view comm_text, std::string_view cgroup_text);

// Every process of proc_root that each rule takes, by rule. A process that
// exits while it is read is left out.
std::vector<std::vector<pid_t>> find_callers(const std::string& proc_root, const std::vector<CallerRule>& rules);

// The same kept up to date at a lower cost: each renew() lists proc_root's
// processes and reads only those it has not judged yet, those younger than
// `recheck_ns` (a fork reads as its parent until it execs) and, once every
// `recheck_ns`, all of them again (a process can exec or move to another
// cgroup at any time).
class CallerScan {
 public:
  CallerScan(std::string proc_root, std::vector<CallerRule> rules, int64_t recheck_ns);
  // (rule index, pid) of every process each rule takes now.
  const std::vector<std::pair<std::size_t, pid_t>>& renew(int64_t now_ns);
  std::size_t reads() const { return reads_; }  // processes read so far (tests)

 private:
  struct Seen {
    int64_t first_ns = 0;
    std::vector<bool> takes;  // per rule
  };
  std::string proc_root_;
  std::vector<CallerRule> rules_;
  int64_t recheck_ns_;
  int64_t last_full_ns_ = 0;
  bool scanned_ = false;
  std::map<pid_t, Seen> seen_;
  std::vector<std::pair<std::size_t, pid_t>> out_;
  std::size_t reads_ = 0;
};

}  // namespace headroom::probes
