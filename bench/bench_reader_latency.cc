// SPDX-License-Identifier: Apache-2.0
// bench_reader_latency: how long after the agent starts writing a report a
// reader holds it, parsed. A writer thread publishes node.orca every --period-us
// (1 ms); a reader thread blocks in read() on an inotify descriptor watching the
// directory for IN_MOVED_TO, then read_report_file()s the new report. The writer's
// CLOCK_MONOTONIC start time travels inside the report (a named metric), so the
// reader computes the latency from what it parsed.
//
// Baseline, side by side in the same run: half a period after each publish the
// writer sends its timestamp through a pipe to a second thread blocked in read().
// That is the floor any cross-thread notification pays on this machine.
//
//   bench_reader_latency [--updates N] [--period-us N] [--dir /dev/shm]
#include <fcntl.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/report_builder.h"
#include "bench/bench_util.h"
#include "headroom/orca/report.h"
#include "publishers/orca_dir_publisher.h"

namespace {

using headroom::bench::monotonic_ns;

constexpr double kGoalP50Us = 200.0;
constexpr const char* kStartKey = "bench.start_ns";
constexpr long kWarmup = 200;  // first publishes: page cache, dentries, thread wake-up paths

struct PerSeq {
  int64_t start = 0;      // writer: before build + serialize
  int64_t published = 0;  // writer: publish() returned
  int64_t woken = 0;      // reader: read() on inotify returned
  int64_t parsed = 0;     // reader: read_report_file() returned
  int64_t carried = 0;    // start as parsed from the report
  int seen = 0;           // how many reads returned this seq
};

void sleep_until(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

void print_row(const char* label, const headroom::bench::Summary& s) {
  std::printf("  %-44s %9.1f %9.1f %9.1f %9.1f\n", label, s.p50, s.p90, s.p99, s.max);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace headroom;
  const bench::Flags flags(argc, argv);
  if (flags.has("--help")) {
    std::printf("usage: bench_reader_latency [--updates N (10000)] [--period-us N (1000)] [--dir /dev/shm]\n");
    return 0;
  }
  const long updates = flags.get_long("--updates", 10000);
  const long period_us = flags.get_long("--period-us", 1000);
  const std::string parent = flags.get("--dir", "/dev/shm");

  bench::TempDir td(parent);
  if (!td.ok()) return 1;
  auto pub = publishers::OrcaDirPublisher::open(td.path());
  if (!pub) {
    std::fprintf(stderr, "open %s: %s\n", td.path().c_str(), pub.error().message.c_str());
    return 1;
  }
  const std::string report_path = td.path() + "/node.orca";

  const int ifd = ::inotify_init1(IN_CLOEXEC);
  if (ifd < 0) {
    std::fprintf(stderr, "inotify_init1: %s\n", std::strerror(errno));
    return 1;
  }
  const int wd = ::inotify_add_watch(ifd, td.path().c_str(), IN_MOVED_TO);
  int pipefd[2];
  if (wd < 0 || ::pipe2(pipefd, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "inotify_add_watch/pipe2: %s\n", std::strerror(errno));
    return 1;
  }

  const long total = kWarmup + updates;
  std::vector<PerSeq> per(static_cast<std::size_t>(total) + 1);
  std::vector<double> pipe_us;
  pipe_us.reserve(static_cast<std::size_t>(total));
  std::atomic<bool> writer_failed{false};
  std::atomic<long> read_errors{0}, wakeups{0};
  const int64_t epoch = monotonic_ns();  // start times are carried relative to this: exact in a double

  // The reader: what a proxy sidecar would do. Exits on IN_IGNORED, which the
  // main thread causes by removing the watch after the writer is done; inotify
  // queues it behind every IN_MOVED_TO already delivered.
  std::thread reader([&] {
    alignas(inotify_event) char buf[4096];
    for (;;) {
      const ssize_t n = ::read(ifd, buf, sizeof buf);
      const int64_t woken = monotonic_ns();
      if (n < 0) {
        if (errno == EINTR) continue;
        std::fprintf(stderr, "read inotify: %s\n", std::strerror(errno));
        return;
      }
      ++wakeups;
      bool changed = false, ignored = false;
      for (ssize_t off = 0; off < n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
        if (ev->mask & IN_IGNORED) ignored = true;
        if ((ev->mask & IN_MOVED_TO) && ev->len > 0 && std::strcmp(ev->name, "node.orca") == 0) changed = true;
        off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      }
      if (changed) {
        auto report = orca::read_report_file(report_path);
        const int64_t parsed = monotonic_ns();
        if (!report) {
          ++read_errors;
        } else if (auto meta = orca::metadata_of(*report); meta && meta->seq < per.size()) {
          PerSeq& p = per[meta->seq];
          if (p.seen++ == 0) {
            p.woken = woken;
            p.parsed = parsed;
            const auto& nm = report->named_metrics();
            if (auto it = nm.find(kStartKey); it != nm.end()) p.carried = epoch + static_cast<int64_t>(it->second);
          }
        } else {
          ++read_errors;
        }
      }
      if (ignored) return;
    }
  });

  std::thread pipe_reader([&] {
    for (;;) {
      int64_t sent = 0;
      const ssize_t n = ::read(pipefd[0], &sent, sizeof sent);
      const int64_t woken = monotonic_ns();
      if (n == 0) return;  // the writer closed its end
      if (n == static_cast<ssize_t>(sizeof sent)) pipe_us.push_back(static_cast<double>(woken - sent) / 1000.0);
    }
  });

  // The writer, on the main thread: a fixed cadence, publish then ping.
  {
    const agent::Config config;
    agent::NodeSample sample = bench::realistic_sample();
    const int64_t period = period_us * 1000;
    int64_t next = monotonic_ns() + period;
    for (long seq = 1; seq <= total; ++seq, next += period) {
      sleep_until(next);
      PerSeq& p = per[static_cast<std::size_t>(seq)];
      p.start = monotonic_ns();
      sample.raw.insert_or_assign(kStartKey, static_cast<double>(p.start - epoch));
      const auto report =
          agent::build_node_report(sample, config, agent::ReportMeta{bench::unix_ms(), static_cast<uint64_t>(seq), 1, false});
      if (auto r = pub->publish(orca::kNodeScope, report); !r) {
        std::fprintf(stderr, "publish: %s\n", r.error().message.c_str());
        writer_failed = true;
        break;
      }
      p.published = monotonic_ns();

      sleep_until(next + period / 2);
      const int64_t sent = monotonic_ns();
      if (::write(pipefd[1], &sent, sizeof sent) != static_cast<ssize_t>(sizeof sent)) {
        std::fprintf(stderr, "write pipe: %s\n", std::strerror(errno));
        writer_failed = true;
        break;
      }
    }
  }
  ::inotify_rm_watch(ifd, wd);
  ::close(pipefd[1]);
  reader.join();
  pipe_reader.join();
  ::close(ifd);
  ::close(pipefd[0]);
  if (writer_failed) return 1;

  // A report the reader never saw (it was late and the next one had already
  // replaced it) counts until the reader held a newer one: skipping it would
  // hide exactly the slow cases.
  std::vector<int64_t> held(per.size(), 0);
  for (long seq = total; seq >= 1; --seq) {
    const PerSeq& p = per[static_cast<std::size_t>(seq)];
    const int64_t later = seq < total ? held[static_cast<std::size_t>(seq) + 1] : 0;
    held[static_cast<std::size_t>(seq)] = p.seen > 0 && (later == 0 || p.parsed < later) ? p.parsed : later;
  }
  std::vector<double> total_us, writer_us, wake_us, read_us;
  long missed = 0, repeated = 0, carried_mismatch = 0, never_held = 0;
  for (long seq = kWarmup + 1; seq <= total; ++seq) {
    const PerSeq& p = per[static_cast<std::size_t>(seq)];
    const int64_t h = held[static_cast<std::size_t>(seq)];
    if (h == 0) {
      ++never_held;
      continue;
    }
    total_us.push_back(static_cast<double>(h - p.start) / 1000.0);
    if (p.seen == 0) {
      ++missed;
      continue;
    }
    repeated += p.seen - 1;
    // The report's own start time must be the writer's: otherwise we timed the wrong report.
    const int64_t d = p.carried - p.start;
    if (d > 1 || d < -1) ++carried_mismatch;
    writer_us.push_back(static_cast<double>(p.published - p.start) / 1000.0);
    // Approximate: the reader can wake before the writer's publish() has returned.
    wake_us.push_back(static_cast<double>(p.woken - p.published) / 1000.0);
    read_us.push_back(static_cast<double>(p.parsed - p.woken) / 1000.0);
  }
  std::vector<double> pipe_measured(pipe_us.begin() + std::min<std::ptrdiff_t>(kWarmup, std::ssize(pipe_us)),
                                    pipe_us.end());

  const auto tot = bench::summarize(total_us), pipe = bench::summarize(pipe_measured);
  std::printf("bench_reader_latency: %s (%s), publish every %ld us, %zu updates measured after %ld warm-up\n",
              parent.c_str(), bench::fs_type(parent).c_str(), period_us, total_us.size(), kWarmup);
  std::printf("  %-44s %9s %9s %9s %9s\n", "microseconds", "p50", "p90", "p99", "max");
  print_row("start of write -> reader holds it (or newer)", tot);
  print_row("baseline: pipe wake-up (8 bytes)", pipe);
  std::printf("  %-44s %8.2fx %8.2fx %8.2fx\n", "ratio latency / pipe wake-up", tot.p50 / pipe.p50,
              tot.p90 / pipe.p90, tot.p99 / pipe.p99);
  print_row("split: writer build+publish returned", bench::summarize(writer_us));
  print_row("split: publish returned -> reader woken (~)", bench::summarize(wake_us));
  print_row("split: read_report_file + metadata", bench::summarize(read_us));
  std::printf("  updates never seen (coalesced: the reader was late): %ld, seen twice: %ld, unreadable: %ld, inotify wake-ups: "
      "%ld\n", missed,
              repeated, read_errors.load(), wakeups.load());
  if (never_held > 0) std::printf("  WARNING: %ld updates were never followed by a report the reader held\n", never_held);
  if (carried_mismatch > 0) std::printf("  WARNING: %ld reports carried an unexpected start time\n", carried_mismatch);
  const bool met = tot.p50 <= kGoalP50Us;
  std::printf("  goal: latency p50 <= %.0f us: %.1f us -> %s\n", kGoalP50Us, tot.p50, bench::verdict(met));
  return read_errors.load() > 0 || total_us.empty() ? 1 : 0;
}
