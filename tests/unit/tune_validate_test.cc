// SPDX-License-Identifier: Apache-2.0
// tune validate's criteria and suggestions, and tune search's positions:
// tables of made-up spikes (StepResults and report readings) and runs.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "agent/ctl/tune_validate.h"

namespace headroom::ctl::tune {
namespace {

namespace b = buffer;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kSlo = "utilization.latency.slo_target";
constexpr const char* kCpu = "cpu_utilization";

// A step of `seconds_long` at `rate` req/s, every request served, with two
// classes (CRITICAL, BULK) of equal share.
b::StepResult step(b::StepKind kind, double rate, int seconds_long, int settle_s) {
  b::StepResult s;
  s.step = b::Step{kind, rate / 100, rate, seconds(seconds_long), seconds(settle_s)};
  s.measured_seconds = seconds_long - settle_s;
  s.offered_rps = s.served_rps = rate;
  const auto n = static_cast<int64_t>(rate * s.measured_seconds);
  s.all.offered = s.all.served = n;
  s.by_class = {b::Counts{}, b::Counts{}};
  for (auto& c : s.by_class) c.offered = c.served = n / 2;
  return s;
}

Reading reading(int64_t at_s, double slo, double cpu, double rps) {
  return Reading{at_s * 1'000'000'000, rps, {{kSlo, slo}, {kCpu, cpu}}};
}

// A 4x spike from 100 req/s that passes: baseline 0-10 s (settle 2 s),
// spike 10-30 s, recovery 30-40 s; the latency signal climbs during the
// spike, the first rejection 5 s into it.
SpikeFacts passing() {
  SpikeFacts f;
  f.steps = {step(b::StepKind::baseline, 100, 10, 2), step(b::StepKind::spike, 400, 20, 0),
             step(b::StepKind::recovery, 100, 10, 2)};
  f.mix = {b::MixEntry{"CRITICAL", 0.5, 90}, b::MixEntry{"BULK", 0.5, 10}};
  f.buffers.baseline_rps = 100;
  f.buffers.success = 2.5;
  f.buffers.failure = 0.5;
  f.readings = {reading(3, 0.10, 0.30, 100), reading(9, 0.08, 0.25, 100), reading(11, 0.20, 0.35, 150),
                reading(12, 0.50, 0.40, 300), reading(20, 0.90, 0.45, 390), reading(35, 0.1, 0.3, 110)};
  f.first_rejection_s = 5;
  f.shed = {ShedEntry{kSlo, {0.28, 0.64, 1.0}}, ShedEntry{kCpu, {0.6, 0.8, 1.5}}};
  return f;
}

b::StepResult& spike_of(SpikeFacts& f) { return f.steps[1]; }

std::vector<std::string> failed_names(const Judgement& j) {
  std::vector<std::string> out;
  for (const auto& c : j.criteria)
    if (!c.passed) out.push_back(c.name);
  return out;
}

struct JudgeCase {
  std::string name;
  std::function<void(SpikeFacts&, Limits&)> change;
  Cause cause;
  std::vector<std::string> failed;
};

TEST(TuneJudge, EachCriterionFailsOnItsOwnFigureAndNamesItsCause) {
  const std::vector<JudgeCase> cases = {
      {"all met", [](SpikeFacts&, Limits&) {}, Cause::none, {}},
      {"client sent 90 % of the spike", [](SpikeFacts& f, Limits&) { spike_of(f).offered_rps = 360; },
       Cause::not_received, {"spike_received"}},
      {"report saw 70 % of the spike", [](SpikeFacts& f, Limits&) { f.readings[4].rps = 280; },
       Cause::not_received, {"spike_received"}},
      {"no report readable: judged on the client alone", [](SpikeFacts& f, Limits&) { f.readings.clear(); }, Cause::none, {}},
      {"not received wins over a late shedder",
       [](SpikeFacts& f, Limits&) {
         spike_of(f).offered_rps = 300;
         spike_of(f).all.failed = spike_of(f).all.offered / 10;
       },
       Cause::not_received, {"spike_received", "graceful_rejection"}},
      {"buffers short of spike - 1", [](SpikeFacts& f, Limits&) { f.buffers.failure = 0.4; }, Cause::capacity, {"buffers"}},
      {"the spike sent a request short: the buffers reach what was sent",
       [](SpikeFacts& f, Limits&) {
         spike_of(f).offered_rps = 399.95;
         f.buffers.failure = 0.4995;
       },
       Cause::none, {}},
      {"the spike sent a request short and the buffers fall short of it",
       [](SpikeFacts& f, Limits&) {
         spike_of(f).offered_rps = 399.95;
         f.buffers.failure = 0.49;
       },
       Cause::capacity, {"buffers"}},
      {"success buffer below --expect-success-buffer", [](SpikeFacts&, Limits& l) { l.expect_success_buffer = 2.6; },
       Cause::capacity, {"buffers"}},
      {"5 % of the spike failed", [](SpikeFacts& f, Limits&) { spike_of(f).all.failed = spike_of(f).all.offered / 20; },
       Cause::too_late, {"graceful_rejection"}},
      {"rejections slow (p99 80 ms)",
       [](SpikeFacts& f, Limits&) { spike_of(f).all.rejected_latency.p99 = 80'000'000; }, Cause::too_late,
       {"graceful_rejection"}},
      {"CRITICAL served 95 %",
       [](SpikeFacts& f, Limits&) { spike_of(f).by_class[0].served = spike_of(f).by_class[0].offered * 95 / 100; },
       Cause::too_late, {"served_within_slo"}},
      {"BULK served 50 % is no criterion",
       [](SpikeFacts& f, Limits&) { spike_of(f).by_class[1].served = spike_of(f).by_class[1].offered / 2; }, Cause::none, {}},
      {"3 % of 2xx slower than max",
       [](SpikeFacts& f, Limits&) {
         auto& all = spike_of(f).all;
         all.failed_by[static_cast<std::size_t>(b::FailReason::over_slo)] = all.served * 3 / 97;
       },
       Cause::too_late, {"served_within_slo"}},
      {"1 % rejected at the baseline", [](SpikeFacts& f, Limits&) { f.steps[0].all.rejected = f.steps[0].all.offered / 100; },
       Cause::too_early, {"no_baseline_shedding"}},
      {"0.1 % rejected at the baseline is allowed",
       [](SpikeFacts& f, Limits&) {
         f.steps[0].all.offered = 2000;
         f.steps[0].all.rejected = 2;
       },
       Cause::none, {}},
      {"too early wins over too late",
       [](SpikeFacts& f, Limits&) {
         f.steps[0].all.rejected = f.steps[0].all.offered / 50;
         spike_of(f).all.failed = spike_of(f).all.offered / 10;
       },
       Cause::too_early, {"graceful_rejection", "no_baseline_shedding"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    SpikeFacts f = passing();
    Limits l;
    c.change(f, l);
    const Judgement j = judge(f, l);
    EXPECT_EQ(j.passed, c.cause == Cause::none);
    EXPECT_EQ(j.cause, c.cause);
    EXPECT_EQ(failed_names(j), c.failed);
    ASSERT_EQ(j.criteria.size(), 5u);
    EXPECT_EQ(j.suggestion.has_value(), c.cause != Cause::none);
  }
}

TEST(TuneJudge, TooLateNamesTheSignalHighestBeforeTheFirstRejectionAndALowerStart) {
  SpikeFacts f = passing();
  spike_of(f).all.failed = spike_of(f).all.offered / 10;
  const Judgement j = judge(f, Limits{});
  ASSERT_TRUE(j.suggestion);
  const Suggestion& s = *j.suggestion;
  EXPECT_EQ(s.cause, Cause::too_late);
  EXPECT_EQ(s.signal, kSlo);
  // Readings at 11 s and 12 s are before the rejection at 15 s; 0.9 at 20 s is not.
  ASSERT_TRUE(s.value);
  EXPECT_DOUBLE_EQ(*s.value, 0.5);
  // Baseline level 0.10 (its max at 2-10 s): 0.10 + 0.5 (min(0.5, 0.28) - 0.10).
  ASSERT_TRUE(s.shed_start && s.critical_start);
  EXPECT_NEAR(*s.shed_start, 0.19, 1e-9);
  // CRITICAL keeps its place, halfway from the start to all_shed (as in the file).
  EXPECT_NEAR(*s.critical_start, 0.19 + 0.5 * (1.0 - 0.19), 1e-9);
  EXPECT_NE(s.text.find("lower its shed_start 0.28 to 0.19"), std::string::npos) << s.text;
}

TEST(TuneJudge, TooLateWithoutARejectionLooksAtTheWholeSpike) {
  SpikeFacts f = passing();
  f.first_rejection_s.reset();
  spike_of(f).by_class[0].served = 0;
  const Judgement j = judge(f, Limits{});
  ASSERT_TRUE(j.suggestion && j.suggestion->value);
  EXPECT_DOUBLE_EQ(*j.suggestion->value, 0.9);
  EXPECT_NE(j.suggestion->text.find("nothing was rejected"), std::string::npos);
}

TEST(TuneJudge, TooEarlyNamesTheSignalNearestItsStartAtTheBaseline) {
  SpikeFacts f = passing();
  f.steps[0].all.rejected = f.steps[0].all.offered / 20;
  // cpu 0.55 of start 0.6 is nearer its start than latency 0.10 of 0.28.
  f.readings[1].signals[kCpu] = 0.55;
  const Judgement j = judge(f, Limits{});
  ASSERT_TRUE(j.suggestion && j.suggestion->value && j.suggestion->shed_start);
  EXPECT_EQ(j.suggestion->signal, kCpu);
  EXPECT_DOUBLE_EQ(*j.suggestion->value, 0.55);
  EXPECT_NEAR(*j.suggestion->shed_start, 0.55 + 0.2 * 0.45, 1e-9);
}

TEST(TuneJudge, ARunWithoutASpikeStepGivesNoVerdict) {
  SpikeFacts f = passing();
  f.steps.resize(1);
  const Judgement j = judge(f, Limits{});
  EXPECT_FALSE(j.passed);
  EXPECT_EQ(j.cause, Cause::not_received);
}

TEST(TuneScale, PositionsMoveStartsFromTheBaselineLevelAndCriticalKeepsItsPlace) {
  // CRITICAL starts halfway from the start to all_shed: (0.64 - 0.28) / (1 - 0.28).
  const std::vector<ShedEntry> file{ShedEntry{kSlo, {0.28, 0.64, 1.0}}};
  struct Case {
    double level, s, start, critical;
  };
  const std::vector<Case> cases = {
      {0.10, 1.0, 0.28, 0.64},  {0.10, 0.5, 0.19, 0.595}, {0.10, 2.0, 0.46, 0.73},
      {0.10, 9.0, 0.991, 0.9955},  // the start clamped below all_shed
      {0.30, 0.5, 0.14, 0.57},     // a level over the start: scaled from 0
      {0.00, 0.25, 0.07, 0.535},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c.level) + " at s " + std::to_string(c.s));
    const auto out = scale_shed(file, {{kSlo, c.level}}, c.s);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_NEAR(out[0].thresholds.shed_start, c.start, 1e-9);
    EXPECT_NEAR(out[0].thresholds.critical_start, c.critical, 1e-9);
    EXPECT_DOUBLE_EQ(out[0].thresholds.all_shed, 1.0);
    EXPECT_TRUE(orca::validate_thresholds(out[0].thresholds).ok());
  }
  // A file whose CRITICAL start hugs its start keeps that place: the search
  // moves where shedding starts, not the shape of the function.
  const auto tight = scale_shed({ShedEntry{"cpu_utilization", {1.35, 1.44, 1.5}}}, {{"cpu_utilization", 0.35}}, 0.25);
  EXPECT_NEAR(tight[0].thresholds.shed_start, 0.6, 1e-9);
  EXPECT_NEAR(tight[0].thresholds.critical_start, 0.6 + 0.6 * 0.9, 1e-9);
  // The largest valid position: 0.99 (1.0 - 0.1) / (0.28 - 0.1).
  EXPECT_NEAR(max_position(file, {{kSlo, 0.1}}), 0.99 * 0.9 / 0.18, 1e-9);
}

struct NextCase {
  std::string name;
  std::vector<SearchRun> runs;
  double s_max;
  std::optional<double> next;
};

TEST(TuneSearch, NextPositionFollowsTheDocumentedSearch) {
  const Cause pass = Cause::none, late = Cause::too_late, early = Cause::too_early;
  const std::vector<NextCase> cases = {
      {"first: the file", {}, 2, 1.0},
      {"pass: later shedding", {{1, pass, 2}}, 2, 1.5},
      {"pass again: bounded by validity", {{1, pass, 2}, {1.5, pass, 2.5}}, 2, 2.0},
      {"pass at the bound: stop", {{1, pass, 2}, {1.5, pass, 2.5}, {2, pass, 2.6}}, 2, std::nullopt},
      {"pass then late: halfway", {{1, pass, 2}, {1.5, late, 0}}, 2, 1.25},
      {"pass then capacity above: halfway", {{1, pass, 2}, {1.5, Cause::capacity, 0}}, 2, 1.25},
      {"bracket under 0.05: stop", {{1, pass, 2}, {1.04, late, 0}}, 2, std::nullopt},
      {"late: bisect [0, 1]", {{1, late, 0}}, 2, 0.5},
      {"late twice: bisect [0, 0.5]", {{1, late, 0}, {0.5, late, 0}}, 2, 0.25},
      {"late then early: bisect [0.5, 1]", {{1, late, 0}, {0.5, early, 0}}, 2, 0.75},
      {"early: move up", {{1, early, 0}}, 1.8, 1.5},
      {"early twice: up to the bound", {{1, early, 0}, {1.5, early, 0}}, 1.8, 1.8},
      {"early at the bound: stop", {{1, early, 0}, {1.5, early, 0}, {1.8, early, 0}}, 1.8, std::nullopt},
      {"capacity: stop", {{1, Cause::capacity, 0}}, 2, std::nullopt},
      {"not received: stop", {{1, Cause::not_received, 0}}, 2, std::nullopt},
      {"max spikes: stop", {{1, late, 0}, {0.5, late, 0}, {0.25, late, 0}}, 2, std::nullopt},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const NextStep n = next_position(c.runs, c.s_max, c.name == "max spikes: stop" ? 3 : 6);
    ASSERT_EQ(n.s.has_value(), c.next.has_value()) << n.why;
    if (c.next) {
      EXPECT_NEAR(*n.s, *c.next, 1e-9) << n.why;
    }
    EXPECT_FALSE(n.why.empty());
  }
}

TEST(TuneSearch, BestRunHasTheLargestSuccessBufferTiesToTheLaterStart) {
  EXPECT_EQ(best_run({{1, Cause::too_late, 3}, {0.5, Cause::none, 1.2}, {0.75, Cause::none, 1.8}}), 2u);
  EXPECT_EQ(best_run({{1, Cause::none, 2}, {1.5, Cause::none, 2}, {1.25, Cause::none, 1.9}}), 1u);
  EXPECT_FALSE(best_run({{1, Cause::too_late, 3}, {0.5, Cause::capacity, 1}}).has_value());
}

TEST(TuneReadings, MaxReadingAndStepWindows) {
  const std::vector<Reading> rs = {reading(1, 0.2, 0.3, 90), reading(5, 0.4, 0.1, 110), reading(10, 0.9, 0.9, 400)};
  EXPECT_DOUBLE_EQ(*max_reading(rs, kSlo, 0, 10'000'000'000), 0.4);
  EXPECT_DOUBLE_EQ(*max_reading(rs, "rps", 0, 11'000'000'000), 400);
  EXPECT_FALSE(max_reading(rs, "mem_utilization", 0, 11'000'000'000).has_value());
  EXPECT_FALSE(max_reading(rs, kSlo, 20'000'000'000, 30'000'000'000).has_value());
  const auto w = step_windows({b::Step{b::StepKind::baseline, 1, 100, seconds(10), seconds(2)},
                               b::Step{b::StepKind::spike, 4, 400, seconds(20), seconds(0)}});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].measured_ns, 2'000'000'000);
  EXPECT_EQ(w[1].begin_ns, 10'000'000'000);
  EXPECT_EQ(w[1].end_ns, 30'000'000'000);
}

}  // namespace
}  // namespace headroom::ctl::tune
