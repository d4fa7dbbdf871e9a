// SPDX-License-Identifier: Apache-2.0
// Normalization tables: each signal is a fraction that only rises with load.
#include "agent/signals/normalize.h"

#include <cmath>

#include <gtest/gtest.h>

namespace headroom::agent {
namespace {

using probes::CpuTimes;

constexpr int64_t kSecond = 1'000'000'000;

TEST(CpuBusyFraction, Table) {
  const CpuTimes base{100, 0, 50, 1000, 10, 0, 0, 0};
  struct Case {
    const char* name;
    CpuTimes delta;
    std::optional<double> expected;
  } cases[] = {
      {"idle", {0, 0, 0, 100, 0, 0, 0, 0}, 0.0},
      {"half user", {50, 0, 0, 50, 0, 0, 0, 0}, 0.5},
      {"user nice system irq softirq all count", {10, 10, 10, 50, 0, 10, 10, 0}, 0.5},
      {"iowait is idle", {0, 0, 0, 50, 50, 0, 0, 0}, 0.0},
      {"steal is capacity we did not get", {25, 0, 0, 50, 0, 0, 0, 25}, 0.5},
      {"fully busy", {80, 0, 20, 0, 0, 0, 0, 0}, 1.0},
      {"no time passed", {0, 0, 0, 0, 0, 0, 0, 0}, std::nullopt},
  };
  for (const auto& c : cases) {
    CpuTimes cur = base;
    cur.user += c.delta.user;
    cur.nice += c.delta.nice;
    cur.system += c.delta.system;
    cur.idle += c.delta.idle;
    cur.iowait += c.delta.iowait;
    cur.irq += c.delta.irq;
    cur.softirq += c.delta.softirq;
    cur.steal += c.delta.steal;
    auto got = cpu_busy_fraction(base, cur);
    ASSERT_EQ(got.has_value(), c.expected.has_value()) << c.name;
    if (got) {
      EXPECT_DOUBLE_EQ(*got, *c.expected) << c.name;
    }
  }
  CpuTimes backwards = base;
  backwards.idle -= 1;
  EXPECT_FALSE(cpu_busy_fraction(base, backwards)) << "a counter that went backwards is not a sample";
}

TEST(RunnableExcess, Table) {
  // procs_running includes the reader itself.
  struct Case {
    uint32_t running;
    unsigned ncpu;
    double expected;
  } cases[] = {
      {0, 2, 0.0}, {1, 2, 0.0}, {3, 2, 0.0}, {4, 2, 0.5}, {5, 2, 1.0}, {9, 2, 3.0}, {17, 2, 7.0}, {65, 64, 0.0},
      {129, 64, 1.0}, {5, 0, 0.0},
  };
  for (const auto& c : cases)
    EXPECT_DOUBLE_EQ(runnable_excess(c.running, c.ncpu), c.expected) << c.running << " on " << c.ncpu;
}

TEST(CpuDemand, OneTwoFourEightBusyThreadsOnTwoCpusStrictlyIncrease) {
  // busy share + run-queue excess, as the sampler combines them: what a 2-CPU
  // machine reports for 1, 2, 4 and 8 CPU-bound threads (plus the reader).
  const CpuTimes a{0, 0, 0, 0, 0, 0, 0, 0};
  auto demand = [&](uint64_t busy_ticks, uint32_t threads) {
    CpuTimes b{busy_ticks, 0, 0, 200 - busy_ticks, 0, 0, 0, 0};
    return *cpu_busy_fraction(a, b) + runnable_excess(threads + 1, 2);
  };
  const double d1 = demand(100, 1), d2 = demand(200, 2), d4 = demand(200, 4), d8 = demand(200, 8);
  EXPECT_DOUBLE_EQ(d1, 0.5);
  EXPECT_DOUBLE_EQ(d2, 1.0);
  EXPECT_DOUBLE_EQ(d4, 2.0);
  EXPECT_DOUBLE_EQ(d8, 4.0);
}

TEST(RunDelayExcess, Table) {
  probes::SchedStatReading a{1'000, 2}, b{1'000 + 2 * kSecond, 2};
  EXPECT_DOUBLE_EQ(*run_delay_excess(a, b, kSecond), 1.0);  // 2 s of waiting per second on 2 CPUs
  EXPECT_DOUBLE_EQ(*run_delay_excess(a, a, kSecond), 0.0);
  EXPECT_FALSE(run_delay_excess(b, a, kSecond));
  EXPECT_FALSE(run_delay_excess(a, b, 0));
}

TEST(PressureFraction, Table) {
  struct Case {
    uint64_t prev, cur;
    int64_t elapsed_ns;
    std::optional<double> expected;
  } cases[] = {
      {0, 0, kSecond, 0.0},
      {1000, 251'000, kSecond, 0.25},          // 250 ms stalled in 1 s
      {0, 100'000, kSecond / 10, 1.0},         // stalled the whole 100 ms
      {0, 200'000, kSecond / 10, 1.0},         // clamped: counter granularity
      {500, 400, kSecond, std::nullopt},       // went backwards
      {0, 10, 0, std::nullopt},
  };
  for (const auto& c : cases) {
    auto got = pressure_fraction(c.prev, c.cur, c.elapsed_ns);
    ASSERT_EQ(got.has_value(), c.expected.has_value());
    if (got) {
      EXPECT_DOUBLE_EQ(*got, *c.expected);
    }
  }
}

TEST(MemoryFraction, Table) {
  EXPECT_DOUBLE_EQ(*memory_fraction({1000, 250}), 0.75);
  EXPECT_DOUBLE_EQ(*memory_fraction({1000, 1000}), 0.0);
  EXPECT_DOUBLE_EQ(*memory_fraction({1000, 2000}), 0.0);  // never negative
  EXPECT_DOUBLE_EQ(*memory_fraction({1000, 0}), 1.0);
  EXPECT_FALSE(memory_fraction({0, 0}));
}

TEST(CgroupCpu, QuotaAware) {
  // 50 % of a 2-CPU quota on a 64-CPU host is 50 %, not 1.5 %.
  const double capacity = cgroup_cpu_capacity(64, 2.0, 0);
  EXPECT_DOUBLE_EQ(capacity, 2.0);
  EXPECT_DOUBLE_EQ(*cgroup_cpu_fraction(0, 1'000'000, kSecond, capacity), 0.5);
  EXPECT_DOUBLE_EQ(cgroup_cpu_capacity(64, std::nullopt, 4), 4.0);   // cpuset only
  EXPECT_DOUBLE_EQ(cgroup_cpu_capacity(64, 8.0, 4), 4.0);            // the smaller wins
  EXPECT_DOUBLE_EQ(cgroup_cpu_capacity(64, 0.5, 4), 0.5);
  EXPECT_DOUBLE_EQ(cgroup_cpu_capacity(8, std::nullopt, 0), 8.0);    // unlimited: the host
  EXPECT_DOUBLE_EQ(cgroup_cpu_capacity(8, 16.0, 0), 8.0);            // quota above the host
  EXPECT_FALSE(cgroup_cpu_fraction(10, 5, kSecond, 2.0));
  EXPECT_FALSE(cgroup_cpu_fraction(0, 5, 0, 2.0));
}

TEST(CgroupMemory, LimitOrHostTotal) {
  EXPECT_DOUBLE_EQ(*cgroup_memory_fraction({512, 1024}, 4096), 0.5);
  EXPECT_DOUBLE_EQ(*cgroup_memory_fraction({512, std::nullopt}, 4096), 0.125);
  EXPECT_DOUBLE_EQ(*cgroup_memory_fraction({2048, 1ULL << 60}, 4096), 0.5);  // limit above host RAM
  EXPECT_DOUBLE_EQ(*cgroup_memory_fraction({4096, 1024}, 4096), 1.0);
  EXPECT_FALSE(cgroup_memory_fraction({1, std::nullopt}, 0));
}

TEST(Ewma, AlphaAndSmoother) {
  EXPECT_DOUBLE_EQ(ewma_alpha(100, 0), 1.0);
  EXPECT_NEAR(ewma_alpha(100'000'000, kSecond), 1 - std::exp(-0.1), 1e-12);
  Smoother s(0.5);
  EXPECT_DOUBLE_EQ(s.update("cpu", 1.0), 1.0);  // first sample taken as is
  EXPECT_DOUBLE_EQ(s.update("cpu", 0.0), 0.5);
  EXPECT_DOUBLE_EQ(s.update("cpu", 0.0), 0.25);
  s.forget("cpu");
  EXPECT_DOUBLE_EQ(s.update("cpu", 0.8), 0.8);
  // Smoothing keeps order: a higher constant load converges higher.
  Smoother lo(ewma_alpha(100, 1000)), hi(ewma_alpha(100, 1000));
  double l = 0, h = 0;
  for (int i = 0; i < 100; ++i) {
    l = lo.update("x", 0.3 + (i % 2) * 0.1);
    h = hi.update("x", 0.5 + (i % 2) * 0.1);
  }
  EXPECT_LT(l, h);
}

TEST(Composite, MaxAndMean) {
  EXPECT_FALSE(composite({}, CompositeMethod::max));
  EXPECT_DOUBLE_EQ(*composite({{0.2, 1}, {1.7, 1}, {0.5, 1}}, CompositeMethod::max), 1.7);
  EXPECT_DOUBLE_EQ(*composite({{0.2, 1}, {1.0, 0.5}, {0.6, 1}}, CompositeMethod::max), 0.6);
  EXPECT_DOUBLE_EQ(*composite({{0.2, 1}, {0.6, 1}}, CompositeMethod::mean), 0.4);
  EXPECT_DOUBLE_EQ(*composite({{0.2, 1}, {0.8, 3}}, CompositeMethod::mean), 0.65);
  EXPECT_DOUBLE_EQ(*composite({{0.2, 0}, {0.8, 0}}, CompositeMethod::mean), 0.0);
}

TEST(Clamp01, Table) {
  EXPECT_EQ(clamp01(-1), 0.0);
  EXPECT_EQ(clamp01(0.3), 0.3);
  EXPECT_EQ(clamp01(4), 1.0);
  EXPECT_EQ(clamp01(std::nan("")), 0.0);
}

}  // namespace
}  // namespace headroom::agent
