// SPDX-License-Identifier: Apache-2.0
#include "probes/own_pid.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <string_view>

#include "probes/proc_file.h"

namespace headroom::probes {
namespace {

constexpr unsigned long kPfKthread = 0x00200000;  // include/linux/sched.h, unchanged since 2.6.27

Result<std::string> read_link(const std::string& path) {
  std::array<char, 64> link{};
  const ssize_t n = ::readlink(path.c_str(), link.data(), link.size());
  if (n < 0) return system_error(errno, "readlink " + path);
  return std::string(link.data(), static_cast<size_t>(n));
}

Result<std::string> read_text(const std::string& path) {
  ProcFile file(path);
  auto text = file.read();
  if (!text) return text.error();
  return std::string(*text);
}

std::string what_to_do() {
  return "the eBPF probe's programs see the kernel's PIDs, so the agent's own requests on an endpoint's port "
         "(its metrics or out-of-band listener) may be counted as a server's, and its own network namespace may "
         "not be named \"host\"; set agent.proc_root (--proc-root) to a mount of the node's /proc, e.g. a "
         "hostPath volume at /host/proc (packaging/kubernetes/)";
}

}  // namespace

Result<pid_t> parse_self_link(std::string_view text) {
  pid_t pid = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || pid <= 0)
    return logic_error("the link reads \"" + std::string(text) + "\", not a PID");
  return pid;
}

bool is_kernel_thread_stat(std::string_view text) {
  // "2 (kthreadd) S 0 0 0 0 -1 2129984 ...": the name may hold spaces and
  // parentheses, so the fields are counted from the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) return false;
  std::string_view rest = text.substr(close + 1);
  for (int field = 3; field <= 9; ++field) {  // state, ppid, pgrp, session, tty_nr, tpgid, flags
    const size_t start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) return false;
    rest = rest.substr(start);
    const size_t stop = std::min(rest.find(' '), rest.size());
    if (field == 9) {
      unsigned long flags = 0;
      const auto [end, ec] = std::from_chars(rest.data(), rest.data() + stop, flags);
      return ec == std::errc() && end == rest.data() + stop && (flags & kPfKthread) != 0;
    }
    rest = rest.substr(stop);
  }
  return false;
}

OwnPid resolve_own_pid(const std::string& proc_root, const OwnPidReadings& readings, pid_t fallback) {
  const std::string self = proc_root + "/self";
  if (!readings.self_link)
    return {fallback, "cannot take this process's PID from " + self + " (" + readings.self_link.error().message +
                          "): getpid() (" + std::to_string(fallback) + ") is taken instead; in a PID namespace " +
                          what_to_do()};
  auto pid = parse_self_link(*readings.self_link);
  if (!pid)
    return {fallback, self + ": " + pid.error().message + " (is " + proc_root + " a procfs?): getpid() (" +
                          std::to_string(fallback) + ") is taken instead; in a PID namespace " + what_to_do()};
  const std::string init = "pid:[" + std::to_string(kInitPidNamespace) + "]";
  if (readings.own_ns && *readings.own_ns == init) return {*pid, {}};
  if (readings.pid2_stat && is_kernel_thread_stat(*readings.pid2_stat)) return {*pid, {}};
  return {*pid, proc_root + " is the procfs of a PID namespace other than the kernel's initial one (it shows no "
                "kernel thread as PID 2), so this process's PID there (" + std::to_string(*pid) +
                ") is not the one the kernel sees: " + what_to_do()};
}

OwnPid own_pid(const std::string& proc_root) {
  const OwnPidReadings readings{read_link(proc_root + "/self"), read_link(proc_root + "/self/ns/pid"),
                                read_text(proc_root + "/2/stat")};
  return resolve_own_pid(proc_root, readings, ::getpid());
}

}  // namespace headroom::probes
