// SPDX-License-Identifier: Apache-2.0
// bench_loadgen: the cost of the open-loop load engine behind `headroomctl
// buffer` (agent/ctl/loadgen.h), i.e. whether the client can offer a rate without
// becoming the bottleneck it is meant to measure.
//
// The benchmark pins itself to CPU 0 and hr-test-server (no delay, so the
// server is as cheap as it gets) to CPU 1, then offers increasing rates for a
// few seconds each. Per rate: responses per second achieved, the engine's own
// CPU time per request (the process has one thread: the engine's), and how
// late requests left against their schedule (send lag). The last line names
// the highest rate at which at least 99 % were answered with send lag p99
// under 1 ms.
//
//   bench_loadgen [HR_TEST_SERVER] [--seconds N] [--rates 2000,5000,...]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/ctl/loadgen.h"

namespace {

namespace lg = headroom::ctl::loadgen;

double tv_seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; }

// User and system CPU of the process so far.
std::pair<double, double> rusage_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return {tv_seconds(ru.ru_utime), tv_seconds(ru.ru_stime)};
}

double cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

struct Server {
  pid_t pid = -1;
  uint16_t port = 0;
};

// hr-test-server on an ephemeral port, pinned to `cpu` (-1: not pinned).
Server start_server(const std::string& path, int cpu) {
  int out[2];
  if (::pipe(out) != 0) return {};
  Server s;
  s.pid = ::fork();
  if (s.pid == 0) {
    if (cpu >= 0) pin_to(cpu);
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    ::execl(path.c_str(), path.c_str(), "--port", "0", static_cast<char*>(nullptr));
    std::perror("bench_loadgen: exec hr-test-server");
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  char c;
  while (line.size() < 64 && ::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  if (line.starts_with("port=")) s.port = static_cast<uint16_t>(std::atoi(line.c_str() + 5));
  return s;
}

std::vector<double> parse_rates(const std::string& text) {
  std::vector<double> rates;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto comma = text.find(',', pos);
    rates.push_back(std::atof(text.substr(pos, comma - pos).c_str()));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return rates;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef HR_TEST_SERVER_PATH
  std::string server_path = HR_TEST_SERVER_PATH;
#else
  std::string server_path;
#endif
  double seconds = 3;
  std::vector<double> rates = {2000, 5000, 10000, 20000, 40000};
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (a == "--rates" && i + 1 < argc) {
      rates = parse_rates(argv[++i]);
    } else if (!a.starts_with("--")) {
      server_path = argv[i];
    } else {
      std::fprintf(stderr, "usage: %s [HR_TEST_SERVER] [--seconds N] [--rates R1,R2,...]\n", argv[0]);
      return 2;
    }
  }
  if (server_path.empty() || seconds <= 0 || rates.empty()) {
    std::fprintf(stderr, "usage: %s HR_TEST_SERVER [--seconds N] [--rates R1,R2,...]\n", argv[0]);
    return 2;
  }

  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  const bool pinned = cpus >= 2 && pin_to(0);
  const Server server = start_server(server_path, pinned ? 1 : -1);
  if (server.port == 0) {
    std::fprintf(stderr, "bench_loadgen: %s printed no port=<n> line\n", server_path.c_str());
    return 1;
  }

  std::printf("# bench_loadgen: the load engine against hr-test-server (no delay), %.0f s per rate\n\n", seconds);
  std::printf("engine on CPU 0, server on CPU 1: %s; %ld CPUs online\n\n", pinned ? "pinned" : "NOT pinned", cpus);
  std::printf(
      "| offered req/s | requests | answered | achieved resp/s | engine CPU s (user + sys) | CPU us/request "
      "| CPU %% of a core | send lag p50 us | p99 us | max us | peak conns |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);

  double best = 0;
  for (const double rate : rates) {
    lg::Options o;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(server.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::memcpy(&o.target.addr, &a, sizeof a);
    o.target.addr_len = sizeof a;
    o.target.host_header = "127.0.0.1:" + std::to_string(server.port);
    o.phases = {{std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9)), rate}};
    o.classes = {{"CRITICAL", 1}, {"DEFAULT", 3}};
    o.timeout = std::chrono::seconds(1);
    o.start = lg::Clock::now() + std::chrono::milliseconds(10);

    const auto ru0 = rusage_seconds();
    const double cpu0 = cpu_seconds();
    const auto wall0 = lg::Clock::now();
    auto run = lg::run(o);
    if (!run) {
      std::fprintf(stderr, "bench_loadgen: %s\n", run.error().message.c_str());
      return 1;
    }
    const lg::RunResult r = std::move(run).value();
    const double wall = std::chrono::duration<double>(lg::Clock::now() - wall0).count();
    const double cpu = cpu_seconds() - cpu0;
    const auto ru1 = rusage_seconds();
    const double user = ru1.first - ru0.first, sys = ru1.second - ru0.second;

    std::size_t ok = 0;
    for (const auto& rec : r.records) ok += rec.outcome == lg::Outcome::response && rec.status == 200;
    const auto n = static_cast<double>(r.records.size());
    const double answered = n > 0 ? static_cast<double>(ok) / n : 0;
    const double lag_p99_us = static_cast<double>(r.send_lag_p99_ns) / 1e3;
    if (answered >= 0.99 && lag_p99_us < 1000) best = std::max(best, rate);
    std::printf("| %.0f | %zu | %.2f %% | %.0f | %.3f (%.3f + %.3f) | %.2f | %.1f %% | %.1f | %.1f | %.1f | %d |\n",
                rate, r.records.size(), 100 * answered, static_cast<double>(ok) / seconds, cpu, user, sys,
                n > 0 ? cpu / n * 1e6 : 0, 100 * cpu / wall, static_cast<double>(r.send_lag_p50_ns) / 1e3, lag_p99_us,
                static_cast<double>(r.send_lag_max_ns) / 1e3, r.peak_connections);
    std::fflush(stdout);
    if (!r.first_error.empty()) std::printf("  (first error: %s)\n", r.first_error.c_str());
  }
  std::printf("\nhighest rate with >= 99 %% answered and send lag p99 < 1 ms: %.0f req/s%s\n", best,
              best == 0 ? " (none)" : "");

  ::kill(server.pid, SIGTERM);
  int st = 0;
  ::waitpid(server.pid, &st, 0);
  return 0;
}
