// SPDX-License-Identifier: Apache-2.0
// bench_syscall_overhead: what system calls cost in this process, which is not
// a server: run it once without headroomd and once with headroomd's eBPF
// endpoint probe attached (an endpoint on some other port), and the difference
// is what the raw_syscalls sys_enter/sys_exit and sock tracepoint programs add
// to every process on the machine that is NOT traced.
//
// Three loops, each timed with CLOCK_MONOTONIC around the whole loop:
//  - getppid: a null system call (raw syscall(), glibc caches nothing here).
//    The probe's programs run and return at their syscall-number switch.
//  - pipe: write(1 byte) + read(1 byte) on a pipe. read/write are syscalls the
//    probe looks at: sys_enter does its one lookup of this process in `procs`.
//  - tcp: send(64 bytes) + recv(64 bytes) over a loopback TCP connection to a
//    listening socket of this process, on an ephemeral port (not an endpoint).
//    sendto/recvfrom are looked at too, and the loopback delivery also fires
//    sock:sk_data_ready (its program looks the port up in `ports`).
// Each loop runs --rounds times after one warm-up round; the figure is the
// median round (nearest rank), in ns per system call (pipe and tcp: the pair's
// time / 2), with the fastest round for contrast.
//
//   bench_syscall_overhead [--getppid N (1000000)] [--pipe N (1000000)] [--tcp N (100000)]
//                          [--rounds R (5)] [--only getppid|pipe|tcp] [--tsv] [--serve]
// --tsv prints "name<TAB>median_ns<TAB>fastest_ns<TAB>syscalls" lines only, the
// last being every system call the loop made, warm-up included
// (bench/bench_endpoints.sh divides the eBPF programs' run time by it).
// --serve (implies --tsv): measures once per line read on stdin and ends each
// measurement with a line "end", until EOF. One process, the same pipe and
// socket pair for every measurement, so the script can start and stop
// headroomd between measurements without a new process's own variance (a
// fresh loopback connection alone varies by +-15 % from process to process).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_util.h"

namespace {

using headroom::bench::monotonic_ns;

struct Loop {
  std::string name;
  std::string what;
  long iterations = 0;      // loop iterations
  int syscalls_per_iter = 1;
  std::function<bool(long)> run;  // runs n iterations; false on a failed call
};

bool die(const char* what) {
  std::fprintf(stderr, "bench_syscall_overhead: %s: %s\n", what, std::strerror(errno));
  return false;
}

// A connected loopback TCP pair inside this process: client -> server.
struct TcpPair {
  int listener = -1, client = -1, server = -1;
  uint16_t port = 0;
  bool open() {
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) return die("socket");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;  // ephemeral: not an endpoint's port
    if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return die("bind");
    if (::listen(listener, 1) != 0) return die("listen");
    socklen_t len = sizeof a;
    if (::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) return die("getsockname");
    port = ntohs(a.sin_port);
    client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (client < 0) return die("socket");
    if (::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return die("connect");
    server = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (server < 0) return die("accept");
    const int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return true;
  }
  ~TcpPair() {
    for (int fd : {client, server, listener})
      if (fd >= 0) ::close(fd);
  }
};

}  // namespace

int main(int argc, char** argv) {
  using namespace headroom;
  const bench::Flags flags(argc, argv);
  if (flags.has("--help")) {
    std::printf("usage: bench_syscall_overhead [--getppid N (1000000)] [--pipe N (1000000)] [--tcp N (100000)]\n"
                "                              [--rounds R (5)] [--only getppid|pipe|tcp] [--tsv] [--serve]\n");
    return 0;
  }
  const long n_getppid = flags.get_long("--getppid", 1'000'000);
  const long n_pipe = flags.get_long("--pipe", 1'000'000);
  const long n_tcp = flags.get_long("--tcp", 100'000);
  const long rounds = flags.get_long("--rounds", 5);
  const bool serve = flags.has("--serve");
  const bool tsv = serve || flags.has("--tsv");
  const std::string only = flags.get("--only", "");
  if (!only.empty() && only != "getppid" && only != "pipe" && only != "tcp") {
    std::fprintf(stderr, "--only: getppid, pipe or tcp, got \"%s\"\n", only.c_str());
    return 2;
  }

  int pfd[2] = {-1, -1};
  if (::pipe2(pfd, O_CLOEXEC) != 0) {
    die("pipe");
    return 1;
  }
  TcpPair tcp;
  if (!tcp.open()) return 1;

  std::vector<Loop> loops;
  loops.push_back({"getppid", "getppid() (null syscall)", n_getppid, 1, [](long n) {
                     for (long i = 0; i < n; ++i) ::syscall(SYS_getppid);
                     return true;
                   }});
  loops.push_back({"pipe", "write + read, 1 byte, pipe", n_pipe, 2, [&](long n) {
                     char c = 'x';
                     for (long i = 0; i < n; ++i) {
                       if (::write(pfd[1], &c, 1) != 1) return die("write");
                       if (::read(pfd[0], &c, 1) != 1) return die("read");
                     }
                     return true;
                   }});
  loops.push_back({"tcp", "send + recv, 64 bytes, loopback TCP", n_tcp, 2, [&](long n) {
                     char buf[64] = {};
                     for (long i = 0; i < n; ++i) {
                       if (::send(tcp.client, buf, sizeof buf, 0) != static_cast<ssize_t>(sizeof buf)) return die("send");
                       // Loopback delivers within send(); MSG_WAITALL in case a segment is split.
                       if (::recv(tcp.server, buf, sizeof buf, MSG_WAITALL) != static_cast<ssize_t>(sizeof buf))
                         return die("recv");
                     }
                     return true;
                   }});

  if (!tsv) {
    std::printf("bench_syscall_overhead: pid %d (not a server), %ld rounds after 1 warm-up round, tcp port %u\n",
                static_cast<int>(::getpid()), rounds, tcp.port);
    std::printf("  %-40s %12s %10s %10s\n", "ns per system call", "iterations", "median", "fastest");
  }
  auto measure = [&]() {
    for (auto& l : loops) {
      if (!only.empty() && l.name != only) continue;
      std::vector<double> ns_per_call;
      for (long r = 0; r <= rounds; ++r) {
        const int64_t t0 = monotonic_ns();
        if (!l.run(l.iterations)) return false;
        const int64_t t1 = monotonic_ns();
        if (r == 0) continue;  // warm-up
        ns_per_call.push_back(static_cast<double>(t1 - t0) /
                              (static_cast<double>(l.iterations) * static_cast<double>(l.syscalls_per_iter)));
      }
      const auto s = bench::summarize(ns_per_call);
      const double fastest = *std::min_element(ns_per_call.begin(), ns_per_call.end());
      if (tsv)
        std::printf("%s\t%.1f\t%.1f\t%ld\n", l.name.c_str(), s.p50, fastest,
                    (rounds + 1) * l.iterations * l.syscalls_per_iter);
      else
        std::printf("  %-40s %12ld %10.1f %10.1f\n", l.what.c_str(), l.iterations, s.p50, fastest);
    }
    return true;
  };
  if (!serve) {
    if (!measure()) return 1;
  } else {
    for (int ch; (ch = std::getchar()) != EOF;) {
      if (ch != '\n') continue;
      if (!measure()) return 1;
      std::printf("end\n");
      std::fflush(stdout);
    }
  }
  ::close(pfd[0]);
  ::close(pfd[1]);
  return 0;
}
