// SPDX-License-Identifier: Apache-2.0
// One run of `headroomctl buffer`'s experiment (buffer_run.h) and the I/O
// around it: the target's address and whether it is on this machine, the
// baseline from a report, Ctrl-C, and sampling headroomd's reports during the
// run. The plan and the arithmetic are in buffer_model.h, the load in loadgen.h.
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
#include <functional>
#include <memory>
#include <random>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/config/duration.h"
#include "agent/ctl/buffer_run.h"
#include "agent/ctl/buffer_model.h"
#include "agent/ctl/buffer_render.h"
#include "agent/ctl/buffer_retries.h"
#include "agent/ctl/loadgen.h"
#include "headroom/orca/clock.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_reader.h"
#include "headroom/orca/result.h"
#include "headroom/orca/shedder.h"

namespace headroom::ctl::buffer {

using std::chrono::nanoseconds;

namespace {

Result<nanoseconds> duration_option(const char* flag, const std::string& text) {
  auto d = agent::parse_duration_checked(text);
  if (!d) return logic_error(std::string(flag) + " " + text + ": " + d.error().message);
  return *d;
}

// "host:port/path", "http://host:port/path", "[::1]:8080/x".
struct ParsedTarget {
  std::string host, port, path = "/";
};
Result<ParsedTarget> parse_target(std::string text) {
  if (text.starts_with("https://")) return logic_error("TARGET " + text + ": only plain HTTP/1.1 is supported (no TLS)");
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
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return logic_error("TARGET " + text + ": expected [IPv6]:PORT");
    t.host = text.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return logic_error("TARGET " + text + ": expected HOST:PORT[/PATH], e.g. 127.0.0.1:8080/play");
    t.host = text.substr(0, colon);
  }
  t.port = text.substr(colon + 1);
  if (t.port.empty() || t.port.size() > 5 || t.port.find_first_not_of("0123456789") != std::string::npos ||
      std::stol(t.port) < 1 || std::stol(t.port) > 65535)
    return logic_error("TARGET: port \"" + t.port + "\" must be a number from 1 to 65535");
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
// A stale or unreadable report gives no sample. Each endpoint report read
// also goes to `on_report` (--retries budget: the budget's report rule).
class ReportSampler {
 public:
  using OnReport = std::function<void(const orca::Report&, bool stale)>;
  ReportSampler(std::string dir, std::string scope, std::string signal, loadgen::Clock::time_point origin,
                OnReport on_report = {})
      : dir_(std::move(dir)), scope_(std::move(scope)), signal_(std::move(signal)), origin_(origin),
        on_report_(std::move(on_report)) {}
  void start() {
    thread_ = std::thread([this] { loop(); });
  }
  std::vector<UtilizationSample> stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return std::move(samples_);
  }
  ~ReportSampler() { stop(); }

 private:
  std::optional<double> read(const std::string& scope, const std::string& signal, const OnReport& on_report = {}) const {
    auto report = orca::read_report_file(dir_ + "/" + orca::report_file_name(scope));
    if (!report) return std::nullopt;
    const bool stale = orca::check_staleness(*report, orca::unix_now_ms(), orca::Shedder::kStaleIntervals).stale;
    if (on_report) on_report(*report, stale);
    if (stale) return std::nullopt;
    return orca::signal_value(*report, signal);
  }
  void loop() {
    while (!stop_) {
      const auto now = loadgen::Clock::now();
      UtilizationSample s;
      s.at_ns = std::chrono::duration_cast<nanoseconds>(now - origin_).count();
      if (!scope_.empty()) s.endpoint = read(scope_, signal_, on_report_);
      s.node = read("node", "application_utilization");
      if (s.at_ns >= 0 && (s.endpoint || s.node)) samples_.push_back(s);
      std::this_thread::sleep_until(now + std::chrono::milliseconds(10));
    }
  }
  std::string dir_, scope_, signal_;
  loadgen::Clock::time_point origin_;
  OnReport on_report_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<UtilizationSample> samples_;
};


Result<ResolvedTarget> resolve_target(const RunOptions& o, const std::string& text) {
  auto parsed = parse_target(text);
  if (!parsed) return std::move(parsed).error();
  const ParsedTarget& t = *parsed;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(t.host.c_str(), t.port.c_str(), &hints, &found); rc != 0)
    return logic_error("TARGET " + text + ": cannot resolve " + t.host + ": " + gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> found_guard(found, freeaddrinfo);
  ResolvedTarget r;
  std::memcpy(&r.target.addr, found->ai_addr, found->ai_addrlen);
  r.target.addr_len = found->ai_addrlen;
  r.target.host_header = (t.host.find(':') != std::string::npos ? "[" + t.host + "]" : t.host) + ":" + t.port;
  r.target.path = t.path;
  r.shown = r.target.host_header + t.path;
  if (!o.allow_remote && !is_local(found->ai_addr))
    return logic_error("TARGET " + text + " (" + address_text(found->ai_addr) +
                       ") is not on this machine; a load experiment against another machine needs --allow-remote");
  return r;
}

// Every TARGET, the instances of one service: each resolved and checked,
// all with one path, none twice.
Result<std::vector<ResolvedTarget>> resolve_targets(const RunOptions& o) {
  if (o.targets.size() > loadgen::kMaxInstances)
    return logic_error("TARGET given " + std::to_string(o.targets.size()) + " times: at most " +
                       std::to_string(loadgen::kMaxInstances) + " instances of one service; give fewer");
  std::vector<ResolvedTarget> out;
  for (const auto& text : o.targets) {
    auto r = resolve_target(o, text);
    if (!r) return std::move(r).error();
    if (!out.empty() && r->target.path != out.front().target.path)
      return logic_error("TARGET " + text + ": the path " + r->target.path + " differs from " + out.front().shown +
                         "'s; the instances of one service take the same requests, give them one path");
    for (const auto& seen : out)
      if (seen.target.addr_len == r->target.addr_len &&
          std::memcmp(&seen.target.addr, &r->target.addr, seen.target.addr_len) == 0)
        return logic_error("TARGET " + text + " is the same instance as " + seen.shown + "; give each instance once");
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace

std::string targets_text(const std::vector<ResolvedTarget>& targets) {
  std::string out = targets.front().shown;
  if (targets.size() == 1) return out;
  for (std::size_t i = 1; i < targets.size(); ++i) out += (i + 1 == targets.size() ? " and " : ", ") + targets[i].shown;
  return out + " (round robin)";
}


namespace {

// --baseline: a rate, or the rps_fractional of --scope's report.
Result<Baseline> baseline_of(const RunOptions& o) {
  Baseline b;
  if (o.baseline != "report") {
    char* end = nullptr;
    b.rps = std::strtod(o.baseline.c_str(), &end);
    if (o.baseline.empty() || end == nullptr || *end != '\0' || !(b.rps > 0) || !std::isfinite(b.rps))
      return logic_error("--baseline \"" + o.baseline + "\": a rate above 0 in requests per second, or \"report\"");
    return b;
  }
  if (o.scope.empty())
    return logic_error("--baseline report: needs --scope endpoint.<name> (whose rps_fractional is the baseline)");
  const std::string file = o.orca_dir + "/" + orca::report_file_name(o.scope);
  auto report = orca::read_report_file(file);
  if (!report) return logic_error("--baseline report: " + report.error().message);
  if (orca::check_staleness(*report, orca::unix_now_ms(), orca::Shedder::kStaleIntervals).stale)
    return logic_error("--baseline report: " + file + " is stale: is headroomd running?");
  b.rps = report->rps_fractional();
  if (!(b.rps > 0))
    return logic_error("--baseline report: " + file + " shows no traffic (rps_fractional 0); give --baseline RPS");
  b.source = o.scope + "'s rps_fractional";
  return b;
}

// The steps of a ramp or a spike, multiples of the baseline.
Result<std::vector<Step>> steps_of(const RunOptions& o, double baseline) {
  if (o.spike > 0) {
    SpikeSpec spec;
    spec.multiple = o.spike;
    auto before = duration_option("--before", o.before);
    if (!before) return std::move(before).error();
    auto length = duration_option("--spike-for", o.spike_for);
    if (!length) return std::move(length).error();
    auto after = duration_option("--after", o.after);
    if (!after) return std::move(after).error();
    auto settle = duration_option("--settle", o.settle);
    if (!settle) return std::move(settle).error();
    spec.before = *before;
    spec.length = *length;
    spec.after = *after;
    spec.settle = *settle;
    return spike_steps(spec, baseline);
  }
  RampSpec spec;
  auto multiples = parse_multiples(o.ramp);
  if (!multiples) return std::move(multiples).error();
  spec.multiples = *multiples;
  auto step = duration_option("--step", o.step);
  if (!step) return std::move(step).error();
  auto settle = duration_option("--settle", o.settle);
  if (!settle) return std::move(settle).error();
  spec.step = *step;
  spec.settle = *settle;
  return ramp_steps(spec, baseline);
}

}  // namespace

Result<Plan> plan_of(const RunOptions& o) {
  Plan p;
  auto targets = resolve_targets(o);
  if (!targets) return std::move(targets).error();
  p.targets = std::move(*targets);
  auto mix = parse_mix(o.mix);
  if (!mix) return std::move(mix).error();
  p.mix = std::move(*mix);
  auto baseline = baseline_of(o);
  if (!baseline) return std::move(baseline).error();
  p.baseline = std::move(*baseline);
  p.criteria.reject_statuses = o.reject_statuses;
  auto slo = duration_option("--slo", o.slo);
  if (!slo) return std::move(slo).error();
  auto reject_within = duration_option("--reject-within", o.reject_within);
  if (!reject_within) return std::move(reject_within).error();
  auto timeout = duration_option("--timeout", o.timeout);
  if (!timeout) return std::move(timeout).error();
  auto max_duration = duration_option("--max-duration", o.max_duration);
  if (!max_duration) return std::move(max_duration).error();
  p.criteria.slo = *slo;
  p.criteria.reject_within = *reject_within;
  p.timeout = *timeout;
  if (*timeout <= *slo) return logic_error("--timeout (" + o.timeout + ") must be longer than --slo (" + o.slo + ")");
  auto steps = steps_of(o, p.baseline.rps);
  if (!steps) return std::move(steps).error();
  p.steps = std::move(*steps);
  if (peak_rate(p.steps) > o.max_rate)
    return logic_error(std::to_string(std::llround(peak_rate(p.steps))) + " req/s at the highest step is above --max-rate (" +
                       std::to_string(std::llround(o.max_rate)) + "); raise --max-rate to send it");
  if (total_duration(p.steps) > *max_duration)
    return logic_error("the plan lasts " + std::to_string(total_duration(p.steps).count() / 1'000'000'000) +
                       " s, longer than --max-duration (" + o.max_duration + "); raise --max-duration to run it");
  auto retries = parse_retry_mode(o.retries);
  if (!retries) return std::move(retries).error();
  p.retries = *retries;
  p.expectations.success_buffer = o.expect_success;
  p.expectations.failure_buffer = o.expect_failure;
  p.expectations.spike = o.spike > 0;
  for (const auto& text : o.expect_served) {
    auto e = parse_served_expectation(text, p.mix);
    if (!e) return std::move(e).error();
    p.expectations.served.push_back(*e);
  }
  return p;
}

namespace {

// Each connection is a descriptor: lift the soft limit towards the hard one.
void raise_descriptor_limit(const std::string& program, int connections) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t want = static_cast<rlim_t>(connections) + 64;
  if (lim.rlim_cur < want) {
    lim.rlim_cur = std::min(want, lim.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  if (lim.rlim_cur < want)
    std::fprintf(stderr, "%s: --connections %d: only %llu descriptors allowed (ulimit -n); "
                 "connections beyond them fail\n", program.c_str(), connections, static_cast<unsigned long long>(lim.rlim_cur));
}

// SIGINT and SIGTERM as a descriptor the engine polls: Ctrl-C stops the run
// and the part that ran is still reported.
Result<int> stop_signals_fd() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  const int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) return system_error(errno, "signalfd");
  return sfd;
}

// What the run says, from its records and the reports sampled meanwhile.
// With retries, each first attempt counts with its last attempt's outcome.
RunReport report_of(const RunOptions& o, const Plan& p, loadgen::RunResult result,
                       const std::vector<UtilizationSample>& samples, bool sampled,
                       const std::vector<RetryClient::Held>& suppressed) {
  const BufferRules rules{o.max_failed / 100, o.max_served_drop / 100};
  const double threshold = o.threshold.value_or(orca::default_thresholds(o.signal).shed_start);
  RunReport report;
  report.target = p.targets.front().shown;
  report.mode = o.spike > 0 ? "spike" : "ramp";
  report.baseline_rps = p.baseline.rps;
  report.baseline_source = p.baseline.source;
  report.criteria = p.criteria;
  report.rules = rules;
  report.mix = p.mix;
  if (p.retries != RetryMode::none) {
    report.retry_mode = p.retries;
    report.max_retries = o.max_retries;
    report.retries = retry_counts(p.steps, p.mix.size(), result.records, suppressed);
    report.steps = analyze(p.steps, p.mix.size(), first_attempt_outcomes(result.records), p.criteria, samples);
  } else {
    report.steps = analyze(p.steps, p.mix.size(), result.records, p.criteria, samples);
  }
  report.buffers = compute_buffers(report.steps, p.baseline.rps, rules);
  if (o.spike > 0) report.time_to_shed = time_to_shed(p.steps, result.records, p.criteria, samples, threshold);
  report.signal_scope = sampled && !o.scope.empty() ? o.scope : "";
  report.signal = o.signal;
  report.threshold = threshold;
  report.verdict = judge_run(report.steps, p.mix, report.buffers, p.expectations, rules, result);
  report.interrupted = result.stopped;
  if (p.targets.size() > 1) {
    std::vector<std::string> shown;
    for (const auto& t : p.targets) shown.push_back(t.shown);
    report.instances = instance_counts(shown, result.records, p.criteria);
  }
  result.records.clear();
  report.client = std::move(result);
  return report;
}


}  // namespace

Result<bool> target_is_local(const std::string& text) {
  auto parsed = parse_target(text);
  if (!parsed) return std::move(parsed).error();
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(parsed->host.c_str(), parsed->port.c_str(), &hints, &found); rc != 0)
    return logic_error("TARGET " + text + ": cannot resolve " + parsed->host + ": " + gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> found_guard(found, freeaddrinfo);
  return is_local(found->ai_addr);
}

Result<RunReport> run_plan(const RunOptions& o, const Plan& p, const ReportObserver& observe) {
  raise_descriptor_limit(o.program, o.connections);
  const auto sfd = stop_signals_fd();
  if (!sfd) return sfd.error();
  loadgen::Options lo;
  lo.target = p.targets.front().target;
  for (std::size_t i = 1; i < p.targets.size(); ++i) lo.more_instances.push_back(p.targets[i].target);
  lo.phases = phases_of(p.steps);
  for (const auto& m : p.mix) lo.classes.push_back(loadgen::RequestClass{m.name, m.share});
  lo.priority_header = o.priority_header;
  lo.max_connections = o.connections;
  lo.timeout = p.timeout;
  lo.stop_fd = *sfd;
  lo.start = loadgen::Clock::now() + std::chrono::milliseconds(20);
  RetryClient::Settings rs{p.retries, o.max_retries, {}, std::random_device{}()};
  for (const auto& m : p.mix) rs.priorities.push_back(m.priority);
  RetryClient retries(std::move(rs));
  lo.retry = retries.hooks();
  const bool sample = !o.orca_dir.empty() && ::access(o.orca_dir.c_str(), R_OK | X_OK) == 0;
  ReportSampler::OnReport on_report;
  // The shedder's view of the target's report (--retries budget): --signal at its default thresholds.
  orca::ShedderConfig shedder;
  shedder.signals = {{o.signal, orca::default_thresholds(o.signal)}};
  const bool budget = p.retries == RetryMode::budget;
  if (budget || observe)
    on_report = [&retries, &observe, shedder, budget, start = lo.start](const orca::Report& r, bool stale) {
      if (budget) retries.update_target(r, shedder, stale);
      if (observe) observe(r, stale, std::chrono::duration_cast<nanoseconds>(loadgen::Clock::now() - start).count());
    };
  ReportSampler sampler(o.orca_dir, o.scope, o.signal, lo.start, std::move(on_report));
  if (sample) sampler.start();
  auto result = loadgen::run(lo);
  ::close(*sfd);
  auto samples = sampler.stop();
  if (!result) return std::move(result).error();
  return report_of(o, p, std::move(result).value(), samples, sample, retries.suppressed());
}

}  // namespace headroom::ctl::buffer
