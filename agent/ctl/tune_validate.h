// SPDX-License-Identifier: Apache-2.0
// `headroomctl tune validate` and `tune search` without I/O: the five named
// criteria a configuration must meet in a spike (docs/tuning.md), the
// adjustment a failed one suggests, the scaling of an endpoint's shedding
// thresholds by one position, and the search's next position from the runs so
// far. Everything here is arithmetic over a spike's StepResults and the
// endpoint report's readings taken during it; tests feed it made-up ones.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/ctl/buffer_model.h"
#include "headroom/orca/shedder.h"

namespace headroom::ctl::tune {

using std::chrono::nanoseconds;

// ---------------------------------------------------------------- the file's endpoint

// One [[endpoint.shed]] entry: the reference shedder's function of one signal.
struct ShedEntry {
  std::string signal;  // "utilization.latency.slo_target"
  orca::SignalThresholds thresholds;
};

// What validate needs of the endpoint NAME in a headroom.toml.
struct EndpointUnderTest {
  std::string name;
  nanoseconds target{0}, max{0};
  std::vector<ShedEntry> shed;
};

// ---------------------------------------------------------------- the run's readings

// One read of the endpoint's report during the run.
struct Reading {
  int64_t at_ns = 0;  // since the run's start
  std::optional<double> rps;  // rps_fractional
  std::map<std::string, double> signals;  // the signals read (the file's shed signals and --signal)
};

// When each step ran, from the plan: [begin, end) since the run's start,
// and where its measured part begins (after its settle).
struct StepWindow {
  int64_t begin_ns = 0, measured_ns = 0, end_ns = 0;
};
std::vector<StepWindow> step_windows(const std::vector<buffer::Step>& steps);

// The highest value of `signal` (or, with signal "rps", of rps) among the
// readings in [from_ns, to_ns); empty when none has it.
std::optional<double> max_reading(const std::vector<Reading>& readings, const std::string& signal, int64_t from_ns,
                                  int64_t to_ns);

// ---------------------------------------------------------------- the criteria

struct Limits {
  double spike = 4;               // the spike's multiple of the baseline
  double min_sent = 0.95;         // spike_received: sent at least this share of the planned rate...
  double min_report_rps = 0.80;   // ...and the report's rps reached this share of it
  double expect_success_buffer = 0;
  double max_failed = 0.01;       // graceful_rejection: failed share of the spike's offered
  nanoseconds reject_within{std::chrono::milliseconds(50)};  // ...and rejections' p99
  std::vector<std::pair<std::string, double>> expect_served{{"CRITICAL", 0.99}};  // served_within_slo
  double max_slow = 0.01;         // ...and at most this share of 2xx answers slower than max
  double max_baseline_rejected = 0.001;  // no_baseline_shedding
};

// One measured figure of a criterion against its limit.
struct Measure {
  std::string what;  // "sent / planned"
  double value = 0;
  double limit = 0;
  bool at_least = true;  // passes when value >= limit (else value <= limit)
  bool passed = false;
  std::string unit;  // "", "%" (value and limit are fractions shown as percentages), "ms"
};
struct Criterion {
  std::string name;  // spike_received, buffers, graceful_rejection, served_within_slo, no_baseline_shedding
  bool passed = true;
  std::vector<Measure> measures;
};

enum class Cause : uint8_t {
  none,          // passed
  not_received,  // the client could not send the spike: no verdict on the file
  too_early,     // shedding starts at the baseline
  too_late,      // the spike was not rejected gracefully or served within the SLO
  capacity,      // the instance cannot absorb the spike at this baseline
};
std::string_view cause_name(Cause cause) noexcept;

// The adjustment a failed run suggests.
struct Suggestion {
  Cause cause = Cause::none;
  std::string signal;              // the signal to move (too_early, too_late)
  std::optional<double> value;     // its level: during the spike before the first rejection, or the baseline's max
  std::optional<double> shed_start, critical_start;  // the proposed thresholds
  std::string text;                // one sentence for the operator
};

struct Judgement {
  bool passed = false;
  Cause cause = Cause::none;
  std::vector<Criterion> criteria;
  std::optional<Suggestion> suggestion;
};

// What one spike showed, as the judge needs it.
struct SpikeFacts {
  std::vector<buffer::StepResult> steps;  // baseline, spike[, recovery]
  std::vector<buffer::MixEntry> mix;
  buffer::Buffers buffers;
  std::vector<Reading> readings;  // empty when no report was readable
  std::optional<double> first_rejection_s;  // since the spike's start
  std::vector<ShedEntry> shed;  // the thresholds in use (the file's)
  std::string signal = "application_utilization";  // --signal: the one judged when the file has no [[endpoint.shed]]
};

// Judges the five criteria and, on a fail, the cause and its suggestion:
// spike_received failed -> not_received (whatever else failed);
// else no_baseline_shedding -> too_early; else served_within_slo or
// graceful_rejection -> too_late; else buffers -> capacity.
Judgement judge(const SpikeFacts& facts, const Limits& limits);

// ---------------------------------------------------------------- the search

// The thresholds at position s (docs/tuning.md): for each entry, with b the
// signal's baseline level (0 when unknown, and 0 when b is not below the
// file's shed_start), start(s) = b + s (start - b), at most
// b + 0.99 (all_shed - b); critical_start keeps the file's place between the
// start and all_shed (critical(s) = start(s) + f (all_shed - start(s)), f as
// in the file); all_shed kept. s = 1 is the file.
std::vector<ShedEntry> scale_shed(const std::vector<ShedEntry>& file, const std::map<std::string, double>& levels,
                                  double s);
// The largest position whose thresholds stay valid with a margin:
// start(s) <= b + 0.99 (all_shed - b) for every entry.
double max_position(const std::vector<ShedEntry>& file, const std::map<std::string, double>& levels);

struct SearchRun {
  double s = 1;
  Cause cause = Cause::none;  // none: passed
  double success_buffer = 0;
};
struct NextStep {
  std::optional<double> s;  // the next position; empty: stop
  std::string why;          // why this position, or why the search stops
};
inline constexpr double kMinBracket = 0.05;
// The search from the runs so far (pure; docs/tuning.md "search"):
//  - no run yet: s = 1 (the file);
//  - a run passed: try later shedding: 1.5 x the highest passing s (at most
//    s_max), or halfway to the lowest failing s above it;
//  - none passed, shedding too late at s_hi: bisect [s_lo, s_hi], s_lo the
//    highest too-early position or 0;
//  - none passed, only too early: 1.5 x the highest too-early position;
//  - stop: max_runs reached, the bracket narrower than kMinBracket, s_max
//    reached, a position already run, or a fail that thresholds cannot fix
//    (capacity, not_received) with no pass yet.
NextStep next_position(const std::vector<SearchRun>& runs, double s_max, int max_runs);
// The best passing run: the largest success buffer, ties to the larger s.
std::optional<std::size_t> best_run(const std::vector<SearchRun>& runs);

}  // namespace headroom::ctl::tune
