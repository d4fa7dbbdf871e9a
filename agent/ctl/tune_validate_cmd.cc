// SPDX-License-Identifier: Apache-2.0
// headroomctl tune validate and tune search (docs/tuning.md): a configuration
// put on the canary on this machine, a spike sent with `headroomctl buffer`'s
// engine (buffer_run.h), the spike judged (tune_validate.h), and the
// original configuration put back. Search repeats this with the shedding
// thresholds moved by one position per run and writes the best passing file.
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/config/duration.h"
#include "agent/ctl/buffer_run.h"
#include "agent/ctl/commands.h"
#include "agent/ctl/tune_apply.h"
#include "agent/ctl/tune_report.h"
#include "agent/ctl/tune_validate.h"
#include "headroom/orca/shedder.h"

namespace headroom::ctl {
namespace {

namespace b = buffer;
namespace t = tune;
using std::chrono::nanoseconds;

constexpr int kExitFailed = 1;  // a criterion failed; search: no file passed
constexpr int kExitUsage = 64;
constexpr int kExitUnavailable = 69;
constexpr int kExitInterrupted = 130;

struct TuneOptions {
  std::string file, target, endpoint;
  std::string baseline = "report";
  double spike = 4;
  std::string before = "10s", spike_for = "20s", after = "10s";
  std::string mix = "CRITICAL=25,DEGRADED=25,BEST_EFFORT=25,BULK=25";
  std::string priority_header = "x-priority";
  std::string reject_within = "50ms";
  std::string timeout = "2s";
  int connections = 512;
  double max_failed = 1;  // percent
  double expect_success = 0;
  std::vector<std::string> expect_served;  // default CRITICAL=99 when the mix has CRITICAL
  std::string signal = "application_utilization";
  std::string orca_dir = "/run/orca";
  std::string headroomd_config = "/etc/headroom/headroom.toml";
  std::optional<int> headroomd_pid;
  bool keep = false, no_apply = false, json = false, allow_remote = false;
  int max_spikes = 6;
  std::string out;
};

// Why the command stops before a verdict: the exit status and the message.
struct Exit {
  int code = kExitUsage;
  std::string message;
};
template <class T>
using Checked = Result<T, Exit>;

int report_exit(const char* command, const Exit& e) {
  std::fprintf(stderr, "headroomctl tune %s: %s\n", command, e.message.c_str());
  return e.code;
}

// Everything a spike needs, checked before anything is changed or sent.
struct Prepared {
  std::string text;  // FILE's content
  t::EndpointUnderTest endpoint;
  b::RunOptions run;
  b::Plan plan;
  t::Limits limits;
};

b::RunOptions run_options(const TuneOptions& o, const t::EndpointUnderTest& e) {
  b::RunOptions r;
  r.program = "headroomctl tune";
  r.targets = {o.target};
  r.baseline = o.baseline;
  r.spike = o.spike;
  r.before = o.before;
  r.spike_for = o.spike_for;
  r.after = o.after;
  r.mix = o.mix;
  r.priority_header = o.priority_header;
  r.slo = std::to_string(e.max.count()) + "ns";  // served: a 2xx within the file's max
  r.reject_within = o.reject_within;
  auto timeout = agent::parse_duration_checked(o.timeout);
  r.timeout = timeout && *timeout > e.max ? o.timeout : std::to_string(2 * e.max.count()) + "ns";
  r.connections = o.connections;
  r.max_failed = o.max_failed;
  r.orca_dir = o.orca_dir;
  r.scope = "endpoint." + e.name;
  r.signal = o.signal;
  r.allow_remote = o.allow_remote;
  return r;
}

Checked<t::Limits> limits_of(const TuneOptions& o, const std::vector<b::MixEntry>& mix) {
  t::Limits l;
  l.spike = o.spike;
  l.expect_success_buffer = o.expect_success;
  l.max_failed = o.max_failed / 100;
  auto within = agent::parse_duration_checked(o.reject_within);
  if (!within) return Exit{kExitUsage, "--reject-within " + o.reject_within + ": " + within.error().message};
  l.reject_within = *within;
  l.expect_served.clear();
  std::vector<std::string> served = o.expect_served;
  if (served.empty())
    for (const auto& m : mix)
      if (m.name == "CRITICAL") served.push_back("CRITICAL=99");
  for (const auto& text : served) {
    auto e = b::parse_served_expectation(text, mix);
    if (!e) return Exit{kExitUsage, "--expect-served: " + e.error().message};
    l.expect_served.push_back(*e);
  }
  return l;
}

// `search`: the endpoint must have [[endpoint.shed]] entries to move.
Checked<Prepared> prepare(const TuneOptions& o, bool search) {
  Prepared p;
  std::ifstream in(o.file, std::ios::binary);
  if (!in) return Exit{kExitUsage, o.file + ": cannot read: " + std::strerror(errno)};
  std::ostringstream text;
  text << in.rdbuf();
  p.text = text.str();
  auto endpoint = t::endpoint_of(p.text, o.file, o.endpoint);
  if (!endpoint) return Exit{kExitUsage, endpoint.error().to_string()};
  p.endpoint = std::move(*endpoint);
  if (search && p.endpoint.shed.empty())
    return Exit{kExitUsage, o.file + ": [[endpoint]] " + o.endpoint +
                                " has no [[endpoint.shed]]: search moves its thresholds; add them (headroomctl tune "
                                "recommend writes them)"};
  auto local = b::target_is_local(o.target);
  if (!local) return Exit{kExitUsage, "--target: " + local.error().message};
  if (!*local && !o.allow_remote)
    return Exit{kExitUnavailable, "--target " + o.target +
                                      " is not on this machine: validate applies FILE to the canary here (or pass "
                                      "--allow-remote and --no-apply when the target already runs FILE)"};
  p.run = run_options(o, p.endpoint);
  // Every flag checked now; --baseline report is read once FILE is applied
  // (the endpoint may be new to the canary): plan_with_baseline().
  b::RunOptions checked = p.run;
  if (checked.baseline == "report") checked.baseline = "1";
  auto plan = b::plan_of(checked);
  if (!plan) return Exit{kExitUsage, plan.error().message};
  p.plan = std::move(*plan);
  auto limits = limits_of(o, p.plan.mix);
  if (!limits) return std::move(limits).error();
  p.limits = *limits;
  return p;
}

// The plan at the real baseline: --baseline report reads the endpoint's
// report (FILE applied), which may be missing or stale (exit 69).
Checked<bool> plan_with_baseline(Prepared& p) {
  if (p.run.baseline != "report") return true;
  auto plan = b::plan_of(p.run);
  if (!plan) return Exit{kExitUnavailable, plan.error().message};
  p.plan = std::move(*plan);
  return true;
}

// The canary made to run `content`: headroomd's configuration replaced, SIGHUP,
// and its endpoint report awaited.
Checked<t::CanaryConfig> open_canary(const TuneOptions& o) {
  pid_t pid = 0;
  if (o.headroomd_pid) {
    pid = static_cast<pid_t>(*o.headroomd_pid);
  } else {
    auto found = t::find_headroomd();
    if (!found) return Exit{kExitUnavailable, found.error().message};
    pid = *found;
  }
  auto canary = t::CanaryConfig::open(o.headroomd_config, pid);
  if (!canary) return Exit{kExitUnavailable, canary.error().message + " (headroomd's configuration: --headroomd-config)"};
  return std::move(*canary);
}

Checked<bool> apply(const TuneOptions& o, const Prepared& p, t::CanaryConfig& canary, const std::string& content) {
  if (auto a = canary.apply(content); !a) return Exit{kExitUnavailable, a.error().message};
  if (auto w = t::wait_for_target(o.orca_dir, p.endpoint.name, p.endpoint.target, std::chrono::seconds(5)); !w) {
    (void)canary.restore();
    return Exit{kExitUnavailable, w.error().message};
  }
  // The shedding target, started with --config on this path, re-reads it within ~100 ms.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  return true;
}

bool interrupt_pending() {
  sigset_t pending;
  sigemptyset(&pending);
  return ::sigpending(&pending) == 0 && (sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGTERM) == 1);
}

// SIGINT and SIGTERM held from the start: Ctrl-C while the file is applied
// stops the spike (buffer_run.h), and the original is put back before exit.
void hold_stop_signals() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
}

struct Spike {
  t::RunSummary summary;
  std::vector<t::Reading> readings;
  bool interrupted = false;
};

// One spike with the thresholds `shed` in place, judged.
Checked<Spike> run_spike(const TuneOptions& o, const Prepared& p, const std::vector<t::ShedEntry>& shed, double s) {
  std::vector<std::string> signals{o.signal};
  for (const auto& e : shed) signals.push_back(e.signal);
  Spike out;
  auto observe = [&out, &signals](const orca::Report& r, bool stale, int64_t at_ns) {
    if (stale) return;
    t::Reading reading{at_ns, r.rps_fractional(), {}};
    for (const auto& name : signals)
      if (auto v = orca::signal_value(r, name)) reading.signals[name] = *v;
    out.readings.push_back(std::move(reading));
  };
  auto report = b::run_plan(p.run, p.plan, observe);
  if (!report) return Exit{report.error().code == 0 ? kExitUsage : kExitUnavailable, report.error().message};
  t::SpikeFacts facts;
  facts.steps = report->steps;
  facts.mix = p.plan.mix;
  facts.buffers = report->buffers;
  facts.readings = out.readings;
  if (report->time_to_shed) facts.first_rejection_s = report->time_to_shed->first_rejection;
  facts.shed = shed;
  facts.signal = o.signal;
  out.summary = t::RunSummary{s, shed, t::judge(facts, p.limits), report->buffers};
  out.interrupted = report->interrupted;
  return out;
}

void print_lines(const std::vector<std::string>& lines) {
  for (const auto& l : lines) std::printf("%s\n", l.c_str());
  std::fflush(stdout);
}

void announce(const char* command, const Prepared& p) {
  std::fprintf(stderr, "headroomctl tune %s: will send %s, open loop; served: 2xx within %s's max (%.4g ms)\n", command,
               b::describe_plan(p.plan.steps, p.plan.mix, b::targets_text(p.plan.targets)).c_str(),
               p.endpoint.name.c_str(), static_cast<double>(p.endpoint.max.count()) / 1e6);
}

int run_validate(const TuneOptions& o) {
  hold_stop_signals();
  auto prepared = prepare(o, false);
  if (!prepared) return report_exit("validate", prepared.error());
  Prepared& p = *prepared;
  std::optional<t::CanaryConfig> canary;
  if (!o.no_apply) {
    auto opened = open_canary(o);
    if (!opened) return report_exit("validate", opened.error());
    canary.emplace(std::move(*opened));
    if (auto a = apply(o, p, *canary, p.text); !a) return report_exit("validate", a.error());
    std::fprintf(stderr, "headroomctl tune validate: headroomd runs %s (%s); a shedding target started with --config %s "
                 "re-reads its [[endpoint.shed]] thresholds by itself\n", o.file.c_str(), o.headroomd_config.c_str(),
                 o.headroomd_config.c_str());
    if (o.keep) canary->keep();
  }
  if (interrupt_pending()) return kExitInterrupted;  // the canary's destructor puts the original back
  if (auto planned = plan_with_baseline(p); !planned) return report_exit("validate", planned.error());
  announce("validate", p);
  auto spike = run_spike(o, p, p.endpoint.shed, 1);
  if (!spike) return report_exit("validate", spike.error());
  if (canary) {
    if (auto r = canary->restore(); !r) std::fprintf(stderr, "headroomctl tune validate: %s\n", r.error().message.c_str());
  }
  if (o.json)
    std::printf("%s\n", t::judgement_json(spike->summary).c_str());
  else
    print_lines(t::render_judgement(spike->summary));
  std::fflush(stdout);
  if (spike->interrupted) return kExitInterrupted;
  const auto& j = spike->summary.judgement;
  if (j.passed) return 0;
  return j.cause == t::Cause::not_received ? kExitUnavailable : kExitFailed;
}

// The baseline level of each of the file's signals: its max in the first
// run's baseline step.
std::map<std::string, double> baseline_levels(const Spike& first, const Prepared& p) {
  std::map<std::string, double> levels;
  const auto w = t::step_windows(p.plan.steps);
  for (std::size_t i = 0; i < p.plan.steps.size(); ++i)
    if (p.plan.steps[i].kind == b::StepKind::baseline)
      for (const auto& e : p.endpoint.shed)
        if (auto v = t::max_reading(first.readings, e.signal, w[i].measured_ns, w[i].end_ns)) levels[e.signal] = *v;
  return levels;
}

std::string search_command(const TuneOptions& o) {
  char spike[32];
  std::snprintf(spike, sizeof spike, "%g", o.spike);
  std::string c = "headroomctl tune search " + o.file + " --target " + o.target + " --endpoint " + o.endpoint +
                  " --baseline " + o.baseline + " --spike " + spike + " --before " + o.before +
                  " --spike-for " + o.spike_for + " --after " + o.after + " --mix " + o.mix + " --max-spikes " +
                  std::to_string(o.max_spikes) + " --out " + o.out;
  for (const auto& e : o.expect_served) c += " --expect-served " + e;
  return c;
}

// The search's loop: a spike per position until next_position stops.
struct SearchOutcome {
  std::vector<t::RunSummary> runs;
  std::vector<t::SearchRun> positions;
  std::string why;
  int interrupted_or_unavailable = 0;
};
Checked<SearchOutcome> search_loop(const TuneOptions& o, Prepared& p, t::CanaryConfig& canary) {
  SearchOutcome out;
  std::map<std::string, double> levels;
  double s_max = t::max_position(p.endpoint.shed, levels);
  while (true) {
    const auto next = t::next_position(out.positions, s_max, o.max_spikes);
    out.why = next.why;
    if (!next.s) break;
    const auto shed = t::scale_shed(p.endpoint.shed, levels, *next.s);
    auto content = t::with_thresholds(p.text, o.file, p.endpoint.name, shed);
    if (!content) return Exit{kExitUsage, content.error().message};
    if (auto a = apply(o, p, canary, *content); !a) return std::move(a).error();
    if (interrupt_pending()) {
      out.interrupted_or_unavailable = kExitInterrupted;
      break;
    }
    if (out.runs.empty()) {  // the baseline, once, for every run
      if (auto planned = plan_with_baseline(p); !planned) return std::move(planned).error();
      announce("search", p);
    }
    std::fprintf(stderr, "headroomctl tune search: run %zu at s = %.3g: %s\n", out.runs.size() + 1, *next.s, next.why.c_str());
    auto spike = run_spike(o, p, shed, *next.s);
    if (!spike) return std::move(spike).error();
    if (out.runs.empty()) {
      levels = baseline_levels(*spike, p);
      s_max = t::max_position(p.endpoint.shed, levels);
    }
    out.runs.push_back(spike->summary);
    out.positions.push_back({*next.s, spike->summary.judgement.cause, spike->summary.buffers.success});
    if (!o.json) print_lines(t::render_judgement(spike->summary));
    if (spike->interrupted) out.interrupted_or_unavailable = kExitInterrupted;
    if (spike->summary.judgement.cause == t::Cause::not_received) out.interrupted_or_unavailable = kExitUnavailable;
    if (out.interrupted_or_unavailable != 0) break;
  }
  return out;
}

int run_search(const TuneOptions& o) {
  hold_stop_signals();
  if (o.no_apply) return report_exit("search", {kExitUsage, "--no-apply: search applies each position's file; use validate"});
  auto prepared = prepare(o, true);
  if (!prepared) return report_exit("search", prepared.error());
  Prepared& p = *prepared;
  auto opened = open_canary(o);
  if (!opened) return report_exit("search", opened.error());
  t::CanaryConfig canary = std::move(*opened);
  auto outcome = search_loop(o, p, canary);
  if (o.keep) canary.keep();
  if (auto r = canary.restore(); !r) std::fprintf(stderr, "headroomctl tune search: %s\n", r.error().message.c_str());
  if (!outcome) return report_exit("search", outcome.error());
  const auto& runs = outcome->runs;
  const auto best = t::best_run(outcome->positions);
  if (o.json) {
    std::printf("%s\n", t::search_json(runs, best, o.out).c_str());
  } else {
    print_lines(t::render_runs(runs));
    std::printf("search stopped: %s\n", outcome->why.c_str());
  }
  std::fflush(stdout);
  if (outcome->interrupted_or_unavailable != 0) return outcome->interrupted_or_unavailable;
  if (!best) {
    std::string failed = "no run";
    if (!runs.empty())
      for (const auto& c : runs.back().judgement.criteria)
        if (!c.passed) failed = c.name;
    std::fprintf(stderr, "headroomctl tune search: no position passed; %s could not be met on this instance%s\n",
                 failed.c_str(), runs.empty() || !runs.back().judgement.suggestion
                                     ? ""
                                     : (": " + runs.back().judgement.suggestion->text).c_str());
    return kExitFailed;
  }
  auto content = t::with_thresholds(p.text, o.file, p.endpoint.name, runs[*best].shed);
  if (!content) return report_exit("search", {kExitUsage, content.error().message});
  if (auto w = t::replace_file(o.out, t::search_header(search_command(o), runs, *best) + *content); !w)
    return report_exit("search", {kExitUnavailable, "--out: " + w.error().message});
  std::fprintf(stderr, "headroomctl tune search: wrote run %zu (s = %.3g, success buffer %.2f) to %s\n", *best + 1,
               runs[*best].s, runs[*best].buffers.success, o.out.c_str());
  return 0;
}

const CLI::Validator kSignal(
    [](std::string& text) -> std::string {
      return orca::is_known_signal(text) ? "" : "unknown signal; expected application_utilization, cpu_utilization, "
                                                "mem_utilization or utilization.<key>";
    },
    "NAME");

// The flags validate and search share.
void add_flags(CLI::App* c, TuneOptions& o) {
  c->add_option("FILE", o.file, "The configuration to prove: a headroom.toml with the endpoint's target, max and "
                                "[[endpoint.shed]]")->required();
  c->add_option("--target", o.target, "The canary: HOST:PORT[/PATH] on this machine")->required();
  c->add_option("--endpoint", o.endpoint, "The [[endpoint]] of FILE the target serves")->required();
  c->add_option("--baseline", o.baseline, "The baseline rate in requests per second, or \"report\": the endpoint report's rps")
      ->capture_default_str();
  c->add_option("--spike", o.spike, "The spike's rate as a multiple of the baseline")->capture_default_str()->check(CLI::Range(1.01, 1000.0));
  c->add_option("--before", o.before, "Baseline before the spike")->capture_default_str();
  c->add_option("--spike-for", o.spike_for, "How long the spike lasts")->capture_default_str();
  c->add_option("--after", o.after, "Baseline after the spike (0s: none)")->capture_default_str();
  c->add_option("--mix", o.mix, "Priority mix: NAME=SHARE,... with bucket names or priorities 1-100")->capture_default_str();
  c->add_option("--priority-header", o.priority_header, "Request header that carries the priority")->capture_default_str();
  c->add_option("--reject-within", o.reject_within, "graceful_rejection: the rejections' p99 at most this")->capture_default_str();
  c->add_option("--timeout", o.timeout, "A request unanswered this long after it was due failed (at least 2 x max)")
      ->capture_default_str();
  c->add_option("--connections", o.connections, "At most this many keep-alive connections")->capture_default_str()->check(CLI::Range(1, 65536));
  c->add_option("--max-failed", o.max_failed, "graceful_rejection: at most this percentage of the spike failed")
      ->capture_default_str()->check(CLI::Range(0.0, 100.0));
  c->add_option("--expect-success-buffer", o.expect_success, "buffers: the success buffer is at least this")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--expect-served", o.expect_served,
                "served_within_slo: NAME=PERCENT of NAME's spike requests served within max (repeatable; default CRITICAL=99)");
  c->add_option("--signal", o.signal, "The report's signal sampled when FILE has no [[endpoint.shed]]")->capture_default_str()->check(kSignal);
  c->add_option("--orca-dir", o.orca_dir, "headroomd's report directory")->capture_default_str();
  c->add_option("--headroomd-config", o.headroomd_config, "headroomd's configuration file, replaced by FILE during the run")
      ->capture_default_str();
  c->add_option("--headroomd-pid", o.headroomd_pid, "headroomd's pid (default: the one process named headroomd)")->check(CLI::PositiveNumber);
  c->add_flag("--keep", o.keep, "Leave the applied file in place after the run");
  c->add_flag("--allow-remote", o.allow_remote, "Allow a target that is not on this machine (with --no-apply)");
  c->add_flag("--json", o.json, "Print JSON instead of tables");
}

constexpr const char* kExitText =
    "Exit status: 0 pass, 1 a criterion failed (search: no position passed), 64 usage error or bad FILE,\n"
    "69 environment (headroomd not found or did not take FILE, target not local, the client could not\n"
    "send the spike), 130 interrupted. The original configuration is put back after the run unless --keep.";

}  // namespace

std::pair<CLI::App*, Runner> add_tune_validate_command(CLI::App& tune) {
  auto o = std::make_shared<TuneOptions>();
  auto* c = tune.add_subcommand("validate", "Prove a configuration with a spike on the canary on this machine");
  c->footer(std::string("Applies FILE to headroomd here (its --headroomd-config replaced, SIGHUP), sends a spike with\n"
                        "headroomctl buffer's engine and judges five criteria: spike_received, buffers,\n"
                        "graceful_rejection, served_within_slo (2xx within FILE's max) and no_baseline_shedding.\n"
                        "A fail names the criterion and the adjustment it suggests (docs/tuning.md).\n") + kExitText);
  add_flags(c, *o);
  c->add_flag("--no-apply", o->no_apply, "Do not apply FILE: the canary already runs it");
  return {c, [o] { return run_validate(*o); }};
}

std::pair<CLI::App*, Runner> add_tune_search_command(CLI::App& tune) {
  auto o = std::make_shared<TuneOptions>();
  auto* c = tune.add_subcommand("search", "Move FILE's shedding thresholds until validate passes with the largest success buffer");
  c->footer(std::string("Runs validate's spike at positions s of the endpoint's [[endpoint.shed]] thresholds:\n"
                        "start(s) = b + s (start - b), b the signal's level at the first run's baseline; CRITICAL\n"
                        "keeps its place between the start and all_shed. s = 1 first (FILE); a pass tries later\n"
                        "shedding (1.5 x), shedding too late bisects [0, 1], too early moves up; at most\n"
                        "--max-spikes runs, or a bracket under 0.05.\n"
                        "Writes the best passing file to --out with a comment header of the runs.\n") + kExitText);
  add_flags(c, *o);
  c->add_option("--max-spikes", o->max_spikes, "At most this many spikes")->capture_default_str()->check(CLI::Range(1, 100));
  c->add_option("--out", o->out, "Write the best passing file here")->required();
  return {c, [o] { return run_search(*o); }};
}

}  // namespace headroom::ctl
