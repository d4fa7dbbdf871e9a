// SPDX-License-Identifier: Apache-2.0
// Where `headroomctl tune recommend` reads history (agent/ctl/tune_sources.h),
// from literal texts: Prometheus' query_range JSON (values as strings, "NaN",
// an error body), the queries and their URL, the assembly of several
// headroomd's series per endpoint, and the text exposition of /metrics.
#include "agent/ctl/tune_sources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace headroom::ctl::tune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using std::chrono::seconds;

// -- Prometheus' JSON ------------------------------------------------------------

TEST(ParseQueryRange, AMatrixWithLabelsStringValuesNaNAndInf) {
  const auto r = parse_query_range(R"({"status":"success","data":{"resultType":"matrix","result":[
      {"metric":{"endpoint":"play","percentile":"90"},"values":[[1700000000,"0.0379"],[1700000015,"NaN"],[1700000030.5,"+Inf"]]},
      {"metric":{},"values":[]}]}})");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  const Series& s = (*r)[0];
  EXPECT_EQ(s.labels.at("endpoint"), "play");
  EXPECT_EQ(s.labels.at("percentile"), "90");
  ASSERT_EQ(s.points.size(), 3u);
  EXPECT_EQ(s.points[0].first, 1700000000);
  EXPECT_DOUBLE_EQ(s.points[0].second, 0.0379);
  EXPECT_TRUE(std::isnan(s.points[1].second));
  EXPECT_EQ(s.points[2].first, 1700000030.5);
  EXPECT_TRUE(std::isinf(s.points[2].second));
  EXPECT_TRUE((*r)[1].points.empty());
}

TEST(ParseQueryRange, AnErrorBodyQuotesPrometheus) {
  const auto r = parse_query_range(
      R"({"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error: unexpected"})");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "Prometheus answered bad_data: invalid parameter \"query\": 1:5: parse error: unexpected");
}

TEST(ParseQueryRange, WhatIsNotItsJsonIsQuoted) {
  const auto html = parse_query_range("<html>502 Bad Gateway</html>");
  ASSERT_FALSE(html);
  EXPECT_THAT(html.error().message, HasSubstr("not Prometheus API JSON: \"<html>502 Bad Gateway</html>\""));
  const auto vector = parse_query_range(R"({"status":"success","data":{"resultType":"vector","result":[]}})");
  ASSERT_FALSE(vector);
  EXPECT_THAT(vector.error().message, HasSubstr("no \"matrix\" result"));
  const auto point = parse_query_range(
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,2]]}]}})");
  ASSERT_FALSE(point);
  EXPECT_THAT(point.error().message, HasSubstr("[time, \"value\"]"));
}

// -- the queries --------------------------------------------------------------------

TEST(Queries, OneQueryPerQuantityForEveryEndpointWithStepWindows) {
  const Queries all = build_queries({}, seconds(300));
  EXPECT_EQ(all.rate, "sum by (endpoint) (rate(headroom_endpoint_requests_total{endpoint_instance=\"\"}[600s]))");
  EXPECT_EQ(all.window_quantiles, "avg_over_time(headroom_endpoint_latency_seconds{endpoint_instance=\"\"}[299999ms])");
  EXPECT_EQ(all.histogram,
            "sum by (endpoint, le) (rate(headroom_endpoint_request_duration_seconds_bucket{endpoint_instance=\"\"}"
            "[600s])) * 300");
  EXPECT_THAT(all.signals, HasSubstr("headroom_utilization_ratio{scope=\"endpoint\",endpoint_instance=\"\"}[299999ms]"));
  EXPECT_THAT(all.node_cpu, HasSubstr("headroom_cpu_utilization_ratio{scope=\"node\"}[299999ms]"));
  const Queries some = build_queries({"play", "api.v2"}, seconds(15));
  EXPECT_EQ(some.rate,
            "sum by (endpoint) (rate(headroom_endpoint_requests_total{endpoint_instance=\"\",endpoint=~\"play|api\\\\.v2\"}"
            "[75s]))");
  EXPECT_EQ(some.window_requests,
            "avg_over_time(headroom_endpoint_window_requests{endpoint_instance=\"\",endpoint=~\"play|api\\\\.v2\"}[14999ms])");
}

TEST(Queries, TheUrlEscapesTheQuery) {
  EXPECT_EQ(url_encode("a b{c=\"d\"}[5m]|x.y"), "a%20b%7Bc%3D%22d%22%7D%5B5m%5D%7Cx.y");
  EXPECT_EQ(query_range_url("http://p:9090", "up", 100, 400, seconds(15)),
            "http://p:9090/api/v1/query_range?query=up&start=100&end=400&step=15");
}

// -- assembly -------------------------------------------------------------------------

Series series(Labels labels, std::vector<std::pair<double, double>> points) { return {std::move(labels), std::move(points)}; }

TEST(Assemble, StepsByTimeAndSeveralHeadroomdCombined) {
  PrometheusAnswers a;
  // Steps at 1000, 1060, 1120; a point off the range is left out.
  a.rate = {series({{"endpoint", "play"}}, {{1000, 5}, {1120, 7}, {5000, 99}})};
  // Two nodes' percentiles of play, weighted by their windows' requests.
  a.window_quantiles = {
      series({{"endpoint", "play"}, {"instance", "n1:9464"}, {"percentile", "90"}}, {{1000, 0.010}, {1060, 0.020}}),
      series({{"endpoint", "play"}, {"instance", "n2:9464"}, {"percentile", "90"}}, {{1000, 0.030}}),
      series({{"endpoint", "play"}, {"instance", "n1:9464"}, {"quantile", "0.99"}}, {{1000, 0.050}})};
  a.window_requests = {series({{"endpoint", "play"}, {"instance", "n1:9464"}}, {{1000, 100}, {1060, 50}}),
                       series({{"endpoint", "play"}, {"instance", "n2:9464"}}, {{1000, 300}})};
  a.signals = {series({{"endpoint", "play"}, {"signal", "latency.slo_target"}}, {{1060, 0.25}})};
  a.node_cpu = {series({}, {{1000, 0.4}, {1060, 0.6}})};
  a.histogram = {series({{"endpoint", "play"}, {"le", "0.1"}}, {{1000, 8}}),
                 series({{"endpoint", "play"}, {"le", "+Inf"}}, {{1000, 10}})};
  const History h = assemble(a, 1000, seconds(60), 3);
  ASSERT_EQ(h.endpoints.size(), 1u);
  const EndpointHistory& p = h.endpoints.at("play");
  EXPECT_EQ(p.name, "play");
  EXPECT_EQ(p.step_seconds, 60);
  ASSERT_EQ(p.rate.size(), 3u);
  EXPECT_EQ(p.rate[0], 5);
  EXPECT_TRUE(std::isnan(p.rate[1]));
  EXPECT_EQ(p.rate[2], 7);
  const auto& p90 = p.window_quantiles.at(0.9);
  EXPECT_DOUBLE_EQ(p90[0], (0.010 * 100 + 0.030 * 300) / 400);
  EXPECT_DOUBLE_EQ(p90[1], 0.020);
  EXPECT_TRUE(std::isnan(p90[2]));
  EXPECT_DOUBLE_EQ(p.window_requests[0], 400);
  EXPECT_DOUBLE_EQ(p.window_quantiles.at(0.99)[0], 0.050);
  EXPECT_DOUBLE_EQ(p.signals.at("utilization.latency.slo_target")[1], 0.25);
  EXPECT_DOUBLE_EQ(h.node_cpu[1], 0.6);
  ASSERT_EQ(p.histogram_steps.size(), 3u);
  EXPECT_EQ(p.histogram_steps[0].le.size(), 2u);
  EXPECT_TRUE(std::isinf(p.histogram_steps[0].le[1]));
  EXPECT_EQ(p.histogram_steps[0].count(), 10);
  EXPECT_EQ(p.histogram_steps[1].count(), 0);
}

// -- /metrics ----------------------------------------------------------------------------

TEST(ParseExposition, LabelsEscapesSpecialValuesAndTimestamps) {
  const auto r = parse_exposition(
      "# HELP x_total A counter.\n"
      "# TYPE x_total counter\n"
      "\n"
      "x_total 3\n"
      "h_bucket{endpoint=\"play\",le=\"+Inf\"} 1.5e+03\n"
      "  g{path=\"C:\\\\dir\",quote=\"say \\\"hi\\\"\",nl=\"a\\nb\",} NaN 1700000000000\r\n"
      "n{} -Inf\n");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].name, "x_total");
  EXPECT_EQ((*r)[0].value, 3);
  EXPECT_EQ((*r)[1].labels.at("le"), "+Inf");
  EXPECT_EQ((*r)[1].value, 1500);
  EXPECT_EQ((*r)[2].labels.at("path"), "C:\\dir");
  EXPECT_EQ((*r)[2].labels.at("quote"), "say \"hi\"");
  EXPECT_EQ((*r)[2].labels.at("nl"), "a\nb");
  EXPECT_TRUE(std::isnan((*r)[2].value));
  EXPECT_TRUE(std::isinf((*r)[3].value));
}

TEST(ParseExposition, TheErrorNamesTheLine) {
  const auto r = parse_exposition("# ok\nx 1\ny{a=\"b} 2\n");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("line 3: label a's value has no closing quote"));
  const auto v = parse_exposition("x one\n");
  ASSERT_FALSE(v);
  EXPECT_THAT(v.error().message, HasSubstr("line 1: the value one is not a number"));
}

TEST(HistoryFromMetrics, TheAggregatesCumulativeHistogramAndCurrentSignals) {
  const auto samples = parse_exposition(
      "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"play\",le=\"0.05\"} 9000\n"
      "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"play\",le=\"+Inf\"} 10000\n"
      "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"play\",le=\"0.01\"} 1000\n"
      "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"play\",endpoint_instance=\"pod\",le=\"+Inf\"} 5\n"
      "headroom_endpoint_request_duration_seconds_count{endpoint=\"play\"} 10000\n"
      "headroom_utilization_ratio{endpoint=\"play\",scope=\"endpoint\",signal=\"latency.slo_max\"} 0.02\n"
      "headroom_utilization_ratio{endpoint=\"play\",endpoint_instance=\"pod\",scope=\"endpoint\",signal=\"latency.slo_max\"} 0.9\n"
      "headroom_utilization_ratio{scope=\"node\",signal=\"cpu\"} 0.7\n"
      "headroom_cpu_utilization_ratio{scope=\"node\"} 0.42\n");
  ASSERT_TRUE(samples);
  const History h = history_from_metrics(*samples);
  ASSERT_EQ(h.endpoints.size(), 1u);
  const EndpointHistory& p = h.endpoints.at("play");
  EXPECT_TRUE(p.cumulative);
  ASSERT_EQ(p.histogram_steps.size(), 1u);
  EXPECT_EQ(p.histogram_steps[0].le, (std::vector<double>{0.01, 0.05, INFINITY}));
  EXPECT_EQ(p.histogram_steps[0].cumulative, (std::vector<double>{1000, 9000, 10000}));
  EXPECT_EQ(p.signals.at("utilization.latency.slo_max"), std::vector<double>{0.02});
  EXPECT_EQ(h.node_cpu, std::vector<double>{0.42});
}

}  // namespace
}  // namespace headroom::ctl::tune
