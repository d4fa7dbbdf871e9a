// SPDX-License-Identifier: Apache-2.0
// bench_dependency_floor: what the eBPF dependency probe costs an outbound
// call, as a ratio to the floor: empty programs (bench/floor.bpf.c) on the
// tracepoints the probe's program set attaches (--programs): the socket set
// inet_sock_set_state, tcp_sendmsg_locked, sk_data_ready; the send-length
// set inet_sock_set_state, sock_send_length, sk_data_ready; the syscall set
// sys_exit, inet_sock_set_state, sk_data_ready (BTF tracepoints); the raw
// one sys_exit, inet_sock_set_state (raw tracepoints); the socket reads one
// sys_exit (BTF) and inet_sock_set_state (raw). The syscall sets'
// sched_process_fork program has no floor: nothing forks here.
//
// One thread does exchanges over loopback TCP connections it owns both ends
// of (blocking, TCP_NODELAY): the client writes "PING\r\n", the server reads
// it and writes "+PONG\r\n", the client reads that. Two connections: one to
// the port the dependency names (traced: the probe times every exchange),
// one to another port (untraced: its programs only look up the port). Each
// cycle runs a slice of --slice exchanges per (variant, connection), the
// variants in an order rotated every cycle:
//   none     nothing attached
//   floor    the empty programs on the probe's hooks
//   floor4   the same and one more hook, for comparison: sockets and
//            send-length, sock_recv_length (the endpoint socket set's floor,
//            bench_ebpf_floor's floor-sockets); the syscall sets, sys_enter
//            (BTF: the endpoint syscall set's floor)
//   product  DependencyProbe, opened once, then detached and attached
// Per slice: CPU ns per exchange (CLOCK_THREAD_CPUTIME_ID; on loopback the
// receive softirq runs in the sending thread, and without
// CONFIG_IRQ_TIME_ACCOUNTING it is charged to it). Per cycle and connection:
// floor - none, product - none, product - floor; reported: the medians over
// cycles with the interquartile range. The ratio to the floor is the ratio
// of the two medians, over every cycle (a per-cycle ratio has to drop the
// cycles whose floor - none is not positive, which biases it upwards: its
// median and IQR are shown beside it, over the cycles that have one), with
// a 95 % interval from resampling the cycles. Many short slices (the
// default: 1 500 cycles of 200 exchanges, about a minute) pair the variants
// closer in time than a few long ones, and --cpu pins the thread (both ends
// of the exchange, and the softirq, on one CPU: no migration in a slice).
// At the end the probe's own count is checked: one completed call per
// traced exchange while attached, none for the untraced connection. Then,
// outside those figures, bpf_stats (which makes every program dearer): per
// program, firings and the ns spent inside it per exchange, for the floor's
// and the probe's programs, over --stats-slices slices of each connection.
//
//   bench_dependency_floor [--cycles N (1500)] [--slice N (200)] [--warmup N (300)]
//                          [--protocol generic|http1] [--stats-slices N (10)] [--cpu N]
//                          [--programs sockets|send-length|syscalls|socket-reads|raw (sockets)]
//                          [--server thread|process (thread)]
// --server process: the server ends in a child process (ServerProcess), as
// a real dependency's server is (another process, or another machine): in
// the syscall sets it is not a caller, so its reads and writes pay the
// process look-up alone, where with --server thread (one thread owning both
// ends) they pay the descriptor walk too. The CPU per exchange is then the
// client thread's and the server process's, and each exchange switches
// between them (both on one CPU with --cpu).
// http1: the exchange is "GET / HTTP/1.1" / "HTTP/1.1 200 OK" and the
// dependency http1, so each answer's status line is read (arrived.bpf.h).
// Needs root and a kernel with BTF; the socket set needs its tracepoints (6.11+).
#include <arpa/inet.h>
#include <sched.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "probes/dependency_probe.h"
#include "probes/program_set.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "floor.skel.h"
#pragma GCC diagnostic pop

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench_dependency_floor: %s\n", what.c_str());
  std::exit(2);
}

int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// The server ends in a process of their own (--server-process): a child
// forked before the probe is opened (so neither it nor its fork is a
// caller), handed each accepted socket over a Unix socket, and answering
// on it from a thread of its own. Its CPU is counted with the client's.
struct ServerProcess {
  pid_t pid = -1;
  int channel = -1;  // the parent's end
  clockid_t clock{};

  void start() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) fail("socketpair failed");
    pid = ::fork();
    if (pid < 0) fail("fork failed");
    if (pid == 0) {
      ::close(sv[0]);
      serve(sv[1]);
    }
    ::close(sv[1]);
    channel = sv[0];
    if (::clock_getcpuclockid(pid, &clock) != 0) fail("cannot read the server process's CPU clock");
  }
  int64_t cpu_ns() const {
    timespec ts{};
    ::clock_gettime(clock, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  }
  // One message of the channel: a socket and the answer it gives.
  struct Handover {
    char data[128] = {};
    iovec iov{data, sizeof data};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr m{};
    Handover() {
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      m.msg_control = control;
      m.msg_controllen = sizeof control;
    }
    Handover(const Handover&) = delete;
    Handover& operator=(const Handover&) = delete;
  };
  // Hands over one server end, with the answer it gives.
  void adopt(int fd, std::string_view answer) {
    Handover h;
    std::memcpy(h.data, answer.data(), std::min(answer.size(), sizeof h.data - 1));
    cmsghdr* c = CMSG_FIRSTHDR(&h.m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (::sendmsg(channel, &h.m, 0) != static_cast<ssize_t>(sizeof h.data)) fail("cannot hand a socket to the server");
  }
  void stop() {
    if (pid <= 0) return;
    ::close(channel);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  // The child: one answering thread per socket it is handed, until the
  // parent closes the channel.
  [[noreturn]] static void serve(int channel) {
    std::vector<std::thread> threads;
    for (;;) {
      Handover h;
      if (::recvmsg(channel, &h.m, MSG_WAITALL) != static_cast<ssize_t>(sizeof h.data)) break;
      cmsghdr* c = CMSG_FIRSTHDR(&h.m);
      if (c == nullptr || c->cmsg_type != SCM_RIGHTS) break;
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
      threads.emplace_back([fd, answer = std::string(h.data)] {
        char buf[128];
        while (::read(fd, buf, sizeof buf) > 0)
          if (::write(fd, answer.data(), answer.size()) != static_cast<ssize_t>(answer.size())) break;
        ::close(fd);
      });
    }
    for (auto& t : threads) t.detach();
    ::_exit(0);
  }
};

// A loopback connection this thread owns both ends of (or the client's
// alone, the server's handed to a ServerProcess).
struct Pair {
  int listener = -1, client = -1, server = -1;
  uint16_t port = 0;

  Pair() {
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener, 4) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      fail(std::string("cannot listen on loopback: ") + std::strerror(errno));
    port = ntohs(a.sin_port);
  }
  // Connected after the probe is open, so the connect is seen.
  void connect() {
    client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      fail(std::string("cannot connect: ") + std::strerror(errno));
    server = ::accept(listener, nullptr, nullptr);
    const int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  std::string_view kPing = "PING\r\n", kPong = "+PONG\r\n";
  void hand_to(ServerProcess& s) {
    s.adopt(server, kPong);
    ::close(server);
    server = -1;
  }
  void exchange() {
    char buf[128];
    if (server < 0) {  // the server process answers
      if (::write(client, kPing.data(), kPing.size()) != static_cast<ssize_t>(kPing.size()) ||
          ::read(client, buf, sizeof buf) != static_cast<ssize_t>(kPong.size()))
        fail(std::string("exchange failed: ") + std::strerror(errno));
      return;
    }
    if (::write(client, kPing.data(), kPing.size()) != static_cast<ssize_t>(kPing.size()) ||
        ::read(server, buf, sizeof buf) <= 0 ||
        ::write(server, kPong.data(), kPong.size()) != static_cast<ssize_t>(kPong.size()) ||
        ::read(client, buf, sizeof buf) <= 0)
      fail(std::string("exchange failed: ") + std::strerror(errno));
  }
};

struct Quartiles {
  double q1 = 0, median = 0, q3 = 0;
};

Quartiles quartiles(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  auto at = [&](double f) { return v[static_cast<std::size_t>(f * static_cast<double>(v.size() - 1))]; };
  return {at(0.25), at(0.5), at(0.75)};
}

// A 95 % interval of the ratio of the medians of p and f (paired by
// cycle): the 2.5th and 97.5th percentiles over 1 000 resamples of the
// cycles, drawn with replacement (a fixed seed: a run's figures repeat).
std::pair<double, double> ratio_interval(const std::vector<double>& f, const std::vector<double>& p) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<std::size_t> pick(0, f.size() - 1);
  std::vector<double> ratios, rf(f.size()), rp(p.size());
  for (int b = 0; b < 1000; ++b) {
    for (std::size_t i = 0; i < f.size(); ++i) {
      const std::size_t k = pick(rng);
      rf[i] = f[k];
      rp[i] = p[k];
    }
    const double mf = quartiles(rf).median;
    if (mf > 0) ratios.push_back(quartiles(rp).median / mf);
  }
  if (ratios.size() < 100) return {0, 0};
  std::sort(ratios.begin(), ratios.end());
  const auto at = [&](double q) { return ratios[static_cast<std::size_t>(q * static_cast<double>(ratios.size() - 1))]; };
  return {at(0.025), at(0.975)};
}

void print(const char* what, const Quartiles& q, const char* unit) {
  std::printf("  %-34s %9.1f %s   (IQR %.1f .. %.1f)\n", what, q.median, unit, q.q1, q.q3);
}

// The ids of the BPF programs loaded now.
std::vector<uint32_t> prog_ids() {
  std::vector<uint32_t> ids;
  for (uint32_t id = 0; bpf_prog_get_next_id(id, &id) == 0;) ids.push_back(id);
  return ids;
}

// The floor of each program set: its hooks' empty programs, and the one
// more of floor4.
struct Floor {
  std::vector<std::string> progs;
  std::string extra;
};
Floor floor_of(headroom::probes::ProgramSet set) {
  using headroom::probes::ProgramSet;
  if (set == ProgramSet::syscalls)
    return {{"floor_sys_exit", "floor_inet_sock_set_state", "floor_sk_data_ready"}, "floor_sys_enter"};
  if (set == ProgramSet::raw) return {{"floor_raw_sys_exit", "floor_raw_inet_sock_set_state"}, "floor_sys_enter"};
  if (set == ProgramSet::socket_reads) return {{"floor_sys_exit", "floor_raw_inet_sock_set_state"}, "floor_sys_enter"};
  if (set == ProgramSet::send_length)
    return {{"floor_inet_sock_set_state", "floor_sock_send_length", "floor_sk_data_ready"}, "floor_sock_recv_length"};
  return {{"floor_inet_sock_set_state", "floor_tcp_sendmsg_locked", "floor_sk_data_ready"}, "floor_sock_recv_length"};
}

struct ProgRun {
  std::string name;
  uint64_t run_cnt = 0, run_time_ns = 0;
};
ProgRun prog_run(int fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) fail("cannot read a program's info");
  return {info.name, info.run_cnt, info.run_time_ns};
}

}  // namespace

int main(int argc, char** argv) {
  int cycles = 1500, slice = 200, warmup = 300, stats_slices = 10, cpu = -1;
  bool http1 = false, server_process = false;
  headroom::probes::DependencyProbeOptions options;
  options.programs = headroom::probes::ProgramSet::sockets;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--programs") {
      auto set = headroom::probes::parse_program_set(argv[i + 1]);
      if (!set || *set == headroom::probes::ProgramSet::automatic)
        fail("--programs is sockets, send-length, syscalls, socket-reads or raw");
      options.programs = *set;
      continue;
    }
    if (a == "--server") {
      server_process = std::string_view(argv[i + 1]) == "process";
      if (!server_process && std::string_view(argv[i + 1]) != "thread") fail("--server is thread or process");
      continue;
    }
    if (a == "--protocol") {
      http1 = std::string_view(argv[i + 1]) == "http1";
      if (!http1 && std::string_view(argv[i + 1]) != "generic") fail("--protocol is http1 or generic");
      continue;
    }
    if (a == "--cycles") cycles = v;
    else if (a == "--slice") slice = v;
    else if (a == "--warmup") warmup = v;
    else if (a == "--stats-slices") stats_slices = v;
    else if (a == "--cpu") cpu = v;
    else fail("unknown option " + std::string(a));
  }
  if (cycles < 3 || slice < 1) fail("--cycles must be at least 3 and --slice at least 1");
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0) fail("--cpu " + std::to_string(cpu) + ": " + std::strerror(errno));
  }

  ServerProcess server;
  if (server_process) server.start();  // before the probe: not a caller, nor its fork
  Pair traced, untraced;
  headroom::probes::DependencySpec spec;
  spec.address = in6_addr{};
  ::inet_pton(AF_INET6, "::ffff:127.0.0.1", &*spec.address);
  spec.port = traced.port;
  spec.target_ns = 10'000'000;
  spec.max_ns = 100'000'000;
  spec.protocol = http1 ? headroom::probes::DependencyProtocol::http1 : headroom::probes::DependencyProtocol::generic;
  if (http1)
    for (Pair* p : {&traced, &untraced}) {
      p->kPing = "GET / HTTP/1.1\r\nHost: b\r\n\r\n";
      p->kPong = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    }
  // The probe's programs, for bpf_stats: those it loads (named hr_dep_*).
  const std::vector<uint32_t> ids_before = prog_ids();
  auto probe = headroom::probes::DependencyProbe::open({spec}, options);
  if (!probe) fail(probe.error().message);
  std::vector<int> product_fds;
  for (uint32_t id : prog_ids()) {
    if (std::find(ids_before.begin(), ids_before.end(), id) != ids_before.end()) continue;
    const int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0) continue;
    if (prog_run(fd).name.starts_with("hr_dep_")) product_fds.push_back(fd);
    else ::close(fd);
  }
  traced.connect();
  untraced.connect();
  if (server_process)
    for (Pair* p : {&traced, &untraced}) p->hand_to(server);
  (*probe)->detach();

  floor_bpf* floor = floor_bpf__open();
  if (floor == nullptr) fail("cannot open the floor's BPF object");
  const Floor fl = floor_of(options.programs);
  std::vector<std::string> all = fl.progs;
  all.push_back(fl.extra);
  for (bpf_program* p = bpf_object__next_program(floor->obj, nullptr); p != nullptr;
       p = bpf_object__next_program(floor->obj, p))
    bpf_program__set_autoload(p, std::find(all.begin(), all.end(), bpf_program__name(p)) != all.end());
  if (const int err = floor_bpf__load(floor); err != 0) fail(std::string("cannot load the floor: ") + std::strerror(-err));
  std::vector<bpf_link*> links;

  enum { kNone, kFloor, kFloor4, kProduct, kVariants };
  auto attach = [&](int v) {
    if (v == kFloor || v == kFloor4)
      for (const std::string& n : all) {
        if (v == kFloor && n == fl.extra) continue;
        bpf_link* l = bpf_program__attach(bpf_object__find_program_by_name(floor->obj, n.c_str()));
        if (l == nullptr) fail("cannot attach " + n);
        links.push_back(l);
      }
    if (v == kProduct)
      if (auto r = (*probe)->attach(); !r) fail(r.error().message);
  };
  auto detach = [&](int v) {
    for (bpf_link* l : links) bpf_link__destroy(l);
    links.clear();
    if (v == kProduct) (*probe)->detach();
  };
  auto run = [&](Pair& p, int n) {
    const auto cpu_now = [&] { return thread_cpu_ns() + (server_process ? server.cpu_ns() : 0); };
    const int64_t t0 = cpu_now();
    for (int i = 0; i < n; ++i) p.exchange();
    return static_cast<double>(cpu_now() - t0) / n;
  };
  for (Pair* p : {&traced, &untraced}) (void)run(*p, warmup);

  // cost[connection][variant] per cycle
  std::vector<double> cost[2][kVariants];
  uint64_t traced_attached = 0;
  headroom::probes::DependencySnapshot snap;
  if (auto r = (*probe)->read(snap, mono_ns()); !r) fail(r.error().message);
  const uint64_t completed0 = snap.dependencies[0].calls.stats.completed;
  for (int c = 0; c < cycles; ++c) {
    for (int k = 0; k < kVariants; ++k) {
      const int v = (k + c) % kVariants;
      attach(v);
      cost[0][v].push_back(run(traced, slice));
      cost[1][v].push_back(run(untraced, slice));
      detach(v);
      if (v == kProduct) traced_attached += static_cast<uint64_t>(slice);
    }
  }
  if (auto r = (*probe)->read(snap, mono_ns()); !r) fail(r.error().message);
  const uint64_t counted = snap.dependencies[0].calls.stats.completed - completed0;

  const char* const conn_names[2] = {"traced connection (the dependency)", "untraced connection (another port)"};
  std::printf("bench_dependency_floor: %s, %s, %d cycles x %d exchanges per slice, CPU ns per exchange%s\n",
              (*probe)->attach_kind().c_str(), http1 ? "http1" : "generic", cycles, slice,
              server_process ? " (client thread and server process)" : "");
  std::printf("floor: %zu empty programs; floor4: and %s\n", fl.progs.size(), fl.extra.c_str());
  for (int conn = 0; conn < 2; ++conn) {
    std::vector<double> floor_d, floor4_d, product_d, ratio, beyond;
    for (int c = 0; c < cycles; ++c) {
      const double none = cost[conn][kNone][static_cast<std::size_t>(c)];
      const double f = cost[conn][kFloor][static_cast<std::size_t>(c)] - none;
      const double p = cost[conn][kProduct][static_cast<std::size_t>(c)] - none;
      const double f4 = cost[conn][kFloor4][static_cast<std::size_t>(c)] - none;
      floor4_d.push_back(f4);
      floor_d.push_back(f);
      product_d.push_back(p);
      beyond.push_back(p - f);
      if (f > 0) ratio.push_back(p / f);
    }
    std::printf("%s:\n", conn_names[conn]);
    print("none", quartiles(cost[conn][kNone]), "ns");
    print("floor - none", quartiles(floor_d), "ns");
    print("product - none", quartiles(product_d), "ns");
    print("product - floor", quartiles(beyond), "ns");
    print("floor4 - none", quartiles(floor4_d), "ns");
    const Quartiles qf = quartiles(floor_d), qp = quartiles(product_d), qf4 = quartiles(floor4_d);
    const auto [lo, hi] = ratio_interval(floor_d, product_d);
    std::printf("  %-34s %9.2f x   (95 %% interval %.2f .. %.2f)\n", "ratio to floor, of the medians",
                qf.median > 0 ? qp.median / qf.median : 0.0, lo, hi);
    std::printf("  %-34s %9.2f x\n", "ratio to floor4, of the medians", qf4.median > 0 ? qp.median / qf4.median : 0.0);
    const Quartiles qr = quartiles(ratio);
    std::printf("  %-34s %9.2f x   (IQR %.2f .. %.2f; %zu of %d cycles)\n", "per-cycle ratio to floor", qr.median,
                qr.q1, qr.q3, ratio.size(), cycles);
  }
  std::printf("calls counted while attached: %llu of %llu traced exchanges\n",
              static_cast<unsigned long long>(counted), static_cast<unsigned long long>(traced_attached));
  if (counted != traced_attached) fail("the probe did not count one call per traced exchange");

  // bpf_stats: the ns inside each program per exchange. The fd keeps the
  // statistics on; closing it restores what kernel.bpf_stats_enabled says.
  if (const int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME); stats_fd >= 0 && stats_slices > 0) {
    std::vector<int> floor_fds;
    for (const std::string& n : fl.progs)
      floor_fds.push_back(bpf_program__fd(bpf_object__find_program_by_name(floor->obj, n.c_str())));
    std::printf("bpf_stats, %d slices per connection: per exchange, firings and ns inside the program\n",
                stats_slices);
    for (int conn = 0; conn < 2; ++conn) {
      Pair& p = conn == 0 ? traced : untraced;
      for (int v : {kFloor, kProduct}) {
        const std::vector<int>& fds = v == kFloor ? floor_fds : product_fds;
        std::vector<ProgRun> before, after;
        attach(v);
        (void)run(p, warmup);
        for (int fd : fds) before.push_back(prog_run(fd));
        for (int i = 0; i < stats_slices; ++i) (void)run(p, slice);
        for (int fd : fds) after.push_back(prog_run(fd));
        detach(v);
        const double n = static_cast<double>(stats_slices) * slice;
        double total = 0;
        std::string line;
        for (std::size_t i = 0; i < fds.size(); ++i) {
          const double ns = static_cast<double>(after[i].run_time_ns - before[i].run_time_ns) / n;
          total += ns;
          char buf[96];
          std::snprintf(buf, sizeof buf, "  %s %.2fx %.1f", after[i].name.c_str(),
                        static_cast<double>(after[i].run_cnt - before[i].run_cnt) / n, ns);
          line += buf;
        }
        std::printf("  %-9s %-7s total %6.1f ns:%s\n", conn == 0 ? "traced" : "untraced",
                    v == kFloor ? "floor" : "product", total, line.c_str());
      }
    }
    ::close(stats_fd);
  }
  floor_bpf__destroy(floor);
  server.stop();
  for (int fd : product_fds) ::close(fd);

  // What read() costs the agent each interval: without callers (counters
  // and the slots), and with a caller rule (plus the scan of /proc).
  auto read_cost = [&](headroom::probes::DependencyProbe& p) {
    std::vector<double> us;
    for (int i = 0; i < 50; ++i) {
      const int64_t t0 = mono_ns();
      if (auto r = p.read(snap, mono_ns()); !r) fail(r.error().message);
      us.push_back(static_cast<double>(mono_ns() - t0) / 1e3);
    }
    return quartiles(us);
  };
  spec.caller_process = "bench_dependenc";  // this process (comm keeps 15 bytes)
  spec.port = static_cast<uint16_t>(traced.port + 1 == 0 ? 1 : traced.port + 1);
  auto with_callers = headroom::probes::DependencyProbe::open({spec}, options);
  if (!with_callers) fail(with_callers.error().message);
  std::size_t procs = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc"))
    procs += std::isdigit(static_cast<unsigned char>(e.path().filename().string()[0])) ? 1 : 0;
  std::printf("read() wall time per call (50 reads):\n");
  print("without callers", read_cost(**probe), "us");
  print(("with caller_process, " + std::to_string(procs) + " processes").c_str(), read_cost(**with_callers), "us");
  return 0;
}
