// SPDX-License-Identifier: Apache-2.0
// The publishers behind publishers/publisher.h, driven by hand-made ticks:
// the registry's order, what each writes from the typed values, stop,
// retire and take_over.
#include "publishers/publisher.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "agent/signals/report_builder.h"
#include "headroom/orca/report.h"
#include "publishers/envoy_bridge.h"
#include "publishers/orca_dir_publisher.h"
#include "agent/daemon/pipeline.h"
#include "agent/daemon/publisher_registry.h"
#include "temp_dir.h"
#include "tick_builder.h"

namespace headroom::publishers {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

agent::EndpointConfig endpoint(const std::string& name) {
  agent::EndpointConfig e;
  e.name = name;
  e.port = 8080;
  e.target = std::chrono::milliseconds(10);
  e.max = std::chrono::milliseconds(100);
  return e;
}

class PublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.orca_dir = dir_ / "orca";
    config_.endpoints = {endpoint("api"), endpoint("web")};
    agent::EnvoyBridgeConfig bridge;
    bridge.value = "utilization.cpu.pressure";
    bridge.file = dir_ / "envoy/pressure";
    bridge.neutral = 0.05;
    config_.envoy = {bridge};
    tick_.meta = {1'700'000'000'000, 7, 100, false};
    node_.signals = {{"cpu", 1.4}, {"cpu.pressure", 0.25}, {"memory", 0.5}};
    node_.raw = {{"headroom.cpu.busy", 0.9}};
    api_signals_.rps = 12;
    api_signals_.share_over_target = 0.5;
    refill();
  }
  void refill() {
    testing::fill_tick(tick_, node_, config_, {{&config_.endpoints[0], &api_signals_}, {&config_.endpoints[1]}});
  }

  static Publishers build(const agent::Config& config) {
    auto built = agent::build_publishers(config, agent::report_scopes(config));
    if (!built) throw std::runtime_error(built.error().message);
    return std::move(built.value());
  }
  Publishers build() { return build(config_); }
  orca::Report report(const std::string& name) {
    auto r = orca::read_report_file(dir_ / ("orca/" + name));
    if (!r) throw std::runtime_error(r.error().message);
    return *r;
  }

  TempDir dir_;
  agent::Config config_;
  agent::EndpointSignals api_signals_;
  agent::NodeSample node_;
  Tick tick_;
};

TEST_F(PublisherTest, TheRegistryBuildsTheOrcaDirectoryFirstThenEachBridge) {
  ASSERT_GE(agent::publisher_kinds().size(), 2u);
  EXPECT_EQ(agent::publisher_kinds()[0].name, "orca_dir");
  const auto pubs = build();
  ASSERT_EQ(pubs.size(), 2u);
  EXPECT_EQ(pubs[0]->name(), "orca_dir");
  EXPECT_TRUE(pubs[0]->essential());
  EXPECT_EQ(pubs[0]->target(), config_.orca_dir);
  EXPECT_EQ(pubs[1]->name(), "envoy");
  EXPECT_FALSE(pubs[1]->essential());
  EXPECT_EQ(pubs[1]->target(), config_.envoy[0].file);
}

TEST_F(PublisherTest, ReportsAndTheBridgeCarryTheTicksValues) {
  auto pubs = build();
  for (auto& p : pubs) ASSERT_TRUE(p->publish(tick_));
  const auto node = report("node.orca");
  EXPECT_EQ(testing::read_file(dir_ / "orca/node.orca"), tick_.node().bytes) << "the file holds the bytes the tick carries";
  EXPECT_DOUBLE_EQ(node.cpu_utilization(), 1.4);
  EXPECT_DOUBLE_EQ(node.application_utilization(), 1.4);
  EXPECT_DOUBLE_EQ(node.utilization().at("cpu"), 1.0);
  EXPECT_DOUBLE_EQ(node.named_metrics().at("headroom.cpu.busy"), 0.9);
  EXPECT_DOUBLE_EQ(node.named_metrics().at("headroom.seq"), 7);
  EXPECT_DOUBLE_EQ(report("endpoint.api.orca").rps_fractional(), 12);
  EXPECT_DOUBLE_EQ(report("endpoint.web.orca").named_metrics().at("headroom.ebpf.unavailable"), 1);
  EXPECT_EQ(testing::read_file(config_.envoy[0].file), "0.25\n");

  // Kept reports are refilled: a figure that goes away leaves the file too.
  node_.raw.clear();
  node_.signals.erase("cpu");
  tick_.meta.seq = 8;
  refill();
  for (auto& p : pubs) ASSERT_TRUE(p->publish(tick_));
  const auto again = report("node.orca");
  EXPECT_FALSE(again.named_metrics().contains("headroom.cpu.busy"));
  EXPECT_FALSE(again.utilization().contains("cpu"));
  EXPECT_EQ(again.cpu_utilization(), 0.0);
  EXPECT_DOUBLE_EQ(again.named_metrics().at("headroom.seq"), 8);
}

TEST_F(PublisherTest, StopMarksTheFinalReportAndWritesTheNeutralValue) {
  auto pubs = build();
  for (auto& p : pubs) ASSERT_TRUE(p->publish(tick_));
  tick_.meta.stopped = true;
  refill();
  for (auto& p : pubs) p->stop(tick_);
  EXPECT_DOUBLE_EQ(report("node.orca").named_metrics().at("headroom.stopped"), 1);
  EXPECT_DOUBLE_EQ(report("endpoint.api.orca").named_metrics().at("headroom.stopped"), 1);
  EXPECT_EQ(testing::read_file(config_.envoy[0].file), "0.05\n");
}

TEST_F(PublisherTest, TakeOverRemovesReportsOfEndpointsThatAreGoneAndRetireIsNeutral) {
  auto pubs = build();
  for (auto& p : pubs) ASSERT_TRUE(p->publish(tick_));
  agent::Config next = config_;
  next.endpoints = {endpoint("api")};
  next.envoy.clear();
  auto fresh = build(next);
  ASSERT_EQ(fresh.size(), 1u);
  fresh[0]->take_over(agent::report_scopes(config_));
  EXPECT_TRUE(fs::exists(dir_ / "orca/endpoint.api.orca"));
  EXPECT_FALSE(fs::exists(dir_ / "orca/endpoint.web.orca"));
  pubs[1]->retire();
  EXPECT_EQ(testing::read_file(config_.envoy[0].file), "0.05\n");
}

TEST_F(PublisherTest, AnUnusableDirectoryIsABuildErrorOfThePlaceNotTheConfiguration) {
  testing::TempDir other;
  std::ofstream(other / "file") << "x";
  config_.orca_dir = other / "file/orca";
  auto built = agent::build_publishers(config_, agent::report_scopes(config_));
  ASSERT_FALSE(built);
  EXPECT_EQ(agent::exit_status(built.error()), agent::kExitCantCreat) << built.error().message;
  EXPECT_NE(built.error().message.find("agent.orca_dir"), std::string::npos) << built.error().message;
}

}  // namespace
}  // namespace headroom::publishers
