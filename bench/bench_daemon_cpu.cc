// SPDX-License-Identifier: Apache-2.0
// bench_daemon_cpu: what the real headroomd costs the machine it measures. Runs
// the built binary at the default 100 ms interval against the real /proc, with
// its report directory on tmpfs, for --seconds (60), then stops it with SIGTERM.
//
// CPU comes from two places:
//  - wait4()'s rusage of the child: user + system time of its whole life,
//    start-up included, to the microsecond;
//  - the child's process CPU clock (clock_getcpuclockid), read after a warm-up
//    and again just before SIGTERM: the steady state, in nanoseconds.
// Memory: VmRSS and VmHWM from /proc/<pid>/status just before SIGTERM.
// The seq of node.orca proves how often it published.
//
// Then, unless --no-splits, the same work is repeated in this process, part by
// part, to show where a tick's CPU goes: each part's CPU time (thread CPU clock)
// at the daemon's cadence, so caches are as cold as the daemon's.
//
//   bench_daemon_cpu [--seconds N] [--warmup-seconds N] [--dir /dev/shm] [--headroomd PATH]
//                    [--no-splits] [--split-ticks N] [--split-interval-ms N]
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/report_builder.h"
#include "agent/signals/sampler.h"
#include "bench/bench_util.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_writer.h"
#include "probes/proc_file.h"
#include "publishers/orca_dir_publisher.h"

#ifndef HEADROOMD_PATH
#error "HEADROOMD_PATH must name the headroomd binary (bench/CMakeLists.txt sets it)"
#endif

namespace {

using headroom::bench::monotonic_ns;

constexpr double kGoalCpuPercent = 0.25;
constexpr double kGoalRssMiB = 16.0;

void sleep_until(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

int64_t cpu_clock_ns(clockid_t clk) {
  timespec ts{};
  if (::clock_gettime(clk, &ts) != 0) return -1;
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// "VmRSS:	   8123 kB" -> {"VmRSS", 8123}.
std::map<std::string, long> status_kb(pid_t pid) {
  std::map<std::string, long> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || !line.ends_with(" kB")) continue;
    out[line.substr(0, colon)] = std::strtol(line.c_str() + colon + 1, nullptr, 10);
  }
  return out;
}

std::optional<headroom::orca::ReportMetadata> report_meta(const std::string& path) {
  auto r = headroom::orca::read_report_file(path);
  if (!r) return std::nullopt;
  auto m = headroom::orca::metadata_of(*r);
  if (!m) return std::nullopt;
  return *m;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

double mib(long kb) { return static_cast<double>(kb) / 1024.0; }
double secs(int64_t ns) { return static_cast<double>(ns) / 1e9; }
double tv_secs(const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; }

int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// One tick of headroomd, taken apart: each part's CPU time in this thread,
// ticks `interval_ms` apart like the daemon's, so caches are as cold as its.
// The /proc reads are timed both as the sampler does them and file by file.
bool run_splits(const std::string& orca_dir, long ticks, long interval_ms) {
  using namespace headroom;
  const agent::Config config;
  spdlog::set_level(spdlog::level::off);  // the sampler's one-time notices would break the table
  auto sampler = agent::NodeSampler::create(config);
  auto made = publishers::make_directories(orca_dir);
  auto writer = orca::ReportFileWriter::open(orca_dir);
  if (!sampler || !made || !writer) {
    std::fprintf(stderr, "splits: cannot set up the sampler or %s\n", orca_dir.c_str());
    return false;
  }
  const char* files[] = {"/proc/stat", "/proc/meminfo", "/proc/pressure/cpu", "/proc/pressure/memory",
                         "/proc/pressure/io"};
  std::vector<probes::ProcFile> procs;
  for (const char* f : files) procs.emplace_back(f);

  std::vector<std::string> names = {"wake-up from the timer sleep",
                                    "NodeSampler::sample (5 files + parse)",
                                    "build_node_report",
                                    "SerializeToString",
                                    "tmp file + rename (write_bytes)"};
  for (const char* f : files) names.push_back(std::string("  alone: pread ") + f);
  std::vector<std::vector<double>> cpu_us(names.size());
  std::vector<double> cold_syscall_us, hot_syscall_us;

  auto timed = [](auto&& fn) {
    const int64_t c0 = thread_cpu_ns();
    fn();
    return static_cast<double>(thread_cpu_ns() - c0) / 1000.0;
  };
  sampler.value()->sample(monotonic_ns());  // baseline, as the daemon's first tick
  int64_t next = monotonic_ns();
  agent::NodeSample last;
  orca::Report report;
  std::string bytes;
  bool ok = true;
  for (long i = 0; i < ticks && ok; ++i) {
    next += interval_ms * 1'000'000;
    int64_t w0 = 0, w1 = 0, w2 = 0;
    cpu_us[0].push_back(timed([&] {
      sleep_until(next);
      // The machine's cold-path tax: the same null system call as the first
      // after the sleep and once more right after (vDSO clock, no syscall).
      w0 = monotonic_ns();
      ::syscall(SYS_getppid);
      w1 = monotonic_ns();
      ::syscall(SYS_getppid);
      w2 = monotonic_ns();
    }));
    cold_syscall_us.push_back(static_cast<double>(w1 - w0) / 1000.0);
    hot_syscall_us.push_back(static_cast<double>(w2 - w1) / 1000.0);
    cpu_us[1].push_back(timed([&] { last = sampler.value()->sample(monotonic_ns()); }));
    cpu_us[2].push_back(timed([&] {
      report = agent::build_node_report(last, config, {bench::unix_ms(), static_cast<uint64_t>(i + 1), 100, false});
    }));
    cpu_us[3].push_back(timed([&] {
      bytes.clear();
      ok = report.SerializeToString(&bytes);
    }));
    cpu_us[4].push_back(timed([&] { ok = ok && static_cast<bool>(writer->write_bytes("node.orca", bytes)); }));
    // The single files after the tick's work, so they do not warm the sampler's reads.
    for (std::size_t f = 0; f < procs.size(); ++f) cpu_us[5 + f].push_back(timed([&] { (void)procs[f].read(); }));
  }
  if (!ok) {
    std::fprintf(stderr, "splits: publishing into %s failed\n", orca_dir.c_str());
    return false;
  }
  std::printf("\n  where a tick's CPU goes, in-process (%ld ticks, %ld ms apart; thread CPU time)\n", ticks,
              interval_ms);
  std::printf("  %-46s %9s %9s %9s\n", "microseconds of CPU", "p50", "p90", "mean");
  double sum = 0;
  for (std::size_t k = 0; k < names.size(); ++k) {
    const auto s = bench::summarize(cpu_us[k]);
    if (k < 5) sum += s.mean;
    std::printf("  %-46s %9.1f %9.1f %9.1f\n", names[k].c_str(), s.p50, s.p90, s.mean);
  }
  std::printf("  %-46s %29.1f\n", "sum of the tick's parts (means)", sum);
  const auto cold = bench::summarize(cold_syscall_us), hot = bench::summarize(hot_syscall_us);
  std::printf("  %-46s %9.2f %9.2f %9.2f\n", "null syscall, first after the sleep (wall)", cold.p50, cold.p90, cold.mean);
  std::printf("  %-46s %9.2f %9.2f %9.2f\n", "null syscall, the next one (wall)", hot.p50, hot.p90, hot.mean);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace headroom;
  const bench::Flags flags(argc, argv);
  if (flags.has("--help")) {
    std::printf("usage: bench_daemon_cpu [--seconds N (60)] [--warmup-seconds N (2)] [--dir /dev/shm] [--headroomd PATH]\n"
        "                        [--no-splits] [--split-ticks N (50)] [--split-interval-ms N (100)]\n");
    return 0;
  }
  const long seconds = flags.get_long("--seconds", 60);
  if (seconds < 2) {
    std::fprintf(stderr, "--seconds: at least 2 (a warm-up and a steady window)\n");
    return 2;
  }
  const long warmup_s = std::min(flags.get_long("--warmup-seconds", 2), seconds > 2 ? seconds / 2 : 1L);
  const std::string parent = flags.get("--dir", "/dev/shm");
  const std::string binary = flags.get("--headroomd", HEADROOMD_PATH);
  const bool splits = !flags.has("--no-splits");
  const long split_ticks = flags.get_long("--split-ticks", 50);
  const long split_interval_ms = flags.get_long("--split-interval-ms", 100);

  bench::TempDir td(parent);
  if (!td.ok()) return 1;
  const std::string orca_dir = td.path() + "/orca";
  const std::string report = orca_dir + "/node.orca";
  const std::string config = td.path() + "/headroom.toml";
  const std::string log = td.path() + "/headroomd.log";
  {
    // An explicit, empty configuration: the defaults, whatever /etc/headroom holds.
    std::ofstream(config) << "# bench_daemon_cpu: all defaults (interval 100ms)\n";
  }

  const std::string load_before = first_line("/proc/loadavg");
  const int64_t t_fork = monotonic_ns();
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::fprintf(stderr, "fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    ::unsetenv("NOTIFY_SOCKET");  // not systemd's child here
    const char* args[] = {binary.c_str(), "--config", config.c_str(), "--orca-dir", orca_dir.c_str(), nullptr};
    ::execv(binary.c_str(), const_cast<char* const*>(args));
    std::fprintf(stderr, "execv %s: %s\n", binary.c_str(), std::strerror(errno));
    ::_exit(127);
  }

  auto child_gone = [&](const char* when) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      std::fprintf(stderr, "headroomd exited %s (status %d); its log:\n", when, status);
      std::ifstream in(log);
      std::fprintf(stderr, "%s", std::string(std::istreambuf_iterator<char>(in), {}).c_str());
      return true;
    }
    return false;
  };

  clockid_t cpu_clock{};
  if (::clock_getcpuclockid(pid, &cpu_clock) != 0) {
    std::fprintf(stderr, "clock_getcpuclockid: cannot read the child's CPU clock\n");
    ::kill(pid, SIGKILL);
    return 1;
  }

  // Warm-up: the first report comes one interval after start; the steady state
  // starts when start-up (exec, dynamic linking, configuration) is long over.
  sleep_until(t_fork + warmup_s * 1'000'000'000L);
  if (child_gone("during warm-up")) return 1;
  const auto meta0 = report_meta(report);
  const int64_t cpu0 = cpu_clock_ns(cpu_clock);
  const int64_t wall0 = monotonic_ns();
  if (!meta0 || cpu0 < 0) {
    std::fprintf(stderr, "no readable %s after %ld s of warm-up\n", report.c_str(), warmup_s);
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    return 1;
  }

  sleep_until(t_fork + seconds * 1'000'000'000L);
  if (child_gone("before the end of the run")) return 1;
  const auto meta1 = report_meta(report);
  const int64_t cpu1 = cpu_clock_ns(cpu_clock);
  const int64_t wall1 = monotonic_ns();
  const auto status = status_kb(pid);
  const std::string load_after = first_line("/proc/loadavg");

  ::kill(pid, SIGTERM);
  int wstatus = 0;
  rusage ru{};
  if (::wait4(pid, &wstatus, 0, &ru) != pid) {
    std::fprintf(stderr, "wait4: %s\n", std::strerror(errno));
    return 1;
  }
  const int64_t t_exit = monotonic_ns();
  const auto meta_final = report_meta(report);
  if (!meta1) {
    std::fprintf(stderr, "%s unreadable at the end of the run\n", report.c_str());
    return 1;
  }

  const double life_s = secs(t_exit - t_fork);
  const double user_s = tv_secs(ru.ru_utime), sys_s = tv_secs(ru.ru_stime);
  const double life_pct = 100.0 * (user_s + sys_s) / life_s;
  const double steady_wall = secs(wall1 - wall0);
  const double steady_cpu = secs(cpu1 - cpu0);
  const double steady_pct = 100.0 * steady_cpu / steady_wall;
  const uint64_t steady_publishes = meta1->seq - meta0->seq;
  const double rate = static_cast<double>(steady_publishes) / steady_wall;
  const double us_per_tick = steady_publishes > 0 ? 1e6 * steady_cpu / static_cast<double>(steady_publishes) : 0;
  const long rss = status.contains("VmRSS") ? status.at("VmRSS") : -1;
  const long hwm = status.contains("VmHWM") ? status.at("VmHWM") : -1;

  std::printf("bench_daemon_cpu: %s, interval 100 ms (default), real /proc, --orca-dir on %s (%s)\n", binary.c_str(),
              parent.c_str(), bench::fs_type(parent).c_str());
  std::printf("  run: %.1f s fork to exit; steady window %.1f s (after %ld s warm-up); exit status %d\n", life_s,
              steady_wall, warmup_s, WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
  std::printf("  load average before: %s\n  load average after:  %s\n", load_before.c_str(), load_after.c_str());
  std::printf("  %-46s %12s\n", "figure", "value");
  // The kernel scales user/system to the exact runtime by tick samples: the sum
  // is exact, the split only indicative.
  std::printf("  %-46s %9.3f ms\n", "CPU, whole life: user (rusage, indicative)", 1e3 * user_s);
  std::printf("  %-46s %9.3f ms\n", "CPU, whole life: system (rusage, indicative)", 1e3 * sys_s);
  std::printf("  %-46s %9.3f ms\n", "CPU, whole life: user + system (exact)", 1e3 * (user_s + sys_s));
  std::printf("  %-46s %10.4f %%\n", "CPU, whole life, % of one core", life_pct);
  std::printf("  %-46s %10.4f %%\n", "CPU, steady state, % of one core", steady_pct);
  std::printf("  %-46s %9.1f us\n", "CPU per tick (steady: sample+build+publish)", us_per_tick);
  std::printf("  %-46s %9.1f us\n", "  budget per tick at 0.25 % and 10/s", 1e6 * kGoalCpuPercent / 100.0 / 10.0);
  std::printf("  %-46s %12llu\n", "publishes in the steady window (seq delta)",
              static_cast<unsigned long long>(steady_publishes));
  std::printf("  %-46s %12.2f\n", "publishes per second (expect 10)", rate);
  std::printf("  %-46s %12llu\n", "seq at SIGTERM", static_cast<unsigned long long>(meta1->seq));
  if (meta_final)
    std::printf("  %-46s %12llu%s\n", "seq of the final report",
                static_cast<unsigned long long>(meta_final->seq), meta_final->stopped ? " (stopped=1)" : " (no stopped!)");
  std::printf("  %-46s %9.2f MiB\n", "VmRSS before SIGTERM", mib(rss));
  std::printf("  %-46s %9.2f MiB\n", "VmHWM (peak RSS)", mib(hwm));
  if (status.contains("RssAnon"))
    std::printf("  %-46s %9.2f / %.2f MiB\n", "  of which RssAnon / RssFile", mib(status.at("RssAnon")),
                mib(status.contains("RssFile") ? status.at("RssFile") : 0));
  std::printf("  %-46s %9.2f MiB\n", "VmSize", mib(status.contains("VmSize") ? status.at("VmSize") : -1));

  const bool cpu_met = life_pct <= kGoalCpuPercent, steady_met = steady_pct <= kGoalCpuPercent;
  const bool rss_met = hwm >= 0 && mib(hwm) <= kGoalRssMiB;
  std::printf("  goal: CPU <= %.2f %% of one core over the whole run (%.0f s): %.4f %% -> %s\n", kGoalCpuPercent,
              life_s, life_pct, bench::verdict(cpu_met));
  std::printf("  goal: CPU <= %.2f %% of one core in the steady state: %.4f %% -> %s\n", kGoalCpuPercent, steady_pct,
              bench::verdict(steady_met));
  std::printf("  goal: RSS (VmHWM) <= %.0f MiB: %.2f MiB -> %s\n", kGoalRssMiB, mib(hwm), bench::verdict(rss_met));
  if (seconds < 60) std::printf("  note: run shorter than 60 s: a smoke run, not a measurement of the goal\n");
  if (splits && !run_splits(td.path() + "/splits", split_ticks, split_interval_ms)) return 1;
  return 0;
}
