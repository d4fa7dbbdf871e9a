// SPDX-License-Identifier: Apache-2.0
// The endpoint probe's program sets (probes/ebpf/endpoint.bpf.c), one row
// each: what it attaches, what kernel it needs and how that is checked,
// which ports it takes. The choice among them is pure: what the kernel has
// and what the endpoints need come in as arguments. The loader
// (endpoint_probe.cc) tries the rows it is given, best first, and keeps the
// first that loads and attaches. A new program set is a new row.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "headroom/orca/result.h"

namespace headroom::probes {

// Which program sets the probe may try (docs/endpoints.md): headroomd takes
// it from HEADROOM_EBPF_PROGRAMS, benchmarks and tests set it themselves.
enum class ProgramSet {
  automatic,  // every row, best first
  sockets,    // the socket tracepoints only
  syscalls,   // the syscall tracepoints, as BTF tracepoints, else as raw tracepoints
  raw,        // the syscall tracepoints as raw tracepoints only
  // The dependency probe's send-length set only (sock:sock_send_length for
  // tcp:tcp_sendmsg_locked, kernels 6.6 to 6.10); endpoints have none.
  send_length,
  // The dependency probe's syscall set whose sys_exit is a BTF tracepoint
  // that reads sockets as the raw one does (kernels 5.11 to 6.1) only;
  // endpoints have none.
  socket_reads,
};

// "auto" (or ""), "sockets", "syscalls", "raw", "send-length",
// "socket-reads": HEADROOM_EBPF_PROGRAMS's values.
Result<ProgramSet> parse_program_set(std::string_view name);
std::string_view program_set_name(ProgramSet set);

// What the running kernel has, for the rows' checks before loading
// (kernel_features.h asks the kernel's BTF). What these do not cover,
// loading tells.
struct KernelFeatures {
  bool sk_data_ready = false;       // tracepoint sock:sk_data_ready (6.6+)
  bool tcp_sendmsg_locked = false;  // tracepoint tcp:tcp_sendmsg_locked (6.11+)
  bool sock_send_length = false;    // tracepoint sock:sock_send_length (6.3+)
  bool rdonly_cast = false;         // kfunc bpf_rdonly_cast (6.2+): the BTF syscall programs
  bool current_task_btf = false;    // helper bpf_get_current_task_btf (5.11+): the socket reads programs
};

// What the endpoints need of the programs: whether a port's requests must
// be read (an endpoint with a path, or HTTP/2: only the syscall programs see
// the bytes), for some ports and for all of them.
struct PortNeeds {
  bool some_bytes = false;
  bool all_bytes = false;
};

// Which ports a row's programs take.
enum class PortsTaken {
  without_bytes,  // every port, none of whose requests must be read: the socket programs
  split,          // ports whose requests must be read to the syscall programs, the others to the socket programs
  every,          // every port: the syscall programs
};

// The programs user space runs itself (BPF_PROG_TEST_RUN) before reading
// the socket programs' requests: loaded, never attached.
inline constexpr std::string_view kSockRefresh = "hr_sock_refresh";

struct ProgramSetRow {
  std::string_view kind;                     // attach_kind()
  std::array<std::string_view, 6> programs;  // loaded and attached (kSockRefresh only loaded)
  std::string_view arrival;                  // loaded too where the kernel has sock:sk_data_ready
  bool sockets;                              // has socket programs (the requests array)
  bool syscalls;                             // has syscall programs (the inflight, known and procs maps)
  PortsTaken ports;
  // The kernel it needs, checked before loading: nullptr when loading is
  // the check (the raw tracepoint programs: 5.5 with BTF).
  bool (*kernel_fits)(const KernelFeatures&);
  std::string_view kernel_needs;  // said when kernel_fits is false
  // The HEADROOM_EBPF_PROGRAMS values that include it (bits of 1 << ProgramSet).
  unsigned offered;
};

// Every row, best first.
const std::vector<ProgramSetRow>& program_set_rows();

// The rows to try for `choice`, best first, and why the others of the choice
// were skipped ("<kind>: <why>; " each; with skipped_err ENOTSUP when any
// was, for the error when none loads). A row that one set alone makes
// redundant (both sets, when every port or none needs the bytes) is skipped
// without a word.
struct ProgramSetPlan {
  std::vector<const ProgramSetRow*> tries;
  std::string skipped;
  int skipped_err = 0;
};
ProgramSetPlan plan_program_sets(ProgramSet choice, const PortNeeds& needs, const KernelFeatures& kernel);

// The dependency probe's program sets (probes/ebpf/dependency.bpf.c), best
// first: the socket set, its send-length variant (no HTTP/2: it sees no
// bytes), then the syscall set as BTF tracepoints, with sys_exit a BTF
// tracepoint that reads sockets (bpf_get_current_task_btf without
// bpf_rdonly_cast: 5.11 to 6.1), and as raw tracepoints.
// `arrival`: sock:sk_data_ready's program, loaded too where the kernel has
// it. `ports` is unused (every row takes every dependency).
const std::vector<ProgramSetRow>& dependency_set_rows();

// The dependency rows to try for `choice`, best first, and why the others of
// the choice were skipped, as plan_program_sets says it. http2: a
// dependency speaks HTTP/2, whose streams every set walks; the socket reads
// and raw tracepoint programs come twice, with the walk (bpf_loop: 5.17+)
// for it, without otherwise, and the plan holds the one that fits.
ProgramSetPlan plan_dependency_sets(ProgramSet choice, bool http2, const KernelFeatures& kernel);

// The HR_SET_* (endpoint_abi.h) that measures a port under `row`.
uint32_t port_set(const ProgramSetRow& row, bool port_needs_bytes);

}  // namespace headroom::probes
