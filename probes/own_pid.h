// SPDX-License-Identifier: Apache-2.0
// This process's PID as the kernel's programs see it. The eBPF programs get
// tgids from bpf_get_current_pid_tgid(), numbered in the kernel's initial PID
// namespace; in a pod getpid() numbers the pod's namespace instead. A procfs
// answers readlink("<proc_root>/self") with the reader's PID in the namespace
// that procfs was mounted for, so the node's /proc mounted at proc_root
// (packaging/kubernetes/) gives the kernel's PID whatever the agent's own PID
// namespace is.
//
// Whether proc_root's namespace is the initial one, without ptrace rights
// (/proc/1/ns/pid needs them; the pod's agent has none): either this process
// itself is in the initial namespace (<proc_root>/self/ns/pid is
// pid:[4026531836], PROC_PID_INIT_INO, fixed in the kernel), and then every
// procfs that shows it is the initial one; or <proc_root>/2 is a kernel
// thread (kthreadd, PF_KTHREAD in its stat's flags): only the initial
// namespace's procfs shows kernel threads.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "headroom/orca/result.h"

namespace headroom::probes {

inline constexpr uint32_t kInitPidNamespace = 0xEFFFFFFCU;  // pid:[4026531836]

// The PID of a "<proc_root>/self" link's text ("4242" -> 4242). Errors say
// what the text is not.
Result<pid_t> parse_self_link(std::string_view text);

// Whether a /proc/PID/stat text is a kernel thread's (PF_KTHREAD in field 9,
// the flags); false for a text that is not a stat line.
bool is_kernel_thread_stat(std::string_view text);

// What own_pid() reads under proc_root, or each read's error.
struct OwnPidReadings {
  Result<std::string> self_link;  // readlink <proc_root>/self
  Result<std::string> own_ns;     // readlink <proc_root>/self/ns/pid
  Result<std::string> pid2_stat;  // <proc_root>/2/stat
};

struct OwnPid {
  pid_t pid = 0;  // never 0: getpid() when <proc_root>/self cannot be used
  // Empty when pid is the kernel's PID; else why it may not be and what to
  // do (the caller logs it).
  std::string warning;
};

// The pure part of own_pid(); fallback is getpid().
OwnPid resolve_own_pid(const std::string& proc_root, const OwnPidReadings& readings, pid_t fallback);

// Reads the links and the file under proc_root.
OwnPid own_pid(const std::string& proc_root);

}  // namespace headroom::probes
