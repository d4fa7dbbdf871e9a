// SPDX-License-Identifier: Apache-2.0
// The eBPF dependency probe (probes/dependency_probe.h) on the real kernel:
// real clients (hr-test-load, and sockets of this process) call real servers
// (hr-test-server, listeners of this process), and what the probe counts on
// the calling side is compared with what the clients measured.
//
// The probe times a call from the client's write to the first answer bytes
// reaching the client's socket; the client from its send to its last read.
// On loopback the two differ by microseconds: the thresholds below sit far
// from the servers' delays, so both sides put each call on the same side.
//
// HEADROOM_EBPF_PROGRAMS picks the program set, as it does headroomd's (ctest
// reruns them with syscalls, send-length, socket-reads and raw). Needs root
// (eBPF) and a kernel with BTF, and for the socket set its tracepoints
// (6.11+); without them every test skips, saying so.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dependency_probe_support.h"
#include "probes/dependency_probe.h"
#include "probes/endpoint_probe.h"
#include "process.h"
#include "temp_dir.h"
#include "test_server.h"

namespace headroom {
namespace {

using namespace std::chrono_literals;
using probes::DependencyProbe;
using probes::DependencyProtocol;
using probes::DependencySnapshot;
using probes::DependencySpec;
using probes::DependencyTotals;
using testing::Process;
using testing::start_test_server;
using testing::TempDir;

#define REQUIRE_EBPF() HR_REQUIRE_EBPF()
#define OPEN_PROBE(var, specs) HR_OPEN_DEPENDENCY_PROBE(var, specs)
int64_t now_ns() { return testing::monotonic_ns(); }

in6_addr loopback_v4() {
  in6_addr a{};
  ::inet_pton(AF_INET6, "::ffff:127.0.0.1", &a);
  return a;
}

// A dependency on 127.0.0.1:port.
DependencySpec spec(uint16_t port, std::chrono::milliseconds target, std::chrono::milliseconds max,
                    DependencyProtocol protocol = DependencyProtocol::http1) {
  DependencySpec s = testing::dependency_spec(port, target, max, protocol);
  s.address = loopback_v4();
  return s;
}

DependencySnapshot snap(DependencyProbe& p) { return testing::read_now(p); }

// hr-test-load's one-line JSON report.
struct Load {
  std::string json;
  double requests = -1, errors = -1, over = std::nan("");
};

double json_number(const std::string& json, const std::string& key) {
  const auto at = json.find("\"" + key + "\":");
  if (at == std::string::npos) return std::nan("");
  return std::strtod(json.c_str() + at + key.size() + 3, nullptr);
}

Load finish(Process& load) {
  EXPECT_EQ(load.wait(60s), std::optional<int>(0)) << load.out() << load.err();
  Load l;
  const auto out = load.out();
  const auto brace = out.find('{');
  if (brace == std::string::npos) {
    ADD_FAILURE() << "hr-test-load printed no report: " << out << load.err();
    return l;
  }
  l.json = out.substr(brace, out.find('\n', brace) - brace);
  l.requests = json_number(l.json, "requests");
  l.errors = json_number(l.json, "errors");
  l.over = json_number(l.json, "10ms");
  return l;
}

std::vector<std::string> load_args(const std::string& binary, uint16_t port, std::vector<std::string> more) {
  more.insert(more.begin(), {binary, "--port", std::to_string(port)});
  return more;
}

// Runs the client to its end, renewing the probe's callers as the agent does
// each interval (every 20 ms here: a caller started after a renewal is
// missed until the next).
Load run_reading(DependencyProbe& probe, Process& load) {
  while (load.running()) {
    (void)snap(probe);
    std::this_thread::sleep_for(20ms);
  }
  return finish(load);
}

// Accuracy against the client: 20 % of the calls are slow (20 ms, over the
// 10 ms target), the others fast (1 ms).
void expect_matches_client(DependencyProbe& probe, const TempDir& dir, uint16_t port, std::vector<std::string> args) {
  const auto before = snap(probe).dependencies.at(0);
  Process load(load_args(HR_TEST_LOAD_PATH, port, std::move(args)), dir);
  const auto client = finish(load);
  const auto after = snap(probe).dependencies.at(0);
  const double completed = static_cast<double>(after.calls.stats.completed - before.calls.stats.completed);
  const double over = static_cast<double>(after.calls.stats.over_target - before.calls.stats.over_target);
  std::cout << "[ accuracy ] client " << client.json << "\n[ accuracy ] probe completed " << completed
            << " over target " << over << " errors " << after.calls.stats.errors - before.calls.stats.errors << "\n";
  ASSERT_GT(client.requests, 500) << client.json;
  EXPECT_EQ(client.errors, 0) << client.json;
  EXPECT_NEAR(completed, client.requests, 0.1 * client.requests) << "completed calls vs the client's requests";
  EXPECT_NEAR(over / completed, client.over, 0.02) << "share over the 10 ms target vs the client's";
  EXPECT_NEAR(client.over, 0.2, 0.05) << "the servers' slow share is what the test meant";
  EXPECT_LE(after.calls.stats.errors - before.calls.stats.errors, 4u) << "at most the calls cut off at the end";
}

TEST(DependencyEbpf, Http1KeepAliveShareAndCountMatchTheClient) {
  REQUIRE_EBPF();
  TempDir dir(testing::tmpfs_base());
  auto server = start_test_server(dir, {"--mode", "http", "--delay", "/fast=1ms", "--delay", "/slow=20ms"});
  ASSERT_NE(server.port, 0);
  OPEN_PROBE(probe, std::vector{spec(server.port, 10ms, 500ms)});
  EXPECT_EQ(probe.attach_kind(), testing::expected_kind());
  std::vector<std::string> args{"--mode", "http", "--connections", "4", "--duration", "3s", "--over", "10ms"};
  for (int i = 0; i < 4; ++i) args.insert(args.end(), {"--path", "/fast"});
  args.insert(args.end(), {"--path", "/slow"});
  expect_matches_client(probe, dir, server.port, args);
}

// The programs find arrived bytes in page fragments once they have learnt
// where the kernel maps pages (arrived.bpf.h, from partially used slabs of
// the socket caches): short runs on `paths` that open and close connections
// until each probe has seen an error, as a node's traffic would.
void learn_arrived_bytes(const std::vector<DependencyProbe*>& probes, const TempDir& dir, uint16_t port,
                         const std::vector<std::string>& paths) {
  const auto learning = std::chrono::steady_clock::now();
  const auto unlearnt = [&] {
    for (DependencyProbe* p : probes)
      if (snap(*p).dependencies.at(0).calls.stats.errors == 0) return true;
    return false;
  };
  for (int run = 0; unlearnt(); ++run) {
    ASSERT_LT(std::chrono::steady_clock::now() - learning, 20s)
        << "no error answer seen after " << run << " short runs: the programs did not find the arrived bytes";
    std::vector<std::string> args{"--mode", "http", "--connections", "8", "--requests", "40"};
    for (const auto& path : paths) args.insert(args.end(), {"--path", path});
    Process warm(load_args(HR_TEST_LOAD_PATH, port, args), dir);
    (void)finish(warm);
  }
  std::cout << "[ status ] status lines read after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - learning).count()
            << " ms of warm-up\n";
}

// HTTP/1 5xx answers are errors (completed calls too); a 5xx is read from
// the answer's status line as it reaches the client's socket.
TEST(DependencyEbpf, Http1ServerErrorsCountAsErrors) {
  REQUIRE_EBPF();
  TempDir dir(testing::tmpfs_base());
  auto server = start_test_server(dir, {"--mode", "http", "--status", "/err=503"});
  ASSERT_NE(server.port, 0);
  OPEN_PROBE(probe, std::vector{spec(server.port, 10ms, 500ms)});
  ASSERT_NO_FATAL_FAILURE(learn_arrived_bytes({&probe}, dir, server.port, {"/err"}));
  const auto before = snap(probe).dependencies.at(0);
  std::vector<std::string> args{"--mode", "http", "--connections", "2", "--requests", "2000"};
  for (int i = 0; i < 4; ++i) args.insert(args.end(), {"--path", "/ok"});
  args.insert(args.end(), {"--path", "/err"});
  Process load(load_args(HR_TEST_LOAD_PATH, server.port, args), dir);
  const auto client = finish(load);
  const auto after = snap(probe).dependencies.at(0);
  const auto errors = after.calls.stats.errors - before.calls.stats.errors;
  const auto completed = after.calls.stats.completed - before.calls.stats.completed;
  std::cout << "[ 5xx ] client " << client.json << "\n[ 5xx ] probe completed " << completed << " errors " << errors
            << "\n";
  ASSERT_EQ(client.requests, 2000) << client.json;
  // The connections share the request budget, each rotating over the paths
  // from its own start: about one in five asks for /err.
  EXPECT_NEAR(client.errors, 400, 10) << "about one in five answered 503: " << client.json;
  EXPECT_EQ(completed, 2000u);
  EXPECT_EQ(static_cast<double>(errors), client.errors) << "every 503 the client got, and nothing else";
  EXPECT_EQ(after.resets - before.resets, 0u);
}

// The error rule: two probes watch the same calls, one with the default rule
// (connect, reset, 5xx) and one with "connect+reset+4xx". A fifth of the
// answers are 503, a fifth 404: each probe counts its own kind, and together
// they count every answer the client took for a failure.
TEST(DependencyEbpf, TheErrorRuleSaysWhichAnswersAreErrors) {
  REQUIRE_EBPF();
  TempDir dir(testing::tmpfs_base());
  auto server = start_test_server(dir, {"--mode", "http", "--status", "/err=503", "--status", "/missing=404"});
  ASSERT_NE(server.port, 0);
  auto client_errors = spec(server.port, 10ms, 500ms);
  client_errors.errors.status_5xx = false;
  client_errors.errors.status_4xx = true;
  OPEN_PROBE(five, std::vector{spec(server.port, 10ms, 500ms)});
  OPEN_PROBE(four, std::vector{client_errors});
  ASSERT_NO_FATAL_FAILURE(learn_arrived_bytes({&five, &four}, dir, server.port, {"/err", "/missing"}));
  const auto before5 = snap(five).dependencies.at(0), before4 = snap(four).dependencies.at(0);
  std::vector<std::string> args{"--mode", "http", "--connections", "2", "--requests", "2000"};
  for (const char* path : {"/ok", "/ok", "/ok", "/missing", "/err"}) args.insert(args.end(), {"--path", path});
  Process load(load_args(HR_TEST_LOAD_PATH, server.port, args), dir);
  const auto client = finish(load);
  const auto after5 = snap(five).dependencies.at(0), after4 = snap(four).dependencies.at(0);
  const auto errors5 = after5.calls.stats.errors - before5.calls.stats.errors;
  const auto errors4 = after4.calls.stats.errors - before4.calls.stats.errors;
  std::cout << "[ rule ] client " << client.json << "\n[ rule ] 5xx rule " << errors5 << " errors, 4xx rule "
            << errors4 << "\n";
  ASSERT_EQ(client.requests, 2000) << client.json;
  EXPECT_NEAR(client.errors, 800, 20) << "about two in five answered 503 or 404: " << client.json;
  EXPECT_NEAR(static_cast<double>(errors5), 400, 10) << "the 503s";
  EXPECT_NEAR(static_cast<double>(errors4), 400, 10) << "the 404s";
  EXPECT_EQ(static_cast<double>(errors5 + errors4), client.errors) << "every answer the client took for a failure";
  EXPECT_EQ(after5.calls.stats.completed - before5.calls.stats.completed, 2000u);
  EXPECT_EQ(after4.calls.stats.completed - before4.calls.stats.completed, 2000u);
}


TEST(DependencyEbpf, GenericLineProtocolShareAndCountMatchTheClient) {
  REQUIRE_EBPF();
  TempDir dir(testing::tmpfs_base());
  auto server = start_test_server(dir, {"--mode", "line"});
  ASSERT_NE(server.port, 0);
  OPEN_PROBE(probe, std::vector{spec(server.port, 10ms, 500ms, DependencyProtocol::generic)});
  std::vector<std::string> args{"--mode", "line", "--connections", "4", "--duration", "3s", "--over", "10ms"};
  for (int i = 0; i < 4; ++i) args.insert(args.end(), {"--line", "1000"});
  args.insert(args.end(), {"--line", "20000"});
  expect_matches_client(probe, dir, server.port, args);
}

// A stopped dependency: its calls stay in flight and age past max, so the
// share of calls over max in the latest interval (ended ones plus those in
// flight) reaches 1.0 within max plus a read interval or two.
TEST(DependencyEbpf, AStoppedDependencyDrivesTheShareOverMaxToOne) {
  REQUIRE_EBPF();
  TempDir dir(testing::tmpfs_base());
  auto server = start_test_server(dir, {"--mode", "line"});
  ASSERT_NE(server.port, 0);
  OPEN_PROBE(probe, std::vector{spec(server.port, 20ms, 100ms, DependencyProtocol::generic)});
  Process load(load_args(HR_TEST_LOAD_PATH, server.port,
                         {"--mode", "line", "--connections", "4", "--duration", "4s", "--line", "500"}),
               dir);
  std::this_thread::sleep_for(1s);
  testing::ContinueAtExit resume{server.proc->pid()};
  const auto prev = snap(probe).dependencies.at(0);
  ASSERT_GT(prev.calls.stats.completed, 100u) << "calls before the stop";
  server.proc->signal(SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  const auto r = testing::share_over_max_after_stop(probe, prev, stopped);
  EXPECT_EQ(r.share, 1.0);
  EXPECT_EQ(r.inflight, 4u) << "one call in flight per connection";
  EXPECT_LE(r.took, 100ms + 2 * 100ms + 200ms) << "max + two read intervals (+ slack for a busy machine)";
  server.proc->signal(SIGCONT);
  (void)finish(load);
}

// A socket bound to 127.0.0.1 on a port of the kernel's choice (in port).
int bound_loopback(uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  return fd;
}

// A free port: bound, then closed, so nothing listens there.
uint16_t free_port() {
  uint16_t port = 0;
  ::close(bound_loopback(port));
  return port;
}

// A listener of this process on 127.0.0.1 (backlog as given) in lfd: its
// port, 0 when it could not be made.
uint16_t listen_loopback(int backlog, int& lfd) {
  uint16_t port = 0;
  lfd = bound_loopback(port);
  return port != 0 && ::listen(lfd, backlog) == 0 ? port : 0;
}

// Connects to 127.0.0.1:port; blocking: 0 or the errno, nonblocking: the fd.
int connect_to(uint16_t port, bool nonblocking, int& fd) {
  fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? 0 : errno;
}

// Debian's redis-server, called by one connection of this process: every
// 5th command is DEBUG SLEEP 0.02 (20 ms, over the 10 ms target), the others
// PING. DEBUG SLEEP stops the whole server; with one connection that delays
// this connection's call alone. The client times each command itself.
TEST(DependencyEbpf, RedisShareAndCountMatchTheClient) {
  REQUIRE_EBPF();
  const char* const redis_server = "/usr/bin/redis-server";
  if (!std::filesystem::exists(redis_server)) {
    if (std::getenv("CI") != nullptr) FAIL() << "redis-server is missing: apt-get install redis-server";
    GTEST_SKIP() << "SKIPPED: redis-server is missing (Debian package redis-server)";
  }
  TempDir dir(testing::tmpfs_base());
  const uint16_t port = free_port();
  ASSERT_NE(port, 0);
  OPEN_PROBE(probe, std::vector{spec(port, 10ms, 500ms, DependencyProtocol::generic)});
  Process redis({redis_server, "--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                 "no", "--enable-debug-command", "yes", "--dir", dir.path()},
                dir);
  int fd = -1;
  ASSERT_TRUE(testing::eventually([&] {
    if (connect_to(port, false, fd) == 0) return true;
    ::close(fd);
    return false;
  })) << "redis-server did not listen: " << redis.err();
  const auto before = snap(probe).dependencies.at(0);
  int calls = 0, slow = 0;
  const auto end = std::chrono::steady_clock::now() + 3s;
  for (; std::chrono::steady_clock::now() < end; ++calls) {
    const std::string cmd = calls % 5 == 4 ? "DEBUG SLEEP 0.02\r\n" : "PING\r\n";
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(::write(fd, cmd.data(), cmd.size()), static_cast<ssize_t>(cmd.size()));
    std::string answer;
    char buf[64];
    while (!answer.ends_with("\r\n")) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      ASSERT_GT(n, 0) << "redis-server closed the connection";
      answer.append(buf, static_cast<std::size_t>(n));
    }
    ASSERT_EQ(answer[0], '+') << answer;
    if (std::chrono::steady_clock::now() - t0 > 10ms) ++slow;
  }
  const auto after = snap(probe).dependencies.at(0);
  ::close(fd);
  const double completed = static_cast<double>(after.calls.stats.completed - before.calls.stats.completed);
  const double over = static_cast<double>(after.calls.stats.over_target - before.calls.stats.over_target);
  const double share = static_cast<double>(slow) / calls;
  std::cout << "[ redis ] client calls " << calls << " over 10 ms " << share << "; probe completed " << completed
            << " over " << over / completed << "\n";
  ASSERT_GT(calls, 300);
  EXPECT_NEAR(completed, calls, 0.1 * calls);
  EXPECT_NEAR(over / completed, share, 0.02);
  EXPECT_NEAR(share, 0.2, 0.05);
  EXPECT_EQ(after.calls.stats.errors, before.calls.stats.errors);
}

TEST(DependencyEbpf, EachRefusedConnectIsAConnectFailureAndAnError) {
  REQUIRE_EBPF();
  const uint16_t port = free_port();
  ASSERT_NE(port, 0);
  OPEN_PROBE(probe, std::vector{spec(port, 10ms, 100ms, DependencyProtocol::generic)});
  const auto before = snap(probe).dependencies.at(0);
  for (int i = 0; i < 5; ++i) {
    int fd = -1;
    EXPECT_EQ(connect_to(port, false, fd), ECONNREFUSED);
    ::close(fd);
  }
  const auto after = snap(probe).dependencies.at(0);
  EXPECT_EQ(after.connect_failures - before.connect_failures, 5u);
  EXPECT_EQ(after.calls.stats.errors - before.calls.stats.errors, 5u);
  EXPECT_EQ(after.calls.stats.aborted - before.calls.stats.aborted, 5u);
  EXPECT_EQ(after.calls.stats.completed - before.calls.stats.completed, 0u);
  EXPECT_EQ(after.resets - before.resets, 0u);
  EXPECT_EQ(after.calls.inflight, 0u);
}

// A connect refused under a rule without "connect" is a connect failure but
// no error; under the default rule it is both.
TEST(DependencyEbpf, ARuleWithoutConnectCountsRefusedConnectsApart) {
  REQUIRE_EBPF();
  const uint16_t port = free_port();
  ASSERT_NE(port, 0);
  auto quiet = spec(port, 10ms, 100ms, DependencyProtocol::generic);
  quiet.errors.connect = false;
  OPEN_PROBE(counted, std::vector{spec(port, 10ms, 100ms, DependencyProtocol::generic)});
  OPEN_PROBE(apart, std::vector{quiet});
  const auto c0 = snap(counted).dependencies.at(0), a0 = snap(apart).dependencies.at(0);
  for (int i = 0; i < 3; ++i) {
    int fd = -1;
    EXPECT_EQ(connect_to(port, false, fd), ECONNREFUSED);
    ::close(fd);
  }
  const auto c1 = snap(counted).dependencies.at(0), a1 = snap(apart).dependencies.at(0);
  EXPECT_EQ(c1.connect_failures - c0.connect_failures, 3u);
  EXPECT_EQ(c1.calls.stats.errors - c0.calls.stats.errors, 3u);
  EXPECT_EQ(a1.connect_failures - a0.connect_failures, 3u);
  EXPECT_EQ(a1.calls.stats.errors - a0.calls.stats.errors, 0u) << "the rule leaves connects out";
  EXPECT_EQ(a1.calls.stats.aborted - a0.calls.stats.aborted, 3u);
}

// A connection made before the probe was loaded is decided at its first
// write, and measured from then on.
TEST(DependencyEbpf, AConnectionOlderThanTheProbeIsMeasuredFromItsFirstWrite) {
  REQUIRE_EBPF();
  TempDir dir(testing::tmpfs_base());
  auto server = start_test_server(dir, {"--mode", "line"});
  ASSERT_NE(server.port, 0);
  int fd = -1;
  ASSERT_EQ(connect_to(server.port, false, fd), 0);
  OPEN_PROBE(probe, std::vector{spec(server.port, 10ms, 100ms, DependencyProtocol::generic)});
  const auto before = snap(probe).dependencies.at(0);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(::write(fd, "0\n", 2), 2);
    std::string answer;
    char buf[16];
    while (!answer.ends_with("\n")) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      ASSERT_GT(n, 0);
      answer.append(buf, static_cast<std::size_t>(n));
    }
  }
  const auto after = snap(probe).dependencies.at(0);
  ::close(fd);
  EXPECT_EQ(after.calls.stats.completed - before.calls.stats.completed, 100u);
  EXPECT_EQ(after.calls.inflight, 0u);
}

// Each call's time as the probe takes it: from the request's first segment
// (or its write) to the answer's arrival, so never more than the client's own
// measure (before its write to after its read), and not less than it by more
// than the system calls around them. Three ways to call, each taking another
// path of the probe's clock: calls back to back (the start from TCP's send
// stamp), calls after a pause longer than a tick (a clock read at the write),
// and a request written in two pieces 5 ms apart (the start stays the first
// piece's, whether or not the server acknowledged it before the second).
struct Timed {
  double probe_ms = 0, client_ms = 0;
  uint64_t calls = 0;
};

Timed timed_calls(DependencyProbe& probe, int fd, int n, std::chrono::milliseconds pause, bool split) {
  const auto before = snap(probe).dependencies.at(0);
  int64_t client_ns = 0;
  for (int i = 0; i < n; ++i) {
    std::this_thread::sleep_for(pause);
    const int64_t t0 = now_ns();
    if (split) {
      EXPECT_EQ(::write(fd, "20", 2), 2);
      std::this_thread::sleep_for(5ms);
      EXPECT_EQ(::write(fd, "00\n", 3), 3);
    } else {
      EXPECT_EQ(::write(fd, "2000\n", 5), 5);
    }
    std::string answer;
    char buf[16];
    while (!answer.ends_with("\n")) {
      const ssize_t got = ::read(fd, buf, sizeof buf);
      if (got <= 0) {
        ADD_FAILURE() << "the server closed";
        return {};
      }
      answer.append(buf, static_cast<std::size_t>(got));
    }
    client_ns += now_ns() - t0;
  }
  const auto after = snap(probe).dependencies.at(0);
  Timed t;
  t.calls = after.calls.stats.completed - before.calls.stats.completed;
  t.probe_ms = static_cast<double>(after.calls.stats.busy_ns - before.calls.stats.busy_ns) / 1e6 / n;
  t.client_ms = static_cast<double>(client_ns) / 1e6 / n;
  return t;
}

TEST(DependencyEbpf, EachCallIsTimedWithinTheClientsOwnMeasure) {
  REQUIRE_EBPF();
  TempDir dir(testing::tmpfs_base());
  auto server = start_test_server(dir, {"--mode", "line"});  // "2000": answers after 2 ms
  ASSERT_NE(server.port, 0);
  OPEN_PROBE(probe, std::vector{spec(server.port, 10ms, 100ms, DependencyProtocol::generic)});
  int fd = -1;
  ASSERT_EQ(connect_to(server.port, false, fd), 0);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct Way {
    const char* name;
    std::chrono::milliseconds pause;
    bool split;
  };
  for (const Way way : {Way{"back to back", 0ms, false}, Way{"after 10 ms pauses", 10ms, false},
                        Way{"in two pieces", 0ms, true}}) {
    constexpr int kCalls = 150;
    const Timed t = timed_calls(probe, fd, kCalls, way.pause, way.split);
    std::cout << "[ timing ] " << way.name << ": probe " << t.probe_ms << " ms, client " << t.client_ms
              << " ms per call\n";
    EXPECT_EQ(t.calls, static_cast<uint64_t>(kCalls)) << way.name;
    EXPECT_GE(t.probe_ms, 2.0) << way.name << ": the server's own delay is 2 ms";
    EXPECT_LE(t.probe_ms, t.client_ms) << way.name << ": longer than the client saw";
    EXPECT_GE(t.probe_ms, t.client_ms - 0.3) << way.name << ": shorter than the client saw by more than 0.3 ms";
  }
  ::close(fd);
}

// A request written in two pieces, the first acknowledged before the second
// is written (the server acknowledges at once, and the client waits 50 ms):
// the second piece goes out on an idle connection, where TCP stamps its send
// time anew. The call is still timed from its first piece, in every set.
TEST(DependencyEbpf, ARequestInTwoPiecesIsTimedFromItsFirstPieceThoughItWasAcknowledged) {
  REQUIRE_EBPF();
  int lfd = -1;
  const uint16_t port = listen_loopback(8, lfd);
  ASSERT_NE(port, 0) << std::strerror(errno);
  OPEN_PROBE(probe, std::vector{spec(port, 10ms, 100ms, DependencyProtocol::generic)});
  int client = -1;
  ASSERT_EQ(connect_to(port, false, client), 0);
  const int server = ::accept(lfd, nullptr, nullptr);
  ASSERT_GE(server, 0);
  const int one = 1;
  ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  constexpr int kCalls = 5;
  const auto before = snap(probe).dependencies.at(0);
  int64_t client_ns = 0;
  char buf[16];
  for (int i = 0; i < kCalls; ++i) {
    ::setsockopt(server, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
    const int64_t t0 = now_ns();
    ASSERT_EQ(::write(client, "PI", 2), 2);
    ASSERT_EQ(::read(server, buf, sizeof buf), 2);
    std::this_thread::sleep_for(50ms);
    ASSERT_EQ(::write(client, "NG\r\n", 4), 4);
    ASSERT_EQ(::read(server, buf, sizeof buf), 4);
    ASSERT_EQ(::write(server, "+PONG\r\n", 7), 7);
    ASSERT_EQ(::read(client, buf, sizeof buf), 7);
    client_ns += now_ns() - t0;
  }
  const auto after = snap(probe).dependencies.at(0);
  ASSERT_EQ(after.calls.stats.completed - before.calls.stats.completed, static_cast<uint64_t>(kCalls));
  const double probe_ms = static_cast<double>(after.calls.stats.busy_ns - before.calls.stats.busy_ns) / 1e6 / kCalls;
  const double client_ms = static_cast<double>(client_ns) / 1e6 / kCalls;
  std::cout << "[ pieces ] probe " << probe_ms << " ms, client " << client_ms << " ms per call ("
            << probe.attach_kind() << ")\n";
  EXPECT_GE(probe_ms, 50.0) << "timed from the second piece, not the first";
  EXPECT_LE(probe_ms, client_ms) << "longer than the client saw";
  EXPECT_EQ(after.calls.stats.over_target - before.calls.stats.over_target, static_cast<uint64_t>(kCalls));
  ::close(client);
  ::close(server);
  ::close(lfd);
}

// Refused connects to (address, port) pairs that share ports: each counts for
// the dependency its peer address names, IPv6 and IPv4 alike; an IPv6 socket
// to an IPv4-mapped address is the IPv4 peer.
int refused_from(int family, const char* address, uint16_t port) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    ::inet_pton(AF_INET6, address, &a->sin6_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    ::inet_pton(AF_INET, address, &a->sin_addr);
    len = sizeof *a;
  }
  const int err = ::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

TEST(DependencyEbpf, PeersAreMatchedByAddressIpv6AndIpv4Alike) {
  REQUIRE_EBPF();
  const uint16_t port = free_port();
  ASSERT_NE(port, 0);
  auto v6 = spec(port, 10ms, 100ms, DependencyProtocol::generic);
  ::inet_pton(AF_INET6, "::1", &*v6.address);
  auto v4 = spec(port, 10ms, 100ms, DependencyProtocol::generic);  // ::ffff:127.0.0.1
  auto other = spec(port, 10ms, 100ms, DependencyProtocol::generic);
  ::inet_pton(AF_INET6, "::ffff:127.0.0.2", &*other.address);
  OPEN_PROBE(probe, (std::vector{v6, v4, other}));
  const auto before = snap(probe).dependencies;
  EXPECT_EQ(refused_from(AF_INET6, "::1", port), ECONNREFUSED);
  EXPECT_EQ(refused_from(AF_INET6, "::1", port), ECONNREFUSED);
  EXPECT_EQ(refused_from(AF_INET6, "::ffff:127.0.0.1", port), ECONNREFUSED);
  EXPECT_EQ(refused_from(AF_INET, "127.0.0.1", port), ECONNREFUSED);
  EXPECT_EQ(refused_from(AF_INET, "127.0.0.2", port), ECONNREFUSED);
  EXPECT_EQ(refused_from(AF_INET, "127.0.0.3", port), ECONNREFUSED);  // no dependency names it
  const auto after = snap(probe).dependencies;
  EXPECT_EQ(after.at(0).connect_failures - before.at(0).connect_failures, 2u) << "[::1]";
  EXPECT_EQ(after.at(1).connect_failures - before.at(1).connect_failures, 2u) << "127.0.0.1, from both families";
  EXPECT_EQ(after.at(2).connect_failures - before.at(2).connect_failures, 1u) << "127.0.0.2";
}

// A listener that never accepts, its queue full (backlog 0 holds one
// connection): the next connect's SYNs are dropped. That connect is a call
// in flight while it waits, and a connect failure when the client gives up.
TEST(DependencyEbpf, ABlackHoledConnectIsInFlightThenAConnectFailure) {
  REQUIRE_EBPF();
  int lfd = -1;
  const uint16_t port = listen_loopback(0, lfd);
  ASSERT_NE(port, 0) << std::strerror(errno);
  OPEN_PROBE(probe, std::vector{spec(port, 50ms, 200ms, DependencyProtocol::generic)});
  int queued = -1, held = -1;
  ASSERT_EQ(connect_to(port, false, queued), 0) << "the one connection the queue holds";
  const auto before = snap(probe).dependencies.at(0);
  EXPECT_EQ(before.calls.inflight, 0u) << "an established connection with no call is not in flight";
  ASSERT_EQ(connect_to(port, true, held), EINPROGRESS);
  std::this_thread::sleep_for(400ms);
  const auto waiting = snap(probe).dependencies.at(0);
  EXPECT_EQ(waiting.calls.inflight, 1u) << "the pending connect";
  EXPECT_EQ(waiting.calls.inflight_over_max, 1u) << "older than max (200 ms) after 400 ms";
  EXPECT_EQ(waiting.connect_failures, before.connect_failures);
  ::close(held);  // the client gives up
  const auto after = snap(probe).dependencies.at(0);
  EXPECT_EQ(after.calls.inflight, 0u);
  EXPECT_EQ(after.connect_failures - before.connect_failures, 1u);
  EXPECT_EQ(after.calls.stats.aborted - before.calls.stats.aborted, 1u);
  EXPECT_EQ(after.calls.stats.errors - before.calls.stats.errors, 1u);
  EXPECT_EQ(after.calls.stats.over_max - before.calls.stats.over_max, 1u) << "its latency: the time it waited";
  ::close(queued);
  ::close(lfd);
}

// Calls that the connection's end ends, each on a connection of its own to
// a listener of this process: the server closes without answering (its
// unread request makes the close a reset), the server answers and closes at
// once (corked: the answer's bytes and the FIN in one segment, so the
// connection is in CLOSE_WAIT before the bytes are announced: completed),
// and the client gives up and closes with its call in flight.
TEST(DependencyEbpf, ACallEndedByItsConnectionsEndIsAResetOrItsAnswer) {
  REQUIRE_EBPF();
  int lfd = -1;
  const uint16_t port = listen_loopback(8, lfd);
  ASSERT_NE(port, 0) << std::strerror(errno);
  OPEN_PROBE(probe, std::vector{spec(port, 10ms, 100ms, DependencyProtocol::generic)});
  auto call = [&](int& client, int& server) {
    ASSERT_EQ(connect_to(port, false, client), 0);
    server = ::accept(lfd, nullptr, nullptr);
    ASSERT_GE(server, 0);
    ASSERT_EQ(::write(client, "PING\r\n", 6), 6);
    std::this_thread::sleep_for(20ms);
  };
  const auto before = snap(probe).dependencies.at(0);
  int client = -1, server = -1;
  call(client, server);
  ::close(server);  // unread: a reset
  std::this_thread::sleep_for(20ms);
  ::close(client);
  const auto reset = snap(probe).dependencies.at(0);
  EXPECT_EQ(reset.resets - before.resets, 1u) << "the server closed without answering";
  EXPECT_EQ(reset.calls.stats.completed, before.calls.stats.completed);

  call(client, server);
  char buf[16];
  ASSERT_EQ(::read(server, buf, sizeof buf), 6);
  const int one = 1;
  ASSERT_EQ(::setsockopt(server, IPPROTO_TCP, TCP_CORK, &one, sizeof one), 0);
  ASSERT_EQ(::write(server, "+PONG\r\n", 7), 7);
  ::close(server);  // the FIN goes with the corked answer
  std::this_thread::sleep_for(20ms);
  const auto answered = snap(probe).dependencies.at(0);
  EXPECT_EQ(answered.calls.stats.completed - reset.calls.stats.completed, 1u) << "the answer beside the FIN";
  EXPECT_EQ(answered.resets, reset.resets);
  EXPECT_EQ(answered.calls.stats.over_target - reset.calls.stats.over_target, 1u) << "20 ms, over the 10 ms target";
  ::close(client);

  call(client, server);
  ::close(client);  // the client gives up
  const auto gave_up = snap(probe).dependencies.at(0);
  EXPECT_EQ(gave_up.resets - answered.resets, 1u) << "the client closed with its call in flight";
  EXPECT_EQ(gave_up.calls.stats.aborted - before.calls.stats.aborted, 2u);
  EXPECT_EQ(gave_up.calls.stats.errors - before.calls.stats.errors, 2u);
  EXPECT_EQ(gave_up.calls.inflight, 0u);
  ::close(server);
  ::close(lfd);
}

// Many calls in flight at once, on as many connections: each connection's
// call has a home slot from the socket's hash, and a call whose home is
// taken sits in one of the next slots, counted at its home (dependency_abi.h).
// With 1 500 calls among 16 384 slots some are certain to sit away from home
// (about 70 a round): every call must be found again at its answer, once, in
// two rounds on the same connections (the second finds the homes' counts back
// where the first left them).
TEST(DependencyEbpf, ManyCallsInFlightAtOnceAreEachEndedOnce) {
  REQUIRE_EBPF();
  constexpr int kCalls = 1500;
  rlimit files{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  if (files.rlim_cur < 2 * kCalls + 64) {
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, 2 * kCalls + 64);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &files), 0) << std::strerror(errno);
  }
  ASSERT_GE(files.rlim_cur, rlim_t{2 * kCalls + 64}) << "the test needs " << 2 * kCalls + 64 << " open files";
  int lfd = -1;
  const uint16_t port = listen_loopback(kCalls, lfd);
  ASSERT_NE(port, 0) << std::strerror(errno);
  OPEN_PROBE(probe, std::vector{spec(port, 10ms, 10s, DependencyProtocol::generic)});
  std::vector<int> clients(kCalls, -1), servers(kCalls, -1);
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_EQ(connect_to(port, false, clients[i]), 0) << i;
    servers[i] = ::accept(lfd, nullptr, nullptr);
    ASSERT_GE(servers[i], 0) << i;
  }
  const auto before = snap(probe).dependencies.at(0);
  for (int round = 1; round <= 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    for (const int c : clients) ASSERT_EQ(::write(c, "PING\r\n", 6), 6);
    const auto asked = snap(probe).dependencies.at(0);
    EXPECT_EQ(asked.calls.inflight, static_cast<uint64_t>(kCalls)) << "every call in flight, none lost to a full slot";
    char buf[16];
    for (const int s : servers) {
      ASSERT_EQ(::read(s, buf, sizeof buf), 6);
      ASSERT_EQ(::write(s, "+PONG\r\n", 7), 7);
    }
    for (const int c : clients) ASSERT_EQ(::read(c, buf, sizeof buf), 7);
    const auto answered = snap(probe).dependencies.at(0);
    EXPECT_EQ(answered.calls.stats.completed - before.calls.stats.completed, static_cast<uint64_t>(round * kCalls));
    EXPECT_EQ(answered.calls.inflight, 0u) << "a call whose answer was not matched to it stays in flight";
    EXPECT_EQ(answered.calls.stats.aborted, before.calls.stats.aborted);
  }
  for (int i = 0; i < kCalls; ++i) {
    ::close(clients[i]);
    ::close(servers[i]);
  }
  ::close(lfd);
}

// For each syscall set in turn (BTF, socket reads, raw tracepoints), whatever
// HEADROOM_EBPF_PROGRAMS says: a probe forced to it, on a generic dependency
// at a listener of this process, and a connection to that listener made
// after it opened, its client and accepted server ends handed to `body`.
template <class Body>
void for_each_syscall_set(Body body) {
  int lfd = -1;
  const uint16_t port = listen_loopback(8, lfd);
  ASSERT_NE(port, 0) << std::strerror(errno);
  for (const auto set : {probes::ProgramSet::syscalls, probes::ProgramSet::socket_reads, probes::ProgramSet::raw}) {
    SCOPED_TRACE(std::string(probes::program_set_name(set)));
    probes::DependencyProbeOptions forced;
    forced.programs = set;
    auto opened = DependencyProbe::open({spec(port, 10ms, 100ms, DependencyProtocol::generic)}, forced);
    ASSERT_TRUE(opened) << opened.error().message;
    int client = -1;
    ASSERT_EQ(connect_to(port, false, client), 0);
    const int server = ::accept(lfd, nullptr, nullptr);
    ASSERT_GE(server, 0);
    body(**opened, client, server);
    ::close(client);
    ::close(server);
  }
  ::close(lfd);
}

// The syscall programs start a call at the write's exit. On loopback the
// answer can reach the client's socket before its write returns, its arrival
// seen while no call is in flight: the read of it must end the call, neither
// leaving it in flight nor counting it twice. Made certain here by a server
// that answers before the client writes.
TEST(DependencyEbpf, SyscallProgramsEndAnAnswerThatCameBeforeTheWriteReturnedAtItsRead) {
  REQUIRE_EBPF();
  for_each_syscall_set([](DependencyProbe& probe, int client, int server) {
    const auto before = snap(probe).dependencies.at(0);
    ASSERT_EQ(::write(server, "+PONG\r\n", 7), 7);  // the answer, there before the request's write returns
    std::this_thread::sleep_for(10ms);
    ASSERT_EQ(::write(client, "PING\r\n", 6), 6);
    EXPECT_EQ(snap(probe).dependencies.at(0).calls.inflight, 1u) << "the call, from its write";
    char buf[16];
    ASSERT_EQ(::read(client, buf, sizeof buf), 7);
    const auto early = snap(probe).dependencies.at(0);
    EXPECT_EQ(early.calls.stats.completed - before.calls.stats.completed, 1u) << "ended by the read of its answer";
    EXPECT_EQ(early.calls.inflight, 0u);
    // The next call in the usual order: one more, once.
    ASSERT_EQ(::read(server, buf, sizeof buf), 6);
    ASSERT_EQ(::write(client, "PING\r\n", 6), 6);
    ASSERT_EQ(::read(server, buf, sizeof buf), 6);
    ASSERT_EQ(::write(server, "+PONG\r\n", 7), 7);
    ASSERT_EQ(::read(client, buf, sizeof buf), 7);
    const auto after = snap(probe).dependencies.at(0);
    EXPECT_EQ(after.calls.stats.completed - before.calls.stats.completed, 2u);
    EXPECT_EQ(after.calls.stats.errors, before.calls.stats.errors);
    EXPECT_EQ(after.calls.inflight, 0u);
  });
}

// The send-length programs (kernels 6.6 to 6.10) start a call as the send
// returns, the socket's lock released: on loopback the answer can be there
// first, its arrival seen while no call is in flight. The send must then end
// the call itself, at once, once, and read its HTTP status there. Made
// certain by a server that answers before the client writes; forced to the
// set whatever HEADROOM_EBPF_PROGRAMS says.
TEST(DependencyEbpf, SendLengthProgramsEndAnAnswerThatCameBeforeTheSendReturnedAtTheSend) {
  REQUIRE_EBPF();
  int lfd = -1;
  const uint16_t port = listen_loopback(8, lfd);
  ASSERT_NE(port, 0) << std::strerror(errno);
  // A server of 503s beside, whose answers teach the programs where the
  // buffers' pages are (arrived.bpf.h): the status is read from then on.
  TempDir dir(testing::tmpfs_base());
  auto web = start_test_server(dir, {"--mode", "http", "--status", "/err=503"});
  ASSERT_NE(web.port, 0);
  probes::DependencyProbeOptions forced;
  forced.programs = probes::ProgramSet::send_length;
  auto opened = DependencyProbe::open({spec(web.port, 10ms, 500ms), spec(port, 10ms, 100ms)}, forced);
  if (!opened && testing::kernel_lacks_the_set(opened.error()))
    GTEST_SKIP() << "SKIPPED: " << opened.error().message;
  ASSERT_TRUE(opened) << opened.error().message;
  DependencyProbe& probe = **opened;
  EXPECT_EQ(probe.attach_kind(), "tp_btf sockets, send length");
  EXPECT_EQ(probe.load_failures(), "");
  ASSERT_NO_FATAL_FAILURE(learn_arrived_bytes({&probe}, dir, web.port, {"/err"}));
  int client = -1;
  ASSERT_EQ(connect_to(port, false, client), 0);
  const int server = ::accept(lfd, nullptr, nullptr);
  ASSERT_GE(server, 0);
  const std::string_view unavailable = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";
  const std::string_view ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  const std::string_view request = "GET / HTTP/1.1\r\nHost: d\r\n\r\n";
  const auto n = [](std::string_view v) { return static_cast<ssize_t>(v.size()); };
  char buf[128];
  // A call in the usual order: in flight from its send to its answer.
  const auto usual_call = [&](const char* which) {
    ASSERT_EQ(::write(client, request.data(), request.size()), n(request));
    EXPECT_EQ(snap(probe).dependencies.at(1).calls.inflight, 1u) << which << ", from its send";
    ASSERT_EQ(::read(server, buf, sizeof buf), n(request));
    ASSERT_EQ(::write(server, ok.data(), ok.size()), n(ok));
    ASSERT_EQ(::read(client, buf, sizeof buf), n(ok));
  };
  // One, no error.
  const auto before = snap(probe).dependencies.at(1);
  usual_call("the first call");
  const auto usual = snap(probe).dependencies.at(1);
  EXPECT_EQ(usual.calls.stats.completed - before.calls.stats.completed, 1u);
  EXPECT_EQ(usual.calls.stats.errors, before.calls.stats.errors);
  EXPECT_EQ(usual.calls.inflight, 0u);
  // The answer first, then the send.
  ASSERT_EQ(::write(server, unavailable.data(), unavailable.size()), n(unavailable));
  std::this_thread::sleep_for(10ms);
  ASSERT_EQ(::write(client, request.data(), request.size()), n(request));
  const auto early = snap(probe).dependencies.at(1);
  EXPECT_EQ(early.calls.inflight, 0u) << "ended at the send, not left in flight";
  EXPECT_EQ(early.calls.stats.completed - usual.calls.stats.completed, 1u);
  EXPECT_EQ(early.calls.stats.errors - usual.calls.stats.errors, 1u) << "its 503, read at the send";
  EXPECT_EQ(early.calls.stats.over_target, usual.calls.stats.over_target) << "timed to its answer, not later";
  ASSERT_EQ(::read(client, buf, sizeof buf), n(unavailable));
  ASSERT_EQ(::read(server, buf, sizeof buf), n(request));
  // Its answer read, the next call is timed from its own send again.
  usual_call("the next call");
  const auto after = snap(probe).dependencies.at(1);
  EXPECT_EQ(after.calls.stats.completed - before.calls.stats.completed, 3u);
  EXPECT_EQ(after.calls.stats.errors - before.calls.stats.errors, 1u);
  EXPECT_EQ(after.calls.inflight, 0u);
  ::close(client);
  ::close(server);
  ::close(lfd);
}

// The syscall programs look at the processes that connected to a
// dependency, and at their children: a child forked after the connect that
// calls on the connection it inherited (a pool opened before a fork) is
// measured. Its parent answers as the server, on the other end.
TEST(DependencyEbpf, SyscallProgramsMeasureAChildOnTheConnectionItInherited) {
  REQUIRE_EBPF();
  constexpr int kCalls = 10;
  for_each_syscall_set([](DependencyProbe& probe, int client, int server) {
    const auto before = snap(probe).dependencies.at(0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0) << std::strerror(errno);
    if (child == 0) {  // the caller: nothing but system calls until _exit
      char b[16];
      for (int i = 0; i < kCalls; ++i)
        if (::write(client, "PING\r\n", 6) != 6 || ::read(client, b, sizeof b) != 7) ::_exit(1);
      ::_exit(0);
    }
    char buf[16];
    for (int i = 0; i < kCalls; ++i) {
      ASSERT_EQ(::read(server, buf, sizeof buf), 6);
      ASSERT_EQ(::write(server, "+PONG\r\n", 7), 7);
    }
    int status = -1;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's calls failed";
    const auto after = snap(probe).dependencies.at(0);
    EXPECT_EQ(after.calls.stats.completed - before.calls.stats.completed, static_cast<uint64_t>(kCalls))
        << "the child's calls on the inherited connection";
    EXPECT_EQ(after.calls.inflight, 0u);
  });
}

// Two clients call the same server with the same load; the dependency names
// one of them (by process name, by cgroup) and counts only its calls.
constexpr int kCallerRequests = 2500;

std::vector<std::string> caller_load(const std::string& binary, uint16_t port) {
  return load_args(binary, port, {"--mode", "line", "--requests", std::to_string(kCallerRequests), "--line", "400"});
}

void expect_only_the_caller(DependencyProbe& probe, Process& caller, Process& other) {
  const auto before = snap(probe).dependencies.at(0);
  const auto mine = run_reading(probe, caller);
  const auto theirs = finish(other);
  const auto after = snap(probe).dependencies.at(0);
  const double completed = static_cast<double>(after.calls.stats.completed - before.calls.stats.completed);
  std::cout << "[ callers ] caller " << mine.requests << ", other " << theirs.requests << ", probe " << completed
            << "\n";
  ASSERT_EQ(mine.requests, kCallerRequests) << mine.json;
  ASSERT_EQ(theirs.requests, kCallerRequests) << theirs.json;
  EXPECT_NEAR(completed, mine.requests, 0.1 * mine.requests) << "the caller's calls, not the other's";
}

TEST(DependencyEbpf, OnlyTheNamedCallerProcessCounts) {
  REQUIRE_EBPF();
  TempDir dir(testing::tmpfs_base());
  auto server = start_test_server(dir, {"--mode", "line"});
  ASSERT_NE(server.port, 0);
  // The same client under another name (its comm).
  const std::string renamed = dir / "hr-dep-caller";
  std::filesystem::copy_file(HR_TEST_LOAD_PATH, renamed);
  auto s = spec(server.port, 10ms, 100ms, DependencyProtocol::generic);
  s.caller_process = "hr-dep-caller";
  OPEN_PROBE(probe, std::vector{s});
  Process other(caller_load(HR_TEST_LOAD_PATH, server.port), dir);
  Process caller(caller_load(renamed, server.port), dir);
  expect_only_the_caller(probe, caller, other);
}

TEST(DependencyEbpf, OnlyTheProcessesOfTheNamedCgroupCount) {
  REQUIRE_EBPF();
  const std::string hierarchy = "/sys/fs/cgroup/pids";
  if (!std::filesystem::exists(hierarchy + "/cgroup.procs") && !std::filesystem::exists("/sys/fs/cgroup/cgroup.procs"))
    GTEST_SKIP() << "SKIPPED: no cgroup v1 pids hierarchy and no cgroup v2 mount at /sys/fs/cgroup";
  const bool v2 = std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers");
  const std::string group = (v2 ? std::string("/sys/fs/cgroup") : hierarchy) + "/hr-dep-test-" +
                            std::to_string(::getpid());
  ASSERT_TRUE(std::filesystem::create_directory(group)) << group;
  struct Remove {
    std::string dir;
    ~Remove() { std::filesystem::remove(dir); }
  } remove{group};
  TempDir dir(testing::tmpfs_base());
  auto server = start_test_server(dir, {"--mode", "line"});
  ASSERT_NE(server.port, 0);
  auto s = spec(server.port, 10ms, 100ms, DependencyProtocol::generic);
  s.caller_cgroup = group;
  OPEN_PROBE(probe, std::vector{s});
  // The caller moves itself into the cgroup, waits for a renewal, then runs the client.
  std::string cmd = "echo $$ > " + group + "/cgroup.procs && sleep 0.3 && exec";
  for (const auto& a : caller_load(HR_TEST_LOAD_PATH, server.port)) cmd += " '" + a + "'";
  Process caller({"/bin/sh", "-c", cmd}, dir);
  Process other(caller_load(HR_TEST_LOAD_PATH, server.port), dir);
  expect_only_the_caller(probe, caller, other);
}

// A port that is both an endpoint of this node (its server here) and a
// dependency of a local client: the endpoint probe counts the server's side,
// the dependency probe the client's, each every call once.
TEST(DependencyEbpf, AnEndpointPortIsMeasuredOnBothSidesOnce) {
  REQUIRE_EBPF();
  TempDir dir(testing::tmpfs_base());
  auto server = start_test_server(dir, {"--mode", "line"});
  ASSERT_NE(server.port, 0);
  auto any_host = spec(server.port, 10ms, 100ms, DependencyProtocol::generic);
  any_host.address.reset();
  OPEN_PROBE(probe, std::vector{any_host});
  probes::EndpointSpec ep;
  ep.port = server.port;
  ep.target_ns = 10'000'000;
  ep.max_ns = 100'000'000;
  auto endpoint = probes::EndpointProbe::open({ep}, {});
  ASSERT_TRUE(endpoint) << endpoint.error().message;
  probes::EndpointSnapshot e0, e1;
  ASSERT_TRUE((*endpoint)->read(e0, now_ns()));
  const auto before = snap(probe).dependencies.at(0);
  Process load(load_args(HR_TEST_LOAD_PATH, server.port,
                         {"--mode", "line", "--connections", "2", "--requests", "2000", "--line", "100"}),
               dir);
  const auto client = finish(load);
  ASSERT_TRUE((*endpoint)->read(e1, now_ns()));
  const auto after = snap(probe).dependencies.at(0);
  const auto dep_completed = after.calls.stats.completed - before.calls.stats.completed;
  const auto ep_completed = e1.endpoints.at(0).stats.completed - e0.endpoints.at(0).stats.completed;
  std::cout << "[ both sides ] client " << client.requests << ", dependency " << dep_completed << ", endpoint "
            << ep_completed << " (" << (*endpoint)->attach_kind() << ")\n";
  ASSERT_EQ(client.requests, 2000) << client.json;
  EXPECT_EQ(dep_completed, 2000u) << "the client's calls, once each (not the server's answers)";
  EXPECT_NEAR(static_cast<double>(ep_completed), 2000, 20) << "the endpoint still counts the server's side";
  EXPECT_EQ(after.calls.stats.errors - before.calls.stats.errors, 0u);
}

TEST(DependencyEbpf, OpenRefusesWhatItCannotMeasureSayingWhy) {
  REQUIRE_EBPF();
  // HTTP/2 is measured by every program set (dependency_http2_test.cc): an
  // http2 dependency opens with the best set the kernel has...
  auto h2 = spec(8080, 10ms, 100ms, DependencyProtocol::http2);
  auto r = DependencyProbe::open({h2}, {});
  if (!r && headroom::testing::kernel_lacks_the_set(r.error()))
    GTEST_SKIP() << "SKIPPED: " << r.error().message;
  EXPECT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)->attach_kind(), "tp_btf sockets");
  // ...and with each syscall set forced, beside an HTTP/1 one.
  for (const auto set : {probes::ProgramSet::syscalls, probes::ProgramSet::socket_reads, probes::ProgramSet::raw}) {
    probes::DependencyProbeOptions forced;
    forced.programs = set;
    auto s = DependencyProbe::open({spec(8081, 10ms, 100ms), h2}, forced);
    ASSERT_TRUE(s) << probes::program_set_name(set) << ": " << s.error().message;
    EXPECT_EQ((*s)->attach_kind(), set == probes::ProgramSet::raw            ? "raw_tp syscalls"
                                   : set == probes::ProgramSet::socket_reads ? "tp_btf syscalls, socket reads"
                                                                             : "tp_btf syscalls");
    EXPECT_EQ((*s)->load_failures(), "");
  }
  // Two dependencies on one peer are refused, naming it.
  auto twice = DependencyProbe::open({spec(8080, 10ms, 100ms), spec(8080, 20ms, 200ms)}, {});
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("127.0.0.1 port 8080"), std::string::npos) << twice.error().message;
}

}  // namespace
}  // namespace headroom
