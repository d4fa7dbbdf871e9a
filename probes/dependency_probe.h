// SPDX-License-Identifier: Apache-2.0
// The eBPF dependency probe (probes/ebpf/dependency.bpf.c): outbound calls of
// the node's processes to the [[dependency]]s, measured from the calling
// side (docs/dependencies.md). Loads and attaches the programs, configures
// the dependencies, and reads what the kernel has aggregated. RAII:
// destroying the probe detaches everything.
//
// A call starts when the client writes a request on a connection to the
// dependency and no call is in flight on it (HTTP/2: a HEADERS frame opens a
// stream), and ends when the answer's first bytes arrive. Errors: a connect
// that fails (refused, timed out, the client gave up), a connection reset or
// closed with a call in flight, an HTTP/1 5xx status line, an HTTP/2 :status
// 5xx or non-zero grpc-status. The socket program set times the answer's
// arrival; the syscall set, on kernels before 6.11, starts a call at the
// write's exit and ends it at the arrival (6.6+) or at the client's read,
// an HTTP/2 stream at the client's read (with raw tracepoints, 5.17+).
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "headroom/orca/result.h"
#include "probes/endpoint_probe.h"

namespace headroom::probes {

enum class DependencyProtocol {
  http1,    // HTTP/1.x: one call at a time per connection; a 5xx status line is an error
  http2,    // cleartext HTTP/2 (gRPC clients): calls are streams
  generic,  // any request/response protocol, one call at a time per connection (Redis, SQL wire protocols)
};

struct DependencySpec {
  // The remote side: a connection whose peer is (address, port). No address:
  // any host on that port. IPv4 addresses are kept as IPv4-mapped IPv6
  // (::ffff:a.b.c.d), as an AF_INET6 socket to an IPv4 peer sees them.
  std::optional<in6_addr> address;
  uint16_t port = 0;
  uint64_t target_ns = 0;
  uint64_t max_ns = 0;
  DependencyProtocol protocol = DependencyProtocol::http1;
  // The callers: both empty, every process on the node. caller_cgroup is a
  // cgroup directory (absolute path under the cgroup mount, v1 or v2): the
  // processes in it or below it; caller_process a process name (comm, at
  // most 15 bytes). Both set: a process must match both.
  std::string caller_cgroup;
  std::string caller_process;
  // The error rule: which failed calls count in calls.stats.errors.
  // Connect failures and resets are counted apart whatever it says.
  struct Errors {
    bool status_5xx = true;  // an HTTP 5xx answer; http2: also a grpc-status other than OK
    bool status_4xx = false; // an HTTP 4xx answer
    bool connect = true;     // a failed connect
    bool reset = true;       // a reset or a close with the call in flight; http2: RST_STREAM too
    bool operator==(const Errors&) const = default;
  } errors;
};

struct DependencyProbeOptions {
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  ProgramSet programs = ProgramSet::automatic;  // which rows of dependency_set_rows() to try
  // Tests: while this file exists, read() fails as a map read the kernel
  // refused would. Empty in the shipped daemon.
  std::string fail_reads_while;
};

// One dependency's counters since the probe was loaded (sums over CPUs; they
// wrap, so take differences) and its calls in flight now.
//  calls.stats.completed      calls whose answer began to arrive
//  calls.stats.errors         failed calls, as DependencySpec::errors says (by default error answers,
//                             every aborted call and every connect failure)
//  calls.stats.aborted        calls that ended without an answer: connection reset or closed
//                             with the call in flight, and connect failures
//  calls.stats.over_target/over_max, busy_ns, hist: of completed and aborted calls
//  calls.inflight*            calls in flight now, connects in progress included
struct DependencyTotals {
  EndpointTotals calls;
  uint64_t connect_failures = 0;  // connects refused, timed out or abandoned (also in aborted and errors)
  uint64_t resets = 0;            // calls ended by a reset or close (also in aborted and errors)
};

// How the HTTP/2 frame walks fared, over every HTTP/2 dependency since load.
struct DependencyHttp2Counts {
  uint64_t frames = 0;   // frame headers walked, both directions
  uint64_t streams = 0;  // streams measured (each took a slot of the calls table)
  uint64_t dropped = 0;  // streams not measured: their connection's entry or the table's slots were taken
  uint64_t desyncs = 0;  // walks that lost the frame boundaries
  uint64_t resyncs = 0;  // directions found again at a piece starting with the preface or a plausible frame
  uint64_t lost = 0;     // streams in flight given up uncounted when the server's frames were lost
  uint64_t hpack_lost = 0;  // connections whose server header blocks could no longer be followed
};

struct DependencySnapshot {
  int64_t at_ns = 0;  // CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns()
  std::vector<DependencyTotals> dependencies;  // in DependencySpec order
  DependencyHttp2Counts http2;
  uint64_t table_used = 0;  // calls in flight the kernel's table holds now
  uint64_t table_size = 0;
};

class DependencyProbe {
 public:
  // Checks the kernel, loads the programs, fills the maps and attaches last.
  // The error says what is missing and what to do.
  static Result<std::unique_ptr<DependencyProbe>> open(const std::vector<DependencySpec>& dependencies,
                                                       const DependencyProbeOptions& options);
  ~DependencyProbe();
  DependencyProbe(const DependencyProbe&) = delete;
  DependencyProbe& operator=(const DependencyProbe&) = delete;

  // Reads every dependency's counters and its calls in flight, their ages
  // taken at now_ns (CLOCK_MONOTONIC). Also renews the callers (processes
  // matching caller_process / caller_cgroup) from proc_root.
  Result<void> read(DependencySnapshot& out, int64_t now_ns);

  // Detach every program, and attach again (benchmarks).
  void detach();
  Result<void> attach();

  // Which programs are attached: "tp_btf sockets" (6.11+), "tp_btf sockets,
  // send length" (6.6+), "tp_btf syscalls" (6.2+), "tp_btf syscalls, socket
  // reads" (5.11+) or "raw_tp syscalls" (program_set.h, dependency_set_rows).
  const std::string& attach_kind() const;
  // Better program sets that were tried first and failed to load, with the
  // error and the kernel's last words ("" when the first choice attached).
  const std::string& load_failures() const;
  uint64_t map_bytes() const;

 private:
  struct Impl;
  explicit DependencyProbe(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace headroom::probes
