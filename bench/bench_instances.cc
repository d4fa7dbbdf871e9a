// SPDX-License-Identifier: Apache-2.0
// bench_instances: the agent's CPU per tick for the endpoints' part of a
// tick with 1, 16 and 128 instances of one endpoint (issue 27). In process,
// the real pieces: EndpointSampler fed synthetic probe snapshots (its test
// Reader), each instance's server found in a fixture /proc (ns/net, cgroup)
// and its cgroup read from a fixture /sys (v1: cpuacct, cfs quota, memory),
// EndpointScopes building every report (the aggregate and one per
// instance), each serialized and written through OrcaDirPublisher into a
// directory on /dev/shm. The node's report is left out: it does not depend
// on the instances.
//
// The variants alternate in slices of --slice ticks (order rotated every
// round, --rounds rounds); per slice the process CPU clock per tick; per
// variant the median over slices and its p10..p90 as the noise figure, and
// the increment per instance from N=1 to N=128 per round.
//
// --interval-ms sleeps that long before each tick, so caches are as cold
// as the daemon's at its cadence (the figure per tick is then larger);
// without it the ticks run back to back.
//
//   bench_instances [--rounds N (40)] [--slice N (20)] [--interval-ms N] [--dir /dev/shm]
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/endpoint_sampler.h"
#include "agent/signals/endpoint_scopes.h"
#include "bench/bench_util.h"
#include "publishers/orca_dir_publisher.h"
#include "publishers/tick.h"

namespace {

using namespace headroom;
namespace fs = std::filesystem;

int64_t process_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

constexpr uint32_t kNetnsBase = 4026540000u;
constexpr pid_t kPidBase = 50000;

// <proc>/<pid>/ns/net and cgroup, <sys>/fs/cgroup/... for instance i.
void make_fixture(const std::string& proc, const std::string& sys, int n) {
  for (int i = 0; i < n; ++i) {
    const auto pid = std::to_string(kPidBase + i);
    const auto pod = "kubepods/pod" + std::to_string(i);
    fs::create_directories(proc + "/" + pid + "/ns");
    fs::create_symlink("net:[" + std::to_string(kNetnsBase + static_cast<uint32_t>(i)) + "]",
                       proc + "/" + pid + "/ns/net");
    write_file(proc + "/" + pid + "/cgroup",
               "11:memory:/" + pod + "\n4:cpu,cpuacct:/" + pod + "\n3:cpuset:/" + pod + "\n");
    const std::string cpu = sys + "/fs/cgroup/cpu,cpuacct/" + pod;
    write_file(cpu + "/cpuacct.usage", std::to_string(1'000'000'000ULL * static_cast<unsigned>(i + 1)) + "\n");
    write_file(cpu + "/cpu.cfs_quota_us", "50000\n");
    write_file(cpu + "/cpu.cfs_period_us", "100000\n");
    write_file(cpu + "/cpu.stat", "nr_periods 10\nnr_throttled 0\nthrottled_time 0\n");
    write_file(sys + "/fs/cgroup/cpuset/" + pod + "/cpuset.effective_cpus", "0-1\n");
    const std::string mem = sys + "/fs/cgroup/memory/" + pod;
    write_file(mem + "/memory.usage_in_bytes", "104857600\n");
    write_file(mem + "/memory.limit_in_bytes", "536870912\n");
  }
  write_file(proc + "/meminfo", "MemTotal:        8000000 kB\nMemAvailable:    4000000 kB\n");
}

// One endpoint with n instances, counts moving every tick.
class Variant {
 public:
  Variant(int n, const std::string& root) : n_(n) {
    const std::string proc = root + "/proc", sys = root + "/sys", out = root + "/orca";
    make_fixture(proc, sys, n);
    agent::Config config;
    config.proc_root = proc;
    config.sys_root = sys;
    config.cgroup_version = probes::CgroupVersion::v1;
    agent::EndpointConfig ep;
    ep.name = "api";
    ep.port = 8080;
    ep.target = std::chrono::milliseconds(50);
    ep.max = std::chrono::milliseconds(200);
    config.endpoints.push_back(ep);
    auto sampler = std::make_unique<agent::EndpointSampler>(
        config, [this](probes::EndpointSnapshot& s) { return fill(s); });
    scopes_ = std::make_unique<agent::EndpointScopes>(std::move(sampler));
    auto dir = publishers::OrcaDirPublisher::open(out);
    if (!dir) {
      std::fprintf(stderr, "bench_instances: %s: %s\n", out.c_str(), dir.error().message.c_str());
      std::exit(2);
    }
    dir_ = std::make_unique<publishers::OrcaDirPublisher>(std::move(dir.value()));
  }

  // One tick of the endpoints: sample, build every report, serialize, write.
  void tick() {
    now_ns_ += 100'000'000;
    const int64_t t0 = process_cpu_ns();
    scopes_->sample(now_ns_);
    const int64_t t1 = process_cpu_ns();
    tick_.meta = {bench::unix_ms(), ++seq_, 100, false};
    tick_.endpoints.clear();
    const auto& scopes = scopes_->scopes();
    tick_.reports.resize(scopes.size());
    for (std::size_t i = 0; i < scopes.size(); ++i)
      if (tick_.reports[i].scope != scopes[i]) tick_.reports[i].scope = scopes[i];
    scopes_->report(agent::NodeFigures{0.4}, tick_.meta, std::span(tick_.reports), tick_);
    for (auto& r : tick_.reports) r.report.SerializeToString(&r.bytes);
    const int64_t t2 = process_cpu_ns();
    for (auto& r : tick_.reports) {
      if (auto w = dir_->publish_bytes(r.scope, r.bytes); !w) {
        std::fprintf(stderr, "bench_instances: %s: %s\n", r.scope.c_str(), w.error().message.c_str());
        std::exit(2);
      }
    }
    split_ns[0] += t1 - t0;
    split_ns[1] += t2 - t1;
    split_ns[2] += process_cpu_ns() - t2;
    ++split_ticks;
  }
  // Instances whose server's cgroup was found and read.
  std::size_t cgroups_read() const {
    std::size_t k = 0;
    for (const auto& i : scopes_->sampler().instances()) k += i.resources.unavailable().empty() && i.resources.cpu();
    return k;
  }
  // CPU ns in sample, report + serialize, write, summed over split_ticks ticks.
  int64_t split_ns[3] = {0, 0, 0};
  int64_t split_ticks = 0;
  int n() const { return n_; }
  std::size_t reports() const { return tick_.reports.size(); }

 private:
  Result<void> fill(probes::EndpointSnapshot& s) {
    ++ticks_;
    s.at_ns = now_ns_;
    s.endpoints.assign(1, {});
    s.instances.resize(static_cast<std::size_t>(n_));
    s.listeners.resize(static_cast<std::size_t>(n_));
    uint64_t total = 0;
    for (int i = 0; i < n_; ++i) {
      auto& in = s.instances[static_cast<std::size_t>(i)];
      in.endpoint = 0;
      in.netns = kNetnsBase + static_cast<uint32_t>(i);
      const uint64_t done = ticks_ * static_cast<uint64_t>(100 + i);
      in.totals.stats.completed = done;
      in.totals.stats.errors = done / 100;
      in.totals.stats.over_target = done / 20;
      in.totals.stats.busy_ns = done * 3'000'000;
      in.totals.hist[200] = static_cast<uint32_t>(done * 9 / 10);
      in.totals.hist[260] = static_cast<uint32_t>(done - done * 9 / 10);
      in.totals.inflight = 2;
      total += done;
      auto& l = s.listeners[static_cast<std::size_t>(i)];
      l.netns = in.netns;
      l.port = 8080;
      l.pid = kPidBase + i;
      l.listeners = 1;
    }
    s.endpoints[0].stats.completed = total;
    s.endpoints[0].hist[200] = static_cast<uint32_t>(total);
    return {};
  }

  int n_;
  uint64_t ticks_ = 0;
  int64_t now_ns_ = 1'000'000'000'000;
  uint64_t seq_ = 0;
  std::unique_ptr<agent::EndpointScopes> scopes_;
  std::unique_ptr<publishers::OrcaDirPublisher> dir_;
  publishers::Tick tick_;
};

double pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return bench::percentile_sorted(v, q);
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Flags flags(argc, argv);
  if (flags.has("--help")) {
    std::printf("usage: bench_instances [--rounds N (40)] [--slice N (20)] [--interval-ms N] [--dir /dev/shm]\n");
    return 0;
  }
  const long rounds = flags.get_long("--rounds", 40);
  const long slice = flags.get_long("--slice", 20);
  const long interval_ms = flags.has("--interval-ms") ? flags.get_long("--interval-ms", 100) : 0;
  const bench::TempDir tmp(flags.get("--dir", "/dev/shm"), "headroom-instances");
  if (!tmp.ok()) return 2;
  spdlog::set_level(spdlog::level::off);

  std::vector<std::unique_ptr<Variant>> variants;
  for (int n : {1, 16, 128}) variants.push_back(std::make_unique<Variant>(n, tmp.path() + "/n" + std::to_string(n)));
  for (auto& v : variants) {
    for (int i = 0; i < 5; ++i) v->tick();  // baseline, instances found, windows filling
    v->split_ns[0] = v->split_ns[1] = v->split_ns[2] = v->split_ticks = 0;
  }
  std::vector<std::vector<double>> us(variants.size());
  std::vector<double> per_instance;
  for (long r = 0; r < rounds; ++r) {
    std::vector<double> this_round(variants.size());
    for (std::size_t k = 0; k < variants.size(); ++k) {
      const std::size_t v = (k + static_cast<std::size_t>(r)) % variants.size();
      int64_t cpu = 0;
      for (long t = 0; t < slice; ++t) {
        if (interval_ms > 0) ::usleep(static_cast<useconds_t>(interval_ms * 1000));
        const int64_t c0 = process_cpu_ns();
        variants[v]->tick();
        cpu += process_cpu_ns() - c0;
      }
      this_round[v] = static_cast<double>(cpu) / 1000.0 / static_cast<double>(slice);
      us[v].push_back(this_round[v]);
    }
    per_instance.push_back((this_round.back() - this_round.front()) / 127.0);
  }
  std::printf("# bench_instances: the endpoints' part of a tick (sample + reports + serialize + write), %ld rounds x "
              "%ld ticks per variant, %s, process CPU clock\n",
              rounds, slice, interval_ms > 0 ? ("one tick per " + std::to_string(interval_ms) + " ms").c_str() : "back to back");
  std::printf("%-10s %8s %8s %9s %9s %9s %12s %9s %9s %9s\n", "instances", "reports", "cgroups", "p50 us", "p10",
              "p90", "us/s @100ms", "sample", "build+ser", "write");
  for (std::size_t v = 0; v < variants.size(); ++v) {
    const auto& x = *variants[v];
    const double t = static_cast<double>(x.split_ticks) * 1000.0;
    std::printf("%-10d %8zu %8zu %9.1f %9.1f %9.1f %12.0f %9.1f %9.1f %9.1f\n", x.n(), x.reports(), x.cgroups_read(),
                pct(us[v], 0.5), pct(us[v], 0.1), pct(us[v], 0.9), pct(us[v], 0.5) * 10,
                static_cast<double>(x.split_ns[0]) / t, static_cast<double>(x.split_ns[1]) / t,
                static_cast<double>(x.split_ns[2]) / t);
  }
  std::printf("(sample, build+ser, write: means per tick, us; cgroups: instances whose server's cgroup was read)\n");
  std::printf("per instance (N=128 - N=1) / 127, per round: p50 %.2f us [p10 %.2f .. p90 %.2f]\n",
              pct(per_instance, 0.5), pct(per_instance, 0.1), pct(per_instance, 0.9));
  return 0;
}
