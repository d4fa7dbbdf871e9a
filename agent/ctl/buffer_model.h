// SPDX-License-Identifier: Apache-2.0
// `headroomctl buffer`, without I/O: the plan of a load experiment (a ramp of
// steps or a spike, in multiples of a baseline rate, with a priority mix), and
// what the engine's records say about it: per step and per priority offered,
// served, rejected and failed, latency percentiles, the success and failure
// buffers and the verdict against the operator's expectations.
// docs/buffers.md defines every figure computed here.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/ctl/loadgen.h"
#include "headroom/orca/result.h"

namespace headroom::ctl::buffer {

using std::chrono::nanoseconds;

// ---------------------------------------------------------------- the plan

// One entry of --mix: the priority header's value and its share.
struct MixEntry {
  std::string name;  // "CRITICAL", "BULK", or a priority "1".."100"
  double share = 0;  // > 0; shares are normalized to sum to 1
  int priority = 0;  // the numeric priority it stands for (bucket: its first level)
};
// "CRITICAL=25,DEGRADED=25,BEST_EFFORT=25,BULK=25" or "1=10,50=40,90=50":
// bucket names (case-insensitive, '-' for '_') or priorities 1..100, each
// once, shares > 0 (percentages or weights; normalized). Sorted most important first.
Result<std::vector<MixEntry>> parse_mix(std::string_view text);

enum class StepKind : uint8_t {
  ramp,      // one step of a ramp
  baseline,  // a spike's baseline before the spike
  spike,     // the spike itself
  recovery,  // the baseline again after the spike
};
std::string_view step_kind_name(StepKind kind) noexcept;

struct Step {
  StepKind kind = StepKind::ramp;
  double multiple = 1;  // of the baseline rate
  double rate = 0;      // requests per second
  nanoseconds duration{0};
  nanoseconds settle{0};  // the first `settle` of the step is not measured
};

struct RampSpec {
  std::vector<double> multiples;  // ascending, > 0
  nanoseconds step{0};            // each step's length
  nanoseconds settle{0};          // < step
};
struct SpikeSpec {
  double multiple = 4;        // > 1
  nanoseconds before{0};      // baseline before the spike, > 0
  nanoseconds length{0};      // the spike, > 0
  nanoseconds after{0};       // baseline after, >= 0 (0: no recovery step)
  nanoseconds settle{0};      // not measured at the start of baseline and recovery
};

// The steps of a ramp or a spike at `baseline_rps`. The spike step is
// measured from its first request (settle 0): what happens while the shedder
// reacts is the point of a spike.
Result<std::vector<Step>> ramp_steps(const RampSpec& spec, double baseline_rps);
Result<std::vector<Step>> spike_steps(const SpikeSpec& spec, double baseline_rps);

// "1,1.5,2,3": multiples, ascending, each > 0.
Result<std::vector<double>> parse_multiples(std::string_view text);

// The engine's phases for these steps (one per step).
std::vector<loadgen::Phase> phases_of(const std::vector<Step>& steps);

// What the run will send: "6 steps, 120 s, 1 000 to 6 000 req/s, 2 160 000
// requests to 127.0.0.1:8080/ (CRITICAL 25 %, ...)". Printed before anything is sent.
std::string describe_plan(const std::vector<Step>& steps, const std::vector<MixEntry>& mix, std::string_view target);
double peak_rate(const std::vector<Step>& steps) noexcept;
nanoseconds total_duration(const std::vector<Step>& steps) noexcept;

// ---------------------------------------------------------------- judging requests

struct Criteria {
  nanoseconds slo{std::chrono::milliseconds(500)};   // a 2xx within this is served
  std::vector<int> reject_statuses{503, 429};        // a deliberate rejection...
  nanoseconds reject_within{std::chrono::milliseconds(50)};  // ...answered this fast
};

enum class Fate : uint8_t {
  served,    // 2xx within the SLO
  rejected,  // a reject status within reject_within
  failed,    // everything else (below: why)
  cancelled, // the run was interrupted before it was answered: not counted
};
enum class FailReason : uint8_t { none, over_slo, slow_reject, status, timeout, connect, closed, bad_response };
inline constexpr std::size_t kFailReasons = 8;
std::string_view fail_reason_name(FailReason reason) noexcept;

struct Judged {
  Fate fate = Fate::failed;
  FailReason reason = FailReason::none;
};
Judged judge(const loadgen::Record& record, const Criteria& criteria) noexcept;

// ---------------------------------------------------------------- per instance

// What one instance of the target did with the attempts sent to it (first
// attempts and retries alike), each judged on its own, over the whole run:
// settling included, cancelled attempts nowhere.
struct InstanceCounts {
  std::string target;  // "127.0.0.1:8001/"
  int64_t attempts = 0;
  int64_t served = 0;
  int64_t rejected = 0;
  int64_t failed = 0;
};
// One per entry of `targets` (indexed like Record::instance).
std::vector<InstanceCounts> instance_counts(const std::vector<std::string>& targets,
                                            const std::vector<loadgen::Record>& records, const Criteria& criteria);

// ---------------------------------------------------------------- per step

struct Latency {  // nanoseconds; 0 when there were no such requests
  int64_t p50 = 0, p90 = 0, p99 = 0, max = 0;
};

struct Counts {
  int64_t offered = 0, served = 0, rejected = 0, failed = 0;
  std::array<int64_t, kFailReasons> failed_by{};  // indexed by FailReason
  Latency served_latency;    // of served requests
  Latency rejected_latency;  // of rejections (a reject status, however slow)
  // Shares of `offered` (0 when nothing was offered).
  double served_share() const noexcept;
  double rejected_share() const noexcept;
  double failed_share() const noexcept;
};

// One utilization sample of headroomd's reports taken during the run.
struct UtilizationSample {
  int64_t at_ns = 0;  // since the engine's start
  std::optional<double> endpoint;  // the endpoint scope's chosen signal
  std::optional<double> node;      // node.orca's application_utilization
};
struct UtilizationSummary {
  std::optional<double> mean, max;
};

struct StepResult {
  Step step;
  double measured_seconds = 0;  // the step's length after settle
  Counts all;
  std::vector<Counts> by_class;  // indexed like the mix
  // Rates over the measured part (requests per second).
  double offered_rps = 0, served_rps = 0, rejected_rps = 0, failed_rps = 0;
  UtilizationSummary endpoint_utilization, node_utilization;
};

// Aggregates the records (schedule order, as run() returns them) into steps.
// A record counts in the step of its phase when it was scheduled after the
// step's settle time; cancelled records count nowhere.
std::vector<StepResult> analyze(const std::vector<Step>& steps, std::size_t classes,
                                const std::vector<loadgen::Record>& records, const Criteria& criteria,
                                const std::vector<UtilizationSample>& samples = {});

// ---------------------------------------------------------------- buffers

struct BufferRules {
  double max_failed = 0.01;        // a graceful step fails at most this share of what it offered
  double max_served_drop = 0.10;   // ...and serves at least (1 - this) of the best served rate so far
};

struct Buffers {
  double baseline_rps = 0;
  // Success buffer: (best served rate of the graceful steps - baseline) / baseline.
  double success = 0;
  double success_capacity_rps = 0;  // that best served rate
  bool success_is_lower_bound = false;  // every graceful step was fully served: capacity not reached
  // Failure buffer: (offered rate where graceful handling ends - capacity) / baseline.
  double failure = 0;
  double graceful_limit_rps = 0;   // where graceful handling ends (interpolated)
  bool failure_is_lower_bound = false;  // no step went past it
  std::optional<std::size_t> last_graceful;  // index into the steps
  std::optional<std::size_t> first_failing;
  std::string explanation;  // one sentence: which steps bracket the figures
};

// Over the ramp, baseline and spike steps in order of offered rate (recovery
// steps are judged separately, see Verdict).
Buffers compute_buffers(const std::vector<StepResult>& steps, double baseline_rps, const BufferRules& rules);

// ---------------------------------------------------------------- time to shed

struct TimeToShed {
  // Since the spike's first request (seconds); empty when it never happened.
  std::optional<double> first_rejection;       // scheduled time of the first rejected request
  std::optional<double> signal_over_threshold; // first report sample at or above the threshold
};
TimeToShed time_to_shed(const std::vector<Step>& steps, const std::vector<loadgen::Record>& records,
                        const Criteria& criteria, const std::vector<UtilizationSample>& samples,
                        double threshold);

// ---------------------------------------------------------------- the verdict

struct Expectations {
  std::optional<double> success_buffer;  // at least
  std::optional<double> failure_buffer;  // at least
  // --expect-served CRITICAL=99: the entry's served share over the measured
  // steps, at least this fraction.
  std::vector<std::pair<std::string, double>> served;
  bool spike = false;  // a spike's checks (below) apply
};

struct Check {
  std::string name;    // "success buffer >= 0.30"
  bool passed = false;
  std::string detail;  // "measured 0.42"
};
struct Verdict {
  bool passed = true;
  std::vector<Check> checks;
};

// Parses "CRITICAL=99" or "CRITICAL=99%" (a percentage) for --expect-served;
// the name must be in the mix.
Result<std::pair<std::string, double>> parse_served_expectation(std::string_view text,
                                                                       const std::vector<MixEntry>& mix);

// The checks:
//  - every expected buffer is met (a lower bound that meets it passes);
//  - every --expect-served entry is met over all measured steps;
//  - for a spike: the spike was received (at least 95 % of its planned
//    requests were sent on time), no step failed more than max_failed (shed
//    load was rejected gracefully, served requests met their SLO), and the
//    recovery step is fully served;
//  - always: some request was answered at all (a target that never answers
//    fails, with the engine's first error).
Verdict judge_run(const std::vector<StepResult>& steps, const std::vector<MixEntry>& mix, const Buffers& buffers,
                  const Expectations& expectations, const BufferRules& rules, const loadgen::RunResult& run);

}  // namespace headroom::ctl::buffer
