// SPDX-License-Identifier: Apache-2.0
// `headroomctl buffer`'s experiment without its outputs: the flags as a plain
// struct, the plan checked from them before anything is sent, and one run of
// the plan that returns what happened as the report the renderers print.
// `headroomctl buffer` prints that report; `headroomctl tune validate` judges
// it against a configuration's SLO (tune_validate.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/ctl/buffer_model.h"
#include "agent/ctl/buffer_render.h"
#include "agent/ctl/buffer_retries.h"
#include "agent/ctl/loadgen.h"
#include "headroom/orca/report.h"
#include "headroom/orca/result.h"

namespace headroom::ctl::buffer {

// The flags of `headroomctl buffer` (docs/buffers.md), as a run needs them.
struct RunOptions {
  std::vector<std::string> targets;  // TARGET, once per instance of the service
  std::string baseline;  // a rate, or "report"
  std::string ramp = "1,1.5,2,2.5,3,4,5,6";
  std::string step = "10s";
  std::string settle = "2s";
  double spike = 0;  // > 0: spike mode
  std::string before = "10s", spike_for = "20s", after = "10s";
  std::string mix = "CRITICAL=25,DEGRADED=25,BEST_EFFORT=25,BULK=25";
  std::string priority_header = "x-priority";
  std::string slo = "500ms";
  std::vector<int> reject_statuses{503, 429};
  std::string reject_within = "50ms";
  std::string timeout = "2s";
  int connections = 512;
  double max_failed = 1;        // percent
  double max_served_drop = 10;  // percent
  std::optional<double> expect_success, expect_failure;
  std::vector<std::string> expect_served;
  std::string orca_dir = "/run/orca";
  std::string scope;
  std::string signal = "application_utilization";
  std::optional<double> threshold;
  bool json = false;
  std::string svg;
  bool allow_remote = false;
  bool dry_run = false;
  double max_rate = 20000;
  std::string max_duration = "10m";
  std::string retries = "none";
  int max_retries = 3;
  std::string program = "headroomctl buffer";  // names the command in messages
};

// One TARGET resolved, on this machine unless --allow-remote.
struct ResolvedTarget {
  loadgen::Target target;
  std::string shown;  // "127.0.0.1:8080/play"
};

struct Baseline {
  double rps = 0;
  std::string source = "given";
};

// Everything the run needs that the flags say, checked before anything is sent.
struct Plan {
  std::vector<ResolvedTarget> targets;  // the instances, at least one
  std::vector<MixEntry> mix;
  Baseline baseline;
  Criteria criteria;
  nanoseconds timeout{0};
  std::vector<Step> steps;
  Expectations expectations;
  RetryMode retries = RetryMode::none;
};
Result<Plan> plan_of(const RunOptions& o);

// The targets as the plan's description names them.
std::string targets_text(const std::vector<ResolvedTarget>& targets);

// Whether TARGET (HOST:PORT[/PATH]) resolves to this machine: loopback or an
// address of one of its interfaces. The error: a malformed or unresolvable TARGET.
Result<bool> target_is_local(const std::string& text);

// Called on the sampling thread with each read of --scope's report, and the
// time of the read since the run's start (nanoseconds; negative before it).
using ReportObserver = std::function<void(const orca::Report& report, bool stale, int64_t at_ns)>;

// Sends the plan and returns its report. SIGINT and SIGTERM stop the run
// (the report says `interrupted` and covers the part that ran). While it runs,
// headroomd's reports in --orca-dir are sampled, and each read of --scope's
// report also goes to `observe`. The error's code is 0 when the engine refused
// the options (a usage error), else the errno of the system call that failed.
Result<RunReport> run_plan(const RunOptions& o, const Plan& p, const ReportObserver& observe = {});

}  // namespace headroom::ctl::buffer
