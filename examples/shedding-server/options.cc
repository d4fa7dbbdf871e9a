// SPDX-License-Identifier: Apache-2.0
// The shedding server's command line (options.h).
#include "options.h"

#include "dependency.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

#include <headroom/orca/priority.h>

namespace shedding_server {

// The library's parser (orca/priority.h), so that the server reads the header
// as every other user of it does; a bucket's name keeps the bucket as a whole
// (level 0) for the shedder's decision.
std::optional<Priority> parse_priority(std::string_view text) {
  const auto value = orca::parse_priority_value(text);
  if (!value) return std::nullopt;
  const orca::Bucket bucket = orca::bucket_of_priority(value->priority);
  return Priority{bucket, value->bucket_name ? 0 : value->priority};
}

// "1ms", "250us", "0.5s", "0": CPU time per request.
std::optional<int64_t> parse_duration_ns(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || value < 0) return std::nullopt;
  const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  const double scale = unit == "s" ? 1e9 : unit == "ms" ? 1e6 : unit == "us" ? 1e3 : unit == "ns" ? 1.0
                       : (unit.empty() && value == 0) ? 0.0 : -1.0;
  if (scale < 0 || value * scale > 60e9) return std::nullopt;
  return static_cast<int64_t>(value * scale);
}

std::optional<Delay> parse_delay(std::string_view text) {
  Delay d;
  constexpr std::string_view kLognormal = "lognormal:";
  if (!text.starts_with(kLognormal)) {
    const auto ns = parse_duration_ns(text);
    if (!ns) return std::nullopt;
    d.kind = *ns > 0 ? Delay::Kind::fixed : Delay::Kind::none;
    d.fixed_ns = *ns;
    return d;
  }
  text.remove_prefix(kLognormal.size());
  const auto comma = text.find(',');
  if (comma == std::string_view::npos) return std::nullopt;
  const auto median = parse_duration_ns(text.substr(0, comma));
  const std::string_view sigma_text = text.substr(comma + 1);
  double sigma = -1;
  const auto [end, ec] = std::from_chars(sigma_text.data(), sigma_text.data() + sigma_text.size(), sigma);
  if (!median || *median <= 0 || ec != std::errc{} || end != sigma_text.data() + sigma_text.size() ||
      !(sigma >= 0 && sigma <= 3))
    return std::nullopt;
  d.kind = Delay::Kind::lognormal;
  d.median_ns = static_cast<double>(*median);
  d.sigma = sigma;
  return d;
}

int64_t delay_ns(const Delay& delay, double normal) {
  switch (delay.kind) {
    case Delay::Kind::none: return 0;
    case Delay::Kind::fixed: return delay.fixed_ns;
    case Delay::Kind::lognormal: {
      // Bounded to a minute, as --cost is: a draw far in the tail must not
      // keep a worker (or the server's stop) waiting for hours.
      const double ns = std::exp(std::log(delay.median_ns) + delay.sigma * normal);
      return static_cast<int64_t>(std::min(ns, 60e9));
    }
  }
  return 0;
}

namespace {
uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15u;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}
// Uniform in (0, 1): 53 bits, never 0 (the logarithm below).
double open_unit(uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }
}  // namespace

double standard_normal(uint64_t k) {
  const double u1 = open_unit(splitmix64(2 * k)), u2 = open_unit(splitmix64(2 * k + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

std::string endpoint_of_scope(std::string_view scope) {
  constexpr std::string_view kPrefix = "endpoint.";
  return scope.starts_with(kPrefix) ? std::string(scope.substr(kPrefix.size())) : std::string();
}

void add_flags(CLI::App& app, Flags& f) {
  Options& o = f.options;
  app.add_option("--port", o.port, "TCP port to listen on; 0 picks a free one")->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--bind", o.bind, "IPv4 address to listen on")->capture_default_str();
  app.add_option("--orca-dir", o.orca_dir, "headroomd's report directory (agent.orca_dir)")->capture_default_str();
  app.add_option("--scope", o.scope, "The report to shed on: endpoint.<name> or node; required unless --no-shed");
  app.add_option("--signal", o.signals, "Signal to shed on, repeatable; the highest drop probability wins")
      ->capture_default_str();
  app.add_option("--shed-start", o.shed_start, "Utilization where non-critical shedding starts (default: the signal's)");
  app.add_option("--critical-start", o.critical_start, "Utilization where CRITICAL shedding starts (default: the signal's)");
  app.add_option("--all-shed", o.all_shed, "Utilization where everything is shed (default: the signal's)");
  app.add_option("--stale-policy", f.stale_policy, "fail_open or use_last")->capture_default_str();
  app.add_option("--priority-header", o.priority_header, "Request header carrying the priority")->capture_default_str();
  app.add_option("--default-priority", f.default_priority,
                 "Priority of a request without a valid priority header: a bucket or 1..100")->capture_default_str();
  app.add_option("--shed-status", o.shed_status, "HTTP status of a shed response")->capture_default_str()
      ->check(CLI::Range(400, 599));
  app.add_option("--workers", o.workers, "Worker threads")->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--cost", f.cost, "CPU time each request costs, e.g. 1ms, 250us")->capture_default_str();
  app.add_option("--delay", f.delay, "Wall-clock time each request sleeps after --cost: 0, a duration (15ms), or "
                 "lognormal:MEDIAN,SIGMA (lognormal:20ms,0.5)")->capture_default_str();
  app.add_option("--config", o.config_file, "headroom.toml whose [[endpoint.shed]] entries of --scope's endpoint "
                 "give the thresholds (instead of --signal, --shed-start, --critical-start, --all-shed); re-read "
                 "when it changes");
  app.add_flag("--no-shed", o.no_shed, "Shed nothing on the endpoint's report (for comparison)");
  app.add_option("--dependency", o.dependency, "HTTP/1.1 service (IPv4 host:port) that requests under "
                 "--dependency-path call from the worker");
  app.add_option("--dependency-path", o.dependency_path, "Path prefix of the requests that call --dependency (with their own path)")
      ->capture_default_str();
  app.add_option("--dependency-timeout", f.dependency_timeout, "How long a worker waits for the dependency's answer")
      ->capture_default_str();
  app.add_option("--gate", o.gate_scope, "Fail calls to --dependency fast on this report (dependency.<name>) with "
                 "the reference gate (headroom/orca/dependency_gate.h)");
  app.add_flag("--fallback", o.fallback, "Answer a call failed fast with 200 \"fallback\" instead of --shed-status");
}

headroom::Result<Options> options_of(const Flags& f) {
  Options opt = f.options;
  const auto cost_ns = parse_duration_ns(f.cost);
  if (!cost_ns)
    return headroom::logic_error("--cost " + f.cost + ": expected a duration such as 1ms, 250us or 0.5s (at most 60s)");
  opt.cost_ns = *cost_ns;
  const auto delay = parse_delay(f.delay);
  if (!delay)
    return headroom::logic_error("--delay " + f.delay + ": expected 0, a duration such as 15ms (at most 60s), or "
                                 "lognormal:MEDIAN,SIGMA such as lognormal:20ms,0.5 (median > 0, sigma 0 to 3)");
  opt.delay = *delay;
  const auto prio = parse_priority(f.default_priority);
  if (!prio)
    return headroom::logic_error("--default-priority " + f.default_priority +
                                 ": expected CRITICAL, DEGRADED, BEST_EFFORT, BULK or 1..100");
  opt.default_priority = *prio;
  const auto policy = orca::parse_stale_policy(f.stale_policy);
  if (!policy) return headroom::logic_error("--stale-policy " + f.stale_policy + ": expected fail_open or use_last");
  opt.stale = *policy;
  if (opt.priority_header.empty()) return headroom::logic_error("--priority-header must not be empty");
  const auto timeout_ns = parse_duration_ns(f.dependency_timeout);
  if (!timeout_ns || *timeout_ns <= 0)
    return headroom::logic_error("--dependency-timeout " + f.dependency_timeout + ": expected a duration such as 2s");
  opt.dependency_timeout_ns = *timeout_ns;
  if (!opt.dependency.empty() && !parse_ipv4_endpoint(opt.dependency))
    return headroom::logic_error("--dependency " + opt.dependency + ": expected an IPv4 host:port such as 127.0.0.1:6000");
  if (!opt.gate_scope.empty() && opt.dependency.empty())
    return headroom::logic_error("--gate needs --dependency: the gate fails calls to it fast");
  if (!opt.no_shed && opt.scope.empty())
    return headroom::logic_error("--scope is required: the report to shed on, e.g. --scope endpoint.play (or --no-shed)");
  if (!opt.config_file.empty()) {
    std::string given;
    for (const auto& flag : f.threshold_flags) given += (given.empty() ? "" : ", ") + flag;
    if (!given.empty())
      return headroom::logic_error("--config cannot be combined with " + given +
                                   ": the file's [[endpoint.shed]] entries give the signals and thresholds");
    if (endpoint_of_scope(opt.scope).empty())
      return headroom::logic_error("--config needs --scope endpoint.NAME (the [[endpoint]] whose [[endpoint.shed]] "
                                   "entries it reads), got --scope " + (opt.scope.empty() ? "(none)" : opt.scope));
  }
  return opt;
}

orca::ShedderConfig shedder_config(const Options& opt) {
  orca::ShedderConfig config;
  config.signals.clear();
  for (const auto& name : opt.signals) {
    orca::SignalThresholds t = orca::default_thresholds(name);
    t.shed_start = opt.shed_start.value_or(t.shed_start);
    t.critical_start = opt.critical_start.value_or(t.critical_start);
    t.all_shed = opt.all_shed.value_or(t.all_shed);
    config.signals.emplace_back(name, t);
  }
  config.stale = opt.stale;
  return config;
}

}  // namespace shedding_server
