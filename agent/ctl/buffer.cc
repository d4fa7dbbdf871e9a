// SPDX-License-Identifier: Apache-2.0
// headroomctl buffer: the load experiment of docs/buffers.md. This file holds
// the command: its flags, and the outputs of a run. The run itself is in
// buffer_run.h, the plan and the arithmetic in buffer_model.h, the load in
// loadgen.h, the outputs' text in buffer_render.h.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "agent/ctl/buffer_render.h"
#include "agent/ctl/buffer_run.h"
#include "agent/ctl/commands.h"
#include "headroom/orca/shedder.h"

namespace headroom::ctl {
namespace {

namespace b = buffer;

constexpr int kExitFailed = 1;  // the verdict failed, or the run could not be judged
constexpr int kExitUsage = 64;
constexpr int kExitInterrupted = 130;

int usage(const std::string& message) {
  std::fprintf(stderr, "headroomctl buffer: %s\n", message.c_str());
  return kExitUsage;
}

// The outputs: the SVG file if asked for, the table or JSON on stdout.
void print(const b::RunOptions& o, const b::RunReport& report) {
  if (!o.svg.empty()) {
    std::ofstream out(o.svg, std::ios::binary | std::ios::trunc);
    out << b::render_svg(report);
    if (!out.flush()) std::fprintf(stderr, "headroomctl buffer: --svg %s: cannot write: %s\n", o.svg.c_str(), std::strerror(errno));
  }
  std::string text;
  if (o.json) {
    text = b::render_json(report) + "\n";
  } else {
    for (const auto& line : b::render_table(report)) text += line + "\n";
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

int run(const b::RunOptions& o) {
  auto plan = b::plan_of(o);
  if (!plan) return usage(plan.error().message);
  const b::Plan& p = *plan;
  std::fprintf(stderr, "headroomctl buffer: will send %s, open loop, up to %d connections; then wait up to %s\n",
               b::describe_plan(p.steps, p.mix, b::targets_text(p.targets)).c_str(), o.connections, o.timeout.c_str());
  if (p.retries != b::RetryMode::none)
    std::fprintf(stderr, "headroomctl buffer: and retries (%s), at most %d per request\n",
                 std::string(b::retry_mode_name(p.retries)).c_str(), o.max_retries);
  if (o.dry_run) return 0;

  auto result = b::run_plan(o, p);
  if (!result) {  // code 0: options the engine refused; otherwise a system call failed
    if (result.error().code == 0) return usage(result.error().message);
    std::fprintf(stderr, "headroomctl buffer: %s\n", result.error().message.c_str());
    return kExitFailed;
  }
  const b::RunReport& report = *result;
  print(o, report);
  if (report.interrupted) return kExitInterrupted;
  return report.verdict.passed ? 0 : kExitFailed;
}

}  // namespace

std::pair<CLI::App*, Runner> add_buffer_command(CLI::App& app) {
  auto o = std::make_shared<b::RunOptions>();
  auto* c = app.add_subcommand("buffer", "Measure a service's success and failure buffers with open-loop load");
  c->footer(
      "Sends open-loop HTTP/1.1 load to TARGET (on this machine unless --allow-remote): a ramp\n"
      "of steps, multiples of --baseline, or with --spike N a baseline, N times the baseline for\n"
      "--spike-for, and the baseline again. Every request carries a priority header from --mix.\n"
      "Per step and priority it prints offered, served (2xx within --slo), rejected (a\n"
      "--reject-status within --reject-within) and failed requests, the success buffer (traffic\n"
      "above the baseline still served) and the failure buffer (traffic above that rejected\n"
      "gracefully), in multiples of the baseline (docs/buffers.md), and, when headroomd runs\n"
      "here, the utilization its reports showed during each step.\n"
      "TARGET given more than once: instances of one service, as a client-side balancer sees\n"
      "them; first attempts go round robin, a retry to the next instance, and each instance's\n"
      "attempts are reported.\n"
      "Exit status: 0 the verdict passed, 1 it failed, 64 usage error, 130 interrupted (the\n"
      "figures printed cover the part that ran).");
  c->add_option("TARGET", o->targets,
                "HOST:PORT[/PATH] or http://HOST:PORT/PATH; several: instances of one service (at most 64)")
      ->required();
  c->add_option("--baseline", o->baseline,
                "The baseline rate in requests per second, or \"report\": the rps_fractional of --scope's report")
      ->required();
  c->add_option("--ramp", o->ramp, "Ramp steps as multiples of the baseline, ascending")->capture_default_str();
  c->add_option("--step", o->step, "How long each ramp step lasts")->capture_default_str();
  c->add_option("--settle", o->settle, "The start of each step (baseline and recovery for a spike) left unmeasured")
      ->capture_default_str();
  c->add_option("--spike", o->spike, "Spike mode: the spike's rate as a multiple of the baseline (> 1)")
      ->check(CLI::PositiveNumber);
  c->add_option("--before", o->before, "Spike mode: baseline before the spike")->capture_default_str();
  c->add_option("--spike-for", o->spike_for, "Spike mode: how long the spike lasts")->capture_default_str();
  c->add_option("--after", o->after, "Spike mode: baseline after the spike (0s: none)")->capture_default_str();
  c->add_option("--mix", o->mix, "Priority mix: NAME=SHARE,... with bucket names or priorities 1-100")->capture_default_str();
  c->add_option("--priority-header", o->priority_header, "Request header that carries the priority")->capture_default_str();
  c->add_option("--slo", o->slo, "A 2xx answered within this is served; later, it failed")->capture_default_str();
  c->add_option("--reject-status", o->reject_statuses, "Statuses that are deliberate rejections (repeatable)")
      ->capture_default_str()
      ->check(CLI::Range(100, 599));
  c->add_option("--reject-within", o->reject_within, "A rejection answered within this is graceful")->capture_default_str();
  c->add_option("--timeout", o->timeout, "A request unanswered this long after it was due failed")->capture_default_str();
  c->add_option("--connections", o->connections, "At most this many keep-alive connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  c->add_option("--max-failed", o->max_failed, "A step is graceful while at most this percentage of it failed")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  c->add_option("--max-served-drop", o->max_served_drop,
                "...and while it serves at least this percentage less than the best step before it")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  c->add_option("--expect-success-buffer", o->expect_success, "Verdict: the success buffer is at least this")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--expect-failure-buffer", o->expect_failure, "Verdict: the failure buffer is at least this")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--expect-served", o->expect_served, "Verdict: NAME=PERCENT of NAME's requests served (repeatable)");
  c->add_option("--orca-dir", o->orca_dir, "headroomd's report directory, sampled during the run")->capture_default_str();
  c->add_option("--scope", o->scope, "The target's report, endpoint.<name>, for its utilization and time to shed");
  c->add_option("--signal", o->signal, "The report's signal shown and timed (as `headroomctl shed` names them)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return orca::is_known_signal(text) ? "" : "unknown signal; expected application_utilization, cpu_utilization, "
                                                      "mem_utilization or utilization.<key>";
          },
          "NAME"));
  c->add_option("--threshold", o->threshold, "Time to shed: when --signal reaches this (default: its shed_start)");
  c->add_flag("--json", o->json, "Print JSON instead of tables");
  c->add_option("--svg", o->svg, "Also write a chart of the run to this SVG file");
  c->add_flag("--allow-remote", o->allow_remote, "Allow a target that is not on this machine");
  c->add_flag("--dry-run", o->dry_run, "Print what would be sent, send nothing");
  c->add_option("--max-rate", o->max_rate, "Refuse plans above this many requests per second")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--max-duration", o->max_duration, "Refuse plans longer than this")->capture_default_str();
  auto* retries = c->add_option("--retries", o->retries,
                "Clients retry rejected and failed requests: none, immediate, backoff, dials or budget (docs/buffers.md)")
      ->capture_default_str();
  c->add_option("--max-retries", o->max_retries, "--retries: at most this many retries of a request")
      ->capture_default_str()
      ->check(CLI::Range(0, 100))
      ->needs(retries);
  return {c, [o] { return run(*o); }};
}

}  // namespace headroom::ctl

