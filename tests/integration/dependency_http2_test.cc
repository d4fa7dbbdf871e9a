// SPDX-License-Identifier: Apache-2.0
// HTTP/2 dependencies (protocol = http2, probes/ebpf/dependency_http2.bpf.h)
// on the real kernel: a real gRPC client (python3-grpcio, one channel: one
// connection carrying many streams at once) calls a real gRPC server
// (tests/http2/grpc_peer.py), and what the probe counts on the calling side
// is compared with what the client measured for each call.
//
// Needs root (eBPF), a kernel with BTF and python3-grpcio; without them
// every test skips, saying so. The socket programs walk the streams on 6.11+,
// the syscall programs on older kernels (ctest runs these again with
// HEADROOM_EBPF_PROGRAMS=syscalls and =raw; =socket-reads by hand).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dependency_probe_support.h"
#include "probes/dependency_probe.h"
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
using testing::TempDir;

const std::string kPython = "/usr/bin/python3";

std::string peer_script() { return std::string(HEADROOM_SOURCE_DIR) + "/tests/http2/grpc_peer.py"; }

#define REQUIRE_EBPF_AND_GRPC()                                                                   \
  do {                                                                                            \
    HR_REQUIRE_EBPF();                                                                            \
    if (std::system((kPython + " -c 'import grpc' 2>/dev/null").c_str()) != 0)                  \
      GTEST_SKIP() << "SKIPPED: python3-grpcio is missing (Debian package python3-grpcio)";     \
  } while (0)

// A gRPC dependency on `port` of any host.
DependencySpec spec(uint16_t port, std::chrono::milliseconds target, std::chrono::milliseconds max) {
  return testing::dependency_spec(port, target, max, DependencyProtocol::http2);
}

// The probe, with the program set HEADROOM_EBPF_PROGRAMS names really
// attached.
#define OPEN_PROBE(var, specs)          \
  HR_OPEN_DEPENDENCY_PROBE(var, specs); \
  ASSERT_EQ(var.attach_kind(), testing::expected_kind())

DependencySnapshot snap(DependencyProbe& p) { return testing::read_now(p); }

// The gRPC server, listening on a port of its choice.
struct Server {
  std::unique_ptr<Process> proc;
  uint16_t port = 0;
};

Server start_server(const TempDir& dir) {
  Server s;
  s.proc = std::make_unique<Process>(std::vector<std::string>{kPython, peer_script(), "server", "0"}, dir);
  testing::eventually([&] { return s.proc->out().find("port=") != std::string::npos; }, 20s);
  const auto out = s.proc->out();
  const auto at = out.find("port=");
  if (at != std::string::npos) s.port = static_cast<uint16_t>(std::atoi(out.c_str() + at + 5));
  return s;
}

// What the client wrote: calls, errors, and its latencies in ms.
struct Client {
  double calls = -1, errors = -1;
  std::vector<double> latencies_ms;
};

double json_number(const std::string& json, const std::string& key) {
  const auto at = json.find("\"" + key + "\":");
  return at == std::string::npos ? -1 : std::strtod(json.c_str() + at + key.size() + 3, nullptr);
}

Client read_client(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string json = ss.str();
  Client c;
  c.calls = json_number(json, "calls");
  c.errors = json_number(json, "errors");
  const auto at = json.find("\"latencies_ms\": [");
  if (at != std::string::npos) {
    const char* p = json.c_str() + at + 17;
    while (*p && *p != ']') {
      char* end = nullptr;
      const double v = std::strtod(p, &end);
      if (end == p) break;
      c.latencies_ms.push_back(v);
      p = end;
      while (*p == ',' || *p == ' ') ++p;
    }
  }
  return c;
}

std::vector<std::string> client_args(uint16_t port, const std::string& seconds, int concurrency, const std::string& out,
                                     int slow, int errors, int timeout_ms = 10000) {
  return {kPython, peer_script(), "client", std::to_string(port), seconds, std::to_string(concurrency), out,
          "--slow", std::to_string(slow), "--errors", std::to_string(errors), "--timeout-ms",
          std::to_string(timeout_ms)};
}

Client run_client(const TempDir& dir, std::vector<std::string> args, const std::string& out) {
  Process p(std::move(args), dir);
  EXPECT_EQ(p.wait(60s), std::optional<int>(0)) << p.out() << p.err();
  return read_client(out);
}

// Opens and closes loopback connections of a family (the client side first,
// so they pass through TIME_WAIT): its socket caches get the partially used
// slabs from which the programs learn where the kernel maps pages
// (arrived.bpf.h), as a node's other traffic would give them. gRPC's C core
// connects with AF_INET6 sockets, even to an IPv4 address.
void churn_connections(int family) {
  const int lfd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_storage ss{};
  socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_loopback;
  }
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  if (::bind(lfd, sa, len) != 0 || ::listen(lfd, 256) != 0 || ::getsockname(lfd, sa, &len) != 0) {
    ::close(lfd);
    return;
  }
  std::vector<int> fds;
  for (int i = 0; i < 200; ++i) {
    const int c = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(c, sa, len) != 0) {
      ::close(c);
      break;
    }
    fds.push_back(c);
    fds.push_back(::accept(lfd, nullptr, nullptr));
  }
  for (std::size_t i = 0; i < fds.size(); i += 2) ::close(fds[i]);
  for (std::size_t i = 1; i < fds.size(); i += 2) ::close(fds[i]);
  ::close(lfd);
}

// The programs read the server's frames in the arrived bytes once they have
// learnt where the kernel maps pages (arrived.bpf.h): short runs until the
// streams are seen to end.
void warm_up(DependencyProbe& probe, const TempDir& dir, uint16_t port) {
  const auto out = dir.path() + "/warm.json";
  const auto learning = std::chrono::steady_clock::now();
  int run = 0;
  for (; snap(probe).dependencies.at(0).calls.stats.completed < 50; ++run) {
    ASSERT_LT(std::chrono::steady_clock::now() - learning, 30s)
        << "no streams ended after " << run << " short runs: the programs did not read the server's frames";
    churn_connections(AF_INET6);
    churn_connections(AF_INET);
    (void)run_client(dir, client_args(port, "0.3", 4, out, 0, 0), out);
  }
  std::cout << "[ warm-up ] server frames read after " << run << " short runs, "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - learning).count()
            << " ms\n";
}

TEST(DependencyHttp2, GrpcShareCountAndErrorsMatchTheClient) {
  REQUIRE_EBPF_AND_GRPC();
  TempDir dir(testing::tmpfs_base());
  auto server = start_server(dir);
  ASSERT_NE(server.port, 0) << server.proc->out() << server.proc->err();
  OPEN_PROBE(probe, std::vector{spec(server.port, 20ms, 500ms)});
  warm_up(probe, dir, server.port);
  const auto before = snap(probe);
  const auto out = dir.path() + "/client.json";
  // 8 calls in flight on one channel; 20 % slow (40 ms, over the 20 ms
  // target), 5 % failing with status INTERNAL.
  const auto client = run_client(dir, client_args(server.port, "4", 8, out, 20, 5), out);
  const auto after = snap(probe);
  const auto& b = before.dependencies.at(0);
  const auto& a = after.dependencies.at(0);
  const double completed = static_cast<double>(a.calls.stats.completed - b.calls.stats.completed);
  const double over = static_cast<double>(a.calls.stats.over_target - b.calls.stats.over_target);
  const auto errors = a.calls.stats.errors - b.calls.stats.errors;
  double client_over = 0;
  for (double ms : client.latencies_ms) client_over += ms > 20.0;
  client_over /= static_cast<double>(client.latencies_ms.size());
  std::cout << "[ grpc ] client calls " << client.calls << " errors " << client.errors << " over target "
            << client_over << "\n[ grpc ] probe completed " << completed << " over target " << over / completed
            << " errors " << errors << " aborted " << a.calls.stats.aborted - b.calls.stats.aborted
            << "\n[ grpc ] http2 frames " << after.http2.frames - before.http2.frames << " streams "
            << after.http2.streams - before.http2.streams << " dropped " << after.http2.dropped - before.http2.dropped
            << " desyncs " << after.http2.desyncs - before.http2.desyncs << " resyncs "
            << after.http2.resyncs - before.http2.resyncs << " lost " << after.http2.lost - before.http2.lost << " hpack lost "
            << after.http2.hpack_lost - before.http2.hpack_lost
            << "\n";
  ASSERT_GT(client.calls, 300) << "calls the client made";
  EXPECT_NEAR(completed, client.calls, 0.1 * client.calls) << "completed streams vs the client's calls";
  EXPECT_NEAR(over / completed, client_over, 0.02) << "share over the 20 ms target vs the client's";
  EXPECT_NEAR(client_over, 0.2, 0.05) << "the server's slow share is what the test meant";
  EXPECT_EQ(static_cast<double>(errors), client.errors) << "every non-OK grpc-status the client got, nothing else";
  EXPECT_GT(client.errors, 0) << "the test meant 5 % of the calls to fail";
  EXPECT_EQ(after.http2.dropped - before.http2.dropped, 0u) << "8 streams in flight fit the connection's entries";
  EXPECT_EQ(after.http2.desyncs - before.http2.desyncs, 0u) << "the frames of both directions followed throughout";
  EXPECT_EQ(a.resets - b.resets, 0u);
}

// Calls past the client's deadline (25 ms, against answers of 40 ms): the
// client resets their streams (RST_STREAM), or the server, which knows the
// deadline, answers DEADLINE_EXCEEDED first. Either way each is an error, as
// the client counts it, and no call of the channel is left in flight.
TEST(DependencyHttp2, CancelledStreamsAreErrorsAsTheClientCountsThem) {
  REQUIRE_EBPF_AND_GRPC();
  TempDir dir(testing::tmpfs_base());
  auto server = start_server(dir);
  ASSERT_NE(server.port, 0) << server.proc->out() << server.proc->err();
  OPEN_PROBE(probe, std::vector{spec(server.port, 20ms, 500ms)});
  warm_up(probe, dir, server.port);
  const auto before = snap(probe);
  const auto out = dir.path() + "/client.json";
  const auto client = run_client(dir, client_args(server.port, "3", 8, out, 20, 0, 25), out);
  const auto after = snap(probe);
  const auto& b = before.dependencies.at(0);
  const auto& a = after.dependencies.at(0);
  const auto errors = a.calls.stats.errors - b.calls.stats.errors;
  const auto resets = a.resets - b.resets;
  const auto calls = a.calls.stats.completed + a.calls.stats.aborted - b.calls.stats.completed - b.calls.stats.aborted;
  std::cout << "[ cancel ] client calls " << client.calls << " errors " << client.errors << "\n[ cancel ] probe calls "
            << calls << " errors " << errors << " resets " << resets << " in flight " << a.calls.inflight << "\n";
  ASSERT_GT(client.calls, 300);
  EXPECT_NEAR(client.errors, 0.2 * client.calls, 0.05 * client.calls) << "the slow fifth passed its deadline";
  EXPECT_NEAR(static_cast<double>(calls), client.calls, 0.1 * client.calls);
  EXPECT_NEAR(static_cast<double>(errors), client.errors, 0.02 * client.errors) << "each cancelled call an error";
  EXPECT_EQ(a.calls.inflight, 0u) << "a reset stream is no longer in flight";
}

// A channel connected before the probe was loaded: its frame boundaries are
// unknown at first, and each direction syncs at a piece that starts with a
// plausible frame header; its streams are measured from then on.
TEST(DependencyHttp2, AChannelOlderThanTheProbeIsMeasuredOnceSynced) {
  REQUIRE_EBPF_AND_GRPC();
  TempDir dir(testing::tmpfs_base());
  auto server = start_server(dir);
  ASSERT_NE(server.port, 0) << server.proc->out() << server.proc->err();
  const auto out = dir.path() + "/client.json";
  Process client(client_args(server.port, "8", 8, out, 0, 0), dir);  // killed at the end, measured or not
  std::this_thread::sleep_for(1s);
  OPEN_PROBE(probe, std::vector{spec(server.port, 20ms, 500ms)});
  const auto learning = std::chrono::steady_clock::now();
  while (snap(probe).dependencies.at(0).calls.stats.completed == 0 &&
         std::chrono::steady_clock::now() - learning < 2s) {
    churn_connections(AF_INET6);  // the programs learn where pages are mapped (see warm_up)
    std::this_thread::sleep_for(20ms);
  }
  const auto before = snap(probe);
  std::this_thread::sleep_for(1s);
  const auto after = snap(probe);
  ASSERT_TRUE(client.running()) << "the client ran through the measured second: " << client.err();
  const auto& b = before.dependencies.at(0);
  const auto& a = after.dependencies.at(0);
  const auto completed = a.calls.stats.completed - b.calls.stats.completed;
  std::cout << "[ older ] completed " << completed << " in a second; resyncs " << after.http2.resyncs
            << " desyncs " << after.http2.desyncs << " lost " << after.http2.lost
            << " dropped " << after.http2.dropped << " in flight " << a.calls.inflight << "\n";
  EXPECT_GT(completed, 300u) << "the channel's calls measured once synced";
  EXPECT_GE(after.http2.resyncs, 2u) << "both directions synced mid-stream";
  EXPECT_EQ(a.calls.stats.errors - b.calls.stats.errors, 0u);
  EXPECT_LE(a.calls.inflight, 8u) << "no stream opened before the server's side synced stays in flight";
}

// A stopped gRPC server: the channel's streams stay in flight and age past
// max, so the share over max in the latest interval reaches 1.0.
TEST(DependencyHttp2, AStoppedGrpcServerDrivesTheShareOverMaxToOne) {
  REQUIRE_EBPF_AND_GRPC();
  TempDir dir(testing::tmpfs_base());
  auto server = start_server(dir);
  ASSERT_NE(server.port, 0) << server.proc->out() << server.proc->err();
  OPEN_PROBE(probe, std::vector{spec(server.port, 20ms, 100ms)});
  warm_up(probe, dir, server.port);
  const auto out = dir.path() + "/client.json";
  Process client(client_args(server.port, "4", 8, out, 0, 0), dir);
  std::this_thread::sleep_for(1500ms);
  testing::ContinueAtExit resume{server.proc->pid()};
  const auto prev = snap(probe).dependencies.at(0);
  server.proc->signal(SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  const auto r = testing::share_over_max_after_stop(probe, prev, stopped);
  EXPECT_EQ(r.share, 1.0);
  EXPECT_EQ(r.inflight, 8u) << "the client's 8 calls in flight, streams of one connection";
  EXPECT_LE(r.took, 100ms + 2 * 100ms + 300ms) << "max + two read intervals (+ slack for a busy machine)";
  server.proc->signal(SIGCONT);
  (void)client.wait(60s);
}

// HTTP/2 statuses and the error rule: nghttpd (Debian's nghttp2-server)
// answers 404 for a file it lacks; h2load (nghttp2-client) asks for a file it
// has and one it lacks in turn, 8 streams at a time on one connection. Two
// probes watch the same streams: under the default rule (connect, reset,
// 5xx) no call is an error; under "connect+reset+4xx" each measured 404 is.
TEST(DependencyHttp2, FourHundredsAreErrorsWhereTheRuleSaysSo) {
  HR_REQUIRE_EBPF();
  const std::string nghttpd = "/usr/sbin/nghttpd", h2load = "/usr/bin/h2load";
  if (::access(nghttpd.c_str(), X_OK) != 0 || ::access(h2load.c_str(), X_OK) != 0)
    GTEST_SKIP() << "SKIPPED: nghttpd or h2load is missing (Debian packages nghttp2-server, nghttp2-client)";
  TempDir dir(testing::tmpfs_base());
  const std::string www = dir.path() + "/www";
  std::filesystem::create_directories(www);
  std::ofstream(www + "/ok") << "ok\n";
  uint16_t port = 0;
  {  // a port the kernel picks, free again for nghttpd
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
    ::close(fd);
  }
  ASSERT_NE(port, 0);
  Process server({nghttpd, "--no-tls", "-d", www, "--address", "127.0.0.1", std::to_string(port)}, dir);
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  auto client_errors = spec(port, 20ms, 500ms);
  client_errors.errors.status_5xx = false;
  client_errors.errors.status_4xx = true;
  OPEN_PROBE(five, std::vector{spec(port, 20ms, 500ms)});
  OPEN_PROBE(four, std::vector{client_errors});
  const auto run = [&](const std::string& requests) {
    Process load({h2load, "-n", requests, "-c", "1", "-m", "8", base + "/ok", base + "/missing"}, dir);
    EXPECT_EQ(load.wait(60s), std::optional<int>(0)) << load.out() << load.err();
    return load.out();
  };
  // The server's header blocks are read where they arrived, once the
  // programs have learnt where the kernel maps pages (see warm_up).
  const auto learning = std::chrono::steady_clock::now();
  while (snap(four).dependencies.at(0).calls.stats.errors == 0) {
    ASSERT_LT(std::chrono::steady_clock::now() - learning, 30s) << "no 404 read: the programs did not read the frames";
    churn_connections(AF_INET6);
    churn_connections(AF_INET);
    (void)run("40");
  }
  const auto b5 = snap(five).dependencies.at(0), b4 = snap(four).dependencies.at(0);
  const std::string out = run("1000");
  const auto a5 = snap(five).dependencies.at(0), a4 = snap(four).dependencies.at(0);
  const auto errors5 = a5.calls.stats.errors - b5.calls.stats.errors;
  const auto errors4 = a4.calls.stats.errors - b4.calls.stats.errors;
  const auto completed = a4.calls.stats.completed - b4.calls.stats.completed;
  const auto h = snap(four).http2;
  std::cout << "[ rule ] 1000 requests, half of them 404: completed " << completed << ", 5xx rule " << errors5
            << " errors, 4xx rule " << errors4 << "; walks: " << h.streams << " streams, " << h.dropped
            << " dropped, " << h.desyncs << " desyncs, " << h.resyncs << " resyncs, " << h.lost << " lost, "
            << h.hpack_lost << " hpack lost\n";
  EXPECT_NE(out.find("1000 done"), std::string::npos) << out;
  EXPECT_NE(out.find("500 2xx, 0 3xx, 500 4xx, 0 5xx"), std::string::npos) << "h2load's own count: " << out;
  // A walk that loses the server's frames (a piece it cannot read, see
  // "Limits" in docs/dependencies.md) gives up the streams in flight, 8 at a
  // time here, half of them 404s: most streams are measured, and of those
  // measured, the 404s are errors under "4xx" and under no other rule.
  EXPECT_GE(completed, 900u) << "at most a tenth of the streams lost with the frames";
  EXPECT_GE(a5.calls.stats.completed - b5.calls.stats.completed, 900u);
  EXPECT_EQ(errors5, 0u) << "a 404 is no error under the default rule";
  EXPECT_NEAR(static_cast<double>(errors4), static_cast<double>(completed) / 2, 4)
      << "each measured 404 under \"connect+reset+4xx\"";
}

}  // namespace
}  // namespace headroom
