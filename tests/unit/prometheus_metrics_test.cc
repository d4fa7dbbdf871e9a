// SPDX-License-Identifier: Apache-2.0
// Ticks -> the Prometheus figures (publishers/prometheus_metrics.h): the
// latency buckets from the kernel histogram, counters summed across ticks and
// reloads, gauges from the last tick, the agent's health; and the text
// exposition the serializer makes of them.
#include "publishers/prometheus_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "agent/signals/report_builder.h"
#include "probes/ebpf/endpoint_abi.h"
#include "tick_builder.h"

namespace headroom::publishers::prom {
namespace {

using namespace std::chrono_literals;
using prometheus::MetricFamily;
using ::testing::HasSubstr;
using ::testing::Not;

uint32_t bucket_of_seconds(double s) { return hr_hist_bucket(static_cast<uint64_t>(s * 1e9)); }
// What a tick carries for a kernel bucket's requests (agent/signals/endpoint_scopes.cc).
double midpoint_seconds(uint32_t b) { return agent::histogram_bucket_midpoint_ns(b) / 1e9; }

// -- the latency buckets -----------------------------------------------------

struct LeCase {
  double latency_seconds;
  std::size_t le_index;  // into kLatencyBucketsSeconds; 14 = +Inf
};

class LatencyBuckets : public ::testing::TestWithParam<LeCase> {};

TEST_P(LatencyBuckets, KernelBucketCountsUnderTheFirstBoundAtOrAboveItsMidpoint) {
  const LeCase& c = GetParam();
  EXPECT_EQ(le_bucket_of(midpoint_seconds(bucket_of_seconds(c.latency_seconds))), c.le_index)
      << c.latency_seconds << " s";
}

const LeCase kLeCases[] = {
    {0.000001, 0},  {0.0003, 0},  {0.00049, 0}, {0.0007, 1}, {0.0015, 2}, {0.002, 2},  {0.004, 3},
    {0.007, 4},     {0.0099, 4},  {0.02, 5},    {0.04, 6},   {0.08, 7},   {0.2, 8},    {0.4, 9},
    {0.9, 10},      {2.0, 11},    {4.5, 12},    {9.5, 13},   {10.8, 14},  {60.0, 14}, {1e6, 14},
};
INSTANTIATE_TEST_SUITE_P(Table, LatencyBuckets, ::testing::ValuesIn(kLeCases));

TEST(LatencyBuckets, EveryKernelBucketIsCountedOnceInOrder) {
  std::size_t prev = 0;
  for (uint32_t b = 0; b < HR_HIST_BUCKETS; ++b) {
    const std::size_t i = le_bucket_of(midpoint_seconds(b));
    ASSERT_LT(i, kLatencyBuckets);
    EXPECT_GE(i, prev) << "kernel bucket " << b;  // monotone: no bucket counted below a smaller one
    prev = i;
    const double mid = midpoint_seconds(b);
    if (i < kLatencyBucketsSeconds.size()) {
      EXPECT_LE(mid, kLatencyBucketsSeconds[i]) << b;
    }
    if (i > 0) {
      EXPECT_GT(mid, kLatencyBucketsSeconds[i - 1]) << b;
    }
  }
  EXPECT_EQ(le_bucket_of(1e9), kLatencyBuckets - 1);  // past 10 s: +Inf, never past the array
}

TEST(LatencyBuckets, MidpointIsWithinTheKernelBucket) {
  for (uint32_t b = 0; b + 1 < HR_HIST_BUCKETS; ++b) {
    const double lo = static_cast<double>(hr_hist_lower_ns(b)) / 1e9;
    const double hi = static_cast<double>(hr_hist_lower_ns(b + 1)) / 1e9;
    EXPECT_GE(midpoint_seconds(b), lo);
    EXPECT_LT(midpoint_seconds(b), hi);
    // The documented bound on _sum's error: half a bucket, at most 1/32 of its value.
    if (b >= HR_HIST_SUB) {
      EXPECT_LE((hi - lo) / 2, midpoint_seconds(b) / 31.0) << b;
    }
  }
}

// -- counters ----------------------------------------------------------------

publishers::EndpointCounts interval(uint64_t completed, std::vector<std::pair<double, uint32_t>> latencies) {
  publishers::EndpointCounts iv;
  iv.completed = completed;
  iv.errors = 1;
  iv.aborted = 2;
  iv.over_target = 3;
  iv.over_max = 1;
  for (const auto& [s, n] : latencies) iv.latencies.emplace_back(midpoint_seconds(bucket_of_seconds(s)), n);
  return iv;
}

TEST(EndpointTotals, AddSumsEveryCounterAndTheHistogram) {
  EndpointTotals c;
  c.add(interval(10, {{0.002, 7}, {0.3, 3}}));
  c.add(interval(5, {{0.002, 5}}));
  EXPECT_EQ(c.requests, 15u);
  EXPECT_EQ(c.errors, 2u);
  EXPECT_EQ(c.aborted, 4u);
  EXPECT_EQ(c.over_target, 6u);
  EXPECT_EQ(c.over_max, 2u);
  EXPECT_EQ(c.latency[2], 12u);  // le 0.0025
  EXPECT_EQ(c.latency[9], 3u);   // le 0.5
  EXPECT_NEAR(c.latency_sum_seconds, 12 * 0.002 + 3 * 0.3, (12 * 0.002 + 3 * 0.3) / 32);
}

// -- the state and its families ----------------------------------------------

agent::EndpointConfig endpoint(const std::string& name, std::chrono::milliseconds target) {
  agent::EndpointConfig e;
  e.name = name;
  e.port = 8080;
  e.target = target;
  e.max = target * 10;
  return e;
}

// Family name -> (labels as "k=v,k=v" -> value), gauges and counters only.
using Samples = std::map<std::string, std::map<std::string, double>>;
Samples samples(const std::vector<MetricFamily>& families) {
  Samples out;
  for (const auto& f : families) {
    for (const auto& m : f.metric) {
      std::string key;
      for (const auto& l : m.label) key += (key.empty() ? "" : ",") + l.name + "=" + l.value;
      out[f.name][key] = f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return out;
}

// Appends dependency `name` to a filled tick: its report from `signals` (null:
// unmeasured) and, when given, this tick's counts.
void add_dependency(Tick& tick, const agent::DependencyConfig& config, const agent::DependencySignals* signals,
                    std::optional<publishers::EndpointCounts> counts, uint64_t connect_failures = 0,
                    uint64_t resets = 0) {
  auto& r = tick.reports.emplace_back();
  r.scope = orca::dependency_scope(config.name);
  agent::build_dependency_report_into(config, signals, tick.meta, r.report);
  r.report.SerializeToString(&r.bytes);
  auto& t = tick.dependencies.emplace_back();
  t.name = config.name;
  t.report = tick.reports.size() - 1;
  t.target_seconds = std::chrono::duration<double>(config.target).count();
  t.max_seconds = std::chrono::duration<double>(config.max).count();
  t.measured = signals != nullptr;
  t.counted = counts.has_value();
  if (counts) t.counts = *counts;
  t.connect_failures = connect_failures;
  t.resets = resets;
}

agent::DependencyConfig dependency(const std::string& name) {
  agent::DependencyConfig d;
  d.name = name;
  d.port = 6379;
  d.target = 2ms;
  d.max = 50ms;
  return d;
}

const MetricFamily* find(const std::vector<MetricFamily>& families, const std::string& name) {
  for (const auto& f : families)
    if (f.name == name) return &f;
  return nullptr;
}

class MetricsStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.endpoints = {endpoint("api", 10ms), endpoint("web", 50ms)};
    tick_.meta = {1'700'000'000'000, 1, 100, false};
    node_.signals = {{"cpu", 1.4}, {"cpu.pressure", 0.25}, {"memory", 0.5}};
    api_.share_over_target = 0.3;
    api_.share_over_max = 0.05;
    api_.inflight_now = 4;
    api_.pending = 2;
    api_.p90_ms = 12;
    api_.window_requests = 10;
    api_interval_ = interval(10, {{0.002, 7}, {0.3, 3}});
    testing::fill_tick(tick_, node_, config_, {{&config_.endpoints[0], &api_, api_interval_}, {&config_.endpoints[1]}});
    tick_.health.ticks = 41;
    tick_.health.last_publish_ms = 1'700'000'000'000;
    tick_.health.ebpf_running = true;
    tick_.health.publish_failures = {{"envoy", 3}};
  }

  agent::Config config_;
  agent::NodeSample node_;
  Tick tick_;
  agent::EndpointSignals api_;
  publishers::EndpointCounts api_interval_;
  MetricsState state_;
};

TEST_F(MetricsStateTest, GaugesAreTheReportsValues) {
  state_.update(tick_);
  const auto s = samples(state_.families("1.2.3"));
  // node.orca: utilization clamped to [0, 1], cpu_utilization not.
  EXPECT_EQ(s.at("headroom_utilization_ratio").at("scope=node,signal=cpu"), 1.0);
  EXPECT_EQ(s.at("headroom_utilization_ratio").at("scope=node,signal=cpu.pressure"), 0.25);
  EXPECT_EQ(s.at("headroom_utilization_ratio").at("scope=node,signal=memory"), 0.5);
  EXPECT_EQ(s.at("headroom_cpu_utilization_ratio").at("scope=node"), 1.4);
  EXPECT_EQ(s.at("headroom_memory_utilization_ratio").at("scope=node"), 0.5);
  EXPECT_EQ(s.at("headroom_application_utilization_ratio").at("scope=node"),
            tick_.node().report.application_utilization());
  // endpoint.api.orca: what its report carries in its utilization map.
  const orca::Report& api_report = tick_.report_of(tick_.endpoints[0]);
  std::size_t api_series = 0;
  for (const auto& [key, value] : api_report.utilization()) {
    EXPECT_EQ(s.at("headroom_utilization_ratio").at("endpoint=api,scope=endpoint,signal=" + key), value) << key;
    ++api_series;
  }
  EXPECT_EQ(api_series, 2u);
  EXPECT_EQ(s.at("headroom_application_utilization_ratio").at("endpoint=api,scope=endpoint"),
            api_report.application_utilization());
  EXPECT_EQ(s.at("headroom_endpoint_requests_in_flight").at("endpoint=api"), 4);
  EXPECT_EQ(s.at("headroom_endpoint_requests_pending").at("endpoint=api"), 2);
  // web is not measured: no utilization or in-flight series, but its counters and SLO.
  EXPECT_FALSE(s.at("headroom_application_utilization_ratio").contains("endpoint=web,scope=endpoint"));
  EXPECT_FALSE(s.at("headroom_endpoint_requests_in_flight").contains("endpoint=web"));
  EXPECT_EQ(s.at("headroom_endpoint_requests_total").at("endpoint=web"), 0);
  EXPECT_EQ(s.at("headroom_endpoint_slo_seconds").at("endpoint=web,slo=target"), 0.05);
  EXPECT_EQ(s.at("headroom_endpoint_slo_seconds").at("endpoint=web,slo=max"), 0.5);
}

TEST_F(MetricsStateTest, AgentHealth) {
  state_.update(tick_);
  const auto s = samples(state_.families("1.2.3"));
  EXPECT_EQ(s.at("headroom_build_info").at("version=1.2.3"), 1);
  EXPECT_EQ(s.at("headroom_ticks_total").at(""), 41);
  EXPECT_EQ(s.at("headroom_last_publish_timestamp_seconds").at(""), 1'700'000'000.0);
  EXPECT_EQ(s.at("headroom_publish_failures_total").at("publisher=envoy"), 3);
  EXPECT_EQ(s.at("headroom_interval_seconds").at(""), 0.1);
  EXPECT_EQ(s.at("headroom_endpoints").at(""), 2);
  EXPECT_EQ(s.at("headroom_ebpf_available").at(""), 1);
  EXPECT_EQ(s.at("headroom_config_generation").at(""), 1);
  EXPECT_EQ(s.at("headroom_config_last_reload_successful").at(""), 1);
  tick_.health.ebpf_running = false;
  tick_.health.last_reload_ok = false;
  tick_.health.config_generation = 4;
  state_.update(tick_);
  const auto t = samples(state_.families("1.2.3"));
  EXPECT_EQ(t.at("headroom_ebpf_available").at(""), 0);
  EXPECT_EQ(t.at("headroom_config_last_reload_successful").at(""), 0);
  EXPECT_EQ(t.at("headroom_config_generation").at(""), 4);
}

TEST_F(MetricsStateTest, CountersRiseTickByTick) {
  state_.update(tick_);
  state_.update(tick_);
  tick_.endpoints[0].counted = false;  // nothing counted this tick (a baseline after a reload)
  state_.update(tick_);
  const auto s = samples(state_.families("x"));
  EXPECT_EQ(s.at("headroom_endpoint_requests_total").at("endpoint=api"), 20);
  EXPECT_EQ(s.at("headroom_endpoint_errors_total").at("endpoint=api"), 2);
  EXPECT_EQ(s.at("headroom_endpoint_requests_aborted_total").at("endpoint=api"), 4);
  EXPECT_EQ(s.at("headroom_endpoint_requests_over_slo_total").at("endpoint=api,slo=target"), 6);
  EXPECT_EQ(s.at("headroom_endpoint_requests_over_slo_total").at("endpoint=api,slo=max"), 2);
}

TEST_F(MetricsStateTest, HistogramIsCumulativeAndEndsAtTheCount) {
  state_.update(tick_);
  const auto families = state_.families("x");
  const MetricFamily* f = find(families, "headroom_endpoint_request_duration_seconds");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->type, prometheus::MetricType::Histogram);
  ASSERT_EQ(f->metric.size(), 2u);
  const auto& h = f->metric[0].histogram;
  ASSERT_EQ(h.bucket.size(), kLatencyBuckets);
  const std::map<double, uint64_t> expected = {{0.001, 0}, {0.0025, 7}, {0.25, 7}, {0.5, 10}, {10, 10}};
  for (std::size_t i = 0; i < h.bucket.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(h.bucket[i].cumulative_count, h.bucket[i - 1].cumulative_count);
    }
    if (auto it = expected.find(h.bucket[i].upper_bound); it != expected.end()) {
      EXPECT_EQ(h.bucket[i].cumulative_count, it->second) << "le " << it->first;
    }
  }
  EXPECT_TRUE(std::isinf(h.bucket.back().upper_bound));
  EXPECT_EQ(h.bucket.back().cumulative_count, 10u);
  EXPECT_EQ(h.sample_count, 10u);  // = requests_total: answered requests
  EXPECT_NEAR(h.sample_sum, 7 * 0.002 + 3 * 0.3, 0.03);
}

TEST_F(MetricsStateTest, CountsFollowTheEndpointNameAcrossAReload) {
  state_.update(tick_);
  // The reload: web first, api second, and a new endpoint "new"; api keeps its counts.
  agent::Config next;
  next.endpoints = {endpoint("web", 50ms), endpoint("new", 5ms), endpoint("api", 10ms)};
  testing::fill_tick(tick_, node_, next, {{&next.endpoints[0]}, {&next.endpoints[1]}, {&next.endpoints[2], &api_, api_interval_}});
  state_.update(tick_);
  auto s = samples(state_.families("x"));
  EXPECT_EQ(s.at("headroom_endpoint_requests_total").at("endpoint=api"), 20);
  EXPECT_EQ(s.at("headroom_endpoint_requests_total").at("endpoint=new"), 0);
  EXPECT_EQ(s.at("headroom_endpoints").at(""), 3);
  ASSERT_EQ(state_.endpoints().size(), 3u);
  EXPECT_EQ(state_.endpoints()[0].name, "web");
  EXPECT_EQ(state_.endpoints()[2].name, "api");
  // A reload that removes api drops its series.
  testing::fill_tick(tick_, node_, next, {{&next.endpoints[0]}, {&next.endpoints[1]}});
  state_.update(tick_);
  s = samples(state_.families("x"));
  EXPECT_FALSE(s.at("headroom_endpoint_requests_total").contains("endpoint=api"));
  EXPECT_EQ(s.at("headroom_endpoints").at(""), 2);
}

// An endpoint's instances: the same series as the aggregate's, with
// endpoint_instance="<id>" beside endpoint="N"; the aggregate's are unchanged.
void add_instance(Tick& tick, std::size_t aggregate, const std::string& id, double over_target,
                  std::optional<publishers::EndpointCounts> counts) {
  const EndpointTick agg = tick.endpoints[aggregate];
  ScopeReport r = tick.reports[agg.report];
  r.scope = orca::instance_scope(agg.name, id);
  r.instance = id;
  (*r.report.mutable_utilization())[std::string(orca::kSignalSloTarget)] = over_target;
  r.report.set_application_utilization(over_target);
  r.report.SerializeToString(&r.bytes);
  tick.reports.push_back(std::move(r));
  EndpointTick t = agg;
  t.instance = id;
  t.report = tick.reports.size() - 1;
  t.counted = counts.has_value();
  if (counts) t.counts = *counts;
  tick.endpoints.push_back(std::move(t));
}

// The report's window percentiles and its request count: gauges in seconds,
// a quantile absent while the report has none, on the aggregate and instances.
TEST_F(MetricsStateTest, WindowPercentilesAreGaugesInSecondsAbsentWhenTheReportHasNone) {
  api_.p50_ms = 2.5;
  api_.p90_ms = 37.9;
  api_.p99_ms = 120;
  api_.window_requests = 412;
  tick_ = Tick{};
  tick_.meta = {1'700'000'000'000, 1, 100, false};
  testing::fill_tick(tick_, node_, config_, {{&config_.endpoints[0], &api_, api_interval_}, {&config_.endpoints[1]}});
  add_instance(tick_, 0, "pod-a", 0.7, std::nullopt);
  state_.update(tick_);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, state_.families("x"));
  const std::string text = out.str();
  for (const char* line : {
           "# TYPE headroom_endpoint_latency_seconds gauge\n",
           "headroom_endpoint_latency_seconds{endpoint=\"api\",percentile=\"50\"} 0.0025\n",
           "headroom_endpoint_latency_seconds{endpoint=\"api\",percentile=\"90\"} 0.0379\n",
           "headroom_endpoint_latency_seconds{endpoint=\"api\",percentile=\"99\"} 0.12\n",
           "# TYPE headroom_endpoint_window_requests gauge\n",
           "headroom_endpoint_window_requests{endpoint=\"api\"} 412\n",
           "headroom_endpoint_window_requests{endpoint=\"api\",endpoint_instance=\"pod-a\"} 412\n",
       })
    EXPECT_THAT(text, HasSubstr(line));
  // web is not measured: neither gauge.
  EXPECT_THAT(text, Not(HasSubstr("headroom_endpoint_latency_seconds{endpoint=\"web\"")));
  EXPECT_THAT(text, Not(HasSubstr("headroom_endpoint_window_requests{endpoint=\"web\"")));

  // A window without a completed request: no percentile, the count still there.
  api_.p50_ms.reset();
  api_.p90_ms.reset();
  api_.p99_ms.reset();
  api_.window_requests = 3;  // aborted ones
  tick_ = Tick{};
  tick_.meta = {1'700'000'000'100, 2, 100, false};
  testing::fill_tick(tick_, node_, config_, {{&config_.endpoints[0], &api_, api_interval_}, {&config_.endpoints[1]}});
  state_.update(tick_);
  std::ostringstream empty;
  prometheus::TextSerializer().Serialize(empty, state_.families("x"));
  EXPECT_THAT(empty.str(), Not(HasSubstr("headroom_endpoint_latency_seconds{")));
  EXPECT_THAT(empty.str(), HasSubstr("headroom_endpoint_window_requests{endpoint=\"api\"} 3\n"));
}

TEST_F(MetricsStateTest, InstancesHaveTheEndpointsSeriesWithAnEndpointInstanceLabel) {
  add_instance(tick_, 0, "pod-a", 0.7, interval(4, {{0.002, 4}}));
  add_instance(tick_, 0, "host", 0.1, std::nullopt);
  state_.update(tick_);
  state_.update(tick_);
  const auto s = samples(state_.families("x"));
  const auto& util = s.at("headroom_utilization_ratio");
  EXPECT_EQ(util.at("endpoint=api,endpoint_instance=pod-a,scope=endpoint,signal=" + std::string(orca::kSignalSloTarget)),
            0.7);
  EXPECT_EQ(util.at("endpoint=api,endpoint_instance=host,scope=endpoint,signal=" + std::string(orca::kSignalSloTarget)),
            0.1);
  // The aggregate's series keep their labels and values.
  EXPECT_EQ(util.at("endpoint=api,scope=endpoint,signal=" + std::string(orca::kSignalSloTarget)), 0.3);
  EXPECT_EQ(s.at("headroom_application_utilization_ratio").at("endpoint=api,endpoint_instance=pod-a,scope=endpoint"),
            0.7);
  // Counters per instance, since the instance first appeared.
  EXPECT_EQ(s.at("headroom_endpoint_requests_total").at("endpoint=api,endpoint_instance=pod-a"), 8);
  EXPECT_EQ(s.at("headroom_endpoint_requests_total").at("endpoint=api,endpoint_instance=host"), 0);
  EXPECT_EQ(s.at("headroom_endpoint_requests_total").at("endpoint=api"), 20);
  EXPECT_EQ(s.at("headroom_endpoint_requests_over_slo_total").at("endpoint=api,endpoint_instance=pod-a,slo=target"), 6);
  EXPECT_EQ(s.at("headroom_endpoint_requests_in_flight").at("endpoint=api,endpoint_instance=pod-a"), 4);
  EXPECT_EQ(s.at("headroom_endpoint_slo_seconds").at("endpoint=api,endpoint_instance=pod-a,slo=target"), 0.01);
  // Instances are not declared endpoints.
  EXPECT_EQ(s.at("headroom_endpoints").at(""), 2);

  // The text: the histogram per instance.
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, state_.families("x"));
  EXPECT_THAT(out.str(), HasSubstr("headroom_endpoint_request_duration_seconds_bucket{endpoint=\"api\","
                                   "endpoint_instance=\"pod-a\",le=\"+Inf\"} 8\n"));
  EXPECT_THAT(out.str(), HasSubstr("headroom_endpoint_request_duration_seconds_count{endpoint=\"api\"} 20\n"));
  // promtool's linter, when it is installed (Debian's prometheus package).
  if (::access("/usr/bin/promtool", X_OK) == 0) {
    FILE* p = ::popen("/usr/bin/promtool check metrics >/dev/null 2>&1", "w");
    ASSERT_NE(p, nullptr);
    std::fputs(out.str().c_str(), p);
    EXPECT_EQ(::pclose(p), 0) << "promtool check metrics rejects:\n" << out.str();
  }
}

TEST_F(MetricsStateTest, AnInstanceThatLeavesTheTickLosesItsSeriesAndStartsFromZeroIfItReturns) {
  Tick with_pod = tick_;
  add_instance(with_pod, 0, "pod-a", 0.7, interval(4, {{0.002, 4}}));
  state_.update(with_pod);
  EXPECT_EQ(samples(state_.families("x")).at("headroom_endpoint_requests_total").at("endpoint=api,endpoint_instance=pod-a"),
            4);
  state_.update(tick_);
  auto s = samples(state_.families("x"));
  EXPECT_FALSE(s.at("headroom_endpoint_requests_total").contains("endpoint=api,endpoint_instance=pod-a"));
  EXPECT_EQ(s.at("headroom_endpoint_requests_total").at("endpoint=api"), 20);
  with_pod.endpoints.back().counted = false;
  state_.update(with_pod);
  s = samples(state_.families("x"));
  EXPECT_EQ(s.at("headroom_endpoint_requests_total").at("endpoint=api,endpoint_instance=pod-a"), 0);
}

TEST_F(MetricsStateTest, NoTickYetMeansNoUtilizationSeries) {
  const auto families = state_.families("x");
  EXPECT_EQ(find(families, "headroom_utilization_ratio"), nullptr);
  EXPECT_EQ(find(families, "headroom_last_publish_timestamp_seconds"), nullptr);
  EXPECT_NE(find(families, "headroom_build_info"), nullptr);
  for (const auto& f : families) EXPECT_FALSE(f.metric.empty()) << f.name;  // empty families are left out
}

TEST_F(MetricsStateTest, TextExpositionFollowsTheConventions) {
  state_.update(tick_);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, state_.families("1.2.3"));
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("# TYPE headroom_endpoint_request_duration_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("headroom_endpoint_request_duration_seconds_bucket{endpoint=\"api\",le=\"+Inf\"} 10\n"));
  EXPECT_THAT(text, HasSubstr("headroom_endpoint_request_duration_seconds_bucket{endpoint=\"api\",le=\"0.0025\"} 7\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE headroom_endpoint_requests_total counter\n"));
  EXPECT_THAT(text, HasSubstr("headroom_utilization_ratio{scope=\"node\",signal=\"cpu.pressure\"} 0.25\n"));
  std::istringstream lines(text);
  std::string line;
  std::map<std::string, int> helps, types;
  while (std::getline(lines, line)) {
    if (line.starts_with("# HELP ")) ++helps[line.substr(7, line.find(' ', 7) - 7)];
    else if (line.starts_with("# TYPE ")) ++types[line.substr(7, line.find(' ', 7) - 7)];
    else {
      EXPECT_TRUE(line.starts_with("headroom_")) << line;
      // No timestamps: a sample line is the series and one value.
      const std::string series_and_value = line.substr(line.rfind('}') == std::string::npos ? 0 : line.rfind('}'));
      EXPECT_EQ(std::count(series_and_value.begin(), series_and_value.end(), ' '), 1) << line;
    }
  }
  EXPECT_EQ(helps, types);
  for (const auto& [name, n] : helps) {
    EXPECT_EQ(n, 1) << name;
    const bool counter = name.ends_with("_total");
    EXPECT_EQ(counter, text.find("# TYPE " + name + " counter") != std::string::npos) << name;
  }
}

// A dependency's series: its shares under scope="dependency", its counters
// summed tick by tick, its histogram, and its series gone once it is.
TEST_F(MetricsStateTest, DependenciesHaveTheirOwnSeriesWithADependencyLabel) {
  const agent::DependencyConfig cache = dependency("cache");
  agent::DependencySignals s;
  s.calls.share_over_target = 0.25;
  s.calls.share_over_max = 0.125;
  s.calls.inflight_now = 3;
  s.error_share = 0.5;
  add_dependency(tick_, cache, &s, interval(4, {{0.0007, 3}, {0.02, 1}}), 2, 1);
  state_.update(tick_);
  // The next tick counts as much again.
  state_.update(tick_);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, state_.families("x"));
  const std::string text = out.str();
  for (const char* line : {
           "headroom_utilization_ratio{dependency=\"cache\",scope=\"dependency\",signal=\"errors\"} 0.5\n",
           "headroom_utilization_ratio{dependency=\"cache\",scope=\"dependency\",signal=\"latency.slo_target\"} 0.25\n",
           "headroom_application_utilization_ratio{dependency=\"cache\",scope=\"dependency\"} 0.5\n",
           "headroom_dependency_calls_total{dependency=\"cache\"} 8\n",
           "headroom_dependency_errors_total{dependency=\"cache\"} 2\n",
           "headroom_dependency_connect_failures_total{dependency=\"cache\"} 4\n",
           "headroom_dependency_resets_total{dependency=\"cache\"} 2\n",
           "headroom_dependency_call_duration_seconds_bucket{dependency=\"cache\",le=\"0.001\"} 6\n",
           "headroom_dependency_call_duration_seconds_bucket{dependency=\"cache\",le=\"+Inf\"} 8\n",
           "headroom_dependency_calls_in_flight{dependency=\"cache\"} 3\n",
           "headroom_dependency_slo_seconds{dependency=\"cache\",slo=\"max\"} 0.05\n",
           "headroom_dependencies 1\n",
       })
    EXPECT_THAT(text, HasSubstr(line));
  EXPECT_THAT(text, Not(HasSubstr("endpoint=\"cache\""))) << "a dependency is not an endpoint";

  // Unmeasured: counters stay, shares and in-flight go.
  tick_.dependencies.clear();
  tick_.reports.pop_back();
  add_dependency(tick_, cache, nullptr, std::nullopt);
  state_.update(tick_);
  std::ostringstream off;
  prometheus::TextSerializer().Serialize(off, state_.families("x"));
  EXPECT_THAT(off.str(), HasSubstr("headroom_dependency_calls_total{dependency=\"cache\"} 8\n"));
  EXPECT_THAT(off.str(), Not(HasSubstr("scope=\"dependency\"")));
  EXPECT_THAT(off.str(), Not(HasSubstr("headroom_dependency_calls_in_flight{")));

  // Removed by a reload: its series leave; back again, it starts from 0.
  tick_.dependencies.clear();
  tick_.reports.pop_back();
  state_.update(tick_);
  EXPECT_TRUE(state_.dependencies().empty());
  add_dependency(tick_, cache, &s, std::nullopt);
  state_.update(tick_);
  ASSERT_EQ(state_.dependencies().size(), 1u);
  EXPECT_EQ(state_.dependencies()[0].counts.requests, 0u);
}

// docs/metrics.md is the contract: every family headroomd exposes has a row
// (name, type) there and appears in at least one example query.
TEST_F(MetricsStateTest, DocsNameEveryMetricWithItsTypeAndAQuery) {
  agent::DependencySignals s;
  s.error_share = 0.1;
  add_dependency(tick_, dependency("cache"), &s, interval(1, {{0.001, 1}}));
  state_.update(tick_);
  std::ifstream in(std::string(HEADROOM_SOURCE_DIR) + "/docs/metrics.md");
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string text = doc.str();
  ASSERT_FALSE(text.empty());
  std::string queries;
  for (std::size_t at = 0; (at = text.find("```promql\n", at)) != std::string::npos;) {
    const std::size_t end = text.find("```\n", at + 10);
    queries += text.substr(at, end - at);
    at = end;
  }
  const std::map<prometheus::MetricType, std::string> types = {{prometheus::MetricType::Counter, "counter"},
                                                               {prometheus::MetricType::Gauge, "gauge"},
                                                               {prometheus::MetricType::Histogram, "histogram"}};
  const auto families = state_.families("x");
  EXPECT_EQ(families.size(), 33u) << "a metric was added or removed: update docs/metrics.md and this count";
  for (const auto& f : families) {
    EXPECT_THAT(text, HasSubstr("| `" + f.name + "` | " + types.at(f.type) + " |")) << f.name;
    EXPECT_THAT(queries, HasSubstr(f.name)) << "no example query uses " << f.name;
  }
}

}  // namespace
}  // namespace headroom::publishers::prom
