// SPDX-License-Identifier: Apache-2.0
// bench_open_conns: opens N TCP connections to HOST:PORT and holds them open,
// idle, until SIGTERM/SIGINT (or --seconds). With --request (HTTP/1.1), each
// connection first sends one "GET PATH" and reads the complete response, so
// it is an idle keep-alive connection the server has already served once
// (and the endpoint probe has seen once), not one still waiting for a request.
//
// Prints "open N" on stdout (flushed) once all N are open, so a script can
// wait for it; at the end, "still open M of N": how many the server had not
// closed (EOF or reset) by then.
//
//   bench_open_conns --port P [--host 127.0.0.1] [--connections N (10000)]
//                    [--request] [--path /] [--seconds S (0: until a signal)]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// Reads one HTTP/1.1 response with a Content-Length (or none: headers only).
bool read_response(int fd) {
  std::string got;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    got.append(buf, static_cast<std::size_t>(n));
    const auto end = got.find("\r\n\r\n");
    if (end == std::string::npos) continue;
    std::size_t body = 0;
    for (const char* key : {"Content-Length:", "content-length:"}) {
      const auto at = got.find(key);
      if (at != std::string::npos && at < end) body = std::strtoul(got.c_str() + at + std::strlen(key), nullptr, 10);
    }
    if (got.size() >= end + 4 + body) return true;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace headroom;
  const bench::Flags flags(argc, argv);
  if (flags.has("--help") || !flags.has("--port")) {
    std::printf("usage: bench_open_conns --port P [--host 127.0.0.1] [--connections N (10000)] [--request] [--path /]\n"
                "                        [--seconds S (0: until SIGTERM/SIGINT)]\n");
    return flags.has("--help") ? 0 : 2;
  }
  const long port = flags.get_long("--port", 0);
  const std::string host = flags.get("--host", "127.0.0.1");
  const long n = flags.get_long("--connections", 10'000);
  const bool request = flags.has("--request");
  const std::string path = flags.get("--path", "/");
  const long seconds = flags.has("--seconds") ? flags.get_long("--seconds", 0) : 0;

  // One descriptor per connection, plus a few.
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  const auto want = static_cast<rlim_t>(n + 64);
  if (rl.rlim_cur < want) {
    rl.rlim_cur = std::min(want, rl.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < want) {
      std::fprintf(stderr, "bench_open_conns: RLIMIT_NOFILE hard limit %llu < %llu; raise it (ulimit -Hn)\n",
                   static_cast<unsigned long long>(rl.rlim_max), static_cast<unsigned long long>(want));
      return 1;
    }
  }
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);

  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    std::fprintf(stderr, "bench_open_conns: --host %s: not an IPv4 address\n", host.c_str());
    return 2;
  }
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n";

  std::vector<int> fds;
  fds.reserve(static_cast<std::size_t>(n));
  const int64_t t0 = bench::monotonic_ns();
  for (long i = 0; i < n && !g_stop; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      std::fprintf(stderr, "bench_open_conns: connection %ld: %s\n", i, std::strerror(errno));
      return 1;
    }
    if (request && (::send(fd, req.data(), req.size(), 0) != static_cast<ssize_t>(req.size()) || !read_response(fd))) {
      std::fprintf(stderr, "bench_open_conns: connection %ld: no response to GET %s\n", i, path.c_str());
      return 1;
    }
    fds.push_back(fd);
  }
  const double open_s = static_cast<double>(bench::monotonic_ns() - t0) / 1e9;
  std::printf("open %zu (%.2f s%s)\n", fds.size(), open_s, request ? ", one request each" : "");
  std::fflush(stdout);

  const int64_t end = seconds > 0 ? bench::monotonic_ns() + seconds * 1'000'000'000L : 0;
  while (!g_stop && (end == 0 || bench::monotonic_ns() < end))
    ::usleep(100'000);

  // Which ones has the server closed meanwhile (readable: EOF or reset)?
  std::vector<pollfd> pfds;
  for (int fd : fds) pfds.push_back({fd, POLLIN | POLLRDHUP, 0});
  ::poll(pfds.data(), pfds.size(), 0);
  std::size_t open = 0;
  for (const auto& p : pfds) open += (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) == 0;
  std::printf("still open %zu of %zu\n", open, fds.size());
  for (int fd : fds) ::close(fd);
  return 0;
}
