// SPDX-License-Identifier: Apache-2.0
// bench_ebpf_floor: what the eBPF endpoint probe costs a loopback request, as
// a ratio to the floor: empty programs (bench/floor.bpf.c) on the same
// tracepoints. The floor is what having a program on those tracepoints costs
// at all (dispatch, trampoline, call and return, which on a VM with
// retpolines dominate); no work done in the programs can go below it.
//
// One thread does request/response exchanges over one loopback TCP
// connection it owns both ends of (blocking sockets, TCP_NODELAY): client
// write of "GET / HTTP/1.1\r\nHost: b\r\n\r\n", server read, server write of
// "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", client read. The listening
// port is the one the product's endpoint is configured on. Variants, attached
// and detached in slices of --slice exchanges (after --warmup exchanges that
// are not measured), in an order rotated every cycle:
//   none             nothing attached
//   floor-sockets    empty programs on sk_data_ready, sock_recv_length,
//                    tcp_sendmsg_locked, inet_sock_set_state
//   floor-sockets-own empty programs on only the three of those hooks the
//                    socket set attaches (it runs nothing on the server's
//                    reads): its own work against its own hooks' cost
//   product-sockets  EndpointProbe with ProgramSet::sockets
//   floor-syscalls   empty programs on sys_enter, sys_exit,
//                    inet_sock_set_state, sk_data_ready (the last where the
//                    kernel has it: the product attaches it only there)
//   floor-syscalls-own empty programs on the same but sys_enter, the hooks
//                    the syscall set attaches (it reads a call's arguments
//                    at its exit)
//   product-syscalls EndpointProbe with ProgramSet::syscalls, tracing this
//                    process (options.self = 1, trace_process(getpid()))
// --set mixed measures, beside product-sockets and its floors (--set all:
// beside both sets' variants):
//   floor-mixed      empty programs on the socket floor's four hooks and
//                    sys_exit; floor-mixed-own: on the four the two sets
//                    attach (sk_data_ready, tcp_sendmsg_locked,
//                    inet_sock_set_state, sys_exit)
//   product-mixed    EndpointProbe with both sets: this port (HTTP/1) with
//                    the socket set, an HTTP/2 endpoint on another port with
//                    the syscall set; this process not traced
// The probes are opened once, before the cycles, and then only detached and
// attached (their maps stay). Per slice: CPU ns per exchange from
// CLOCK_THREAD_CPUTIME_ID (on loopback the receive softirq runs in the
// sending thread's context, so it is included, unless the kernel has
// CONFIG_IRQ_TIME_ACCOUNTING) and wall ns per exchange. Per cycle: each
// variant minus the same cycle's `none`. Reported per program set: the median
// over cycles, with the interquartile range as the noise figure, of
// floor - none, product - none and (product - none) / (floor - none) (a
// cycle whose floor - none is not positive has no ratio; their number is
// printed), and the ratio of the two medians for contrast. A cycle during
// which another process's hr_*/floor_* programs were attached or detached
// (other people's tests load the same programs; checked between slices) is
// left out: its slices paid different costs.
// --protocol http2 makes the exchange HTTP/2 (cleartext, prior knowledge):
// the connection starts with the client's preface and both SETTINGS; each
// exchange is --streams K new streams: the client writes K HEADERS frames
// (END_STREAM) in one write, the server reads them, writes K HEADERS
// (:status 200) + DATA ("ok", END_STREAM) frames in one write, the client
// reads them: 3K frames. The product's endpoint is then protocol http2 (the
// syscall set only, the one that reads the frames), and after the figures
// the probe's own counters are checked: K streams completed and 3K frames
// walked per exchange, no desync, or the run fails.
// Afterwards, outside the figures, one slice per variant with bpf_stats on:
// each program's firings per exchange (machine-wide: syscall tracepoints also
// fire for every other process's system calls during the slice) and the ns
// bpf_stats sees inside the programs.
//
//   bench_ebpf_floor [--set sockets|syscalls|both|mixed|all] [--cycles N (150)] [--slice N (3000)]
//                    [--warmup N (300)] [--json] [--json-file FILE] [--raw FILE]
//                    [--protocol http1|http2] [--streams K (1)]
//   bench_ebpf_floor --hold floor-sockets|floor-syscalls
//
// --json prints one object with the figures instead of the tables;
// --json-file writes it to FILE as well as printing the tables. --raw writes
// every slice to FILE, a line "cycle position variant cpu_ns wall_ns" (per
// exchange) each, to look at the noise. --hold attaches that floor's empty
// programs, prints a line "holding ...", and waits for SIGINT or SIGTERM,
// then detaches (bench/bench_endpoints.sh puts the floor under nginx with
// it). Needs root and a kernel with BTF; a tracepoint the kernel lacks is
// named, exit status 2.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_util.h"
#include "headroom/orca/clock.h"
#include "probes/endpoint_probe.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "floor.skel.h"  // generated from bench/floor.bpf.c at build time
#pragma GCC diagnostic pop

namespace {

using headroom::bench::monotonic_ns;
using headroom::bench::percentile_sorted;
using headroom::probes::EndpointProbe;
using headroom::probes::EndpointSpec;
using headroom::probes::EndpointProbeOptions;
using headroom::probes::Protocol;
using headroom::probes::ProgramSet;

[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char* fmt, ...) {
  std::fputs("bench_ebpf_floor: ", stderr);
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  std::fputc('\n', stderr);
  std::exit(2);
}

int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// ------------------------------------------------------------- tracepoints

// A tracepoint the floors use, the floor program on it, and since when
// kernels have it (for the error message).
struct Tracepoint {
  const char* name;
  const char* program;  // in floor.bpf.c
  const char* since;
};
constexpr Tracepoint kSkDataReady{"sk_data_ready", "floor_sk_data_ready", "6.6"};
constexpr Tracepoint kSockRecvLength{"sock_recv_length", "floor_sock_recv_length", "6.3"};
constexpr Tracepoint kTcpSendmsgLocked{"tcp_sendmsg_locked", "floor_tcp_sendmsg_locked", "6.11"};
constexpr Tracepoint kInetSockSetState{"inet_sock_set_state", "floor_inet_sock_set_state", "4.16"};
constexpr Tracepoint kSysEnter{"sys_enter", "floor_sys_enter", "5.5"};  // as a BTF tracepoint
constexpr Tracepoint kSysExit{"sys_exit", "floor_sys_exit", "5.5"};

// Whether the running kernel has a tracepoint: btf_trace_<name> in its BTF.
class KernelBtf {
 public:
  KernelBtf() : btf_(btf__load_vmlinux_btf()) {
    if (btf_ == nullptr)
      fail("cannot read the kernel's BTF (/sys/kernel/btf/vmlinux): %s; the probes need a kernel with "
           "CONFIG_DEBUG_INFO_BTF=y", std::strerror(errno));
  }
  ~KernelBtf() { btf__free(btf_); }
  KernelBtf(const KernelBtf&) = delete;
  KernelBtf& operator=(const KernelBtf&) = delete;
  bool has(const Tracepoint& tp) const {
    const std::string type = std::string("btf_trace_") + tp.name;
    return btf__find_by_name_kind(btf_, type.c_str(), BTF_KIND_TYPEDEF) > 0;
  }

 private:
  btf* btf_;
};

// ------------------------------------------------------------ bpf objects

struct ProgInfo {
  uint32_t id = 0;
  std::string name;
  uint64_t run_cnt = 0, run_time_ns = 0;
};
// A program's full name: the kernel keeps 15 characters in bpf_prog_info,
// its BTF has all of them (its first function's name, as bpftool shows it).
std::string full_name(int fd, const bpf_prog_info& info) {
  static std::map<uint32_t, std::string> known;  // by program id
  if (auto it = known.find(info.id); it != known.end()) return it->second;
  std::string name = info.name;
  bpf_func_info func{};
  bpf_prog_info more{};
  more.nr_func_info = 1;
  more.func_info_rec_size = sizeof func;
  more.func_info = reinterpret_cast<uintptr_t>(&func);
  uint32_t len = sizeof more;
  if (info.btf_id != 0 && info.nr_func_info > 0 && bpf_obj_get_info_by_fd(fd, &more, &len) == 0) {
    if (btf* b = btf__load_from_kernel_by_id(info.btf_id); b != nullptr) {
      if (const btf_type* t = btf__type_by_id(b, func.type_id); t != nullptr)
        name = btf__name_by_offset(b, t->name_off);
      btf__free(b);
    }
  }
  known.emplace(info.id, name);
  return name;
}

std::optional<ProgInfo> prog_info_by_fd(int fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return std::nullopt;
  return ProgInfo{info.id, full_name(fd, info), info.run_cnt, info.run_time_ns};
}
std::optional<ProgInfo> prog_info_by_id(uint32_t id) {
  const int fd = bpf_prog_get_fd_by_id(id);
  if (fd < 0) return std::nullopt;
  auto info = prog_info_by_fd(fd);
  ::close(fd);
  return info;
}

// The program a bpf link attaches to an event (an iterator's link is not
// one: its program runs only when read).
std::optional<ProgInfo> event_program_of_link(int link_fd) {
  bpf_link_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(link_fd, &info, &len) != 0 || info.type == BPF_LINK_TYPE_ITER) return std::nullopt;
  return prog_info_by_id(info.prog_id);
}

// Every bpf link on the machine that attaches a program to an event: its
// id and the program.
std::vector<std::pair<uint32_t, ProgInfo>> attached_programs() {
  std::vector<std::pair<uint32_t, ProgInfo>> out;
  uint32_t id = 0;
  while (bpf_link_get_next_id(id, &id) == 0) {
    const int fd = bpf_link_get_fd_by_id(id);
    if (fd < 0) continue;
    if (auto p = event_program_of_link(fd)) out.emplace_back(id, *p);
    ::close(fd);
  }
  return out;
}

// The programs this process's own bpf links attach to events (its /proc/self/fd).
std::vector<ProgInfo> own_attached_programs() {
  std::vector<ProgInfo> out;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char link[64];
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
    if (n <= 0) continue;
    link[n] = '\0';
    if (std::string_view(link) != "anon_inode:bpf_link") continue;
    if (auto p = event_program_of_link(std::atoi(e->d_name))) out.push_back(*p);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const ProgInfo& a, const ProgInfo& b) { return a.id < b.id; });
  return out;
}

// The floor object: the programs whose tracepoints the kernel has (and that
// some floor asked for) are loaded; each floor attaches its own subset.
class FloorObject {
 public:
  FloorObject(const KernelBtf& btf, const std::vector<Tracepoint>& wanted) {
    skel_ = floor_bpf__open();
    if (skel_ == nullptr) fail("cannot open the floor's BPF object: %s", std::strerror(errno));
    for (bpf_program* p = bpf_object__next_program(skel_->obj, nullptr); p != nullptr;
         p = bpf_object__next_program(skel_->obj, p)) {
      const std::string_view name = bpf_program__name(p);
      const bool load = std::any_of(wanted.begin(), wanted.end(),
                                    [&](const Tracepoint& tp) { return name == tp.program && btf.has(tp); });
      bpf_program__set_autoload(p, load);
    }
    if (const int err = floor_bpf__load(skel_); err != 0) {
      if (err == -EPERM || err == -EACCES)
        fail("the kernel refused to load the floor's eBPF programs (%s): run as root (or with CAP_BPF and "
             "CAP_PERFMON)", std::strerror(-err));
      fail("cannot load the floor's eBPF programs: %s", std::strerror(-err));
    }
  }
  ~FloorObject() { floor_bpf__destroy(skel_); }
  FloorObject(const FloorObject&) = delete;
  FloorObject& operator=(const FloorObject&) = delete;

  bpf_program* program(const char* name) const {
    bpf_program* p = bpf_object__find_program_by_name(skel_->obj, name);
    if (p == nullptr || !bpf_program__autoload(p)) fail("floor program %s not loaded", name);
    return p;
  }

 private:
  floor_bpf* skel_ = nullptr;
};

// ---------------------------------------------------------------- variants

class Variant {
 public:
  virtual ~Variant() = default;
  virtual const std::string& name() const = 0;
  virtual void attach() = 0;
  virtual void detach() = 0;
  // The loaded programs it attaches, for bpf_stats: fds, and names.
  virtual std::vector<ProgInfo> programs() const = 0;
};

class NoneVariant final : public Variant {
 public:
  const std::string& name() const override { return name_; }
  void attach() override {}
  void detach() override {}
  std::vector<ProgInfo> programs() const override { return {}; }

 private:
  std::string name_ = "none";
};

class FloorVariant final : public Variant {
 public:
  FloorVariant(std::string name, std::vector<bpf_program*> progs) : name_(std::move(name)), progs_(std::move(progs)) {}
  ~FloorVariant() override { FloorVariant::detach(); }
  FloorVariant(const FloorVariant&) = delete;
  FloorVariant& operator=(const FloorVariant&) = delete;
  const std::string& name() const override { return name_; }
  void attach() override {
    for (bpf_program* p : progs_) {
      bpf_link* link = bpf_program__attach(p);
      if (link == nullptr) fail("cannot attach %s: %s", bpf_program__name(p), std::strerror(errno));
      links_.push_back(link);
    }
  }
  void detach() override {
    for (bpf_link* l : links_) bpf_link__destroy(l);
    links_.clear();
  }
  std::vector<ProgInfo> programs() const override {
    std::vector<ProgInfo> out;
    for (bpf_program* p : progs_)
      if (auto i = prog_info_by_fd(bpf_program__fd(p))) out.push_back(*i);
    return out;
  }

 private:
  std::string name_;
  std::vector<bpf_program*> progs_;
  std::vector<bpf_link*> links_;
};

class ProductVariant final : public Variant {
 public:
  ProductVariant(std::string name, std::unique_ptr<EndpointProbe> probe, std::vector<ProgInfo> progs)
      : name_(std::move(name)), probe_(std::move(probe)), progs_(std::move(progs)) {}
  const std::string& name() const override { return name_; }
  void attach() override {
    if (auto r = probe_->attach(); !r) fail("%s: %s", name_.c_str(), r.error().message.c_str());
  }
  void detach() override { probe_->detach(); }
  std::vector<ProgInfo> programs() const override {
    std::vector<ProgInfo> out;
    for (const auto& p : progs_)
      if (auto i = prog_info_by_id(p.id)) out.push_back(*i);
    return out;
  }
  const std::string& kind() const { return probe_->attach_kind(); }
  EndpointProbe& probe() { return *probe_; }

 private:
  std::string name_;
  std::unique_ptr<EndpointProbe> probe_;
  std::vector<ProgInfo> progs_;
};

// ----------------------------------------------------------- the exchange

constexpr std::string_view kRequest = "GET / HTTP/1.1\r\nHost: b\r\n\r\n";
constexpr std::string_view kResponse = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

// HTTP/2 frames (RFC 9113): a 9-byte header, then the payload.
std::string h2_frame(uint8_t type, uint8_t flags, uint32_t sid, std::string_view payload) {
  std::string f;
  const auto n = static_cast<uint32_t>(payload.size());
  f += static_cast<char>(n >> 16);
  f += static_cast<char>(n >> 8);
  f += static_cast<char>(n);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  for (int shift = 24; shift >= 0; shift -= 8) f += static_cast<char>((sid >> shift) & 0xff);
  f += payload;
  return f;
}
constexpr std::string_view kH2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
// :method GET, :scheme http, :path /, :authority "b" (literal, not indexed)
constexpr std::string_view kH2RequestBlock = "\x82\x86\x84\x01\x01" "b";
constexpr std::string_view kH2StatusOk = "\x88";  // :status 200, static index 8

class Connection {
 public:
  Connection(Protocol protocol, int streams) : protocol_(protocol), streams_(streams) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener_ < 0) fail("socket: %s", std::strerror(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fail("bind: %s", std::strerror(errno));
    if (::listen(listener_, 1) != 0) fail("listen: %s", std::strerror(errno));
    socklen_t len = sizeof a;
    if (::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      fail("getsockname: %s", std::strerror(errno));
    port_ = ntohs(a.sin_port);
  }
  ~Connection() {
    for (int fd : {client_, server_, listener_})
      if (fd >= 0) ::close(fd);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  uint16_t port() const { return port_; }

  // The connection, to the listening socket of this process: the port is
  // known (and the probes opened on it) first.
  void connect() {
    client_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (client_ < 0) fail("socket: %s", std::strerror(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port_);
    if (::connect(client_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fail("connect: %s", std::strerror(errno));
    server_ = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (server_ < 0) fail("accept: %s", std::strerror(errno));
    const int one = 1;
    for (int fd : {client_, server_})
      if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        fail("TCP_NODELAY: %s", std::strerror(errno));
    if (protocol_ == Protocol::http2) {
      const std::string settings = h2_frame(4, 0, 0, "");
      const std::string hello = std::string(kH2Preface) + settings;
      std::string buf(hello.size(), '\0');
      send_all(client_, hello);
      recv_all(server_, buf.data(), hello.size());
      send_all(server_, settings);
      recv_all(client_, buf.data(), settings.size());
    }
  }

  void exchanges(long n) {
    if (protocol_ == Protocol::http2) {
      h2_exchanges(n);
      return;
    }
    char buf[256];
    for (long i = 0; i < n; ++i) {
      send_all(client_, kRequest);
      recv_all(server_, buf, kRequest.size());
      send_all(server_, kResponse);
      recv_all(client_, buf, kResponse.size());
    }
  }

 private:
  static void send_all(int fd, std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::write(fd, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("write: %s", n < 0 ? std::strerror(errno) : "nothing written");
      data.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  static void recv_all(int fd, char* buf, std::size_t want) {
    std::size_t got = 0;
    while (got < want) {
      const ssize_t n = ::read(fd, buf + got, want - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("read: %s", n < 0 ? std::strerror(errno) : "connection closed");
      got += static_cast<std::size_t>(n);
    }
  }

  // K streams a round: K HEADERS in one write, K answers in one write.
  void h2_exchanges(long n) {
    std::string request, response, buf;
    for (long i = 0; i < n; ++i) {
      request.clear();
      response.clear();
      for (int k = 0; k < streams_; ++k) {
        const uint32_t sid = next_sid_;
        next_sid_ += 2;
        request += h2_frame(1, 0x5, sid, kH2RequestBlock);  // END_STREAM | END_HEADERS
        response += h2_frame(1, 0x4, sid, kH2StatusOk);     // END_HEADERS
        response += h2_frame(0, 0x1, sid, "ok");            // END_STREAM
      }
      buf.resize(std::max(request.size(), response.size()));
      send_all(client_, request);
      recv_all(server_, buf.data(), request.size());
      send_all(server_, response);
      recv_all(client_, buf.data(), response.size());
    }
  }

 public:
  Protocol protocol() const { return protocol_; }
  int streams() const { return streams_; }

 private:
  int listener_ = -1, client_ = -1, server_ = -1;
  uint16_t port_ = 0;
  Protocol protocol_;
  int streams_;
  uint32_t next_sid_ = 1;
};

// ----------------------------------------------------------------- figures

struct Quartiles {
  double p25 = 0, p50 = 0, p75 = 0;
  std::size_t n = 0;
};
Quartiles quartiles(std::vector<double> v) {
  Quartiles q;
  q.n = v.size();
  if (v.empty()) return q;
  std::sort(v.begin(), v.end());
  q.p25 = percentile_sorted(v, 0.25);
  q.p50 = percentile_sorted(v, 0.50);
  q.p75 = percentile_sorted(v, 0.75);
  return q;
}

struct Slice {
  double cpu_ns = 0, wall_ns = 0;  // per exchange
};

// A program set's floor and product, by variant index.
struct SetPlan {
  std::string set;  // "sockets" or "syscalls"
  std::size_t floor = 0, product = 0;
  std::vector<std::string> floor_programs;
  // Empty programs on only the hooks the product attaches, where they are
  // fewer than the floor's (0: none): what the product's own work costs.
  std::size_t own_floor = 0;
  std::vector<std::string> own_floor_programs;
  std::string product_kind;
  std::vector<std::string> product_programs;
};

struct SetFigures {
  Quartiles own_cpu, ratio_own_cpu;  // against the own floor, when there is one
  double ratio_own_of_medians_cpu = 0;
  Quartiles floor_cpu, product_cpu, ratio_cpu;
  Quartiles floor_wall, product_wall, ratio_wall;
  double ratio_of_medians_cpu = 0, ratio_of_medians_wall = 0;
};

// Firings per exchange and ns in programs per exchange of one variant's
// programs, over one slice with bpf_stats on.
struct ProgStats {
  std::string name;
  double firings = 0, ns = 0;  // per exchange
};

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The links of hr_*/floor_* programs that are not ours (other people's
// tests load the same programs), by id: their cost lands in every variant
// while they stay, and in some slices only when they come or go.
std::vector<uint32_t> foreign_links(const std::vector<uint32_t>& our_programs) {
  std::vector<uint32_t> links;
  for (const auto& [link, p] : attached_programs()) {
    if (!p.name.starts_with("hr_") && !p.name.starts_with("floor_")) continue;
    if (std::find(our_programs.begin(), our_programs.end(), p.id) == our_programs.end()) links.push_back(link);
  }
  return links;
}

int hold(const std::string& which) {
  const bool sockets = which == "floor-sockets";
  if (!sockets && which != "floor-syscalls") fail("--hold: floor-sockets or floor-syscalls, not \"%s\"", which.c_str());
  const KernelBtf btf;
  std::vector<Tracepoint> tps = sockets ? std::vector<Tracepoint>{kSkDataReady, kSockRecvLength, kTcpSendmsgLocked,
                                                                  kInetSockSetState}
                                        : std::vector<Tracepoint>{kSysEnter, kSysExit, kInetSockSetState};
  if (!sockets && btf.has(kSkDataReady)) tps.push_back(kSkDataReady);
  for (const auto& tp : tps)
    if (!btf.has(tp))
      fail("this kernel has no tracepoint %s (kernel %s+), which %s needs", tp.name, tp.since, which.c_str());
  // Blocked before anything is attached: a SIGTERM that comes early stays
  // pending, and sigwait() takes it once the floor is up.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &stop, nullptr);
  const FloorObject obj(btf, tps);
  std::vector<bpf_program*> progs;
  std::vector<std::string> names;
  for (const auto& tp : tps) {
    progs.push_back(obj.program(tp.program));
    names.emplace_back(tp.program);
  }
  FloorVariant held(which, progs);
  held.attach();
  std::printf("holding %s: %s attached (pid %d); SIGINT or SIGTERM detaches\n", which.c_str(),
              join(names, " ").c_str(), static_cast<int>(::getpid()));
  std::fflush(stdout);
  int sig = 0;
  ::sigwait(&stop, &sig);
  held.detach();
  std::printf("detached %s\n", which.c_str());
  return 0;
}

void print_q(const Quartiles& q, int width) {
  char cell[96];
  std::snprintf(cell, sizeof cell, "%.0f [%.0f..%.0f]", q.p50, q.p25, q.p75);
  std::printf(" %*s", width, cell);
}
void print_ratio(const Quartiles& q, double of_medians, int width) {
  char cell[96];
  std::snprintf(cell, sizeof cell, "%.2f [%.2f..%.2f] (%.2f)", q.p50, q.p25, q.p75, of_medians);
  std::printf(" %*s", width, cell);
}
void json_q(FILE* out, const char* key, const Quartiles& q, const char* after) {
  std::fprintf(out, "\"%s\": {\"median\": %.3f, \"p25\": %.3f, \"p75\": %.3f}%s", key, q.p50, q.p25, q.p75, after);
}
void json_strings(FILE* out, const char* key, const std::vector<std::string>& v, const char* after) {
  std::fprintf(out, "\"%s\": [", key);
  for (std::size_t i = 0; i < v.size(); ++i) std::fprintf(out, "%s\"%s\"", i ? ", " : "", v[i].c_str());
  std::fprintf(out, "]%s", after);
}

}  // namespace

int main(int argc, char** argv) {
  const headroom::bench::Flags flags(argc, argv);
  if (flags.has("-h") || flags.has("--help")) {
    std::printf(
        "usage: bench_ebpf_floor [--set sockets|syscalls|both|mixed|all] [--cycles N] [--slice N] [--warmup N]\n"
        "                        [--json] [--json-file FILE] [--raw FILE] [--protocol http1|http2] [--streams K]\n"
        "       bench_ebpf_floor --hold floor-sockets|floor-syscalls\n");
    return 0;
  }
  if (::geteuid() != 0) fail("needs root (it loads eBPF programs)");
  libbpf_set_print(nullptr);  // errors are reported here, with what to do
  if (flags.has("--hold")) return hold(flags.get("--hold", ""));

  const std::string protocol_name = flags.get("--protocol", "http1");
  if (protocol_name != "http1" && protocol_name != "http2")
    fail("--protocol: http1 or http2, not \"%s\"", protocol_name.c_str());
  const Protocol protocol = protocol_name == "http2" ? Protocol::http2 : Protocol::http1;
  const long streams = flags.get_long("--streams", 1);
  if (streams < 1 || streams > 64) fail("--streams: 1 to 64, not %ld", streams);
  if (protocol == Protocol::http1 && flags.has("--streams")) fail("--streams needs --protocol http2");
  // HTTP/2 is read from the bytes: the syscall set only.
  const std::string set = flags.get("--set", protocol == Protocol::http2 ? "syscalls" : "both");
  if (set != "sockets" && set != "syscalls" && set != "both" && set != "mixed" && set != "all")
    fail("--set: sockets, syscalls, both, mixed or all, not \"%s\"", set.c_str());
  if (protocol == Protocol::http2 && set != "syscalls")
    fail("--protocol http2: only the syscall set reads HTTP/2 frames; --set syscalls (the default with it)");
  const long cycles = flags.get_long("--cycles", 150);
  const long slice = flags.get_long("--slice", 3000);
  const long warmup = flags.get_long("--warmup", 300);
  const bool json = flags.has("--json");
  const std::string json_file = flags.get("--json-file", "");
  const std::string raw_file = flags.get("--raw", "");
  FILE* raw = nullptr;
  if (!raw_file.empty() && (raw = std::fopen(raw_file.c_str(), "w")) == nullptr)
    fail("%s: %s", raw_file.c_str(), std::strerror(errno));
  const bool want_sockets = set != "syscalls";
  const bool want_syscalls = set == "syscalls" || set == "both" || set == "all";
  const bool want_mixed = set == "mixed" || set == "all";

  // The floors' tracepoints, checked before anything loads.
  const KernelBtf btf;
  const std::vector<Tracepoint> socket_tps{kSkDataReady, kSockRecvLength, kTcpSendmsgLocked, kInetSockSetState};
  std::vector<Tracepoint> syscall_tps{kSysEnter, kSysExit, kInetSockSetState};
  if (btf.has(kSkDataReady)) syscall_tps.push_back(kSkDataReady);  // as the product: where the kernel has it
  std::vector<Tracepoint> wanted;
  if (want_sockets) {
    for (const auto& tp : socket_tps)
      if (!btf.has(tp))
        fail("this kernel has no tracepoint %s (kernel %s+), which the socket set needs; try --set syscalls", tp.name,
             tp.since);
    wanted.insert(wanted.end(), socket_tps.begin(), socket_tps.end());
  }
  if (want_mixed) {
    if (!btf.has(kSysExit)) fail("this kernel has no BTF tracepoint sys_exit (kernel %s+)", kSysExit.since);
    if (!want_syscalls) wanted.push_back(kSysExit);
  }
  if (want_syscalls) {
    for (const auto& tp : syscall_tps)
      if (!btf.has(tp))
        fail("this kernel has no BTF tracepoint %s (kernel %s+), which the syscall set needs", tp.name, tp.since);
    wanted.insert(wanted.end(), syscall_tps.begin(), syscall_tps.end());
  }
  const FloorObject floor_obj(btf, wanted);

  Connection conn(protocol, static_cast<int>(streams));
  std::vector<std::unique_ptr<Variant>> variants;
  variants.push_back(std::make_unique<NoneVariant>());
  std::vector<SetPlan> plans;
  std::vector<uint32_t> own_ids;  // programs of ours, for foreign_links()
  auto add_set = [&](const char* name, const std::vector<Tracepoint>& tps, ProgramSet programs,
                     const std::vector<Tracepoint>& own_tps, bool beside_http2 = false) {
    SetPlan plan;
    plan.set = name;
    if (!own_tps.empty()) {
      std::vector<bpf_program*> own;
      for (const auto& tp : own_tps) {
        own.push_back(floor_obj.program(tp.program));
        plan.own_floor_programs.emplace_back(tp.program);
      }
      auto own_v = std::make_unique<FloorVariant>(std::string("floor-") + name + "-own", own);
      for (const auto& p : own_v->programs()) own_ids.push_back(p.id);
      plan.own_floor = variants.size();
      variants.push_back(std::move(own_v));
    }
    std::vector<bpf_program*> progs;
    for (const auto& tp : tps) {
      progs.push_back(floor_obj.program(tp.program));
      plan.floor_programs.emplace_back(tp.program);
    }
    auto floor_v = std::make_unique<FloorVariant>(std::string("floor-") + name, progs);
    for (const auto& p : floor_v->programs()) own_ids.push_back(p.id);
    plan.floor = variants.size();
    variants.push_back(std::move(floor_v));

    EndpointProbeOptions options;
    options.programs = programs;
    options.self = 1;  // never this process: the syscall set must trace it
    const uint64_t target_ns = 10'000'000, max_ns = 500'000'000;
    std::vector<EndpointSpec> endpoints{{conn.port(), "", target_ns, max_ns, protocol}};
    // mixed: an HTTP/2 endpoint on another port (no traffic) brings the
    // syscall set in beside the socket set, which keeps this port.
    if (beside_http2)
      endpoints.push_back({static_cast<uint16_t>(conn.port() == 65535 ? 65534 : conn.port() + 1), "", target_ns,
                           max_ns, Protocol::http2});
    auto probe = EndpointProbe::open(endpoints, options);
    if (!probe) fail("the product's %s set: %s", name, probe.error().message.c_str());
    if (beside_http2 && (*probe)->attach_kind() != "tp_btf sockets + syscalls")
      fail("the product's %s set attached \"%s\", not both sets", name, (*probe)->attach_kind().c_str());
    if (programs == ProgramSet::syscalls)
      if (auto r = (*probe)->trace_process(::getpid()); !r)
        fail("trace_process: %s", r.error().message.c_str());
    // Attached now, and nothing else of ours is: its links are its programs.
    std::vector<ProgInfo> progs_info = own_attached_programs();
    (*probe)->detach();
    for (const auto& p : progs_info) {
      plan.product_programs.push_back(p.name);
      own_ids.push_back(p.id);
    }
    plan.product_kind = (*probe)->attach_kind();
    plan.product = variants.size();
    variants.push_back(std::make_unique<ProductVariant>(std::string("product-") + name, std::move(*probe), progs_info));
    plans.push_back(std::move(plan));
  };
  // The socket set attaches three of the floor's four hooks (it needs no
  // program on the server's reads): its own floor is measured beside.
  if (want_sockets)
    add_set("sockets", socket_tps, ProgramSet::sockets, {kSkDataReady, kTcpSendmsgLocked, kInetSockSetState});
  // The syscall set attaches all but sys_enter (it reads a call's arguments
  // at its exit): its own floor is measured beside too.
  if (want_syscalls) {
    std::vector<Tracepoint> own;
    for (const auto& tp : syscall_tps)
      if (std::string_view(tp.name) != kSysEnter.name) own.push_back(tp);
    add_set("syscalls", syscall_tps, ProgramSet::syscalls, own);
  }
  // Both sets at once, this port with the socket set and an HTTP/2 port with
  // the syscall set: what an HTTP/1 request pays for the syscall set's
  // presence (its sys_exit program on every system call, its sk_data_ready
  // and inet_sock_set_state programs beside the socket set's). This process
  // is not traced, as an HTTP/1 server would not be. Floor: the socket set's
  // four hooks and sys_exit; own floor: the four hooks the two sets attach.
  if (want_mixed) {
    std::vector<Tracepoint> tps = socket_tps;
    tps.push_back(kSysExit);
    add_set("mixed", tps, ProgramSet::automatic, {kSkDataReady, kTcpSendmsgLocked, kInetSockSetState, kSysExit},
            /*beside_http2=*/true);
  }
  conn.connect();
  conn.exchanges(warmup * 3);

  utsname uts{};
  ::uname(&uts);
  const std::size_t foreign_start = foreign_links(own_ids).size();
  if (!json) {
    std::printf("# bench_ebpf_floor: the endpoint probe against empty eBPF programs on the same tracepoints\n");
    std::printf("kernel %s; 127.0.0.1:%u, one thread, both ends; %ld cycles x %zu slices of %ld exchanges "
                "(+%ld not measured after each attach), order rotated every cycle\n",
                uts.release, static_cast<unsigned>(conn.port()), cycles, variants.size(), slice, warmup);
    for (const auto& p : plans) {
      std::printf("%-8s floor:   %s\n", p.set.c_str(), join(p.floor_programs, " ").c_str());
      std::printf("%-8s product: %s: %s\n", "", p.product_kind.c_str(), join(p.product_programs, " ").c_str());
    }
    if (foreign_start > 0)
      std::printf("WARNING: %zu bpf link(s) of hr_*/floor_* programs of other processes are attached: their cost "
                  "is in every variant (cycles in which they come or go are left out)\n", foreign_start);
    std::fflush(stdout);
  }

  // The cycles.
  const std::size_t nv = variants.size();
  std::vector<std::vector<Slice>> slices(nv);  // [variant][cycle]
  // A cycle in which another process's hr_*/floor_* programs came or went
  // (checked between slices) compares slices that paid different costs: it
  // is left out. Ones that stayed the whole cycle cost every slice alike.
  std::vector<bool> disturbed;
  long with_foreign = 0;
  for (long c = 0; c < cycles; ++c) {
    const auto foreign = foreign_links(own_ids);
    if (!foreign.empty()) ++with_foreign;
    bool changed = false;
    for (std::size_t k = 0; k < nv; ++k) {
      const std::size_t v = (static_cast<std::size_t>(c) + k) % nv;
      variants[v]->attach();
      conn.exchanges(warmup);
      const int64_t c0 = thread_cpu_ns(), w0 = monotonic_ns();
      conn.exchanges(slice);
      const int64_t c1 = thread_cpu_ns(), w1 = monotonic_ns();
      variants[v]->detach();
      const auto n = static_cast<double>(slice);
      slices[v].push_back({static_cast<double>(c1 - c0) / n, static_cast<double>(w1 - w0) / n});
      if (raw != nullptr)
        std::fprintf(raw, "%ld %zu %s %.1f %.1f\n", c, k, variants[v]->name().c_str(), slices[v].back().cpu_ns,
                     slices[v].back().wall_ns);
      if (foreign_links(own_ids) != foreign) changed = true;
    }
    disturbed.push_back(changed);
  }
  if (raw != nullptr && std::fclose(raw) != 0) fail("%s: %s", raw_file.c_str(), std::strerror(errno));
  // Every cycle when none was undisturbed (the figures then say so).
  const long n_disturbed = std::count(disturbed.begin(), disturbed.end(), true);
  const bool use_all = n_disturbed == cycles;
  const auto used = [&](std::size_t c) { return use_all || !disturbed[c]; };

  // Per cycle, against the same cycle's none.
  std::vector<double> none_cpu, none_wall;
  for (std::size_t c = 0; c < slices[0].size(); ++c) {
    if (!used(c)) continue;
    none_cpu.push_back(slices[0][c].cpu_ns);
    none_wall.push_back(slices[0][c].wall_ns);
  }
  const Quartiles none_cpu_q = quartiles(none_cpu), none_wall_q = quartiles(none_wall);
  std::vector<SetFigures> figures;
  for (const auto& p : plans) {
    std::vector<double> fc, pc, rc, fw, pw, rw, oc, ro;
    for (std::size_t c = 0; c < slices[0].size(); ++c) {
      if (!used(c)) continue;
      const Slice& n = slices[0][c];
      if (p.own_floor != 0) {
        oc.push_back(slices[p.own_floor][c].cpu_ns - n.cpu_ns);
        if (oc.back() > 0) ro.push_back((slices[p.product][c].cpu_ns - n.cpu_ns) / oc.back());
      }
      const Slice& f = slices[p.floor][c];
      const Slice& pr = slices[p.product][c];
      fc.push_back(f.cpu_ns - n.cpu_ns);
      pc.push_back(pr.cpu_ns - n.cpu_ns);
      fw.push_back(f.wall_ns - n.wall_ns);
      pw.push_back(pr.wall_ns - n.wall_ns);
      if (fc.back() > 0) rc.push_back(pc.back() / fc.back());
      if (fw.back() > 0) rw.push_back(pw.back() / fw.back());
    }
    SetFigures fig;
    fig.own_cpu = quartiles(oc);
    fig.ratio_own_cpu = quartiles(ro);
    fig.floor_cpu = quartiles(fc);
    fig.product_cpu = quartiles(pc);
    fig.ratio_cpu = quartiles(rc);
    fig.floor_wall = quartiles(fw);
    fig.product_wall = quartiles(pw);
    fig.ratio_wall = quartiles(rw);
    fig.ratio_of_medians_cpu = fig.floor_cpu.p50 > 0 ? fig.product_cpu.p50 / fig.floor_cpu.p50 : 0;
    fig.ratio_of_medians_wall = fig.floor_wall.p50 > 0 ? fig.product_wall.p50 / fig.floor_wall.p50 : 0;
    fig.ratio_own_of_medians_cpu = fig.own_cpu.p50 > 0 ? fig.product_cpu.p50 / fig.own_cpu.p50 : 0;
    figures.push_back(fig);
  }

  // Firings, outside the figures: one slice per variant with bpf_stats on
  // (it makes every program dearer). The fd keeps the statistics on; closing
  // it restores what kernel.bpf_stats_enabled says.
  std::map<std::string, std::vector<ProgStats>> prog_stats;  // by variant name
  const int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (stats_fd >= 0) {
    for (std::size_t v = 1; v < nv; ++v) {
      variants[v]->attach();
      conn.exchanges(warmup);
      const auto before = variants[v]->programs();
      conn.exchanges(slice);
      const auto after = variants[v]->programs();
      variants[v]->detach();
      auto& out = prog_stats[variants[v]->name()];
      for (const auto& a : after)
        for (const auto& b : before)
          if (a.id == b.id)
            out.push_back({a.name, static_cast<double>(a.run_cnt - b.run_cnt) / static_cast<double>(slice),
                           static_cast<double>(a.run_time_ns - b.run_time_ns) / static_cast<double>(slice)});
    }
    ::close(stats_fd);
  }
  const std::size_t foreign_end = foreign_links(own_ids).size();

  const auto write_json = [&](FILE* out) {
    std::fprintf(out, "{\"kernel\": \"%s\", \"port\": %u, \"cycles\": %ld, \"slice\": %ld, \"warmup\": %ld, "
                 "\"cycles_used\": %zu, \"cycles_disturbed\": %ld, \"cycles_with_foreign\": %ld, "
                 "\"foreign_links_end\": %zu, ",
                 uts.release, static_cast<unsigned>(conn.port()), cycles, slice, warmup, none_cpu_q.n, n_disturbed,
                 with_foreign, foreign_end);
    json_q(out, "none_cpu_ns", none_cpu_q, ", ");
    json_q(out, "none_wall_ns", none_wall_q, ", ");
    std::fprintf(out, "\"sets\": {");
    for (std::size_t i = 0; i < plans.size(); ++i) {
      const auto& p = plans[i];
      const auto& f = figures[i];
      std::fprintf(out, "%s\"%s\": {", i ? ", " : "", p.set.c_str());
      json_strings(out, "floor_programs", p.floor_programs, ", ");
      std::fprintf(out, "\"product_kind\": \"%s\", ", p.product_kind.c_str());
      json_strings(out, "product_programs", p.product_programs, ", ");
      std::fprintf(out, "\"cpu_ns\": {");
      json_q(out, "floor_minus_none", f.floor_cpu, ", ");
      json_q(out, "product_minus_none", f.product_cpu, ", ");
      json_q(out, "ratio", f.ratio_cpu, ", ");
      std::fprintf(out, "\"ratio_cycles\": %zu, \"ratio_of_medians\": %.3f", f.ratio_cpu.n, f.ratio_of_medians_cpu);
      if (p.own_floor != 0) {
        std::fprintf(out, ", ");
        json_q(out, "own_floor_minus_none", f.own_cpu, ", ");
        json_q(out, "ratio_own", f.ratio_own_cpu, ", ");
        std::fprintf(out, "\"ratio_own_of_medians\": %.3f", f.ratio_own_of_medians_cpu);
      }
      std::fprintf(out, "}, \"wall_ns\": {");
      json_q(out, "floor_minus_none", f.floor_wall, ", ");
      json_q(out, "product_minus_none", f.product_wall, ", ");
      json_q(out, "ratio", f.ratio_wall, ", ");
      // bpf_stats' slice: firings and the ns bpf_stats sees in each program.
      std::fprintf(out, "\"ratio_cycles\": %zu, \"ratio_of_medians\": %.3f}, \"programs\": {", f.ratio_wall.n,
                   f.ratio_of_medians_wall);
      bool first = true;
      for (const std::size_t v : {p.floor, p.product})
        for (const auto& st : prog_stats[variants[v]->name()]) {
          std::fprintf(out, "%s\"%s\": {\"firings_per_exchange\": %.3f, \"ns_per_exchange\": %.1f}",
                       first ? "" : ", ", st.name.c_str(), st.firings, st.ns);
          first = false;
        }
      std::fprintf(out, "}}");
    }
    std::fprintf(out, "}}\n");
  };
  // HTTP/2: the product walked every frame and ended every stream of the
  // exchanges it saw, or its figures would be for less work.
  if (protocol == Protocol::http2) {
    auto* product = dynamic_cast<ProductVariant*>(variants[plans.back().product].get());
    if (product == nullptr) fail("no product variant");
    headroom::probes::EndpointSnapshot before, after;
    product->attach();
    if (auto r = product->probe().read(before, headroom::orca::monotonic_ns()); !r)
      fail("read: %s", r.error().message.c_str());
    const long n = 1000;
    conn.exchanges(n);
    if (auto r = product->probe().read(after, headroom::orca::monotonic_ns()); !r)
      fail("read: %s", r.error().message.c_str());
    product->detach();
    const uint64_t completed = after.endpoints.at(0).stats.completed - before.endpoints.at(0).stats.completed;
    const uint64_t frames = after.h2.frames - before.h2.frames;
    const uint64_t desyncs = after.h2.desyncs - before.h2.desyncs;
    const uint64_t want = static_cast<uint64_t>(n * streams);
    std::fprintf(json ? stderr : stdout,
                 "\nhttp2 check: %ld exchanges of %ld stream(s): %llu streams completed, %llu frames walked, "
                 "%llu desyncs, %llu split headers\n",
                 n, streams, static_cast<unsigned long long>(completed), static_cast<unsigned long long>(frames),
                 static_cast<unsigned long long>(desyncs),
                 static_cast<unsigned long long>(after.h2.split_headers - before.h2.split_headers));
    if (completed != want || frames != 3 * want || desyncs != 0)
      fail("the product did not follow the HTTP/2 exchanges: want %llu streams and %llu frames, no desync",
           static_cast<unsigned long long>(want), static_cast<unsigned long long>(3 * want));
  }
  if (!json_file.empty()) {
    FILE* out = std::fopen(json_file.c_str(), "w");
    if (out == nullptr) fail("%s: %s", json_file.c_str(), std::strerror(errno));
    write_json(out);
    if (std::fclose(out) != 0) fail("%s: %s", json_file.c_str(), std::strerror(errno));
  }
  if (json) {
    write_json(stdout);
    return 0;
  }

  std::printf("\nns per exchange, each variant minus the same cycle's none: median over %zu cycles%s [p25..p75]; "
              "ratio = (product - none) / (floor - none) per cycle (in brackets: ratio of the medians)\n",
              none_cpu_q.n, n_disturbed > 0 && !use_all ? " (the undisturbed ones)" : "");
  std::printf("none: CPU %.0f [%.0f..%.0f] ns, wall %.0f [%.0f..%.0f] ns per exchange\n", none_cpu_q.p50,
              none_cpu_q.p25, none_cpu_q.p75, none_wall_q.p50, none_wall_q.p25, none_wall_q.p75);
  std::printf("%-9s %-5s %22s %22s %30s\n", "set", "clock", "floor - none", "product - none", "ratio");
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const auto& f = figures[i];
    std::printf("%-9s %-5s", plans[i].set.c_str(), "cpu");
    print_q(f.floor_cpu, 22);
    print_q(f.product_cpu, 22);
    print_ratio(f.ratio_cpu, f.ratio_of_medians_cpu, 30);
    std::printf("\n%-9s %-5s", "", "wall");
    print_q(f.floor_wall, 22);
    print_q(f.product_wall, 22);
    print_ratio(f.ratio_wall, f.ratio_of_medians_wall, 30);
    std::printf("\n");
    if (plans[i].own_floor != 0) {
      std::printf("%-9s %-5s", "  own", "cpu");
      print_q(f.own_cpu, 22);
      print_q(f.product_cpu, 22);
      print_ratio(f.ratio_own_cpu, f.ratio_own_of_medians_cpu, 30);
      std::printf("   (floor: only the product's hooks, %s)\n", join(plans[i].own_floor_programs, " ").c_str());
    }
    if (f.ratio_cpu.n < none_cpu_q.n || f.ratio_wall.n < none_cpu_q.n)
      std::printf("%-9s (floor - none <= 0 in %zu cycles by CPU, %zu by wall: no ratio for those)\n", "",
                  none_cpu_q.n - f.ratio_cpu.n, none_cpu_q.n - f.ratio_wall.n);
  }
  if (stats_fd < 0) {
    std::printf("\nbpf_stats could not be enabled (%s): no firings per exchange\n", std::strerror(errno));
  } else {
    std::printf("\nper program, one more slice of %ld exchanges per variant with bpf_stats on (machine-wide counts; "
                "not in the figures above)\n", slice);
    std::printf("  %-18s %-28s %20s %20s\n", "variant", "program", "firings/exchange", "ns in it/exchange");
    for (std::size_t v = 1; v < nv; ++v)
      for (const auto& s : prog_stats[variants[v]->name()])
        std::printf("  %-18s %-28s %20.2f %20.1f\n", variants[v]->name().c_str(), s.name.c_str(), s.firings, s.ns);
  }
  if (with_foreign > 0 || foreign_end > 0)
    std::printf("WARNING: hr_*/floor_* programs of other processes were attached in %ld of %ld cycles (%zu links at "
                "the end); they came or went during %ld cycles, %s\n", with_foreign, cycles, foreign_end, n_disturbed,
                use_all ? "which is every cycle: the figures use them all, noise included" : "left out of the figures");
  return 0;
}
