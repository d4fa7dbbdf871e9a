// SPDX-License-Identifier: Apache-2.0
// bench_publish: the cost of one publish of node.orca, as headroomd does it every
// tick (build the report from a sample, serialize, temp file + rename), next to a
// baseline of writing the same bytes in place (open O_TRUNC + write + close).
//
// The two are interleaved iteration by iteration in one run, so a disturbance
// (a compiler on the other core, page cache pressure) hits both alike and their
// ratio stays meaningful even when the absolute figures move.
//
// The main loop runs back to back, with hot caches. headroomd publishes every
// 100 ms, by which time caches, TLBs and branch predictors hold other work, so
// a second, "cold" pass repeats both with --cold-gap-ms between operations.
//
//   bench_publish [--iterations N] [--warmup N] [--dirs /dev/shm,/tmp] [--cold N] [--cold-gap-ms N]
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/report_builder.h"
#include "bench/bench_util.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_writer.h"
#include "publishers/orca_dir_publisher.h"

namespace {

using headroom::bench::monotonic_ns;
using headroom::bench::Summary;
using headroom::bench::summarize;

constexpr double kGoalP50Us = 50.0;

struct Timings {
  std::vector<double> publish, baseline, build, serialize, write_rename;
  void reserve(std::size_t n) {
    for (auto* v : {&publish, &baseline, &build, &serialize, &write_rename}) v->reserve(n);
  }
};

double us_since(int64_t t0) { return static_cast<double>(monotonic_ns() - t0) / 1000.0; }

// The baseline: what a naive writer would do, without atomicity.
bool write_in_place(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const ssize_t n = ::write(fd, bytes.data(), bytes.size());
  const bool ok = n == static_cast<ssize_t>(bytes.size());
  return ::close(fd) == 0 && ok;
}

void print_row(const char* label, const Summary& s) {
  std::printf("  %-40s %9.2f %9.2f %9.2f %9.2f\n", label, s.p50, s.p90, s.p99, s.max);
}

// Runs every variant `iterations` times in one dir; false when something could not run.
struct Options {
  long iterations = 20000, warmup = 500, cold = 50, cold_gap_ms = 100;
};

void sleep_for_ms(long ms) {
  timespec ts{static_cast<time_t>(ms / 1000), (ms % 1000) * 1'000'000L};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

bool run_dir(const std::string& parent, const Options& o, bool* goal_checked, bool* goal_met) {
  const long iterations = o.iterations, warmup = o.warmup;
  using namespace headroom;
  bench::TempDir td(parent);
  if (!td.ok()) return false;
  const std::string fs = bench::fs_type(parent);

  auto pub = publishers::OrcaDirPublisher::open(td.path());
  if (!pub) {
    std::fprintf(stderr, "open %s: %s\n", td.path().c_str(), pub.error().message.c_str());
    return false;
  }
  // A second writer on another name measures the temp file + rename alone.
  auto writer = orca::ReportFileWriter::open(td.path());
  if (!writer) {
    std::fprintf(stderr, "open %s: %s\n", td.path().c_str(), writer.error().message.c_str());
    return false;
  }
  const std::string inplace_path = td.path() + "/inplace.orca";

  const agent::Config config;  // defaults: all five signals, composite max
  const agent::NodeSample sample = bench::realistic_sample();
  std::string bytes;
  std::size_t report_bytes = 0;

  Timings t;
  t.reserve(static_cast<std::size_t>(iterations));
  const int64_t interval_ms = 100;
  for (long i = -warmup; i < iterations; ++i) {
    const bool record = i >= 0;
    agent::ReportMeta meta{bench::unix_ms(), static_cast<uint64_t>(i + warmup + 1), interval_ms, false};

    // 1. The whole publish, as Agent::tick does it after sampling.
    int64_t t0 = monotonic_ns();
    {
      const auto report = agent::build_node_report(sample, config, meta);
      if (auto r = pub->publish(orca::kNodeScope, report); !r) {
        std::fprintf(stderr, "publish: %s\n", r.error().message.c_str());
        return false;
      }
    }
    const double publish_us = us_since(t0);

    // 2. Splits of the same work.
    t0 = monotonic_ns();
    const auto report = agent::build_node_report(sample, config, meta);
    const double build_us = us_since(t0);

    t0 = monotonic_ns();
    bytes.clear();
    if (!report.SerializeToString(&bytes)) {
      std::fprintf(stderr, "serialize failed\n");
      return false;
    }
    const double serialize_us = us_since(t0);
    report_bytes = bytes.size();

    t0 = monotonic_ns();
    if (auto r = writer->write_bytes("split.orca", bytes); !r) {
      std::fprintf(stderr, "write_bytes: %s\n", r.error().message.c_str());
      return false;
    }
    const double write_rename_us = us_since(t0);

    // 3. The baseline: the same bytes written in place.
    t0 = monotonic_ns();
    if (!write_in_place(inplace_path, bytes)) {
      std::fprintf(stderr, "write %s: %s\n", inplace_path.c_str(), std::strerror(errno));
      return false;
    }
    const double baseline_us = us_since(t0);

    if (record) {
      t.publish.push_back(publish_us);
      t.build.push_back(build_us);
      t.serialize.push_back(serialize_us);
      t.write_rename.push_back(write_rename_us);
      t.baseline.push_back(baseline_us);
    }
  }

  // Cold pass: one operation per gap, publish and baseline alternating.
  std::vector<double> cold_publish, cold_baseline;
  for (long i = 0; i < 2 * o.cold; ++i) {
    sleep_for_ms(o.cold_gap_ms);
    const int64_t t0 = monotonic_ns();
    if (i % 2 == 0) {
      agent::ReportMeta meta{bench::unix_ms(), static_cast<uint64_t>(iterations + warmup + i + 1), interval_ms, false};
      const auto report = agent::build_node_report(sample, config, meta);
      if (auto r = pub->publish(orca::kNodeScope, report); !r) {
        std::fprintf(stderr, "publish: %s\n", r.error().message.c_str());
        return false;
      }
      cold_publish.push_back(us_since(t0));
    } else {
      if (!write_in_place(inplace_path, bytes)) {
        std::fprintf(stderr, "write %s: %s\n", inplace_path.c_str(), std::strerror(errno));
        return false;
      }
      cold_baseline.push_back(us_since(t0));
    }
  }

  const Summary pub_s = summarize(t.publish), base_s = summarize(t.baseline);
  std::printf("\n%s (%s), %ld iterations after %ld warm-up, report %zu bytes\n", parent.c_str(), fs.c_str(),
              iterations, warmup, report_bytes);
  std::printf("  %-40s %9s %9s %9s %9s\n", "microseconds", "p50", "p90", "p99", "max");
  print_row("publish (build+serialize+tmp+rename)", pub_s);
  print_row("baseline: same bytes in place (O_TRUNC)", base_s);
  std::printf("  %-40s %8.2fx %8.2fx %8.2fx\n", "ratio publish / baseline", pub_s.p50 / base_s.p50,
              pub_s.p90 / base_s.p90, pub_s.p99 / base_s.p99);
  print_row("split: build_node_report", summarize(t.build));
  print_row("split: SerializeToString", summarize(t.serialize));
  print_row("split: tmp file + rename (write_bytes)", summarize(t.write_rename));
  if (o.cold > 0) {
    const Summary cp = summarize(cold_publish), cb = summarize(cold_baseline);
    std::printf("  cold: %ld of each, one operation every %ld ms (as at headroomd's cadence)\n", o.cold, o.cold_gap_ms);
    print_row("cold: publish", cp);
    print_row("cold: baseline in place", cb);
    std::printf("  %-40s %8.2fx %8.2fx %8.2fx\n", "cold: ratio publish / baseline", cp.p50 / cb.p50, cp.p90 / cb.p90,
                cp.p99 / cb.p99);
  }
  if (fs == "tmpfs") {
    *goal_checked = true;
    const bool met = pub_s.p50 <= kGoalP50Us;
    *goal_met = *goal_met && met;
    std::printf("  goal: publish p50 <= %.0f us on tmpfs: %.2f us -> %s\n", kGoalP50Us, pub_s.p50,
                headroom::bench::verdict(met));
    if (o.cold > 0) {
      const double cold_p50 = summarize(cold_publish).p50;
      std::printf("  same goal at headroomd's cadence (cold, informational): %.2f us -> %s\n", cold_p50,
                  headroom::bench::verdict(cold_p50 <= kGoalP50Us));
    }
  } else {
    std::printf("  (no goal on %s: shown for contrast)\n", fs.c_str());
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const headroom::bench::Flags flags(argc, argv);
  if (flags.has("--help")) {
    std::printf("usage: bench_publish [--iterations N (20000)] [--warmup N (500)] [--dirs /dev/shm,/tmp]\n"
        "                     [--cold N (50; 0: skip)] [--cold-gap-ms N (100)]\n");
    return 0;
  }
  Options o;
  o.iterations = flags.get_long("--iterations", o.iterations);
  o.warmup = flags.get_long("--warmup", o.warmup);
  o.cold = flags.has("--cold") && flags.get("--cold", "") == "0" ? 0 : flags.get_long("--cold", o.cold);
  o.cold_gap_ms = flags.get_long("--cold-gap-ms", o.cold_gap_ms);
  std::vector<std::string> dirs;
  std::stringstream ss(flags.get("--dirs", "/dev/shm,/tmp"));
  for (std::string d; std::getline(ss, d, ',');)
    if (!d.empty()) dirs.push_back(d);

  std::printf("bench_publish: one publish of node.orca vs writing the same bytes in place, interleaved\n");
  bool goal_checked = false, goal_met = true;
  for (const auto& d : dirs)
    if (!run_dir(d, o, &goal_checked, &goal_met)) return 1;
  if (!goal_checked) std::printf("\nno tmpfs directory given: the 50 us goal was not judged\n");
  return 0;
}
