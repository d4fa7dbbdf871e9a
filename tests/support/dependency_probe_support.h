// SPDX-License-Identifier: Apache-2.0
// What the dependency probe's integration tests share
// (tests/integration/dependency_*_test.cc): the probe opened or the test
// skipped (loudly) where the kernel lacks what it needs, a spec from a port
// and an SLO, a snapshot read now, and the share over max after a stop.
#pragma once

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "probes/dependency_probe.h"

// Skips the test (loudly) when the machine cannot load eBPF programs at all.
#define HR_REQUIRE_EBPF()                                                                                        \
  do {                                                                                                           \
    if (::geteuid() != 0)                                                                                        \
      GTEST_SKIP() << "SKIPPED: loading eBPF programs needs root; run the integration tier as root (CI does)"; \
    if (!std::filesystem::exists("/sys/kernel/btf/vmlinux"))                                                     \
      GTEST_SKIP() << "SKIPPED: the kernel has no BTF (/sys/kernel/btf/vmlinux)";                                \
  } while (0)

// `var`: the probe opened for `specs`, with the program set
// HEADROOM_EBPF_PROGRAMS names (as headroomd takes it; ctest reruns the tests
// with the syscall programs). Skips when the kernel lacks what that set needs
// (the error names the version), fails on any other error.
#define HR_OPEN_DEPENDENCY_PROBE(var, specs)                                                           \
  auto var##_opened = ::headroom::probes::DependencyProbe::open(specs, ::headroom::testing::probe_options()); \
  if (!var##_opened && ::headroom::testing::kernel_lacks_the_set(var##_opened.error()))               \
    GTEST_SKIP() << "SKIPPED: " << var##_opened.error().message;                                     \
  ASSERT_TRUE(var##_opened) << var##_opened.error().message;                                         \
  EXPECT_EQ((*var##_opened)->load_failures(), "") << "a better program set did not load";            \
  ::headroom::probes::DependencyProbe& var = **var##_opened

namespace headroom::testing {

// The probe's options: the program set HEADROOM_EBPF_PROGRAMS names, else auto.
inline probes::DependencyProbeOptions probe_options() {
  probes::DependencyProbeOptions o;
  const char* set = std::getenv("HEADROOM_EBPF_PROGRAMS");
  auto programs = probes::parse_program_set(set ? set : "");
  EXPECT_TRUE(programs) << programs.error().message;
  if (programs) o.programs = *programs;
  return o;
}

// Whether DependencyProbe::open refused because no program set of the
// choice fits this kernel (the error names what each needs).
inline bool kernel_lacks_the_set(const Error& e) {
  return e.code == ENOTSUP && e.message.find("no dependency program set of it can measure here") != std::string::npos;
}

// What attach_kind() says for that set on a kernel with every tracepoint
// the probe uses (6.11+).
inline std::string expected_kind() {
  const auto set = probe_options().programs;
  if (set == probes::ProgramSet::syscalls) return "tp_btf syscalls";
  if (set == probes::ProgramSet::raw) return "raw_tp syscalls";
  if (set == probes::ProgramSet::send_length) return "tp_btf sockets, send length";
  if (set == probes::ProgramSet::socket_reads) return "tp_btf syscalls, socket reads";
  return "tp_btf sockets";
}

// CLOCK_MONOTONIC, the clock of the probe's times.
inline int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// A dependency on `port` of any host.
inline probes::DependencySpec dependency_spec(uint16_t port, std::chrono::milliseconds target,
                                              std::chrono::milliseconds max, probes::DependencyProtocol protocol) {
  probes::DependencySpec s;
  s.port = port;
  s.target_ns = static_cast<uint64_t>(std::chrono::nanoseconds(target).count());
  s.max_ns = static_cast<uint64_t>(std::chrono::nanoseconds(max).count());
  s.protocol = protocol;
  return s;
}

// The probe read now; a failed read fails the test.
inline probes::DependencySnapshot read_now(probes::DependencyProbe& p) {
  probes::DependencySnapshot s;
  auto r = p.read(s, monotonic_ns());
  EXPECT_TRUE(r) << r.error().message;
  return s;
}

// The share of calls over max once the dependency stopped answering (at
// `stopped`), read every 100 ms for at most 2 s until it is 1: the calls
// ended since the previous read and those in flight, over max among them.
struct StoppedShare {
  double share = 0;
  uint64_t inflight = 0;
  std::chrono::milliseconds took{};
};

inline StoppedShare share_over_max_after_stop(probes::DependencyProbe& p, probes::DependencyTotals prev,
                                              std::chrono::steady_clock::time_point stopped) {
  using namespace std::chrono_literals;
  StoppedShare r;
  while (std::chrono::steady_clock::now() - stopped < 2s) {
    std::this_thread::sleep_for(100ms);
    const auto cur = read_now(p).dependencies.at(0);
    const auto& c = cur.calls.stats;
    const auto& b = prev.calls.stats;
    const double over = static_cast<double>(c.over_max - b.over_max + cur.calls.inflight_over_max);
    const double all =
        static_cast<double>(c.completed + c.aborted - b.completed - b.aborted + cur.calls.inflight);
    prev = cur;
    r.share = all > 0 ? over / all : 0;
    r.inflight = cur.calls.inflight;
    if (r.share >= 1.0) break;
  }
  r.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - stopped);
  std::cout << "[ stopped ] share over max " << r.share << " after " << r.took.count() << " ms, in flight "
            << r.inflight << "\n";
  return r;
}

}  // namespace headroom::testing
