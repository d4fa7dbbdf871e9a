// SPDX-License-Identifier: Apache-2.0
// The agent's own health as the pipeline keeps it (publishers::AgentHealth),
// read through the Prometheus figures it feeds: ticks, the last publish,
// failures per publisher, the configuration's generation and a rejected
// reload. On fixture trees, with a textfile as the window into each tick.
#include "agent/daemon/pipeline.h"

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/signals/endpoint_scopes.h"
#include "temp_dir.h"

namespace headroom::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

double sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(series + " ")) return std::stod(line.substr(series.size() + 1));
  ADD_FAILURE() << "no series " << series << " in:\n" << text;
  return -1;
}

class PipelineHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy(fs::path(HEADROOM_FIXTURES) / "proc", dir_ / "proc", fs::copy_options::recursive);
    fs::copy(fs::path(HEADROOM_FIXTURES) / "sys-cgroup2", dir_ / "sys", fs::copy_options::recursive);
    config_.proc_root = dir_ / "proc";
    config_.sys_root = dir_ / "sys";
    config_.orca_dir = dir_ / "orca";
    config_.prometheus.textfile = dir_ / "prom/headroom.prom";
    config_.prometheus.textfile_interval = 100ms;  // the minimum; ticks here are ms apart, so...
    fs::create_directory(dir_ / "prom");
    EnvoyBridgeConfig bridge;
    bridge.file = dir_ / "envoy/node.pressure";
    config_.envoy = {bridge};
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>()));
  }
  void TearDown() override { spdlog::set_default_logger(previous_); }

  Agent make() {
    auto built = build_pipeline(config_);
    if (!built) throw std::runtime_error(built.error().message);
    return Agent(std::move(built.value()));
  }
  // The clocks each tick is given: 100 ms apart.
  TickTime next() {
    now_.monotonic_ns += 100'000'000;
    now_.unix_ms += 100;
    return now_;
  }
  // ...each look at the figures writes them with the agent's final tick.
  std::string figures(Agent& agent) {
    agent.stop(next());
    std::ifstream in(dir_ / "prom/headroom.prom");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  testing::TempDir dir_;
  Config config_;
  TickTime now_{1'000'000'000, 1'700'000'000'000};
  std::shared_ptr<spdlog::logger> previous_;
};

// The endpoints' sampler of a running agent (row 0 of the sampler table).
const EndpointSampler& endpoints_of(const Agent& agent) {
  return dynamic_cast<const EndpointScopes&>(*agent.sampler(0)).sampler();
}

TEST_F(PipelineHealthTest, TicksAndTheLastPublishAreCounted) {
  Agent agent = make();
  EXPECT_FALSE(agent.tick(next()));  // the baseline publishes nothing
  EXPECT_TRUE(agent.tick(next()));
  EXPECT_TRUE(agent.tick(next()));
  const std::string text = figures(agent);
  EXPECT_EQ(sample(text, "headroom_ticks_total"), 2);
  // The third tick's clock (the stop's report does not count as published).
  EXPECT_DOUBLE_EQ(sample(text, "headroom_last_publish_timestamp_seconds"), 1'700'000'000.3);
  EXPECT_EQ(sample(text, "headroom_config_generation"), 1);
  EXPECT_EQ(sample(text, "headroom_config_last_reload_successful"), 1);
  EXPECT_EQ(sample(text, "headroom_ebpf_available"), 0);  // no endpoints
  // Every publisher's counter is there from the start, at 0.
  EXPECT_EQ(sample(text, "headroom_publish_failures_total{publisher=\"orca_dir\"}"), 0);
  EXPECT_EQ(sample(text, "headroom_publish_failures_total{publisher=\"envoy\"}"), 0);
  EXPECT_EQ(sample(text, "headroom_publish_failures_total{publisher=\"prometheus_textfile\"}"), 0);
}

TEST_F(PipelineHealthTest, AFailingPublisherIsCountedByNameAndTheTickStillCounts) {
  Agent agent = make();
  agent.tick(next());
  agent.tick(next());
  // The bridge's directory becomes a file: every write of the bridge fails.
  fs::remove_all(dir_ / "envoy");
  std::ofstream(dir_ / "envoy") << "not a directory";
  agent.tick(next());
  agent.tick(next());
  agent.tick(next());
  const std::string text = figures(agent);
  EXPECT_EQ(sample(text, "headroom_publish_failures_total{publisher=\"envoy\"}"), 3);
  EXPECT_EQ(sample(text, "headroom_ticks_total"), 4) << "node.orca was written on every tick";
}

TEST_F(PipelineHealthTest, NodeOrcaFailingStopsTheTickCount) {
  Agent agent = make();
  agent.tick(next());
  agent.tick(next());
  fs::remove_all(dir_ / "orca");
  std::ofstream(dir_ / "orca") << "not a directory";
  EXPECT_FALSE(agent.tick(next()));
  EXPECT_FALSE(agent.tick(next()));
  const std::string text = figures(agent);
  EXPECT_EQ(sample(text, "headroom_ticks_total"), 1);
  EXPECT_EQ(sample(text, "headroom_publish_failures_total{publisher=\"orca_dir\"}"), 2);
}

TEST_F(PipelineHealthTest, ReloadsCountGenerationsAndARejectedOneIsShown) {
  Agent agent = make();
  agent.tick(next());
  agent.tick(next());
  agent.reload_failed("rejected: a test");
  agent.tick(next());
  std::string text = figures(agent);
  EXPECT_EQ(sample(text, "headroom_config_last_reload_successful"), 0);
  EXPECT_EQ(sample(text, "headroom_config_generation"), 1);
  auto rebuilt = build_pipeline(config_);
  ASSERT_TRUE(rebuilt);
  agent.replace(std::move(rebuilt.value()), next());
  agent.tick(next());
  text = figures(agent);
  EXPECT_EQ(sample(text, "headroom_config_last_reload_successful"), 1);
  EXPECT_EQ(sample(text, "headroom_config_generation"), 2);
  EXPECT_EQ(sample(text, "headroom_ticks_total"), 3) << "ticks count across the reload";
}


TEST_F(PipelineHealthTest, AFailedReloadIsInTheStatusAndTheHealthUntilOneSucceeds) {
  Agent agent = make();
  agent.tick(next());
  agent.tick(next());
  EXPECT_EQ(status_line(agent).find("reload"), std::string::npos) << status_line(agent);
  agent.reload_failed("the new endpoints' eBPF probe cannot be attached (no BTF)");
  agent.tick(next());
  EXPECT_THAT(status_line(agent), ::testing::HasSubstr("; last reload failed at "));
  EXPECT_THAT(status_line(agent), ::testing::HasSubstr("Z: the new endpoints' eBPF probe cannot be attached (no BTF)"));
  EXPECT_EQ(sample(figures(agent), "headroom_config_last_reload_successful"), 0);
  auto rebuilt = build_pipeline(config_);
  ASSERT_TRUE(rebuilt);
  agent.replace(std::move(rebuilt.value()), next());
  agent.tick(next());
  EXPECT_EQ(status_line(agent).find("reload"), std::string::npos) << status_line(agent);
  EXPECT_EQ(sample(figures(agent), "headroom_config_last_reload_successful"), 1);
}

TEST_F(PipelineHealthTest, AFailingPublisherIsInTheStatusFromItsFirstErrorUntilItRecovers) {
  Agent agent = make();
  agent.tick(next());
  agent.tick(next());
  const std::string healthy = status_line(agent);
  EXPECT_EQ(healthy.find("failing"), std::string::npos) << healthy;
  fs::remove_all(dir_ / "envoy");
  std::ofstream(dir_ / "envoy") << "not a directory";
  agent.tick(next());
  const std::string failing = status_line(agent);
  EXPECT_THAT(failing, ::testing::HasSubstr("; envoy " + (dir_ / "envoy/node.pressure") + " failing since "));
  EXPECT_EQ(failing.find('\n'), std::string::npos) << "one line";
  ASSERT_EQ(agent.failing().size(), 1u);
  // The same failure on later ticks leaves the line as it was: the daemon
  // sends STATUS= only when it changes.
  agent.tick(next());
  agent.tick(next());
  EXPECT_EQ(status_line(agent), failing);
  fs::remove(dir_ / "envoy");
  fs::create_directory(dir_ / "envoy");
  agent.tick(next());
  EXPECT_EQ(status_line(agent), healthy);
  EXPECT_TRUE(agent.failing().empty());
}

TEST_F(PipelineHealthTest, AReloadWhoseProbeFailsIsAppliedWhenTheRunningOneFailedToo) {
  // No BTF under the fixture's sys_root: every probe fails to load here.
  config_.endpoints = {EndpointConfig{"web", 8080, "", 10ms, 100ms, 0}};
  Agent agent = make();
  agent.tick(next());
  ASSERT_EQ(agent.sampler(0)->state(), ProbeState::failed);
  Config changed = config_;
  changed.endpoints[0].target = 20ms;
  auto rebuilt = build_reload(changed, agent);
  ASSERT_TRUE(rebuilt) << rebuilt.error().message;
  agent.replace(std::move(rebuilt.value()), next());
  EXPECT_EQ(endpoints_of(agent).endpoints().at(0).config.target, 20ms) << "the rest of the file took effect";
}

EndpointConfig web_endpoint() {
  EndpointConfig web;
  web.name = "web";
  web.port = 8080;
  web.target = 10ms;
  web.max = 100ms;
  return web;
}

// A reload keeps the running endpoint probe (its maps, traced processes,
// in-flight requests and windows) exactly when the new configuration would
// build the same one.
TEST(SameEndpointProbe, OnlyWhatTheProbeIsBuiltFromCounts) {
  Config base;
  base.endpoints = {web_endpoint()};
  struct Case {
    const char* change;
    void (*apply)(Config&);
    bool same;
  };
  const Case cases[] = {
      {"nothing", [](Config&) {}, true},
      {"log_level", [](Config& c) { c.log_level = LogLevel::debug; }, true},
      {"orca_dir", [](Config& c) { c.orca_dir = "/tmp/elsewhere"; }, true},
      {"node.cgroup", [](Config& c) { c.cgroup = "system.slice/x.service"; }, true},
      {"an endpoint's target", [](Config& c) { c.endpoints[0].target = 20ms; }, false},
      {"an endpoint's max_concurrency", [](Config& c) { c.endpoints[0].max_concurrency = 8; }, false},
      {"an endpoint added",
       [](Config& c) {
         auto e = c.endpoints[0];
         e.name = "api";
         e.port = 9090;
         c.endpoints.push_back(e);
       },
       false},
      {"every endpoint removed", [](Config& c) { c.endpoints.clear(); }, false},
      {"ebpf off", [](Config& c) { c.ebpf = EbpfMode::off; }, false},
      {"interval", [](Config& c) { c.interval = 50ms; }, false},
      {"smoothing", [](Config& c) { c.smoothing = 1s; }, false},
      {"proc_root", [](Config& c) { c.proc_root = "/host/proc"; }, false},
      {"sys_root", [](Config& c) { c.sys_root = "/host/sys"; }, false},
  };
  for (const auto& k : cases) {
    Config next = base;
    k.apply(next);
    EXPECT_EQ(EndpointScopes::same(base, next), k.same) << k.change;
  }
}

// A reload keeps the node sampler (and its previous readings) when the new
// one would read the same files: the next tick's rates span a whole interval.
TEST(SameNodeSampler, Table) {
  const Config base;
  struct Case {
    const char* change;
    void (*apply)(Config&);
    bool same;
  };
  const Case cases[] = {
      {"nothing", [](Config&) {}, true},
      {"log_level", [](Config& c) { c.log_level = LogLevel::debug; }, true},
      {"orca_dir", [](Config& c) { c.orca_dir = "/tmp/elsewhere"; }, true},
      {"interval", [](Config& c) { c.interval = 50ms; }, true},
      {"node.cgroup", [](Config& c) { c.cgroup = "system.slice/x.service"; }, false},
      {"node.cgroup_version", [](Config& c) { c.cgroup_version = probes::CgroupVersion::v1; }, false},
      {"node.signals", [](Config& c) { c.signals = {"cpu"}; }, false},
      {"proc_root", [](Config& c) { c.proc_root = "/host/proc"; }, false},
      {"sys_root", [](Config& c) { c.sys_root = "/host/sys"; }, false},
  };
  for (const auto& k : cases) {
    Config next = base;
    k.apply(next);
    EXPECT_EQ(same_node_sampler(base, next), k.same) << k.change;
  }
}

TEST_F(PipelineHealthTest, AReloadWithTheSameEndpointsKeepsTheSamplerAndAChangedOneBuildsANew) {
  config_.endpoints = {web_endpoint()};
  config_.ebpf = EbpfMode::off;  // no probe to load here; the sampler is what is kept or not
  Agent agent = make();
  agent.tick(next());
  const EndpointSampler* running = &endpoints_of(agent);

  Config same = config_;
  same.log_level = LogLevel::debug;
  auto kept = build_pipeline(same, &agent.config());
  ASSERT_TRUE(kept);
  EXPECT_TRUE(kept->keep.at(0));
  EXPECT_EQ(kept->samplers.at(0), nullptr) << "the running sampler is taken over, not rebuilt";
  agent.replace(std::move(kept.value()), next());
  EXPECT_EQ(&endpoints_of(agent), running);
  EXPECT_EQ(agent.config().log_level, LogLevel::debug);
  agent.tick(next());

  Config changed = config_;
  changed.endpoints[0].target = 20ms;
  auto rebuilt = build_pipeline(changed, &agent.config());
  ASSERT_TRUE(rebuilt);
  ASSERT_NE(rebuilt->samplers.at(0), nullptr);
  agent.replace(std::move(rebuilt.value()), next());
  EXPECT_NE(&endpoints_of(agent), running);
  EXPECT_EQ(endpoints_of(agent).endpoints().at(0).config.target, 20ms);
  agent.tick(next());
}

}  // namespace
}  // namespace headroom::agent
