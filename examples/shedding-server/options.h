// SPDX-License-Identifier: Apache-2.0
// The shedding server's command line (server.cc): its flags, the values
// CLI11 cannot check by itself, and the reference shedder's configuration
// they ask for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <headroom/orca/names.h>
#include <headroom/orca/priority.h>
#include <headroom/orca/result.h>
#include <headroom/orca/shedder.h>

namespace shedding_server {

namespace orca = headroom::orca;

// A request's priority: a bucket as a whole (level 0) or a numeric level 1..100.
struct Priority {
  orca::Bucket bucket = orca::Bucket::DEGRADED;
  int level = 0;
};

// "critical", "BEST_EFFORT", "best-effort" (any case), or 1..100, as
// orca::parse_priority_value reads it: numbers outside 1..100 are refused
// rather than clamped (a typo should not become the most important priority).
std::optional<Priority> parse_priority(std::string_view text);

// "1ms", "250us", "0.5s", "0": CPU time per request.
std::optional<int64_t> parse_duration_ns(std::string_view text);

// --delay: the wall-clock time a worker sleeps after --cost, drawn per
// request: none, a fixed duration, or log-normal around a median,
// exp(ln(median) + sigma * N(0, 1)).
struct Delay {
  enum class Kind { none, fixed, lognormal };
  Kind kind = Kind::none;
  int64_t fixed_ns = 0;
  double median_ns = 0;
  double sigma = 0;
};
// "0", "15ms", "lognormal:20ms,0.5" (median > 0 and at most 60s, sigma in [0, 3]).
std::optional<Delay> parse_delay(std::string_view text);
// One draw; `normal` is a standard normal variate (a pure function of it).
int64_t delay_ns(const Delay& delay, double normal);
// The k-th value of a fixed sequence of standard normal variates (splitmix64
// and Box-Muller): the k-th request the workers take sleeps delay_ns(delay,
// standard_normal(k)), so every run draws the same delays, whichever worker
// takes which request.
double standard_normal(uint64_t k);

struct Options {
  std::string bind = "127.0.0.1";
  int port = 8080;
  std::string orca_dir = "/run/orca";
  std::string scope;
  std::vector<std::string> signals = {std::string(orca::kApplicationUtilization)};  // the reference shedder's default
  std::optional<double> shed_start, critical_start, all_shed;  // unset: the signal's default
  orca::StalePolicy stale = orca::StalePolicy::fail_open;
  std::string priority_header = std::string(orca::kPriorityHeader);
  Priority default_priority{orca::Bucket::DEGRADED, 0};
  int shed_status = 503;
  int workers = 1;
  int64_t cost_ns = 1'000'000;
  Delay delay;
  // --config: the thresholds of [[endpoint.shed]] of --scope's endpoint in
  // this headroom.toml, re-read when it changes; empty: the flags'.
  std::string config_file;
  bool no_shed = false;
  // --dependency: requests under dependency_path call it from the worker.
  std::string dependency;  // "a.b.c.d:port"; empty: none
  std::string dependency_path = "/dep";
  int64_t dependency_timeout_ns = 5'000'000'000;
  // --gate: the dependency's report (dependency.<name>); empty: no gate.
  std::string gate_scope;
  bool fallback = false;  // a call failed fast is answered 200 "fallback" rather than --shed-status
};

// The flags as given, before the values CLI11 cannot check are parsed.
struct Flags {
  Options options;
  std::string stale_policy = "fail_open", default_priority = "DEGRADED", cost = "1ms", dependency_timeout = "5s";
  std::string delay = "0";
  // The threshold flags given on the command line (--signal, --shed-start,
  // ...), which --config replaces.
  std::vector<std::string> threshold_flags;
};

// The flags --config replaces.
inline constexpr const char* kThresholdFlags[] = {"--signal", "--shed-start", "--critical-start", "--all-shed"};

// Declares every flag on `app`, bound to `flags`.
void add_flags(CLI::App& app, Flags& flags);

// The options the flags say; an error names the flag and what it expects.
headroom::Result<Options> options_of(const Flags& flags);

// Each signal with its defaults, overridden field by field by the flags.
// orca::Shedder::create validates it and names the offending entry.
orca::ShedderConfig shedder_config(const Options& opt);

// The endpoint of an endpoint scope ("endpoint.play" -> "play"); empty for
// any other scope.
std::string endpoint_of_scope(std::string_view scope);

}  // namespace shedding_server
