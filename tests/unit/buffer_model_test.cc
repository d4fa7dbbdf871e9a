// SPDX-License-Identifier: Apache-2.0
// The arithmetic of `headroomctl buffer` (agent/ctl/buffer_model.h) and its
// outputs (agent/ctl/buffer_render.h): plans, judging single requests, steps from
// records, the buffers of docs/buffers.md, time to shed and the verdict.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/ctl/buffer_model.h"
#include "agent/ctl/buffer_render.h"

namespace b = headroom::ctl::buffer;
namespace lg = headroom::ctl::loadgen;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

// A step as the analysis would have produced it: `offered`, `served`,
// `rejected` and `failed` in requests per second over a 10 s measurement.
b::StepResult step(double multiple, double offered, double served, double rejected, double failed,
                   b::StepKind kind = b::StepKind::ramp) {
  b::StepResult s;
  s.step = b::Step{kind, multiple, offered, seconds(10), seconds(0)};
  s.measured_seconds = 10;
  s.offered_rps = offered;
  s.served_rps = served;
  s.rejected_rps = rejected;
  s.failed_rps = failed;
  s.all.offered = static_cast<int64_t>(offered * 10);
  s.all.served = static_cast<int64_t>(served * 10);
  s.all.rejected = static_cast<int64_t>(rejected * 10);
  s.all.failed = static_cast<int64_t>(failed * 10);
  return s;
}

lg::Record response(int64_t at_ms, uint16_t status, int64_t latency_ms, uint16_t phase = 0, uint8_t cls = 0) {
  lg::Record r;
  r.scheduled_ns = at_ms * 1'000'000;
  r.latency_ns = latency_ms * 1'000'000;
  r.status = status;
  r.phase = phase;
  r.request_class = cls;
  r.outcome = lg::Outcome::response;
  return r;
}

}  // namespace

TEST(BufferMix, BucketsAndPrioritiesNormalizedMostImportantFirst) {
  auto mix = b::parse_mix("bulk=50, critical=25,best-effort=25");
  ASSERT_TRUE(mix) << mix.error().message;
  ASSERT_EQ(mix->size(), 3u);
  EXPECT_EQ((*mix)[0].name, "CRITICAL");
  EXPECT_EQ((*mix)[0].priority, 1);
  EXPECT_EQ((*mix)[1].name, "BEST_EFFORT");
  EXPECT_EQ((*mix)[1].priority, 51);
  EXPECT_EQ((*mix)[2].name, "BULK");
  EXPECT_DOUBLE_EQ((*mix)[2].share, 0.5);
  auto numeric = b::parse_mix("90=1,10=3");
  ASSERT_TRUE(numeric);
  EXPECT_EQ((*numeric)[0].name, "10");
  EXPECT_DOUBLE_EQ((*numeric)[0].share, 0.75);
}

TEST(BufferMix, ErrorsNameTheEntry) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"CRITICAL", "NAME=SHARE"},
      {"CRITICAL=0", "above 0"},
      {"CRITICAL=x", "above 0"},
      {"URGENT=5", "\"URGENT\" is neither"},
      {"101=5", "\"101\" is neither"},
      {"CRITICAL=1,critical=2", "listed twice"},
  };
  for (const auto& [text, message] : cases) {
    auto mix = b::parse_mix(text);
    ASSERT_FALSE(mix) << text;
    EXPECT_NE(mix.error().message.find(message), std::string::npos) << text << ": " << mix.error().message;
  }
}

TEST(BufferPlan, RampAndSpikeSteps) {
  auto m = b::parse_multiples("1, 1.5,2x,4");
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, (std::vector<double>{1, 1.5, 2, 4}));
  EXPECT_FALSE(b::parse_multiples("1,1"));
  EXPECT_FALSE(b::parse_multiples("2,1"));
  EXPECT_FALSE(b::parse_multiples("0"));
  auto ramp = b::ramp_steps(b::RampSpec{*m, seconds(5), seconds(1)}, 200);
  ASSERT_TRUE(ramp);
  ASSERT_EQ(ramp->size(), 4u);
  EXPECT_DOUBLE_EQ((*ramp)[3].rate, 800);
  EXPECT_EQ(b::total_duration(*ramp), seconds(20));
  EXPECT_DOUBLE_EQ(b::peak_rate(*ramp), 800);
  EXPECT_FALSE(b::ramp_steps(b::RampSpec{*m, seconds(5), seconds(5)}, 200));  // settle not shorter than the step
  EXPECT_FALSE(b::ramp_steps(b::RampSpec{*m, seconds(5), seconds(1)}, 0));

  auto spike = b::spike_steps(b::SpikeSpec{4, seconds(10), seconds(20), seconds(5), seconds(2)}, 100);
  ASSERT_TRUE(spike);
  ASSERT_EQ(spike->size(), 3u);
  EXPECT_EQ((*spike)[0].kind, b::StepKind::baseline);
  EXPECT_EQ((*spike)[1].kind, b::StepKind::spike);
  EXPECT_DOUBLE_EQ((*spike)[1].rate, 400);
  EXPECT_EQ((*spike)[1].settle, seconds(0));  // the reaction is what a spike measures
  EXPECT_EQ((*spike)[2].kind, b::StepKind::recovery);
  EXPECT_EQ(b::spike_steps(b::SpikeSpec{4, seconds(10), seconds(20), seconds(0), seconds(2)}, 100)->size(), 2u);
  EXPECT_FALSE(b::spike_steps(b::SpikeSpec{1, seconds(10), seconds(20), seconds(0), seconds(2)}, 100));

  auto mix = b::parse_mix("CRITICAL=25,BULK=75");
  const auto text = b::describe_plan(*spike, *mix, "127.0.0.1:8080/");
  EXPECT_EQ(text, "3 steps, 35 s, 100 to 400 req/s, 9 500 requests to 127.0.0.1:8080/ (CRITICAL 25 %, BULK 75 %)");
}

TEST(BufferJudge, EachOutcome) {
  b::Criteria c;  // SLO 500 ms, 503/429 within 50 ms
  struct Case {
    lg::Record record;
    b::Fate fate;
    b::FailReason reason;
  };
  auto outcome = [](lg::Outcome o) {
    lg::Record r;
    r.outcome = o;
    return r;
  };
  const Case cases[] = {
      {response(0, 200, 10), b::Fate::served, b::FailReason::none},
      {response(0, 204, 500), b::Fate::served, b::FailReason::none},  // at the SLO is within it
      {response(0, 200, 501), b::Fate::failed, b::FailReason::over_slo},
      {response(0, 503, 1), b::Fate::rejected, b::FailReason::none},
      {response(0, 429, 50), b::Fate::rejected, b::FailReason::none},
      {response(0, 503, 51), b::Fate::failed, b::FailReason::slow_reject},
      {response(0, 500, 1), b::Fate::failed, b::FailReason::status},
      {response(0, 404, 1), b::Fate::failed, b::FailReason::status},
      {outcome(lg::Outcome::timeout), b::Fate::failed, b::FailReason::timeout},
      {outcome(lg::Outcome::connect_error), b::Fate::failed, b::FailReason::connect},
      {outcome(lg::Outcome::closed), b::Fate::failed, b::FailReason::closed},
      {outcome(lg::Outcome::bad_response), b::Fate::failed, b::FailReason::bad_response},
      {outcome(lg::Outcome::cancelled), b::Fate::cancelled, b::FailReason::none},
  };
  for (const auto& k : cases) {
    const auto j = b::judge(k.record, c);
    EXPECT_EQ(j.fate, k.fate) << k.record.status << " " << k.record.latency_ns;
    EXPECT_EQ(j.reason, k.reason) << k.record.status << " " << k.record.latency_ns;
  }
}

TEST(BufferAnalyze, SettleClassesRatesLatencyAndUtilization) {
  // Two steps of 2 s with 1 s settle; two classes.
  const std::vector<b::Step> steps = {{b::StepKind::ramp, 1, 10, seconds(2), seconds(1)},
                                      {b::StepKind::ramp, 2, 20, seconds(2), seconds(1)}};
  std::vector<lg::Record> records;
  records.push_back(response(500, 500, 1, 0, 0));  // settling: not counted
  for (int i = 0; i < 10; ++i) records.push_back(response(1000 + i * 100, 200, 10 + i, 0, static_cast<uint8_t>(i % 2)));
  for (int i = 0; i < 20; ++i) {
    const auto cls = static_cast<uint8_t>(i % 2);
    records.push_back(response(3000 + i * 50, cls == 0 ? 200 : 503, cls == 0 ? 20 : 2, 1, cls));
  }
  lg::Record cancelled;
  cancelled.phase = 1;
  cancelled.scheduled_ns = 3'990'000'000;
  cancelled.outcome = lg::Outcome::cancelled;
  records.push_back(cancelled);
  const std::vector<b::UtilizationSample> samples = {{500'000'000, 0.9, 0.1},  // settling
                                                     {1'200'000'000, 0.2, 0.3},
                                                     {1'800'000'000, 0.4, std::nullopt},
                                                     {3'500'000'000, 0.8, 0.5}};
  const auto out = b::analyze(steps, 2, records, b::Criteria{}, samples);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].all.offered, 10);
  EXPECT_EQ(out[0].all.served, 10);
  EXPECT_EQ(out[0].by_class[0].offered, 5);
  EXPECT_DOUBLE_EQ(out[0].offered_rps, 10);
  EXPECT_EQ(out[0].all.served_latency.p50, 14'000'000);  // nearest rank of 10..19
  EXPECT_EQ(out[0].all.served_latency.max, 19'000'000);
  EXPECT_DOUBLE_EQ(*out[0].endpoint_utilization.mean, 0.3);
  EXPECT_DOUBLE_EQ(*out[0].endpoint_utilization.max, 0.4);
  EXPECT_DOUBLE_EQ(*out[0].node_utilization.mean, 0.3);
  EXPECT_EQ(out[1].all.offered, 20);  // the cancelled one counts nowhere
  EXPECT_EQ(out[1].all.rejected, 10);
  EXPECT_DOUBLE_EQ(out[1].by_class[1].rejected_share(), 1.0);
  EXPECT_DOUBLE_EQ(out[1].by_class[0].served_share(), 1.0);
  EXPECT_EQ(out[1].all.rejected_latency.p99, 2'000'000);
  EXPECT_DOUBLE_EQ(out[1].served_rps, 10);
  EXPECT_DOUBLE_EQ(*out[1].node_utilization.max, 0.5);
}

// docs/buffers.md's worked example: at a 100 req/s baseline the service
// serves 30 more and rejects 120 more gracefully.
TEST(BufferCompute, TheWorkedExample) {
  const std::vector<b::StepResult> steps = {
      step(1.0, 100, 100, 0, 0),   step(1.3, 130, 130, 0, 0),  step(2.0, 200, 130, 70, 0),
      step(2.5, 250, 129, 121, 0), step(3.0, 300, 110, 130, 60),
  };
  const auto r = b::compute_buffers(steps, 100, b::BufferRules{});
  EXPECT_NEAR(r.success, 0.30, 1e-9);
  EXPECT_FALSE(r.success_is_lower_bound);
  EXPECT_EQ(r.last_graceful, 3u);
  EXPECT_EQ(r.first_failing, 4u);
  // Handled gracefully at the failing step: 110 + 130 + 1 % of 300 = 243,
  // below the last graceful step's 250 offered: the limit is 250.
  EXPECT_NEAR(r.graceful_limit_rps, 250, 1e-9);
  EXPECT_NEAR(r.failure, 1.20, 1e-9);
  EXPECT_FALSE(r.failure_is_lower_bound);
}

TEST(BufferCompute, TableOfShapes) {
  struct Case {
    const char* name;
    std::vector<b::StepResult> steps;
    double success, failure;
    bool success_lower, failure_lower;
  };
  const Case cases[] = {
      // A capacity of 200 req/s, 200 more rejected: the failing step handled
      // 200 + 200 + 4.5 gracefully, between its neighbours.
      {"capacity server",
       {step(1, 100, 100, 0, 0), step(2, 200, 200, 0, 0), step(3, 300, 200, 100, 0), step(3.5, 350, 200, 150, 0),
        step(4.5, 450, 200, 200, 50)},
       1.0, 2.045, false, false},
      // Never saturated: both are lower bounds.
      {"all served", {step(1, 100, 100, 0, 0), step(2, 200, 200, 0, 0)}, 1.0, 0.0, true, true},
      // Rejecting, never failing: the failure buffer is a lower bound.
      {"rejects to the end", {step(1, 100, 100, 0, 0), step(2, 200, 150, 50, 0), step(4, 400, 150, 250, 0)},
       0.5, 2.5, false, true},
      // No shedding: served collapses (everything over the SLO) right after capacity.
      {"collapse without shedding",
       {step(1, 100, 100, 0, 0), step(1.5, 150, 150, 0, 0), step(2, 200, 20, 0, 180)},
       0.5, 0.0, false, false},
      // Served falls by more than 10 % without failures (everything rejected): not graceful.
      {"rejects what it should serve",
       {step(1, 100, 100, 0, 0), step(2, 200, 150, 50, 0), step(3, 300, 100, 200, 0)},
       0.5, 0.5, false, false},
      // The baseline itself fails.
      {"failing at the baseline", {step(1, 100, 50, 0, 50), step(2, 200, 10, 0, 190)}, 0.0, 0.0, false, false},
  };
  for (const auto& k : cases) {
    const auto r = b::compute_buffers(k.steps, 100, b::BufferRules{});
    EXPECT_NEAR(r.success, k.success, 1e-9) << k.name;
    EXPECT_NEAR(r.failure, k.failure, 1e-9) << k.name;
    EXPECT_EQ(r.success_is_lower_bound, k.success_lower) << k.name;
    EXPECT_EQ(r.failure_is_lower_bound, k.failure_lower) << k.name;
    EXPECT_FALSE(r.explanation.empty()) << k.name;
  }
}

TEST(BufferCompute, RecoveryStepsAreNotLoadSteps) {
  // A recovery that failed (a stuck queue) does not move the buffers.
  const std::vector<b::StepResult> steps = {step(1, 100, 100, 0, 0, b::StepKind::baseline),
                                            step(4, 400, 150, 250, 0, b::StepKind::spike),
                                            step(1, 100, 0, 0, 100, b::StepKind::recovery)};
  const auto r = b::compute_buffers(steps, 100, b::BufferRules{});
  EXPECT_NEAR(r.success, 0.5, 1e-9);
  EXPECT_NEAR(r.failure, 2.5, 1e-9);
  EXPECT_TRUE(r.failure_is_lower_bound);
}

TEST(BufferTimeToShed, FirstRejectionAndFirstSampleOverThreshold) {
  const std::vector<b::Step> steps = {{b::StepKind::baseline, 1, 10, seconds(2), seconds(0)},
                                      {b::StepKind::spike, 4, 40, seconds(2), seconds(0)}};
  std::vector<lg::Record> records = {response(100, 503, 1, 0), response(2100, 200, 1, 1), response(2350, 503, 60, 1),
                                     response(2400, 503, 1, 1)};
  const std::vector<b::UtilizationSample> samples = {{1'000'000'000, 0.9, std::nullopt},  // before the spike
                                                     {2'100'000'000, 0.3, std::nullopt},
                                                     {2'250'000'000, 0.61, std::nullopt}};
  const auto t = b::time_to_shed(steps, records, b::Criteria{}, samples, 0.6);
  ASSERT_TRUE(t.first_rejection);
  EXPECT_NEAR(*t.first_rejection, 0.35, 1e-9);  // a slow rejection is still the first one
  ASSERT_TRUE(t.signal_over_threshold);
  EXPECT_NEAR(*t.signal_over_threshold, 0.25, 1e-9);
  const auto none = b::time_to_shed(steps, {response(2100, 200, 1, 1)}, b::Criteria{}, {}, 0.6);
  EXPECT_FALSE(none.first_rejection);
  EXPECT_FALSE(none.signal_over_threshold);
}

TEST(BufferVerdict, ExpectationsAndSpikeChecks) {
  auto mix = *b::parse_mix("CRITICAL=50,BULK=50");
  auto spike = step(4, 400, 150, 250, 0, b::StepKind::spike);
  spike.by_class = {b::Counts{}, b::Counts{}};
  spike.by_class[0].offered = 2000;
  spike.by_class[0].served = 1990;
  spike.by_class[1].offered = 2000;
  spike.by_class[1].served = 10;
  std::vector<b::StepResult> steps = {step(1, 100, 100, 0, 0, b::StepKind::baseline), spike,
                                      step(1, 100, 100, 0, 0, b::StepKind::recovery)};
  steps[0].by_class = steps[2].by_class = {b::Counts{}, b::Counts{}};
  const auto buffers = b::compute_buffers(steps, 100, b::BufferRules{});
  lg::RunResult run;
  run.records = {response(0, 200, 1)};
  b::Expectations ex;
  ex.success_buffer = 0.3;
  ex.failure_buffer = 2.0;
  ex.served = {*b::parse_served_expectation("critical=99%", mix)};
  ex.spike = true;
  auto v = b::judge_run(steps, mix, buffers, ex, b::BufferRules{}, run);
  EXPECT_TRUE(v.passed);
  for (const auto& c : v.checks) EXPECT_TRUE(c.passed) << c.name << ": " << c.detail;

  ex.served = {*b::parse_served_expectation("CRITICAL=99.6", mix)};  // 99.5 % served
  EXPECT_FALSE(b::judge_run(steps, mix, buffers, ex, b::BufferRules{}, run).passed);
  ex.served.clear();
  ex.failure_buffer = 2.6;
  EXPECT_FALSE(b::judge_run(steps, mix, buffers, ex, b::BufferRules{}, run).passed);
  ex.failure_buffer.reset();
  steps[2] = step(1, 100, 90, 0, 10, b::StepKind::recovery);  // not recovered
  steps[2].by_class = {b::Counts{}, b::Counts{}};
  EXPECT_FALSE(b::judge_run(steps, mix, buffers, ex, b::BufferRules{}, run).passed);

  lg::RunResult silent;
  silent.first_error = "connect 127.0.0.1:9: Connection refused";
  lg::Record timeout;
  timeout.outcome = lg::Outcome::connect_error;
  silent.records = {timeout};
  const auto dead = b::judge_run(steps, mix, buffers, b::Expectations{}, b::BufferRules{}, silent);
  EXPECT_FALSE(dead.passed);
  EXPECT_EQ(dead.checks.front().detail, silent.first_error);

  EXPECT_FALSE(b::parse_served_expectation("DEGRADED=99", mix));  // not in the mix
  EXPECT_FALSE(b::parse_served_expectation("CRITICAL=101", mix));
  EXPECT_FALSE(b::parse_served_expectation("CRITICAL", mix));
}

TEST(BufferRender, JsonCarriesTheFiguresAndSvgIsOneDocument) {
  b::RunReport r;
  r.target = "127.0.0.1:8080/";
  r.mode = "ramp";
  r.baseline_rps = 100;
  r.baseline_source = "given";
  r.mix = *b::parse_mix("CRITICAL=50,BULK=50");
  r.steps = {step(1, 100, 100, 0, 0), step(2, 200, 150, 50, 0)};
  for (auto& s : r.steps) s.by_class = {b::Counts{}, b::Counts{}};
  r.steps[1].endpoint_utilization.mean = 0.7;
  r.buffers = b::compute_buffers(r.steps, 100, r.rules);
  r.verdict.checks.push_back({"the target answered", true, "yes"});
  const auto j = nlohmann::json::parse(b::render_json(r));
  EXPECT_EQ(j["steps"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["buffers"]["success"].get<double>(), 0.5);
  EXPECT_TRUE(j["buffers"]["failure_is_lower_bound"].get<bool>());
  EXPECT_DOUBLE_EQ(j["steps"][1]["utilization"]["endpoint"]["mean"].get<double>(), 0.7);
  EXPECT_TRUE(j["steps"][0]["utilization"]["endpoint"]["mean"].is_null());
  EXPECT_TRUE(j["steps"][1]["classes"].contains("BULK"));
  EXPECT_TRUE(j["verdict"]["passed"].get<bool>());

  const auto svg = b::render_svg(r);
  EXPECT_TRUE(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
  EXPECT_NE(svg.find("<title>rejected 50 req/s</title>"), std::string::npos);
  EXPECT_NE(svg.find("endpoint utilization"), std::string::npos);

  const auto table = b::render_table(r);
  bool found = false;
  for (const auto& line : table) found = found || line.starts_with("success buffer: 0.50");
  EXPECT_TRUE(found);
  EXPECT_EQ(table.back(), "verdict: PASS");
}
