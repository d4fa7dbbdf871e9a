// SPDX-License-Identifier: Apache-2.0
// The endpoint probe's loading half: the kernel checks, the program set's
// rows tried best first (program_set.h), the maps sized and filled, the
// servers already running found, and the programs attached last. Reading
// the maps is endpoint_read.cc's.
#include "probes/endpoint_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "probes/endpoint_skeleton.h"
#include "probes/instance.h"
#include "probes/kernel_features.h"
#include "probes/own_pid.h"

namespace headroom::probes {

namespace {

// libbpf's messages during open/load, kept to explain a failure (the
// verifier's last lines), otherwise dropped.
std::string g_libbpf_log;
int collect_libbpf_log(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char line[1024];
  const int n = std::vsnprintf(line, sizeof line, fmt, args);
  if (n > 0) {
    g_libbpf_log += line;
    if (g_libbpf_log.size() > 16384) g_libbpf_log.erase(0, g_libbpf_log.size() - 16384);
  }
  return 0;
}

// Collects libbpf's messages while it lives.
struct LibbpfLog {
  libbpf_print_fn_t previous = libbpf_set_print(collect_libbpf_log);
  LibbpfLog() = default;
  LibbpfLog(const LibbpfLog&) = delete;
  LibbpfLog& operator=(const LibbpfLog&) = delete;
  ~LibbpfLog() { libbpf_set_print(previous); }
};

// The end of libbpf's log: the verifier's verdict is in its last lines.
std::string log_tail(const std::string& text) {
  constexpr std::size_t kKeep = 600;
  std::string t = text.size() > kKeep ? "..." + text.substr(text.size() - kKeep) : text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  for (auto& ch : t)
    if (ch == '\n') ch = ' ';
  return t.empty() ? "nothing" : t;
}

// Loads the row's programs and no others.
void choose(bpf_object* obj, const ProgramSetRow& v, bool arrival) {
  for (bpf_program* prog = bpf_object__next_program(obj, nullptr); prog != nullptr;
       prog = bpf_object__next_program(obj, prog)) {
    const std::string_view name = bpf_program__name(prog);
    const bool wanted = (!name.empty() && std::find(v.programs.begin(), v.programs.end(), name) != v.programs.end()) ||
                        (arrival && !v.arrival.empty() && name == v.arrival);
    bpf_program__set_autoload(prog, wanted);
    if (name == kSockRefresh) bpf_program__set_autoattach(prog, false);
  }
}

Error permission_error(int err) {
  return Error{err,
               std::string("the kernel refused to load eBPF programs (") + std::strerror(err) +
                   "): headroomd needs CAP_BPF and CAP_PERFMON (kernel >= 5.8; CAP_SYS_ADMIN before), "
                   "or root. Under systemd the unit grants them (AmbientCapabilities=); elsewhere run as root "
                   "or set agent.ebpf = \"off\""};
}

uint64_t map_size(const bpf_map* m, int ncpu) {
  const uint64_t entries = bpf_map__max_entries(m);
  const uint64_t value = bpf_map__value_size(m);
  const uint64_t key = bpf_map__key_size(m);
  const auto type = bpf_map__type(m);
  if (type == BPF_MAP_TYPE_PERCPU_ARRAY) return entries * ((value + 7) / 8 * 8) * static_cast<uint64_t>(ncpu);
  if (type == BPF_MAP_TYPE_ARRAY) return entries * value;
  // A hash map allocated on demand (the HTTP/2 connections) takes memory
  // per entry as entries come: not in the figure (docs/endpoints.md).
  if (bpf_map__map_flags(m) & BPF_F_NO_PREALLOC) return 0;
  return entries * (key + value + 64);  // hash element overhead, roughly
}

// Whether the endpoint's requests must be read to be measured (a path picks
// among a port's endpoints; HTTP/2's streams are in its frames): only the
// syscall set sees the bytes.
bool needs_bytes(const EndpointSpec& e) { return !e.path.empty() || e.protocol == Protocol::http2; }

// Tests: read() fails while `file` exists, as a map read the kernel refused
// would (HEADROOM_TEST_EBPF_READ_FAULT); installed only when asked for.
std::function<Result<void>()> fault_while_exists(std::string file) {
  return [file = std::move(file)]() -> Result<void> {
    if (::access(file.c_str(), F_OK) != 0) return {};
    return Error{EIO, "cannot read the eBPF stats map: " + std::string(std::strerror(EIO)) + " (test fault: " + file +
                          " exists)"};
  };
}

}  // namespace

Result<std::unique_ptr<EndpointProbe>> EndpointProbe::open(const std::vector<EndpointSpec>& endpoints,
                                                           const EndpointProbeOptions& options) {
  if (endpoints.empty() || endpoints.size() > HR_MAX_ENDPOINTS)
    return Error{EINVAL, "between 1 and " + std::to_string(HR_MAX_ENDPOINTS) + " endpoints are supported"};
  const std::string btf_path = options.sys_root + "/kernel/btf/vmlinux";
  if (::access(btf_path.c_str(), R_OK) != 0)
    return Error{ENOENT, "this kernel has no BTF type information (" + btf_path + ": " + std::strerror(errno) +
                             "); the eBPF endpoint probes need a kernel built with CONFIG_DEBUG_INFO_BTF=y "
                             "(every major distribution's kernel since 2020)"};

  std::unique_ptr<EndpointProbe> p(new EndpointProbe());
  p->ncpu_ = libbpf_num_possible_cpus();
  if (p->ncpu_ <= 0) return Error{EIO, "cannot count the possible CPUs"};
  const auto kernel = running_kernel_features();
  if (!kernel) return kernel.error();
  p->arrival_ = kernel->sk_data_ready;
  p->specs_ = endpoints;
  if (!options.fail_reads_while.empty()) p->read_fault_ = fault_while_exists(options.fail_reads_while);
  p->cache_.assign(endpoints.size(), EndpointTotals{});
  p->retired_.assign(endpoints.size(), EndpointTotals{});
  if (options.instance_bound == 0) return Error{EINVAL, "the instance bound must be at least 1"};
  p->instance_bound_ = options.instance_bound;
  const LibbpfLog keep_log;
  // HTTP/2's frames, like a path, are in the bytes.
  p->has_http2_ = std::any_of(endpoints.begin(), endpoints.end(),
                              [](const EndpointSpec& e) { return e.protocol == Protocol::http2; });
  // The frames are walked with bpf_loop (Linux 5.17+). Ask the kernel first,
  // so an older one gets an error that names the setting, not a verifier log.
  if (p->has_http2_ && libbpf_probe_bpf_helper(BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_FUNC_loop, nullptr) != 1)
    return Error{ENOTSUP,
                 "an endpoint with protocol = \"http2\" needs the kernel's bpf_loop helper (Linux 5.17 or later), "
                 "which this kernel lacks, to walk the HTTP/2 frames; use a newer kernel, or protocol = \"http1\" "
                 "to time the connections instead of the streams"};
  // A port goes to the syscall set when any of its endpoints needs the bytes.
  std::set<uint32_t> byte_ports;
  for (const auto& e : endpoints)
    if (needs_bytes(e)) byte_ports.insert(e.port);
  const PortNeeds needs{!byte_ports.empty(),
                        std::all_of(endpoints.begin(), endpoints.end(),
                                    [&](const EndpointSpec& e) { return byte_ports.count(e.port) != 0; })};
  // The rows of options.programs (tests, benchmarks, diagnosing a kernel)
  // that fit the kernel and the endpoints, best first; the first that loads
  // and attaches stays.
  const ProgramSetPlan plan = plan_program_sets(options.programs, needs, *kernel);
  std::string failures = plan.skipped, load_failures;
  int last_err = plan.skipped_err;
  std::optional<std::vector<pid_t>> servers;  // scanned once, whichever set loads
  EndpointProbeOptions resolved = options;
  if (resolved.self == 0) resolved.self = own_pid(resolved.proc_root).pid;
  for (const ProgramSetRow* row : plan.tries) {
    g_libbpf_log.clear();
    auto attempt = p->load_row(*row, byte_ports, resolved, servers);
    if (!attempt) return attempt.error();
    if (attempt->err == 0) break;
    last_err = attempt->err;
    if (attempt->open_failed) {
      failures += "open: " + std::string(std::strerror(last_err)) + "; ";
      break;
    }
    failures += std::string(row->kind) + ": " + std::strerror(last_err) + "; ";
    load_failures += std::string(load_failures.empty() ? "" : "; ") + std::string(row->kind) + ": " + std::strerror(last_err) +
                     " (kernel says: " + log_tail(g_libbpf_log) + ")";
  }
  if (!p->skel_) {
    if (last_err == EPERM) return permission_error(last_err);
    return Error{last_err, "cannot load the eBPF endpoint programs (" + failures +
                               "kernel says: " + log_tail(g_libbpf_log) +
                               "); endpoint latency signals need raw tracepoints (kernel 5.5+, with BTF) or BTF tracepoints (6.2+)"};
  }
  p->load_failures_ = load_failures;
  for (bpf_map* m = bpf_object__next_map(p->skel_->obj->obj, nullptr); m != nullptr;
       m = bpf_object__next_map(p->skel_->obj->obj, m))
    p->map_bytes_ += map_size(m, p->ncpu_);
  return p;
}

// libbpf's bootstrap order: open, settings into .rodata, load, fill the
// maps, attach. Attached last, no program sees an unconfigured probe.
Result<EndpointProbe::Attempt> EndpointProbe::load_row(const ProgramSetRow& row, const std::set<uint32_t>& byte_ports,
                                                       const EndpointProbeOptions& options,
                                                       std::optional<std::vector<pid_t>>& servers) {
  auto skel = std::make_unique<Skeleton>();
  skel->obj = endpoint_bpf__open();
  if (!skel->obj) return Attempt{errno, true};
  choose(skel->obj->obj, row, arrival_);
  // Per-endpoint maps hold exactly the configured endpoints; the instances'
  // room for each endpoint's bound and its overflow entry (allocated as
  // instances come: entries x 2.4 KiB x CPUs at most).
  const auto n = static_cast<__u32>(specs_.size());
  bpf_map__set_max_entries(skel->obj->maps.endpoints, n);
  bpf_map__set_max_entries(skel->obj->maps.instances, n * (instance_bound_ + 1));
  skel->obj->rodata->instance_bound = instance_bound_;
  // Each set's maps at full size, the other set's shrunk to nothing (the
  // kernel preallocates hash maps: 7 MiB at full size).
  if (!row.syscalls)
    for (bpf_map* m : {skel->obj->maps.inflight, skel->obj->maps.known, skel->obj->maps.procs})
      bpf_map__set_max_entries(m, 1);
  if (!row.sockets) bpf_map__set_max_entries(skel->obj->maps.requests, 1);
  if (!has_http2_) bpf_map__set_max_entries(skel->obj->maps.h2conns, 1);
  skel->obj->rodata->self_tgid = static_cast<__u32>(options.self);
  if (const int err = endpoint_bpf__load(skel->obj); err != 0) return Attempt{-err, false};
  skel_ = std::move(skel);
  if (auto r = fill_maps(row, byte_ports); !r) return r.error();
  // Servers older than the probe, in every network namespace: the
  // listeners their instances start from (later ones come from the kernel).
  std::set<uint16_t> ports;
  for (const auto& e : specs_) ports.insert(e.port);
  for (const auto& l : scan_listeners(options.proc_root, ports))
    if (auto r = seed_listener({l.netns, l.port, l.pid, l.listeners}); !r) return r.error();
  if (row.sockets) {
    if (auto r = map_slots(); !r) return r.error();
  }
  if (row.syscalls) {
    if (!servers) {
      std::vector<EndpointSpec> traced;  // the syscall set's endpoints
      for (const auto& e : specs_)
        if (port_set(row, byte_ports.count(e.port) != 0) == HR_SET_SYSCALLS) traced.push_back(e);
      servers = existing_servers(traced, options);
    }
    for (const pid_t pid : *servers) (void)trace_process(pid);
  }
  if (const int err = endpoint_bpf__attach(skel_->obj); err != 0) {
    skel_.reset();
    return Attempt{-err, false};
  }
  kind_ = row.kind;
  syscalls_ = row.syscalls;
  if (row.sockets) arrival_ = true;
  return Attempt{};
}

EndpointProbe::~EndpointProbe() = default;

Result<std::vector<std::string>> EndpointProbe::object_programs() {
  Skeleton skel;
  skel.obj = endpoint_bpf__open();
  if (!skel.obj) return Error{errno, std::string("cannot open the eBPF endpoint object: ") + std::strerror(errno)};
  std::vector<std::string> names;
  for (bpf_program* prog = bpf_object__next_program(skel.obj->obj, nullptr); prog != nullptr;
       prog = bpf_object__next_program(skel.obj->obj, prog))
    names.emplace_back(bpf_program__name(prog));
  return names;
}

Result<void> EndpointProbe::fill_maps(const ProgramSetRow& row, const std::set<uint32_t>& byte_ports) {
  const std::vector<EndpointSpec>& endpoints = specs_;
  std::map<uint32_t, hr_port> ports;
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    const auto& e = endpoints[i];
    hr_endpoint v{};
    v.target_ns = e.target_ns;
    v.max_ns = e.max_ns;
    v.path_len = static_cast<__u32>(std::min<std::size_t>(e.path.size(), HR_PATH_BYTES - 1));
    for (std::size_t k = 0; k < v.path_len; ++k) {
      const auto byte = static_cast<unsigned char>(e.path[k]);
      const auto shift = static_cast<unsigned>(8 * (k % 8));  // little-endian words
      v.path_words[k / 8] |= static_cast<__u64>(byte) << shift;
      v.path_mask[k / 8] |= static_cast<__u64>(0xff) << shift;
    }
    const auto idx = static_cast<uint32_t>(i);
    if (bpf_map_update_elem(bpf_map__fd(skel_->obj->maps.endpoints), &idx, &v, BPF_ANY) != 0)
      return Error{errno, std::string("cannot configure the eBPF endpoints map: ") + std::strerror(errno)};
    auto [it, fresh] = ports.try_emplace(e.port);
    const __u32 proto = e.protocol == Protocol::http2 ? HR_PROTO_HTTP2 : HR_PROTO_HTTP1;
    if (fresh) {
      it->second.generic_ep = HR_NO_ENDPOINT;
      it->second.n_paths = 0;
      it->second.proto = proto;
      it->second.set = port_set(row, byte_ports.count(e.port) != 0);
    } else if (it->second.proto != proto) {
      return Error{EINVAL, "port " + std::to_string(e.port) + " has endpoints of two protocols (http1 and http2); "
                               "every endpoint of a port must speak the same"};
    }
    if (proto == HR_PROTO_HTTP2 && !e.path.empty())
      return Error{EINVAL, "an HTTP/2 endpoint cannot have a path (port " + std::to_string(e.port) + ")"};
    if (e.path.empty()) {
      it->second.generic_ep = idx;
    } else if (it->second.n_paths < HR_MAX_PATHS_PER_PORT) {
      it->second.path_eps[it->second.n_paths++] = idx;
    }
  }
  if (ports.size() > HR_MAX_PORTS)
    return Error{EINVAL, "at most " + std::to_string(HR_MAX_PORTS) + " ports can have endpoints"};
  // Each endpoint's overflow instance, where requests past the bound count.
  std::vector<hr_inst> zero(static_cast<std::size_t>(ncpu_));
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    const hr_inst_key k{static_cast<__u32>(i), HR_INSTANCE_OVERFLOW};
    if (bpf_map_update_elem(bpf_map__fd(skel_->obj->maps.instances), &k, zero.data(), BPF_NOEXIST) != 0)
      return Error{errno, std::string("cannot configure the eBPF instances map: ") + std::strerror(errno)};
  }
  // The globals are memory-mapped: written in place, before attaching.
  auto* bss = skel_->obj->bss;
  std::size_t slot = 0;
  for (const auto& [port, v] : ports) {
    bss->port_cfg[slot] = v;
    bss->port_slot[port] = static_cast<__u16>(++slot);
  }
  return {};
}

// Servers that were running before headroomd: the processes holding a socket
// whose local port is an endpoint's. Needs to read other users' /proc/<pid>/fd
// (root); without that, a server is found at its next accept().
std::vector<pid_t> EndpointProbe::existing_servers(const std::vector<EndpointSpec>& endpoints,
                                                   const EndpointProbeOptions& options) {
  std::set<uint32_t> ports;
  for (const auto& e : endpoints) ports.insert(e.port);
  // Not headroomd: a reload's new probe finds its listeners (Prometheus, OOB) open.
  return socket_holders(options.proc_root, ports, SocketEnd::local, options.self);
}

void EndpointProbe::detach() { endpoint_bpf__detach(skel_->obj); }

Result<void> EndpointProbe::attach() {
  if (const int err = endpoint_bpf__attach(skel_->obj); err != 0)
    return Error{-err, std::string("cannot attach the eBPF endpoint programs: ") + std::strerror(-err)};
  return {};
}

Result<void> EndpointProbe::trace_process(pid_t tgid) {
  const auto key = static_cast<uint32_t>(tgid);
  const uint8_t one = 1;
  if (bpf_map_update_elem(bpf_map__fd(skel_->obj->maps.procs), &key, &one, BPF_ANY) != 0)
    return Error{errno, std::string("cannot add the process to the eBPF procs map: ") + std::strerror(errno)};
  return {};
}

Result<void> EndpointProbe::seed_listener(const ListenerState& l) {
  const hr_listen_key k{l.netns, l.port};
  const hr_listener v{l.listeners, static_cast<__u32>(l.pid)};
  if (bpf_map_update_elem(bpf_map__fd(skel_->obj->maps.listeners), &k, &v, BPF_NOEXIST) != 0 && errno != EEXIST)
    return Error{errno, std::string("cannot add to the eBPF listeners map: ") + std::strerror(errno)};
  return {};
}

Result<void> EndpointProbe::forget_instance(uint32_t endpoint, uint32_t netns) {
  if (endpoint >= specs_.size() || netns == HR_INSTANCE_OVERFLOW) return {};
  const hr_inst_key k{endpoint, netns};
  if (bpf_map_delete_elem(bpf_map__fd(skel_->obj->maps.instances), &k) == 0)
    __atomic_fetch_sub(&skel_->obj->bss->instances_used[endpoint], 1u, __ATOMIC_RELAXED);
  else if (errno != ENOENT)
    return Error{errno, std::string("cannot remove an instance from the eBPF instances map: ") + std::strerror(errno)};
  auto it = inst_cache_.find({endpoint, netns});
  if (it == inst_cache_.end()) return {};
  auto& r = retired_[endpoint];
  const hr_stats& s = it->second.stats;
  r.stats.completed += s.completed;
  r.stats.errors += s.errors;
  r.stats.over_target += s.over_target;
  r.stats.over_max += s.over_max;
  r.stats.aborted += s.aborted;
  r.stats.busy_ns += s.busy_ns;
  for (std::size_t b = 0; b < HR_HIST_BUCKETS; ++b) r.hist[b] += it->second.hist[b];
  inst_cache_.erase(it);
  return {};
}

Result<void> EndpointProbe::map_slots() {
  bpf_map* m = skel_->obj->maps.requests;
  const std::size_t n = bpf_map__max_entries(m);
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t bytes = (n * sizeof(hr_slot) + page - 1) / page * page;
  void* at = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, bpf_map__fd(m), 0);
  if (at == MAP_FAILED)
    return Error{errno, std::string("cannot map the eBPF requests array: ") + std::strerror(errno)};
  skel_->slots = static_cast<const hr_slot*>(at);
  skel_->nslots = n;
  skel_->slots_bytes = bytes;
  return {};
}

}  // namespace headroom::probes
