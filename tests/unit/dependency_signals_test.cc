// SPDX-License-Identifier: Apache-2.0
// Dependencies from snapshots the test writes (no probe is loaded): what the
// probe is told of each [[dependency]], the window's error share, connect
// failures and resets, the monotonic rule (a dependency that stops
// answering drives the latency shares to 1.0; an empty window keeps the last
// shares), failed reads, the report dependency.<name>.orca field for field,
// the sampler row's reload rule, and the pipeline with agent.ebpf = "off":
// the report is published with headroom.ebpf.unavailable and the node's
// composite is left alone.
#include "agent/signals/dependency_sampler.h"

#include <arpa/inet.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "agent/daemon/pipeline.h"
#include "agent/signals/dependency_scopes.h"
#include "agent/signals/report_builder.h"
#include "captured_log.h"
#include "headroom/orca/names.h"
#include "temp_dir.h"

namespace headroom::agent {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr int64_t kMs = 1'000'000;

class Quiet : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>()));
  }
  void TearDown() override { spdlog::set_default_logger(previous_); }
  std::shared_ptr<spdlog::logger> previous_;
};

DependencyConfig cache() {
  DependencyConfig d;
  d.name = "cache";
  d.host = "10.0.0.5";
  d.port = 6379;
  d.protocol = DependencyProtocol::generic;
  d.target = 10ms;
  d.max = 100ms;
  d.max_concurrency = 4;
  return d;
}

Config one_dependency() {
  Config c;
  c.interval = 100ms;
  c.smoothing = 500ms;  // a window of 5 intervals
  c.dependencies = {cache()};
  return c;
}

// ---------------------------------------------------------------------------
// What the probe is told

TEST(DependencySpec, AddressesPortsProtocolsAndCallers) {
  DependencyConfig d = cache();
  d.callers_cgroup = "/system.slice/api.service";
  d.callers_process = "api";
  probes::DependencySpec s = dependency_spec(d);
  ASSERT_TRUE(s.address.has_value());
  in6_addr want{};
  ASSERT_EQ(::inet_pton(AF_INET6, "::ffff:10.0.0.5", &want), 1);
  EXPECT_EQ(std::memcmp(&*s.address, &want, sizeof want), 0) << "IPv4 as IPv4-mapped IPv6";
  EXPECT_EQ(s.port, 6379);
  EXPECT_EQ(s.target_ns, 10'000'000u);
  EXPECT_EQ(s.max_ns, 100'000'000u);
  EXPECT_EQ(s.protocol, probes::DependencyProtocol::generic);
  EXPECT_EQ(s.caller_cgroup, "/system.slice/api.service");
  EXPECT_EQ(s.caller_process, "api");

  d.host = "2001:db8::5";
  d.protocol = DependencyProtocol::http2;
  s = dependency_spec(d);
  ASSERT_EQ(::inet_pton(AF_INET6, "2001:db8::5", &want), 1);
  ASSERT_TRUE(s.address.has_value());
  EXPECT_EQ(std::memcmp(&*s.address, &want, sizeof want), 0);
  EXPECT_EQ(s.protocol, probes::DependencyProtocol::http2);

  d.host.clear();  // port alone: any host
  d.protocol = DependencyProtocol::http1;
  s = dependency_spec(d);
  EXPECT_FALSE(s.address.has_value());
  EXPECT_EQ(s.protocol, probes::DependencyProtocol::http1);
}

// ---------------------------------------------------------------------------
// The window

probes::DependencyTotals totals(uint64_t completed, uint64_t errors, uint64_t aborted, uint64_t connect_failures = 0,
                                uint64_t resets = 0) {
  probes::DependencyTotals t;
  t.calls.stats.completed = completed;
  t.calls.stats.errors = errors;
  t.calls.stats.aborted = aborted;
  t.connect_failures = connect_failures;
  t.resets = resets;
  return t;
}

TEST(DependencyWindow, ErrorShareIsFailedOverEndedCalls) {
  DependencyWindow w(3);
  const auto t0 = totals(0, 0, 0);
  // 90 answered (5 of them error answers), 10 aborted: 6 failed connects, 4 resets.
  const auto t1 = totals(90, 15, 10, 6, 4);
  w.add(dependency_interval(t0, 0, t1, 100 * kMs), t1);
  DependencySignals s = w.signals(cache());
  ASSERT_TRUE(s.error_share.has_value());
  EXPECT_DOUBLE_EQ(*s.error_share, 15.0 / 100.0);
  EXPECT_EQ(s.window_connect_failures, 6u);
  EXPECT_EQ(s.window_resets, 4u);
  EXPECT_DOUBLE_EQ(s.calls.rps, 900.0);
  EXPECT_DOUBLE_EQ(s.calls.eps, 150.0) << "eps: failed calls per second";
  EXPECT_EQ(s.calls.window_requests, 100u);
  EXPECT_EQ(w.newest()->connect_failures, 6u);

  // Clean intervals push the failures out of a 3-interval window.
  auto prev = t1;
  for (int i = 2; i <= 4; ++i) {
    auto next = totals(prev.calls.stats.completed + 100, 15, 10, 6, 4);
    w.add(dependency_interval(prev, (i - 1) * 100 * kMs, next, i * 100 * kMs), next);
    prev = next;
  }
  s = w.signals(cache());
  EXPECT_DOUBLE_EQ(*s.error_share, 0.0);
  EXPECT_EQ(s.window_connect_failures, 0u);
  EXPECT_EQ(s.window_resets, 0u);
}

TEST(DependencyWindow, RefusedConnectsAloneAreAllErrors) {
  DependencyWindow w(2);
  const auto t0 = totals(0, 0, 0);
  const auto t1 = totals(0, 20, 20, 20, 0);
  w.add(dependency_interval(t0, 0, t1, 100 * kMs), t1);
  const DependencySignals s = w.signals(cache());
  EXPECT_DOUBLE_EQ(s.error_share.value_or(-1), 1.0);
  EXPECT_DOUBLE_EQ(dependency_composite(s).value_or(-1), 1.0);
}

TEST(DependencyWindow, NothingEndedKeepsTheLastErrorShare) {
  DependencyWindow w(1);
  const auto t0 = totals(0, 0, 0);
  const auto t1 = totals(1, 1, 1);  // two ended, one failed
  w.add(dependency_interval(t0, 0, t1, 100 * kMs), t1);
  EXPECT_DOUBLE_EQ(*w.signals(cache()).error_share, 0.5);
  w.add(dependency_interval(t1, 100 * kMs, t1, 200 * kMs), t1);  // an empty interval
  EXPECT_DOUBLE_EQ(*w.signals(cache()).error_share, 0.5);
  DependencyWindow fresh(1);
  fresh.add(dependency_interval(t0, 0, t0, 100 * kMs), t0);
  EXPECT_FALSE(fresh.signals(cache()).error_share.has_value()) << "no call ended yet: no error share";
}

TEST(DependencyWindow, ConcurrencyIsTheBulkheadsFill) {
  DependencyWindow w(1);
  auto t0 = totals(0, 0, 0);
  auto t1 = totals(0, 0, 0);
  t1.calls.inflight = 2;
  t1.calls.inflight_age_ns = 2 * 100 * kMs;  // two calls in flight all interval
  w.add(dependency_interval(t0, 0, t1, 100 * kMs), t1);
  const DependencySignals s = w.signals(cache());  // max_concurrency 4
  EXPECT_DOUBLE_EQ(s.calls.concurrency.value_or(-1), 0.5);
  DependencyConfig undeclared = cache();
  undeclared.max_concurrency = 0;
  EXPECT_FALSE(w.signals(undeclared).calls.concurrency.has_value());
}

// ---------------------------------------------------------------------------
// The sampler, with a scripted kernel

struct FakeKernel {
  probes::DependencyTotals t;
  bool fail = false;
  Result<void> read(probes::DependencySnapshot& s, int64_t now_ns) {
    if (fail) return Error{EIO, "cannot read the dependency map: Input/output error"};
    s.at_ns = now_ns;
    s.dependencies = {t};
    return {};
  }
};

class DependencySamplerTest : public Quiet {};

TEST_F(DependencySamplerTest, ADependencyThatStopsAnsweringReachesOne) {
  FakeKernel k;
  DependencySampler sampler(one_dependency(), [&](auto& s, int64_t now) { return k.read(s, now); });
  ASSERT_TRUE(sampler.running());
  int64_t now = 1'000 * kMs;
  sampler.sample(now);  // the baseline
  EXPECT_FALSE(sampler.dependencies()[0].signals.has_value());
  // Healthy: 10 calls per interval, all fast.
  for (int i = 0; i < 5; ++i) {
    k.t.calls.stats.completed += 10;
    now += 100 * kMs;
    sampler.sample(now);
  }
  ASSERT_TRUE(sampler.dependencies()[0].signals.has_value());
  EXPECT_DOUBLE_EQ(*sampler.dependencies()[0].signals->calls.share_over_target, 0.0);
  EXPECT_DOUBLE_EQ(*sampler.dependencies()[0].signals->calls.share_over_max, 0.0);
  // It stops answering: 3 calls in flight, older than target and max; none ends.
  k.t.calls.inflight = 3;
  k.t.calls.inflight_over_target = 3;
  k.t.calls.inflight_over_max = 3;
  double last_target = 0;
  for (int i = 0; i < 5; ++i) {
    now += 100 * kMs;
    sampler.sample(now);
    const double share = *sampler.dependencies()[0].signals->calls.share_over_target;
    EXPECT_GE(share, last_target) << "the share only rises while it stays stopped";
    last_target = share;
  }
  const DependencySignals& s = *sampler.dependencies()[0].signals;
  EXPECT_DOUBLE_EQ(*s.calls.share_over_target, 1.0) << "the window's answers left it; only late calls remain";
  EXPECT_DOUBLE_EQ(*s.calls.share_over_max, 1.0);
  EXPECT_DOUBLE_EQ(dependency_composite(s).value_or(0), 1.0);
  // The callers give up (their calls end as resets): the shares stay at 1.
  k.t.calls.inflight = k.t.calls.inflight_over_target = k.t.calls.inflight_over_max = 0;
  k.t.calls.stats.aborted += 3;
  k.t.calls.stats.errors += 3;
  k.t.calls.stats.over_target += 3;
  k.t.calls.stats.over_max += 3;
  k.t.resets += 3;
  now += 100 * kMs;
  sampler.sample(now);
  EXPECT_DOUBLE_EQ(*sampler.dependencies()[0].signals->calls.share_over_max, 1.0);
  EXPECT_DOUBLE_EQ(*sampler.dependencies()[0].signals->error_share, 1.0);
  EXPECT_EQ(sampler.dependencies()[0].signals->window_resets, 3u);
}

// An http2 dependency's sampler says at its end how the HTTP/2 walks fared
// (the kernel's counters at the last read); one without http2 says nothing.
TEST_F(DependencySamplerTest, SaysHowTheHttp2WalksFaredAtItsEnd) {
  for (const auto protocol : {DependencyProtocol::http2, DependencyProtocol::http1}) {
    testing::CapturedLog log;
    {
      Config c = one_dependency();
      c.dependencies[0].protocol = protocol;
      int64_t reads = 0;
      DependencySampler sampler(c, [&](probes::DependencySnapshot& s, int64_t now) -> Result<void> {
        s.at_ns = now;
        s.dependencies = {probes::DependencyTotals{}};
        s.http2.frames = static_cast<uint64_t>(100 * ++reads);
        s.http2.desyncs = 3;
        return {};
      });
      sampler.sample(0);
      sampler.sample(100 * kMs);
    }
    const int said = log.count("HTTP/2 dependency walks since the probe was loaded: 200 frames");
    EXPECT_EQ(said, protocol == DependencyProtocol::http2 ? 1 : 0) << log.text();
    if (said) {
      EXPECT_THAT(log.text(), HasSubstr("3 desyncs"));
    }
  }
}

TEST_F(DependencySamplerTest, AFailedReadLosesNothing) {
  FakeKernel k;
  DependencySampler sampler(one_dependency(), [&](auto& s, int64_t now) { return k.read(s, now); });
  int64_t now = 1'000 * kMs;
  sampler.sample(now);
  k.t.calls.stats.completed = 10;
  sampler.sample(now += 100 * kMs);
  EXPECT_TRUE(sampler.dependencies()[0].counted);
  k.fail = true;
  k.t.calls.stats.completed = 30;
  sampler.sample(now += 100 * kMs);
  EXPECT_FALSE(sampler.dependencies()[0].signals.has_value()) << "unavailable while reads fail";
  EXPECT_FALSE(sampler.dependencies()[0].counted);
  EXPECT_TRUE(sampler.read_failing());
  EXPECT_THAT(sampler.status(), HasSubstr("failing: cannot read the dependency map"));
  k.fail = false;
  sampler.sample(now += 100 * kMs);
  ASSERT_TRUE(sampler.dependencies()[0].signals.has_value());
  EXPECT_FALSE(sampler.read_failing());
  EXPECT_EQ(sampler.dependencies()[0].window.newest()->calls.completed, 20u) << "the gap is one interval";
  EXPECT_EQ(sampler.dependencies()[0].signals->calls.window_requests, 30u);
}

TEST_F(DependencySamplerTest, ASnapshotWithoutEveryDependencyIsNoMeasure) {
  FakeKernel k;
  bool short_snapshot = false;
  DependencySampler sampler(one_dependency(), [&](probes::DependencySnapshot& s, int64_t now) {
    auto r = k.read(s, now);
    if (short_snapshot) s.dependencies.clear();
    return r;
  });
  int64_t now = 1'000 * kMs;
  sampler.sample(now);
  k.t.calls.stats.completed = 10;
  sampler.sample(now += 100 * kMs);
  ASSERT_TRUE(sampler.dependencies()[0].signals.has_value());
  short_snapshot = true;
  sampler.sample(now += 100 * kMs);
  EXPECT_FALSE(sampler.dependencies()[0].signals.has_value());
  short_snapshot = false;
  k.t.calls.stats.completed = 25;
  sampler.sample(now += 100 * kMs);
  ASSERT_TRUE(sampler.dependencies()[0].signals.has_value());
  EXPECT_EQ(sampler.dependencies()[0].window.newest()->calls.completed, 15u) << "from the last whole snapshot";
}

TEST_F(DependencySamplerTest, OffAndUnavailableSayWhy) {
  Config off = one_dependency();
  off.ebpf = EbpfMode::off;
  DependencySampler a(off);
  EXPECT_FALSE(a.running());
  EXPECT_FALSE(a.failed());
  EXPECT_EQ(a.status(), "eBPF off");
  DependencyScopes off_row(std::make_unique<DependencySampler>(off));
  EXPECT_EQ(off_row.state(), ProbeState::off);

  // Tests run with an unprivileged or a probe-less build alike: whatever
  // the reason, a sampler whose probe did not open says it and is "failed".
  DependencySampler b(one_dependency());
  if (!b.running()) {
    EXPECT_TRUE(b.failed());
    EXPECT_FALSE(b.unavailable().empty());
    EXPECT_THAT(b.status(), HasSubstr("eBPF unavailable: " + b.unavailable()));
  }
  EXPECT_EQ(DependencyScopes::build(Config{}), nullptr) << "no dependency, no row";
}

TEST(DependencyScopesRule, SameKeepsTheRunningSampler) {
  const Config running = one_dependency();
  Config next = running;
  next.prometheus.listen = "127.0.0.1:9446";  // unrelated to the probe
  EXPECT_TRUE(DependencyScopes::same(running, next));
  next = running;
  next.dependencies[0].max = 200ms;
  EXPECT_FALSE(DependencyScopes::same(running, next));
  next = running;
  next.dependencies.push_back(cache());
  next.dependencies[1].name = "other";
  EXPECT_FALSE(DependencyScopes::same(running, next));
  next = running;
  next.ebpf = EbpfMode::off;
  EXPECT_FALSE(DependencyScopes::same(running, next));
  next = running;
  next.smoothing = 1s;
  EXPECT_FALSE(DependencyScopes::same(running, next));
}

// ---------------------------------------------------------------------------
// The report

TEST(DependencyReport, EveryFieldFromASnapshot) {
  DependencyWindow w(2);
  auto t0 = totals(0, 0, 0);
  auto t1 = totals(95, 10, 5, 3, 2);
  t1.calls.stats.over_target = 20;
  t1.calls.stats.over_max = 5;
  t1.calls.stats.busy_ns = 95 * 4 * kMs;  // 4 ms each on average
  t1.calls.hist[hr_hist_bucket(4 * kMs)] = 95;
  t1.calls.inflight = 1;
  w.add(dependency_interval(t0, 0, t1, 1'000 * kMs), t1);
  const DependencySignals s = w.signals(cache());
  orca::Report r;
  build_dependency_report_into(cache(), &s, {1'700'000'000'000, 9, 100, false}, r);

  EXPECT_DOUBLE_EQ(r.utilization().at(std::string(orca::kSignalSloTarget)), 0.2);
  EXPECT_DOUBLE_EQ(r.utilization().at(std::string(orca::kSignalSloMax)), 0.05);
  EXPECT_DOUBLE_EQ(r.utilization().at(std::string(orca::kSignalErrors)), 0.1);
  ASSERT_TRUE(r.utilization().contains(std::string(orca::kSignalConcurrency)));
  EXPECT_EQ(r.utilization().size(), 4u);
  const double concurrency = r.utilization().at(std::string(orca::kSignalConcurrency));
  EXPECT_DOUBLE_EQ(r.application_utilization(), std::max({0.2, 0.05, 0.1, concurrency}))
      << "the largest of its shares";
  EXPECT_EQ(r.cpu_utilization(), 0.0) << "no CPU figure of this node";
  EXPECT_DOUBLE_EQ(r.rps_fractional(), 95.0);
  EXPECT_DOUBLE_EQ(r.eps(), 10.0);
  const auto& nm = r.named_metrics();
  EXPECT_DOUBLE_EQ(nm.at(std::string(orca::kMetricInflight)), 1);
  EXPECT_DOUBLE_EQ(nm.at(std::string(orca::kMetricWindowRequests)), 100);
  EXPECT_DOUBLE_EQ(nm.at(std::string(orca::kMetricWindowSeconds)), 1.0);
  EXPECT_DOUBLE_EQ(nm.at(std::string(orca::kMetricConnectFailures)), 3);
  EXPECT_DOUBLE_EQ(nm.at(std::string(orca::kMetricResets)), 2);
  EXPECT_DOUBLE_EQ(nm.at(std::string(orca::kMetricSloTargetMs)), 10);
  EXPECT_DOUBLE_EQ(nm.at(std::string(orca::kMetricSloMaxMs)), 100);
  EXPECT_NEAR(nm.at(std::string(orca::kMetricLatencyP50Ms)), 4.0, 0.2);
  EXPECT_NEAR(nm.at(std::string(orca::kMetricLatencyP99Ms)), 4.0, 0.2);
  EXPECT_DOUBLE_EQ(nm.at(std::string(orca::kSeqKey)), 9);
  EXPECT_FALSE(nm.contains(std::string(orca::kMetricEbpfUnavailable)));
  EXPECT_FALSE(nm.contains(std::string(orca::kMetricPending))) << "callers have no server queue";

  // Refilled without signals: only the metadata and the unavailable flag remain.
  build_dependency_report_into(cache(), nullptr, {1'700'000'000'100, 10, 100, false}, r);
  EXPECT_TRUE(r.utilization().empty());
  EXPECT_EQ(r.application_utilization(), 0.0);
  EXPECT_EQ(r.rps_fractional(), 0.0);
  EXPECT_DOUBLE_EQ(r.named_metrics().at(std::string(orca::kMetricEbpfUnavailable)), 1);
  EXPECT_FALSE(r.named_metrics().contains(std::string(orca::kMetricResets)));
  EXPECT_DOUBLE_EQ(r.named_metrics().at(std::string(orca::kSeqKey)), 10);
}

// ---------------------------------------------------------------------------
// The pipeline with agent.ebpf = "off"

class DependencyPipeline : public Quiet {};

TEST_F(DependencyPipeline, OffPublishesTheReportUnavailableAndLeavesTheNodeAlone) {
  testing::TempDir dir;
  Config config = one_dependency();
  config.ebpf = EbpfMode::off;
  config.include_endpoints = true;
  config.proc_root = std::string(HEADROOM_FIXTURES) + "/proc";
  config.sys_root = std::string(HEADROOM_FIXTURES) + "/sys";
  config.orca_dir = dir / "orca";
  const auto scopes = report_scopes(config);
  ASSERT_EQ(scopes.size(), 2u);
  EXPECT_EQ(scopes[1], "dependency.cache");
  auto built = build_pipeline(config);
  ASSERT_TRUE(built) << built.error().message;
  Agent agent(std::move(built.value()));
  const TickTime t0{5'000'000'000, 1'700'000'000'000};
  agent.tick(t0);
  ASSERT_TRUE(agent.tick({t0.monotonic_ns + 100'000'000, t0.unix_ms + 100}));
  const auto& tick = agent.last_tick();
  ASSERT_EQ(tick.reports.size(), 2u);
  EXPECT_EQ(tick.reports[1].scope, "dependency.cache");
  auto file = orca::read_report_file(dir / "orca/dependency.cache.orca");
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_DOUBLE_EQ(file->named_metrics().at(std::string(orca::kMetricEbpfUnavailable)), 1);
  ASSERT_EQ(tick.dependencies.size(), 1u);
  EXPECT_EQ(tick.dependencies[0].name, "cache");
  EXPECT_EQ(tick.dependencies[0].report, 1u);
  EXPECT_FALSE(tick.dependencies[0].measured);
  for (const auto& [key, value] : tick.node().report.utilization())
    EXPECT_FALSE(key.starts_with(orca::kDependencyScopePrefix)) << key << ": a dependency is not the node's load";
  EXPECT_THAT(status_line(agent), HasSubstr("1 dependency report(s) (eBPF off)"));
}

// A reload that removes the dependency removes its report and its figures
// from the tick; one that keeps it keeps the running sampler.
TEST_F(DependencyPipeline, AReloadKeepsOrRemovesTheDependency) {
  testing::TempDir dir;
  Config config = one_dependency();
  config.ebpf = EbpfMode::off;
  config.proc_root = std::string(HEADROOM_FIXTURES) + "/proc";
  config.sys_root = std::string(HEADROOM_FIXTURES) + "/sys";
  config.orca_dir = dir / "orca";
  auto built = build_pipeline(config);
  ASSERT_TRUE(built) << built.error().message;
  Agent agent(std::move(built.value()));
  TickTime now{5'000'000'000, 1'700'000'000'000};
  agent.tick(now);
  const auto next = [&] {
    now = {now.monotonic_ns + 100'000'000, now.unix_ms + 100};
    return now;
  };
  ASSERT_TRUE(agent.tick(next()));
  const std::string file = dir / "orca/dependency.cache.orca";
  ASSERT_TRUE(std::filesystem::exists(file));

  Config same = config;
  same.log_level = LogLevel::debug;
  auto kept = build_reload(same, agent);
  ASSERT_TRUE(kept) << kept.error().message;
  ASSERT_EQ(kept->keep.size(), sampler_rows().size());
  EXPECT_TRUE(kept->keep[1]) << "the dependencies' row keeps its sampler";
  agent.replace(std::move(kept.value()), now);
  ASSERT_TRUE(agent.tick(next()));
  EXPECT_EQ(agent.last_tick().dependencies.size(), 1u);

  Config without = config;
  without.dependencies.clear();
  auto removed = build_reload(without, agent);
  ASSERT_TRUE(removed) << removed.error().message;
  agent.replace(std::move(removed.value()), now);
  ASSERT_TRUE(agent.tick(next()));
  EXPECT_TRUE(agent.last_tick().dependencies.empty());
  EXPECT_EQ(agent.last_tick().reports.size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(file)) << "a removed dependency's report is removed";
}

}  // namespace
}  // namespace headroom::agent
