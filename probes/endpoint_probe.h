// SPDX-License-Identifier: Apache-2.0
// The eBPF endpoint probe (probes/ebpf/endpoint.bpf.c): loads and attaches
// the programs, configures the endpoints, and reads what the kernel has
// aggregated. RAII: destroying the probe detaches everything.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "headroom/orca/result.h"
#include "probes/program_set.h"
// The ABI header is C, shared with the BPF program.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wuseless-cast"
#include "probes/ebpf/endpoint_abi.h"
#pragma GCC diagnostic pop

namespace headroom::probes {

// What the requests on an endpoint's port are (docs/endpoints.md).
enum class Protocol {
  http1,  // one request at a time per connection (HTTP/1.x and the like)
  http2,  // cleartext HTTP/2 (h2c, gRPC): many streams per connection
};

struct EndpointSpec {
  uint16_t port = 0;
  std::string path;  // empty: the port's endpoint for every request no path claims
  uint64_t target_ns = 0;
  uint64_t max_ns = 0;
  Protocol protocol = Protocol::http1;  // every endpoint of a port says the same
};

struct EndpointProbeOptions {
  std::string proc_root = "/proc";  // for the start-up scan of existing servers
  std::string sys_root = "/sys";    // for /sys/kernel/btf/vmlinux
  // Never traced: the kernel's PID of this process; 0: own_pid(proc_root)
  // (probes/own_pid.h), not getpid(), which a PID namespace renumbers.
  pid_t self = 0;
  ProgramSet programs = ProgramSet::automatic;  // which rows of program_set.h to try
  // Instances counted apart per endpoint (agent.endpoint_instances); the
  // requests of those past it count in the endpoint's overflow instance
  // (netns HR_INSTANCE_OVERFLOW).
  uint32_t instance_bound = HR_DEFAULT_INSTANCES;
  // Tests: while this file exists, read() fails as a map read that the
  // kernel refused would (HEADROOM_TEST_EBPF_READ_FAULT). Empty, as in the
  // shipped daemon: no fault check is installed at all.
  std::string fail_reads_while;
};

// Counters of one endpoint since the probe was loaded (sums over CPUs; they
// wrap modulo 2^64 and 2^32, so take differences), plus the requests in
// flight right now.
struct EndpointTotals {
  hr_stats stats{};
  std::array<uint32_t, HR_HIST_BUCKETS> hist{};
  uint64_t inflight = 0;              // requests in flight now
  uint64_t inflight_over_target = 0;  // ... already older than the SLO target
  uint64_t inflight_over_max = 0;     // ... already older than the SLO max
  uint64_t inflight_age_ns = 0;       // sum of their ages, and of the pending requests' below
  // Requests that reached this endpoint's port but the server has not read
  // (kernels with sock:sk_data_ready): a stopped server's requests. Their path
  // is not known yet, so they count for every endpoint of the port.
  uint64_t pending = 0;
  uint64_t pending_over_target = 0;
  uint64_t pending_over_max = 0;
};

// One instance of an endpoint: its servers in one network namespace.
struct InstanceTotals {
  uint32_t endpoint = 0;  // index into the EndpointSpecs
  uint32_t netns = 0;     // the namespace's inode; HR_INSTANCE_OVERFLOW: those past the bound
  EndpointTotals totals;
};

// Listening sockets of an endpoint's port in one network namespace, and a
// process that listens there (the latest to start listening; for servers
// older than the probe, one found by the start-up scan).
struct ListenerState {
  uint32_t netns = 0;
  uint16_t port = 0;
  pid_t pid = 0;
  int32_t listeners = 0;  // 0 or less: nothing listens there any more
};

struct EndpointSnapshot {
  int64_t at_ns = 0;  // CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns()
  // In EndpointSpec order: each endpoint's totals over all its instances,
  // those forgotten (forget_instance) included, so they never go back.
  std::vector<EndpointTotals> endpoints;
  // Every instance with counts or requests in flight, by (endpoint, netns).
  std::vector<InstanceTotals> instances;
  std::vector<ListenerState> listeners;  // by (netns, port)
  uint64_t instances_lost = 0;           // request ends no instance entry could count (since load)
  uint64_t inflight_unclaimed = 0;        // requests on traced ports no endpoint claims
  // Requests the in-flight table holds now (every endpoint's, pending and
  // unclaimed ones included) and how many it can hold: a request arriving
  // while it is full is not counted (docs/endpoints.md, "Limits and memory").
  uint64_t table_used = 0;
  uint64_t table_size = 0;
  // HTTP/2: streams in flight now (in the endpoints' totals too), HTTP/2
  // connections known, and the parsers' counters since the probe was loaded
  // (sums over CPUs).
  uint64_t h2_streams = 0;
  uint64_t h2_connections = 0;
  hr_h2_stats h2{};
};

// Adds one request in flight to its endpoint's totals (pure; the probe's
// read() calls it for each): by its server time at now_ns (hr_server_time),
// as pending when the server has not read it, to unclaimed when no endpoint
// of its port claims it.
// totals_of(endpoint index) gives the totals a request of that endpoint
// goes into (read() passes its instance's).
void account_inflight(const hr_inflight& r, uint64_t now_ns, const std::vector<EndpointSpec>& specs,
                      const std::function<EndpointTotals&(std::size_t)>& totals_of, uint64_t& unclaimed);
void account_inflight(const hr_inflight& r, uint64_t now_ns, const std::vector<EndpointSpec>& specs,
                      std::vector<EndpointTotals>& totals, uint64_t& unclaimed);

class EndpointProbe {
 public:
  // Checks the kernel (BTF, permissions), loads the best program set that
  // loads (program_set.h's rows, best first), fills the maps with the
  // endpoints and the servers already running, and attaches last. The error
  // says what is missing and what to do.
  static Result<std::unique_ptr<EndpointProbe>> open(const std::vector<EndpointSpec>& endpoints,
                                                     const EndpointProbeOptions& options);
  ~EndpointProbe();
  EndpointProbe(const EndpointProbe&) = delete;
  EndpointProbe& operator=(const EndpointProbe&) = delete;

  // Reads every endpoint's counters and walks the in-flight requests, their
  // ages taken at now_ns (CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns();
  // it becomes out.at_ns). out is a snapshot this probe filled before, or an
  // empty one: an endpoint's histogram is copied into it only when its
  // completed count moved.
  Result<void> read(EndpointSnapshot& out, int64_t now_ns);

  // Detach every program, and attach them again: the maps and what they
  // hold stay (benchmarks compare attached and detached in one process).
  void detach();
  Result<void> attach();

  // Traces this process's sockets from now on (tests; the probe finds
  // servers by themselves through accept/listen and the start-up scan).
  Result<void> trace_process(pid_t tgid);

  // An instance that is gone: its entry leaves the kernel's map (making room
  // under the bound) and its counts stay in its endpoint's totals. A later
  // request of the same namespace makes it an instance again.
  Result<void> forget_instance(uint32_t endpoint, uint32_t netns);
  // A namespace's listeners on a port that the start-up scan found (servers
  // older than the probe); later changes come from the kernel.
  Result<void> seed_listener(const ListenerState& l);

  // "tp_btf sockets", "tp_btf sockets + syscalls", "tp_btf syscalls" or
  // "raw_tp syscalls": which programs are attached.
  const std::string& attach_kind() const { return kind_; }
  // Better program sets that were tried first and failed to load, with the
  // error and the kernel's last words ("" when the first choice attached):
  // the attached set then costs more per request, or measures less.
  const std::string& load_failures() const { return load_failures_; }
  // Whether request arrival is seen (sock:sk_data_ready, kernel >= 6.6).
  bool sees_arrival() const { return arrival_; }
  // Processes traced right now (the procs map), for status lines and tests;
  // 0 with the socket set, which follows sockets, not processes.
  std::size_t traced_processes() const;
  // Bytes of kernel memory the maps take, from their sizes (docs/endpoints.md).
  uint64_t map_bytes() const { return map_bytes_; }

  // The programs the built object (endpoint.bpf.c) holds, by name: it is
  // opened, nothing is loaded (no privileges needed). Tests check that the
  // rows of program_set.h name only these.
  static Result<std::vector<std::string>> object_programs();

 private:
  struct Skeleton;  // endpoint_skeleton.h
  // How one row went: attached, or the errno of its load or attach (the
  // next row is tried); open_failed: the object itself did not open.
  struct Attempt {
    int err = 0;
    bool open_failed = false;
  };
  EndpointProbe() = default;
  // Opens, sizes, loads, fills and attaches one row's programs; an error is
  // one no other row would mend (the maps could not be filled).
  Result<Attempt> load_row(const ProgramSetRow& row, const std::set<uint32_t>& byte_ports,
                           const EndpointProbeOptions& options, std::optional<std::vector<pid_t>>& servers);
  // The endpoints and ports maps, between load and attach; byte_ports: the
  // ports whose requests must be read (port_set()).
  Result<void> fill_maps(const ProgramSetRow& row, const std::set<uint32_t>& byte_ports);
  // Every instance's counters (stats, and hist where completed moved) into
  // inst_cache_, and the listeners into listeners_.
  Result<void> read_counters();
  Result<void> read_listeners();
  // The instance totals a request of (endpoint, netns) in flight goes into.
  EndpointTotals& instance_totals(uint32_t endpoint, uint32_t netns);
  void sum_endpoints();  // cache_ from retired_ and inst_cache_
  // The requests in flight, one call of account each.
  Result<void> map_slots();  // the socket set's requests array, into this process
  Result<void> read_slots(const std::function<void(const hr_inflight&)>& account);
  Result<void> walk_inflight_map(const std::function<void(const hr_inflight&)>& account);
  // HTTP/2 connections: their streams in flight, one call of account each.
  Result<void> walk_h2_streams(uint64_t now_ns, const std::function<void(const hr_inflight&)>& account,
                               EndpointSnapshot& out);
  // Servers that were running before headroomd (the procs map's first
  // entries); options.self is never one of them.
  static std::vector<pid_t> existing_servers(const std::vector<EndpointSpec>& endpoints,
                                             const EndpointProbeOptions& options);

  std::unique_ptr<Skeleton> skel_;
  std::string kind_;
  std::string load_failures_;
  bool arrival_ = false;
  std::vector<EndpointSpec> specs_;
  std::vector<EndpointTotals> cache_;  // the endpoints' sums of their instances
  std::vector<EndpointTotals> retired_;  // what forgotten instances had counted, per endpoint
  // Every instance's totals (hist summed only when completed moved).
  std::map<std::pair<uint32_t, uint32_t>, EndpointTotals> inst_cache_;
  uint32_t instance_bound_ = HR_DEFAULT_INSTANCES;
  uint64_t map_bytes_ = 0;
  int ncpu_ = 1;
  // scratch for reads
  std::vector<hr_inst_key> inst_keys_;
  std::vector<hr_inst> inst_vals_;  // batch: key-major, then CPU
  std::vector<ListenerState> listeners_;
  std::vector<uint64_t> keys_;
  std::vector<hr_inflight> vals_;
  std::vector<hr_h2_conn> h2_vals_;
  bool has_http2_ = false;
  bool syscalls_ = false;  // the syscall set is attached (its in-flight map is read)
  // Tests only (EndpointProbeOptions::fail_reads_while): read() fails while
  // it does. Null in the shipped daemon: a read costs one test of it.
  std::function<Result<void>()> read_fault_;
};

}  // namespace headroom::probes
