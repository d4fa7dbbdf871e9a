// SPDX-License-Identifier: Apache-2.0
// The file `headroomctl tune recommend` writes (agent/ctl/tune_file.h): the
// input with the tuned endpoints' target, max and [[endpoint.shed]] replaced,
// every other section kept, a header of '#' lines, and what headroomd's
// configuration reader and the shedder's checks say of it.
#include "agent/ctl/tune_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "agent/config/config.h"

namespace headroom::ctl::tune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr const char* kInput = R"(# the team's file
[agent]
interval = "200ms"
orca_dir = "/run/orca"

[node]
signals = ["cpu", "memory"]

[[endpoint]]
name = "play"
port = 8080
target = "10ms"
max = "100ms"

[[endpoint]]
name = "quiet"
port = 8081
path = "/quiet"
target = "5ms"
max = "50ms"
max_concurrency = 16

[prometheus]
listen = "127.0.0.1:9464"
)";

Recommendation play() {
  Recommendation r;
  r.endpoint = "play";
  r.ok = true;
  r.peak_steps = 42;
  r.peak_rate = 950;
  r.requests_at_peak = 123456;
  r.method = "window percentiles";
  r.target_seconds = 0.0379;
  r.max_seconds = 0.0641;
  r.target = "37.9ms";
  r.max = "64.1ms";
  SignalPlan cpu;
  cpu.signal = std::string(kShedCpu);
  cpu.p50 = 0.41;
  cpu.p99 = 0.55;
  cpu.level = 0.5;
  cpu.level_from = "--autoscale-cpu";
  cpu.thresholds = thresholds_for_level(0.5, kShedCpu);
  SignalPlan slo;
  slo.signal = std::string(kShedSloTarget);
  slo.level = 0.1;
  slo.level_from = "1 - target quantile 0.9";
  slo.thresholds = thresholds_for_level(0.1, kShedSloTarget);
  r.signals = {cpu, slo};
  return r;
}

Recommendation quiet() {
  Recommendation r;
  r.endpoint = "quiet";
  r.note = "12 requests at peak, fewer than --min-samples 1000: no recommendation";
  return r;
}

Provenance provenance() {
  Provenance p;
  p.command_line = "headroomctl tune recommend --prometheus http://prom:9090 --since 7d --config in.toml";
  p.made_unix = 1'796'000'000;
  p.input = "in.toml";
  p.source = {"Prometheus http://prom:9090: 2026-11-29 to 2026-12-06 (--since 7d), steps of 300 s"};
  return p;
}

TEST(TunedFile, TheRecommendationReplacesTargetMaxAndShedAndKeepsTheRest) {
  const auto text = tuned_file(kInput, "in.toml", {play(), quiet()}, provenance());
  ASSERT_TRUE(text) << text.error().to_string();
  // headroomd reads it as it is, [[endpoint.shed]] included.
  ASSERT_TRUE(check_tuned_file(*text, "out.toml")) << check_tuned_file(*text, "out.toml").error().to_string() << *text;
  const auto config = agent::parse_config(*text, "out.toml");
  ASSERT_TRUE(config) << config.error().to_string() << "\n" << *text;
  ASSERT_EQ(config->endpoints.size(), 2u);
  EXPECT_EQ(config->endpoints[0].target, std::chrono::microseconds(37900));
  EXPECT_EQ(config->endpoints[0].max, std::chrono::microseconds(64100));
  ASSERT_FALSE(config->endpoints[0].shed.empty());
  EXPECT_EQ(config->endpoints[0].shed[0].first, "cpu_utilization");
  EXPECT_TRUE(config->endpoints[1].shed.empty());
  // quiet kept as it was, every other section too.
  EXPECT_EQ(config->endpoints[1].target, std::chrono::milliseconds(5));
  EXPECT_EQ(config->endpoints[1].max_concurrency, 16u);
  EXPECT_EQ(config->endpoints[1].path, "/quiet");
  EXPECT_EQ(config->interval, std::chrono::milliseconds(200));
  EXPECT_EQ(config->signals, (std::vector<std::string>{"cpu", "memory"}));
  EXPECT_EQ(config->prometheus.listen, "127.0.0.1:9464");
  // The thresholds, in the shedder's form.
  EXPECT_THAT(*text, HasSubstr("[[endpoint.shed]]\nall_shed = 1.5\ncritical_start = 0.8\nshed_start = 0.6\n"
                               "signal = 'cpu_utilization'\n"));
  EXPECT_THAT(*text, HasSubstr("critical_start = 0.64\nshed_start = 0.28\nsignal = 'utilization.latency.slo_target'"));
}

TEST(TunedFile, TheHeaderSaysWithWhatWhenFromWhatAndWhy) {
  const auto text = tuned_file(kInput, "in.toml", {play(), quiet()}, provenance());
  ASSERT_TRUE(text);
  EXPECT_THAT(*text, StartsWith("# Made by `headroomctl tune recommend` on 2026-11-30 00:53:20 UTC:\n"));
  const std::string head = text->substr(0, text->find("\n\n"));
  std::istringstream lines(head);
  for (std::string line; std::getline(lines, line);) EXPECT_THAT(line, StartsWith("#"));
  for (const char* part : {
           "#   headroomctl tune recommend --prometheus http://prom:9090 --since 7d --config in.toml\n",
           "#   Prometheus http://prom:9090: 2026-11-29 to 2026-12-06 (--since 7d), steps of 300 s\n",
           "# endpoint \"play\": 123456 requests at peak (42 steps at >= 80 % of the busiest, 950.0 req/s)\n",
           "#   target = 37.9ms: p90 at peak; max = 64.1ms: p99 at peak x 1.5; from the window percentiles",
           "#   cpu_utilization: expected 0.410..0.550 (p50..p99 over the peak steps); level 0.500 (--autoscale-cpu) "
           "-> shed from 0.6, CRITICAL from 0.8, all at 1.5\n",
           "#   utilization.latency.slo_target: expected not observed; level 0.100",
           "# endpoint \"quiet\": left as it was: 12 requests at peak, fewer than --min-samples 1000",
           "# Rewritten from in.toml",
       })
    EXPECT_THAT(head, HasSubstr(part));
}

TEST(TunedFile, FromMetricsTheRangeIsNow) {
  Provenance p = provenance();
  p.cumulative = true;
  const auto text = tuned_file(kInput, "in.toml", {play()}, p);
  ASSERT_TRUE(text);
  EXPECT_THAT(*text, HasSubstr("123456 requests at peak (all since headroomd started)"));
  EXPECT_THAT(*text, HasSubstr("cpu_utilization: expected now 0.410;"));
}

TEST(CheckTunedFile, HeadroomdsReaderAndTheSheddersCheckerHaveTheirSay) {
  const std::string base = "[[endpoint]]\nname = \"play\"\nport = 8080\ntarget = \"10ms\"\nmax = \"100ms\"\n";
  EXPECT_TRUE(check_tuned_file(base, "f.toml"));
  const auto order = check_tuned_file(
      base + "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.9\ncritical_start = 0.8\n", "f.toml");
  ASSERT_FALSE(order);
  EXPECT_THAT(order.error().to_string(), StartsWith("f.toml:9:18: endpoint[0].shed[0].critical_start: "));
  EXPECT_THAT(order.error().message, HasSubstr("critical_start"));
  const auto twice = check_tuned_file(base +
                                          "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.6\n"
                                          "critical_start = 0.8\n[[endpoint.shed]]\nsignal = \"cpu_utilization\"\n"
                                          "shed_start = 0.6\ncritical_start = 0.8\n",
                                      "f.toml");
  ASSERT_FALSE(twice);
  EXPECT_THAT(twice.error().message, HasSubstr("listed twice"));
  const auto unknown = check_tuned_file(
      base + "[[endpoint.shed]]\nsignal = \"bogus\"\nshed_start = 0.6\ncritical_start = 0.8\n", "f.toml");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().key, "endpoint[0].shed[0].signal");
  const auto bad_max = check_tuned_file(
      "[[endpoint]]\nname = \"play\"\nport = 8080\ntarget = \"10ms\"\nmax = \"1ms\"\n", "f.toml");
  ASSERT_FALSE(bad_max);
  EXPECT_EQ(bad_max.error().key, "endpoint[0].max");
  EXPECT_EQ(bad_max.error().line, 5);
}

}  // namespace
}  // namespace headroom::ctl::tune
