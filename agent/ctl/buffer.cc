// SPDX-License-Identifier: Apache-2.0
// headroomctl buffer: the load experiment of docs/buffers.md. This file does
// the I/O around it: the target's address and whether it is on this machine,
// the baseline from a report, Ctrl-C, sampling headroomd's reports during the
// run, and the outputs. The plan and the arithmetic are in buffer_model.h, the
// load in loadgen.h, the outputs' text in buffer_render.h.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "agent/ctl/buffer_model.h"
#include "agent/ctl/buffer_render.h"
#include "agent/ctl/commands.h"
#include "agent/config/duration.h"
#include "agent/ctl/loadgen.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_reader.h"
#include "headroom/orca/shedder.h"

namespace headroom::ctl {
namespace {

namespace b = buffer;
using std::chrono::nanoseconds;

constexpr int kExitFailed = 1;  // the verdict failed, or the run could not be judged
constexpr int kExitUsage = 64;
constexpr int kExitInterrupted = 130;

struct BufferOptions {
  std::string target;
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
};

int usage(const std::string& message) {
  std::fprintf(stderr, "headroomctl buffer: %s\n", message.c_str());
  return kExitUsage;
}

std::optional<nanoseconds> duration_option(const char* flag, const std::string& text, std::string& error) {
  auto d = agent::parse_duration_checked(text);
  if (!d) {
    error = std::string(flag) + " " + text + ": " + d.error().message;
    return std::nullopt;
  }
  return *d;
}

// "host:port/path", "http://host:port/path", "[::1]:8080/x".
struct ParsedTarget {
  std::string host, port, path = "/";
};
std::optional<ParsedTarget> parse_target(std::string text, std::string& error) {
  if (text.starts_with("https://")) {
    error = "TARGET " + text + ": only plain HTTP/1.1 is supported (no TLS)";
    return std::nullopt;
  }
  if (text.starts_with("http://")) text = text.substr(7);
  ParsedTarget t;
  const auto slash = text.find('/');
  if (slash != std::string::npos) {
    t.path = text.substr(slash);
    text.resize(slash);
  }
  std::string::size_type colon;
  if (text.starts_with('[')) {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      error = "TARGET " + text + ": expected [IPv6]:PORT";
      return std::nullopt;
    }
    t.host = text.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      error = "TARGET " + text + ": expected HOST:PORT[/PATH], e.g. 127.0.0.1:8080/play";
      return std::nullopt;
    }
    t.host = text.substr(0, colon);
  }
  t.port = text.substr(colon + 1);
  if (t.port.empty() || t.port.size() > 5 || t.port.find_first_not_of("0123456789") != std::string::npos ||
      std::stol(t.port) < 1 || std::stol(t.port) > 65535) {
    error = "TARGET: port \"" + t.port + "\" must be a number from 1 to 65535";
    return std::nullopt;
  }
  return t;
}

bool same_address(const sockaddr* a, const sockaddr* c) {
  if (a->sa_family != c->sa_family) return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == reinterpret_cast<const sockaddr_in*>(c)->sin_addr.s_addr;
  if (a->sa_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, &reinterpret_cast<const sockaddr_in6*>(c)->sin6_addr,
                       sizeof(in6_addr)) == 0;
  return false;
}

// Loopback, or an address of one of this machine's interfaces.
bool is_local(const sockaddr* addr) {
  if (addr->sa_family == AF_INET &&
      (ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr) >> 24) == 127)
    return true;
  if (addr->sa_family == AF_INET6) {
    const auto& a6 = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127) return true;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool local = false;
  for (auto* i = list; i != nullptr && !local; i = i->ifa_next)
    if (i->ifa_addr != nullptr && same_address(i->ifa_addr, addr)) local = true;
  freeifaddrs(list);
  return local;
}

std::string address_text(const sockaddr* addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, host, sizeof host);
  else if (addr->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, host, sizeof host);
  return host;
}

// Samples headroomd's reports while the load runs: every 10 ms, the chosen
// signal of the endpoint's report and node.orca's application_utilization.
// A stale or unreadable report gives no sample.
class ReportSampler {
 public:
  ReportSampler(std::string dir, std::string scope, std::string signal, loadgen::Clock::time_point origin)
      : dir_(std::move(dir)), scope_(std::move(scope)), signal_(std::move(signal)), origin_(origin) {}
  void start() {
    thread_ = std::thread([this] { loop(); });
  }
  std::vector<b::UtilizationSample> stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return std::move(samples_);
  }
  ~ReportSampler() { stop(); }

 private:
  std::optional<double> read(const std::string& scope, const std::string& signal) const {
    auto report = orca::read_report_file(dir_ + "/" + orca::report_file_name(scope));
    if (!report) return std::nullopt;
    if (orca::check_staleness(*report, orca::unix_now_ms(), orca::Shedder::kStaleIntervals).stale) return std::nullopt;
    return orca::signal_value(*report, signal);
  }
  void loop() {
    while (!stop_) {
      const auto now = loadgen::Clock::now();
      b::UtilizationSample s;
      s.at_ns = std::chrono::duration_cast<nanoseconds>(now - origin_).count();
      if (!scope_.empty()) s.endpoint = read(scope_, signal_);
      s.node = read("node", "application_utilization");
      if (s.at_ns >= 0 && (s.endpoint || s.node)) samples_.push_back(s);
      std::this_thread::sleep_until(now + std::chrono::milliseconds(10));
    }
  }
  std::string dir_, scope_, signal_;
  loadgen::Clock::time_point origin_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<b::UtilizationSample> samples_;
};

int run(const BufferOptions& o) {
  std::string error;
  // --- the target
  const auto target = parse_target(o.target, error);
  if (!target) return usage(error);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(target->host.c_str(), target->port.c_str(), &hints, &found); rc != 0)
    return usage("TARGET " + o.target + ": cannot resolve " + target->host + ": " + gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> found_guard(found, freeaddrinfo);
  loadgen::Options lo;
  std::memcpy(&lo.target.addr, found->ai_addr, found->ai_addrlen);
  lo.target.addr_len = found->ai_addrlen;
  lo.target.host_header = (target->host.find(':') != std::string::npos ? "[" + target->host + "]" : target->host) + ":" + target->port;
  lo.target.path = target->path;
  const std::string shown = lo.target.host_header + target->path;
  if (!o.allow_remote && !is_local(found->ai_addr))
    return usage("TARGET " + o.target + " (" + address_text(found->ai_addr) +
                 ") is not on this machine; a load experiment against another machine needs --allow-remote");

  // --- the plan
  auto mix = b::parse_mix(o.mix);
  if (!mix) return usage(mix.error().message);
  std::string baseline_source = "given";
  double baseline = 0;
  if (o.baseline == "report") {
    if (o.scope.empty()) return usage("--baseline report: needs --scope endpoint.<name> (whose rps_fractional is the baseline)");
    const std::string file = o.orca_dir + "/" + orca::report_file_name(o.scope);
    auto report = orca::read_report_file(file);
    if (!report) return usage("--baseline report: " + report.error().message);
    if (orca::check_staleness(*report, orca::unix_now_ms(), orca::Shedder::kStaleIntervals).stale)
      return usage("--baseline report: " + file + " is stale: is headroomd running?");
    baseline = report->rps_fractional();
    if (!(baseline > 0)) return usage("--baseline report: " + file + " shows no traffic (rps_fractional 0); give --baseline RPS");
    baseline_source = o.scope + "'s rps_fractional";
  } else {
    char* end = nullptr;
    baseline = std::strtod(o.baseline.c_str(), &end);
    if (o.baseline.empty() || end == nullptr || *end != '\0' || !(baseline > 0) || !std::isfinite(baseline))
      return usage("--baseline \"" + o.baseline + "\": a rate above 0 in requests per second, or \"report\"");
  }
  b::Criteria criteria;
  criteria.reject_statuses = o.reject_statuses;
  std::optional<nanoseconds> slo, reject_within, timeout, max_duration;
  if (!(slo = duration_option("--slo", o.slo, error)) || !(reject_within = duration_option("--reject-within", o.reject_within, error)) ||
      !(timeout = duration_option("--timeout", o.timeout, error)) ||
      !(max_duration = duration_option("--max-duration", o.max_duration, error)))
    return usage(error);
  criteria.slo = *slo;
  criteria.reject_within = *reject_within;
  if (*timeout <= *slo) return usage("--timeout (" + o.timeout + ") must be longer than --slo (" + o.slo + ")");
  Result<std::vector<b::Step>> steps = logic_error("");
  if (o.spike > 0) {
    b::SpikeSpec spec;
    spec.multiple = o.spike;
    std::optional<nanoseconds> before, length, after, settle;
    if (!(before = duration_option("--before", o.before, error)) || !(length = duration_option("--spike-for", o.spike_for, error)) ||
        !(after = duration_option("--after", o.after, error)) || !(settle = duration_option("--settle", o.settle, error)))
      return usage(error);
    spec.before = *before;
    spec.length = *length;
    spec.after = *after;
    spec.settle = *settle;
    steps = b::spike_steps(spec, baseline);
  } else {
    b::RampSpec spec;
    auto multiples = b::parse_multiples(o.ramp);
    if (!multiples) return usage(multiples.error().message);
    spec.multiples = *multiples;
    std::optional<nanoseconds> step, settle;
    if (!(step = duration_option("--step", o.step, error)) || !(settle = duration_option("--settle", o.settle, error)))
      return usage(error);
    spec.step = *step;
    spec.settle = *settle;
    steps = b::ramp_steps(spec, baseline);
  }
  if (!steps) return usage(steps.error().message);
  if (b::peak_rate(*steps) > o.max_rate)
    return usage(std::to_string(std::llround(b::peak_rate(*steps))) + " req/s at the highest step is above --max-rate (" +
                 std::to_string(std::llround(o.max_rate)) + "); raise --max-rate to send it");
  if (b::total_duration(*steps) > *max_duration)
    return usage("the plan lasts " + std::to_string(b::total_duration(*steps).count() / 1'000'000'000) +
                 " s, longer than --max-duration (" + o.max_duration + "); raise --max-duration to run it");
  b::Expectations ex;
  ex.success_buffer = o.expect_success;
  ex.failure_buffer = o.expect_failure;
  ex.spike = o.spike > 0;
  for (const auto& text : o.expect_served) {
    auto e = b::parse_served_expectation(text, *mix);
    if (!e) return usage(e.error().message);
    ex.served.push_back(*e);
  }
  b::BufferRules rules{o.max_failed / 100, o.max_served_drop / 100};
  double threshold = o.threshold.value_or(orca::default_thresholds(o.signal).shed_start);

  std::fprintf(stderr, "headroomctl buffer: will send %s, open loop, up to %d connections; then wait up to %s\n",
               b::describe_plan(*steps, *mix, shown).c_str(), o.connections, o.timeout.c_str());
  if (o.dry_run) return 0;

  // --- the run
  // Each connection is a descriptor: lift the soft limit towards the hard one.
  if (rlimit lim{}; ::getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    const rlim_t want = static_cast<rlim_t>(o.connections) + 64;
    if (lim.rlim_cur < want) {
      lim.rlim_cur = std::min(want, lim.rlim_max);
      ::setrlimit(RLIMIT_NOFILE, &lim);
    }
    if (lim.rlim_cur < want)
      std::fprintf(stderr, "headroomctl buffer: --connections %d: only %llu descriptors allowed (ulimit -n); "
                   "connections beyond them fail\n", o.connections, static_cast<unsigned long long>(lim.rlim_cur));
  }
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  const int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    std::fprintf(stderr, "headroomctl buffer: signalfd: %s\n", std::strerror(errno));
    return kExitFailed;
  }
  lo.phases = b::phases_of(*steps);
  for (const auto& m : *mix) lo.classes.push_back(loadgen::RequestClass{m.name, m.share});
  lo.priority_header = o.priority_header;
  lo.max_connections = o.connections;
  lo.timeout = *timeout;
  lo.stop_fd = sfd;
  lo.start = loadgen::Clock::now() + std::chrono::milliseconds(20);
  const bool sample = !o.orca_dir.empty() && ::access(o.orca_dir.c_str(), R_OK | X_OK) == 0;
  ReportSampler sampler(o.orca_dir, o.scope, o.signal, lo.start);
  if (sample) sampler.start();
  loadgen::Result result;
  try {
    result = loadgen::run(lo);
  } catch (const std::invalid_argument& e) {
    ::close(sfd);
    return usage(e.what());
  }
  ::close(sfd);
  auto samples = sampler.stop();

  // --- what it says
  b::RunReport report;
  report.target = shown;
  report.mode = o.spike > 0 ? "spike" : "ramp";
  report.baseline_rps = baseline;
  report.baseline_source = baseline_source;
  report.criteria = criteria;
  report.rules = rules;
  report.mix = *mix;
  report.steps = b::analyze(*steps, mix->size(), result.records, criteria, samples);
  report.buffers = b::compute_buffers(report.steps, baseline, rules);
  if (o.spike > 0) report.time_to_shed = b::time_to_shed(*steps, result.records, criteria, samples, threshold);
  report.signal_scope = sample && !o.scope.empty() ? o.scope : "";
  report.signal = o.signal;
  report.threshold = threshold;
  report.verdict = b::judge_run(report.steps, *mix, report.buffers, ex, rules, result);
  report.interrupted = result.stopped;
  result.records.clear();
  report.client = std::move(result);

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
  if (report.interrupted) return kExitInterrupted;
  return report.verdict.passed ? 0 : kExitFailed;
}

}  // namespace

std::pair<CLI::App*, Runner> add_buffer_command(CLI::App& app) {
  auto o = std::make_shared<BufferOptions>();
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
      "Exit status: 0 the verdict passed, 1 it failed, 64 usage error, 130 interrupted (the\n"
      "figures printed cover the part that ran).");
  c->add_option("TARGET", o->target, "HOST:PORT[/PATH] or http://HOST:PORT/PATH")->required();
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
  return {c, [o] { return run(*o); }};
}

}  // namespace headroom::ctl
