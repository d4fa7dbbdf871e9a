// SPDX-License-Identifier: Apache-2.0
// bench_retry: what the retry budget costs a call (orca/retry_budget.h): one
// record_first_attempt and one may_retry per call, every call asking for a
// retry (the budget soon runs full, so most are denied: an overloaded
// target, the case the budget is for), priorities 1-100 in turn.
//
// Alone, then 8 threads on one budget (one target), in interleaved rounds;
// the median of each. With more threads than CPUs, wall time per call counts
// the waiting for a CPU too, so both sides are measured in the thread's own
// CPU time (CLOCK_THREAD_CPUTIME_ID): what contention on the budget's cache
// lines adds, not the time-sharing. Each thread's clock advances 1 us per call.
//
//   bench_retry [--rounds N (7)] [--calls N (1000000, per thread)] [--threads N (8)]
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "headroom/orca/retry_budget.h"

namespace {

using namespace headroom::orca;

constexpr double kGoalNs = 50.0;
constexpr double kGoalRatio = 2.0;
constexpr int64_t kMonoBase = 1000LL * 1'000'000'000;

int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::atomic<long> g_sink{0};  // keeps the decisions alive

// CPU ns per call of one thread's loop; `granted` gets the retries that went.
double calls_loop(RetryBudget& budget, long calls, int thread, long& granted) {
  long ok = 0;
  const int64_t t0 = thread_cpu_ns();
  for (long i = 0; i < calls; ++i) {
    const int64_t now = kMonoBase + i * 1000 + thread;
    budget.record_first_attempt(now);
    ok += budget.may_retry(static_cast<int>((i + thread * 17) % 100) + 1, 1, now) == RetryDecision::retry ? 1 : 0;
  }
  const double ns = static_cast<double>(thread_cpu_ns() - t0) / static_cast<double>(calls);
  granted += ok;
  return ns;
}

struct Round {
  double ns = 0;       // CPU ns per call, the mean over the threads
  double wall_ns = 0;  // wall ns per call over all threads' calls
  long granted = 0;
  long calls = 0;
};

Round run_round(int threads, long calls) {
  auto budget = std::make_unique<RetryBudget>();
  std::vector<double> ns(static_cast<std::size_t>(threads));
  std::vector<long> granted(static_cast<std::size_t>(threads));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      ns[static_cast<std::size_t>(t)] = calls_loop(*budget, calls, t, granted[static_cast<std::size_t>(t)]);
    });
  while (ready.load() < threads) std::this_thread::yield();
  const int64_t w0 = headroom::bench::monotonic_ns();
  go = true;
  for (auto& th : pool) th.join();
  const int64_t wall = headroom::bench::monotonic_ns() - w0;
  Round r;
  r.calls = calls * threads;
  for (int t = 0; t < threads; ++t) {
    r.ns += ns[static_cast<std::size_t>(t)] / threads;
    r.granted += granted[static_cast<std::size_t>(t)];
  }
  r.wall_ns = static_cast<double>(wall) / static_cast<double>(r.calls);
  g_sink += r.granted;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const headroom::bench::Flags flags(argc, argv);
  if (flags.has("--help")) {
    std::printf("usage: bench_retry [--rounds N (7)] [--calls N (1000000, per thread)] [--threads N (8)]\n");
    return 0;
  }
  const long rounds = std::max(1L, flags.get_long("--rounds", 7));
  const long calls = std::max(1000L, flags.get_long("--calls", 1'000'000));
  const int threads = static_cast<int>(std::clamp(flags.get_long("--threads", 8), 2L, 256L));
  const unsigned cpus = std::thread::hardware_concurrency();

  std::printf("bench_retry: record_first_attempt + may_retry, CPU ns per call, median of %ld interleaved rounds of "
              "%ld calls per thread (%u CPUs)\n", rounds, calls, cpus);
  std::vector<double> alone, many, alone_wall, many_wall;
  double granted_share = 0;
  for (long r = 0; r < rounds; ++r) {
    const Round a = run_round(1, calls);
    const Round m = run_round(threads, calls);
    alone.push_back(a.ns);
    many.push_back(m.ns);
    alone_wall.push_back(a.wall_ns);
    many_wall.push_back(m.wall_ns);
    granted_share = static_cast<double>(m.granted) / static_cast<double>(m.calls);
  }
  const double a = median(alone), m = median(many), ratio = m / a;
  std::printf("  %-34s %10s %16s\n", "", "CPU ns/call", "wall ns/call");
  std::printf("  %-34s %10.1f %16.1f\n", "1 thread", a, median(alone_wall));
  std::printf("  %2d threads, one budget             %10.1f %16.1f   (all threads' calls)\n", threads, m,
              median(many_wall));
  std::printf("  ratio %d threads / 1 thread: %.2f   (retries granted: %.1f %% of calls)\n", threads, ratio,
              100.0 * granted_share);
  const bool ok = a < kGoalNs && ratio <= kGoalRatio;
  std::printf("goal: under %.0f ns alone (%.1f), at most %.0fx that with %d threads (%.2fx): %s\n", kGoalNs, a,
              kGoalRatio, threads, ratio, headroom::bench::verdict(ok));
  return ok ? 0 : 1;
}
