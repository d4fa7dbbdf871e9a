// SPDX-License-Identifier: Apache-2.0
#include "probes/program_set.h"

#include <cerrno>

// The ABI header is C, shared with the BPF program.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wuseless-cast"
#include "probes/ebpf/endpoint_abi.h"
#pragma GCC diagnostic pop

namespace headroom::probes {

namespace {

constexpr unsigned bit(ProgramSet set) { return 1u << static_cast<unsigned>(set); }

// The socket programs need both socket tracepoints.
bool has_socket_tracepoints(const KernelFeatures& k) { return k.sk_data_ready && k.tcp_sendmsg_locked; }

constexpr std::string_view kSocketKernel = "needs sock:sk_data_ready and tcp:tcp_sendmsg_locked (kernel 6.11+)";

// The send-length set: sock_send_length in tcp_sendmsg_locked's place.
bool has_send_length(const KernelFeatures& k) { return k.sk_data_ready && k.sock_send_length; }

constexpr std::string_view kSendLengthKernel = "needs sock:sk_data_ready and sock:sock_send_length (kernel 6.6+)";
// The BTF syscall programs read the kernel's objects through typed views.
bool has_rdonly_cast(const KernelFeatures& k) { return k.rdonly_cast; }
constexpr std::string_view kRdonlyCastKernel = "needs the kfunc bpf_rdonly_cast (kernel 6.2+)";
// The socket reads programs walk from the typed current task.
bool has_current_task_btf(const KernelFeatures& k) { return k.current_task_btf; }
constexpr std::string_view kCurrentTaskBtfKernel = "needs the helper bpf_get_current_task_btf (kernel 5.11+)";
constexpr std::string_view kSendLengthKind = "tp_btf sockets, send length";

constexpr std::string_view kSocketReadsKind = "tp_btf syscalls, socket reads";
constexpr std::string_view kRawKind = "raw_tp syscalls";

// The dependency rows that come twice, without the HTTP/2 walk and with it
// (bpf_loop: 5.17+): the latter's first program.
constexpr std::string_view kRawHttp2Exit = "hr_dep_raw_h2_sys_exit";
constexpr std::string_view kSocketReadsHttp2Exit = "hr_dep_task_h2_sys_exit";

void skip_row(ProgramSetPlan& plan, const ProgramSetRow& row, std::string_view why) {
  plan.skipped += std::string(row.kind) + ": " + std::string(why) + "; ";
  plan.skipped_err = ENOTSUP;
}

struct ChoiceName {
  ProgramSet set;
  std::string_view name;
};
constexpr std::array<ChoiceName, 6> kChoiceNames{{
    {ProgramSet::automatic, "auto"},
    {ProgramSet::sockets, "sockets"},
    {ProgramSet::syscalls, "syscalls"},
    {ProgramSet::raw, "raw"},
    {ProgramSet::send_length, "send-length"},
    {ProgramSet::socket_reads, "socket-reads"},
}};

}  // namespace

// The program names are endpoint.bpf.c's; the loader loads a row's programs
// and no others.
const std::vector<ProgramSetRow>& program_set_rows() {
  static const std::vector<ProgramSetRow> rows{
      {"tp_btf sockets",
       {"hr_sock_arrival", "hr_sock_write", "hr_sock_set_state", kSockRefresh},
       {},
       true,
       false,
       PortsTaken::without_bytes,
       has_socket_tracepoints,
       kSocketKernel,
       bit(ProgramSet::automatic) | bit(ProgramSet::sockets)},
      // Both sets at once, each with its own ports (hr_port.set).
      {"tp_btf sockets + syscalls",
       {"hr_sock_arrival", "hr_sock_write", "hr_sock_set_state", kSockRefresh, "hr_btf_sys_exit",
        "hr_btf_set_state"},
       "hr_btf_data_ready",
       true,
       true,
       PortsTaken::split,
       has_socket_tracepoints,
       kSocketKernel,
       bit(ProgramSet::automatic)},
      {"tp_btf syscalls",
       {"hr_btf_sys_exit", "hr_btf_set_state"},
       "hr_btf_data_ready",
       false,
       true,
       PortsTaken::every,
       has_rdonly_cast,
       kRdonlyCastKernel,
       bit(ProgramSet::automatic) | bit(ProgramSet::syscalls)},
      {"raw_tp syscalls",
       {"hr_raw_sys_exit", "hr_raw_set_state"},
       "hr_raw_data_ready",
       false,
       true,
       PortsTaken::every,
       nullptr,
       {},
       bit(ProgramSet::automatic) | bit(ProgramSet::syscalls) | bit(ProgramSet::raw)},
  };
  return rows;
}

// The program names are dependency.bpf.c's (dependency_syscalls.bpf.h for
// the syscall set). Each row takes every dependency.
const std::vector<ProgramSetRow>& dependency_set_rows() {
  const auto syscall_row = [](std::string_view kind, std::array<std::string_view, 6> programs,
                              std::string_view arrival, unsigned offered,
                              bool (*kernel_fits)(const KernelFeatures&) = nullptr,
                              std::string_view kernel_needs = {}) {
    return ProgramSetRow{kind, programs, arrival, false, true, PortsTaken::every, kernel_fits, kernel_needs, offered};
  };
  static const std::vector<ProgramSetRow> rows{
      {"tp_btf sockets", {"hr_dep_set_state", "hr_dep_write", "hr_dep_arrival"}, {}, true, false, PortsTaken::every,
       has_socket_tracepoints, kSocketKernel, bit(ProgramSet::automatic) | bit(ProgramSet::sockets)},
      {kSendLengthKind, {"hr_dep_set_state", "hr_dep_sent", "hr_dep_arrival"}, {}, true, false, PortsTaken::every,
       has_send_length, kSendLengthKernel,
       bit(ProgramSet::automatic) | bit(ProgramSet::sockets) | bit(ProgramSet::send_length)},
      syscall_row("tp_btf syscalls", {"hr_dep_btf_sys_exit", "hr_dep_btf_sys_state", "hr_dep_btf_sys_fork"},
                  "hr_dep_arrival", bit(ProgramSet::automatic) | bit(ProgramSet::syscalls), has_rdonly_cast,
                  kRdonlyCastKernel),
      // sys_exit as a BTF tracepoint on kernels without bpf_rdonly_cast,
      // the raw programs on the other hooks; no sk_data_ready before 6.6.
      syscall_row(kSocketReadsKind, {"hr_dep_task_sys_exit", "hr_dep_raw_sys_state", "hr_dep_raw_sys_fork"}, {},
                  bit(ProgramSet::automatic) | bit(ProgramSet::syscalls) | bit(ProgramSet::socket_reads),
                  has_current_task_btf, kCurrentTaskBtfKernel),
      // The same with the HTTP/2 walk, for when a dependency speaks it.
      syscall_row(kSocketReadsKind, {kSocketReadsHttp2Exit, "hr_dep_raw_h2_sys_state", "hr_dep_raw_sys_fork"}, {},
                  bit(ProgramSet::automatic) | bit(ProgramSet::syscalls) | bit(ProgramSet::socket_reads),
                  has_current_task_btf, kCurrentTaskBtfKernel),
      syscall_row(kRawKind, {"hr_dep_raw_sys_exit", "hr_dep_raw_sys_state", "hr_dep_raw_sys_fork"}, {},
                  bit(ProgramSet::automatic) | bit(ProgramSet::syscalls) | bit(ProgramSet::raw)),
      syscall_row(kRawKind, {kRawHttp2Exit, "hr_dep_raw_h2_sys_state", "hr_dep_raw_sys_fork"}, {},
                  bit(ProgramSet::automatic) | bit(ProgramSet::syscalls) | bit(ProgramSet::raw)),
  };
  return rows;
}

Result<ProgramSet> parse_program_set(std::string_view name) {
  if (name.empty()) return ProgramSet::automatic;
  for (const auto& c : kChoiceNames)
    if (c.name == name) return c.set;
  return Error{EINVAL, "unknown eBPF program set \"" + std::string(name) +
                           "\" (auto, sockets, syscalls, raw, or send-length or socket-reads for dependencies)"};
}

std::string_view program_set_name(ProgramSet set) {
  for (const auto& c : kChoiceNames)
    if (c.set == set) return c.name;
  return kChoiceNames[0].name;
}

namespace {

// Adds `row` to the plan when `choice` offers it and it fits the kernel;
// returns whether it did the checks without skipping it.
bool offered_and_fits(ProgramSetPlan& plan, const ProgramSetRow& row, ProgramSet choice, const KernelFeatures& kernel) {
  if ((row.offered & bit(choice)) == 0) return false;
  if (row.kernel_fits && !row.kernel_fits(kernel)) {
    skip_row(plan, row, row.kernel_needs);
    return false;
  }
  return true;
}

}  // namespace

ProgramSetPlan plan_program_sets(ProgramSet choice, const PortNeeds& needs, const KernelFeatures& kernel) {
  ProgramSetPlan plan;
  if (choice == ProgramSet::send_length || choice == ProgramSet::socket_reads) {
    plan.skipped = std::string(program_set_name(choice)) +
                   ": a dependency program set, endpoints have none (auto, sockets, syscalls or raw); ";
    plan.skipped_err = ENOTSUP;
    return plan;
  }
  for (const auto& row : program_set_rows()) {
    if (!offered_and_fits(plan, row, choice, kernel)) continue;
    if (row.ports == PortsTaken::without_bytes && needs.some_bytes) {
      skip_row(plan, row, "an endpoint has a path or protocol = \"http2\"");
      continue;
    }
    if (row.ports == PortsTaken::split && (!needs.some_bytes || needs.all_bytes)) continue;  // one set alone does it
    plan.tries.push_back(&row);
  }
  return plan;
}

ProgramSetPlan plan_dependency_sets(ProgramSet choice, bool http2, const KernelFeatures& kernel) {
  ProgramSetPlan plan;
  for (const auto& row : dependency_set_rows()) {
    // The twin of the other kind: not a choice, nothing to say.
    const bool walks_http2 = row.programs[0] == kRawHttp2Exit || row.programs[0] == kSocketReadsHttp2Exit;
    if ((row.kind == kRawKind || row.kind == kSocketReadsKind) && walks_http2 != http2) continue;
    if (!offered_and_fits(plan, row, choice, kernel)) continue;
    if (row.kind == kSendLengthKind && http2) {
      skip_row(plan, row, "a dependency speaks HTTP/2, whose frames it does not see");
      continue;
    }
    plan.tries.push_back(&row);
  }
  return plan;
}

uint32_t port_set(const ProgramSetRow& row, bool port_needs_bytes) {
  switch (row.ports) {
    case PortsTaken::without_bytes:
      return HR_SET_SOCKETS;
    case PortsTaken::split:
      return port_needs_bytes ? HR_SET_SYSCALLS : HR_SET_SOCKETS;
    case PortsTaken::every:
      break;
  }
  return HR_SET_SYSCALLS;
}

}  // namespace headroom::probes
