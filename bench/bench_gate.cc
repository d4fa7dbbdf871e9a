// SPDX-License-Identifier: Apache-2.0
// bench_gate: what the dependency gate's per-call decision costs
// (orca/dependency_gate.h), in each state the gate can be in, alone and with
// a second thread calling update() as fast as it can (an agent publishes
// every 100 ms; flat out is the worst case for the cache line decide()
// reads). Side by side, the same loop around the reference shedder's
// should_drop() (a table lookup) and around clock_gettime(CLOCK_MONOTONIC),
// what reading a clock per call would add. The median of several rounds.
//
//   bench_gate [--rounds N (7)] [--calls N (2000000)]
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "headroom/orca/dependency_gate.h"
#include "headroom/orca/shedder.h"

namespace {

using namespace headroom::orca;

constexpr double kGoalNs = 100.0;
constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kUnixBase = 1'700'000'000'000;
constexpr int64_t kMonoBase = 1000 * kS;

DependencyFigures figures(double errors, double concurrency, double calls) {
  DependencyFigures f;
  f.errors = errors;
  f.concurrency = concurrency;
  f.window_calls = calls;
  f.window_seconds = 0.5;
  f.interval_ms = 100;
  f.timestamp_ms = kUnixBase;
  return f;
}

struct Case {
  const char* name;
  GateState expect;  // of CRITICAL's bucket, checked before and after the loop
  // Brings a gate into the state, at kMonoBase; returns what the updater feeds.
  std::function<DependencyFigures(DependencyGate&)> prepare;
};

const Case kCases[] = {
    {"closed", GateState::closed, [](DependencyGate& g) {
       g.update(figures(0, 0.1, 100), kUnixBase, kMonoBase);
       return figures(0, 0.1, 100);
     }},
    {"open", GateState::open, [](DependencyGate& g) {
       g.update(figures(1, 0, 100), kUnixBase, kMonoBase);
       return figures(1, 0, 100);
     }},
    {"half-open (trickle)", GateState::half_open, [](DependencyGate& g) {
       // Opened open_for ago: half-open now, with no evidence yet.
       // Opened open_for ago, reports every 100 ms since: half-open now, no evidence yet.
       const int64_t open_for_ms = g.options().open_for_ms;
       for (int64_t ms = -open_for_ms; ms <= 0; ms += 100) {
         DependencyFigures f = figures(1, 0, ms == -open_for_ms ? 100 : 0);
         f.timestamp_ms = kUnixBase + ms;
         g.update(f, kUnixBase + ms, kMonoBase + ms * 1'000'000);
       }
       return figures(1, 0, 0);
     }},
    {"bulkhead full", GateState::closed, [](DependencyGate& g) {
       g.update(figures(0, 1.0, 100), kUnixBase, kMonoBase);
       return figures(0, 1.0, 100);
     }},
    {"no data (stale: fail open)", GateState::no_data, [](DependencyGate& g) {
       DependencyFigures f = figures(1, 1.0, 100);
       f.timestamp_ms = kUnixBase - 60'000;
       g.update(f, kUnixBase, kMonoBase);
       return f;
     }},
};

// ns per call of `body(i)` over `calls` calls.
template <class Body>
double time_loop(long calls, Body body) {
  const int64_t t0 = headroom::bench::monotonic_ns();
  for (long i = 0; i < calls; ++i) body(i);
  return static_cast<double>(headroom::bench::monotonic_ns() - t0) / static_cast<double>(calls);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

volatile long g_sink = 0;  // keeps the decisions alive

bool in_state(const DependencyGate& gate, const Case& c, int64_t now) {
  if (gate.state(Bucket::CRITICAL, now) == c.expect) return true;
  std::fprintf(stderr, "bench_gate: %s: the gate is %s, not %s\n", c.name,
               std::string(gate_state_name(gate.state(Bucket::CRITICAL, now))).c_str(),
               std::string(gate_state_name(c.expect)).c_str());
  return false;
}

double gate_round(const Case& c, long calls, bool with_updater, long& updates) {
  DependencyGate gate;
  const DependencyFigures fed = c.prepare(gate);
  if (!in_state(gate, c, kMonoBase)) std::exit(1);
  std::atomic<bool> stop{false};
  std::atomic<long> n{0};
  std::thread updater;
  if (with_updater)
    updater = std::thread([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        gate.update(fed, kUnixBase, kMonoBase);
        n.fetch_add(1, std::memory_order_relaxed);
      }
    });
  if (with_updater)
    while (n.load() == 0) std::this_thread::yield();  // the updater is running before the clock starts
  long sink = 0;
  // The caller's clock advances 1 ns per call: the state holds through the loop.
  const double ns = time_loop(calls, [&](long i) {
    sink += static_cast<long>(gate.decide(static_cast<int>(i % 100) + 1, kMonoBase + i));
  });
  stop = true;
  if (updater.joinable()) updater.join();
  if (!in_state(gate, c, kMonoBase + calls)) std::exit(1);
  g_sink = g_sink + sink;
  updates += n.load();
  return ns;
}

double shedder_round(long calls) {
  Shedder shedder;
  Report r;
  r.set_application_utilization(0.7);
  shedder.update(r, false);
  std::vector<double> random01(4096);
  for (std::size_t i = 0; i < random01.size(); ++i) random01[i] = static_cast<double>((i * 2654435761u) % 4096) / 4096;
  long sink = 0;
  const double ns = time_loop(calls, [&](long i) {
    sink += shedder.should_drop(random01[static_cast<std::size_t>(i) & 4095], static_cast<int>(i % 100) + 1) ? 1 : 0;
  });
  g_sink = g_sink + sink;
  return ns;
}

double clock_round(long calls) {
  long sink = 0;
  const double ns = time_loop(calls, [&](long) {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    sink += ts.tv_nsec & 1;
  });
  g_sink = g_sink + sink;
  return ns;
}

}  // namespace

int main(int argc, char** argv) {
  const headroom::bench::Flags flags(argc, argv);
  if (flags.has("--help")) {
    std::printf("usage: bench_gate [--rounds N (7)] [--calls N (2000000)]\n");
    return 0;
  }
  const long rounds = std::max(1L, flags.get_long("--rounds", 7));
  const long calls = std::max(1000L, flags.get_long("--calls", 2'000'000));

  std::printf("bench_gate: ns per decision, median of %ld rounds of %ld calls (priorities 1-100 in turn)\n", rounds,
              calls);
  std::printf("  %-38s %10s %14s\n", "", "alone", "with updater");
  double worst = 0;
  for (const Case& c : kCases) {
    std::vector<double> alone, busy;
    long updates = 0;
    for (long r = 0; r < rounds; ++r) {
      alone.push_back(gate_round(c, calls, false, updates));
      busy.push_back(gate_round(c, calls, true, updates));
    }
    const double a = median(alone), b = median(busy);
    worst = std::max({worst, a, b});
    std::printf("  decide(), %-28s %10.1f %14.1f   (%ld updates)\n", c.name, a, b, updates);
  }
  std::vector<double> shed, clock;
  for (long r = 0; r < rounds; ++r) {
    shed.push_back(shedder_round(calls));
    clock.push_back(clock_round(calls));
  }
  std::printf("  %-38s %10.1f %14s\n", "shedder should_drop() (reference)", median(shed), "-");
  std::printf("  %-38s %10.1f %14s\n", "clock_gettime(MONOTONIC) (reference)", median(clock), "-");
  std::printf("goal: decide() under %.0f ns in every state: worst %.1f ns, %s\n", kGoalNs, worst,
              headroom::bench::verdict(worst < kGoalNs));
  return worst < kGoalNs ? 0 : 1;
}
