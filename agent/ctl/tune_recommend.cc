// SPDX-License-Identifier: Apache-2.0
// headroomctl tune recommend: the flags, the I/O around the model (the
// configuration read and checked, the history fetched from Prometheus or
// /metrics, the file written atomically) and the table or JSON printed. The
// rules are in tune_model.h, the sources in tune_sources.h, the file in
// tune_file.h.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <future>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/config/config.h"
#include "agent/ctl/commands.h"
#include "agent/ctl/tune_file.h"
#include "agent/ctl/tune_model.h"
#include "agent/ctl/tune_sources.h"
#include "headroom/orca/report_writer.h"

namespace headroom::ctl {
namespace {

using namespace tune;
using nlohmann::json;

constexpr int kExitUsage = 64;        // EX_USAGE
constexpr int kExitUnavailable = 69;  // EX_UNAVAILABLE: Prometheus or headroomd cannot be read
constexpr int kExitSoftware = 70;     // EX_SOFTWARE: the file made does not read back
constexpr int kExitCantCreate = 73;   // EX_CANTCREAT: --out cannot be written

struct RecommendOptions {
  std::string prometheus, metrics;
  std::string since = "7d";
  std::string step;
  std::optional<int64_t> until;
  std::string config = agent::kDefaultConfigPath;
  std::vector<std::string> endpoints;
  Options model;
  std::string out;
  bool json = false;
};

// A failure with its exit status.
struct Failure {
  int status;
  std::string message;
};

// "7d", "12h", "90m", "30s" as whole seconds; nullopt when not.
std::optional<std::chrono::seconds> parse_span(const std::string& text) {
  if (text.size() > 1 && text.back() == 'd' && text.find_first_not_of("0123456789") == text.size() - 1)
    return std::chrono::hours(24) * std::stoll(text.substr(0, text.size() - 1));
  const auto d = agent::parse_duration(text);
  if (!d || *d < std::chrono::seconds(1) || *d % std::chrono::seconds(1) != std::chrono::nanoseconds(0))
    return std::nullopt;
  return std::chrono::duration_cast<std::chrono::seconds>(*d);
}

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  std::size_t at = 0;
  while (at < raw.size()) {
    std::size_t end = raw.find('\0', at);
    if (end == std::string::npos) end = raw.size();
    std::string arg = raw.substr(at, end - at);
    if (!out.empty()) out += ' ';
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_./:=,@%+") ==
                                           std::string::npos;
    if (plain) {
      out += arg;
    } else {
      out += '\'';
      for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
    at = end + 1;
  }
  return out;
}

std::string trim_slash(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// One range query; the failure says what to check.
Result<std::vector<Series>, Failure> range_query(const std::string& base, const std::string& query, int64_t start,
                                                 int64_t end, std::chrono::seconds step) {
  const std::string url = query_range_url(base, query, start, end, step);
  auto got = http_get(url);
  if (!got)
    return Failure{kExitUnavailable, "cannot reach Prometheus at " + base + ": " + got.error().message +
                                         "; check --prometheus (the server's base URL, e.g. http://127.0.0.1:9090)"};
  auto series = parse_query_range(got->body);
  if (!series)
    return Failure{kExitUnavailable, "Prometheus at " + base + " refused the query " + query + " (HTTP " +
                                         std::to_string(got->status) + "): " + series.error().message};
  if (got->status != 200)
    return Failure{kExitUnavailable, "Prometheus at " + base + " answered HTTP " + std::to_string(got->status) +
                                         " to the query " + query};
  return std::move(series).value();
}

struct Fetched {
  History history;
  std::vector<std::string> source;
};

// The quantities at once (one query each, each for every endpoint), then the
// histogram of the endpoints without window percentiles.
Result<Fetched, Failure> fetch_prometheus(const RecommendOptions& o, const std::vector<std::string>& names) {
  const auto since = parse_span(o.since);
  if (!since) return Failure{kExitUsage, "--since " + o.since + ": write a duration like 7d, 12h or 30m"};
  std::optional<std::chrono::seconds> asked;
  if (!o.step.empty()) {
    asked = parse_span(o.step);
    if (!asked) return Failure{kExitUsage, "--step " + o.step + ": write a whole number of seconds like 5m or 15s"};
  }
  const std::chrono::seconds step = choose_step(*since, asked);
  const int64_t end = o.until ? *o.until : static_cast<int64_t>(std::time(nullptr));
  const int64_t start = end - since->count();
  const auto steps = static_cast<std::size_t>(since->count() / step.count()) + 1;
  const std::string base = trim_slash(o.prometheus);
  const Queries q = build_queries(o.endpoints.empty() ? std::vector<std::string>{} : names, step);
  const auto run = [&](const std::string& query) {
    return std::async(std::launch::async, [&, query] { return range_query(base, query, start, end, step); });
  };
  auto rate = run(q.rate), quantiles = run(q.window_quantiles), window = run(q.window_requests),
       signals = run(q.signals), cpu = run(q.node_cpu);
  PrometheusAnswers a;
  for (auto [future, into] : {std::pair{&rate, &a.rate}, std::pair{&quantiles, &a.window_quantiles},
                              std::pair{&window, &a.window_requests}, std::pair{&signals, &a.signals},
                              std::pair{&cpu, &a.node_cpu}}) {
    auto r = future->get();
    if (!r) return std::move(r).error();
    *into = std::move(r).value();
  }
  Fetched f;
  f.history = assemble(a, start, step, steps);
  std::vector<std::string> without;
  for (const auto& n : names) {
    auto it = f.history.endpoints.find(n);
    if (it == f.history.endpoints.end()) continue;
    const auto& wq = it->second.window_quantiles;
    const auto has = [&](double x) {
      return std::any_of(wq.begin(), wq.end(), [&](const auto& kv) { return std::fabs(kv.first - x) < 1e-9; });
    };
    if (!has(o.model.target_quantile) || !has(o.model.max_quantile)) without.push_back(n);
  }
  if (!without.empty()) {
    auto h = range_query(base, build_queries(without, step).histogram, start, end, step);
    if (!h) return std::move(h).error();
    a.histogram = std::move(h).value();
    f.history = assemble(a, start, step, steps);
  }
  f.source = {"Prometheus " + base + ": " + utc_time(start) + " to " + utc_time(end) + " (--since " + o.since +
                  "), steps of " + std::to_string(step.count()) + " s;",
              "the reports' window percentiles (headroom_endpoint_latency_seconds) weighted by their requests, or "
              "the histogram's increase over the peak steps"};
  return f;
}

Result<Fetched, Failure> fetch_metrics(const RecommendOptions& o) {
  auto got = http_get(o.metrics);
  if (!got)
    return Failure{kExitUnavailable, "cannot read headroomd's metrics at " + o.metrics + ": " + got.error().message +
                                         "; check --metrics (headroomd's [prometheus] listen address and /metrics)"};
  if (got->status != 200)
    return Failure{kExitUnavailable, "GET " + o.metrics + " answered HTTP " + std::to_string(got->status) +
                                         "; check --metrics (headroomd's /metrics)"};
  auto samples = parse_exposition(got->body);
  if (!samples)
    return Failure{kExitUnavailable, o.metrics + " is not the Prometheus text format: " + samples.error().message};
  Fetched f;
  f.history = history_from_metrics(*samples);
  f.source = {"headroomd's " + o.metrics + ": the cumulative latency histogram since headroomd started",
              "(bucket resolution, interpolated inside a bucket); the signals as they were when it was read"};
  return f;
}

json signals_json(const Recommendation& r) {
  json out = json::array();
  const auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  for (const auto& s : r.signals)
    out.push_back({{"signal", s.signal}, {"p50", opt(s.p50)}, {"p99", opt(s.p99)}, {"level", s.level},
                   {"level_from", s.level_from}, {"shed_start", s.thresholds.shed_start},
                   {"critical_start", s.thresholds.critical_start}, {"all_shed", s.thresholds.all_shed}});
  return out;
}

std::string render_json(const std::vector<Recommendation>& recs, const Provenance& p, const std::string& out_file,
                        const std::string& file) {
  json eps = json::array();
  for (const auto& r : recs) {
    json e = {{"endpoint", r.endpoint}, {"recommended", r.ok}};
    if (!r.ok) {
      e["note"] = r.note;
    } else {
      e.update({{"requests_at_peak", r.requests_at_peak}, {"peak_steps", r.peak_steps}, {"peak_rate", r.peak_rate},
                {"method", r.method}, {"target", r.target}, {"max", r.max}, {"target_seconds", r.target_seconds},
                {"max_seconds", r.max_seconds}, {"shed", signals_json(r)}});
    }
    eps.push_back(std::move(e));
  }
  json doc = {{"command", p.command_line},
              {"made", utc_time(p.made_unix)},
              {"source", p.source},
              {"target_quantile", p.options.target_quantile},
              {"max_quantile", p.options.max_quantile},
              {"max_margin", p.options.max_margin},
              {"endpoints", eps},
              {"out", out_file.empty() ? json(nullptr) : json(out_file)}};
  if (out_file.empty()) doc["file"] = file;  // the file itself when it was not written
  return doc.dump() + "\n";
}

std::string render_table(const std::vector<Recommendation>& recs, const Provenance& p) {
  std::ostringstream out;
  for (const auto& line : p.source) out << line << "\n";
  out << "\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-24s %14s %10s %10s  %s\n", "ENDPOINT", "REQUESTS@PEAK", "TARGET", "MAX", "FROM");
  out << buf;
  for (const auto& r : recs) {
    if (!r.ok) {
      std::snprintf(buf, sizeof buf, "%-24s %14s %10s %10s  ", r.endpoint.c_str(), "-", "kept", "kept");
      out << buf << r.note << "\n";
      continue;
    }
    std::snprintf(buf, sizeof buf, "%-24s %14.0f %10s %10s  %s\n", r.endpoint.c_str(), r.requests_at_peak,
                  r.target.c_str(), r.max.c_str(), r.method.c_str());
    out << buf;
    for (const auto& s : r.signals) {
      char range[64] = "-";
      if (s.p50 && p.cumulative)
        std::snprintf(range, sizeof range, "now %.3f", *s.p50);
      else if (s.p50)
        std::snprintf(range, sizeof range, "%.3f..%.3f", *s.p50, s.p99.value_or(*s.p50));
      std::snprintf(buf, sizeof buf, "    %-32s expected %-12s L %.3f  shed %.3g  critical %.3g  all %.3g\n",
                    s.signal.c_str(), range, s.level, s.thresholds.shed_start, s.thresholds.critical_start,
                    s.thresholds.all_shed);
      out << buf;
    }
  }
  return out.str();
}

// The file written whole or not at all (temp + rename in its directory).
Result<void> write_atomically(const std::string& path, const std::string& text) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  auto w = orca::ReportFileWriter::open(dir);
  if (!w) return std::move(w).error();
  return w->write_bytes(name, text);
}

Result<void, Failure> check_options(const RecommendOptions& o) {
  if (o.prometheus.empty() == o.metrics.empty())
    return Failure{kExitUsage, "give one of --prometheus URL (history over --since) or --metrics URL (headroomd's "
                               "/metrics, since it started), not both or neither"};
  const Options& m = o.model;
  if (!(m.target_quantile > 0 && m.target_quantile < 1) || !(m.max_quantile > 0 && m.max_quantile < 1))
    return Failure{kExitUsage, "--target-quantile and --max-quantile must be between 0 and 1 (0.9, 0.99)"};
  if (!(m.max_margin >= 1 && m.max_margin <= 100))
    return Failure{kExitUsage, "--max-margin must be between 1 and 100 (1.5)"};
  if (m.max_quantile < m.target_quantile)
    return Failure{kExitUsage, "--max-quantile must be at least --target-quantile"};
  return {};
}

int run_recommend(const RecommendOptions& o) {
  const auto fail = [](const Failure& f) {
    std::fprintf(stderr, "headroomctl tune recommend: %s\n", f.message.c_str());
    return f.status;
  };
  if (auto c = check_options(o); !c) return fail(c.error());
  auto config = agent::load_config(o.config);
  if (!config) return fail({kExitUsage, "--config: " + config.error().to_string()});
  std::vector<std::string> names;
  for (const auto& e : config->endpoints) names.push_back(e.name);
  if (names.empty())
    return fail({kExitUsage, "--config " + o.config + " declares no [[endpoint]]: nothing to tune"});
  if (!o.endpoints.empty()) {
    for (const auto& n : o.endpoints)
      if (std::find(names.begin(), names.end(), n) == names.end())
        return fail({kExitUsage, "--endpoint " + n + ": " + o.config + " declares no [[endpoint]] named " + n});
    names = o.endpoints;
  }
  auto fetched = o.prometheus.empty() ? fetch_metrics(o) : fetch_prometheus(o, names);
  if (!fetched) return fail(fetched.error());

  std::vector<Recommendation> recs;
  for (const auto& n : names) {
    const auto it = fetched->history.endpoints.find(n);
    const auto decl = std::find_if(config->endpoints.begin(), config->endpoints.end(),
                                   [&](const auto& e) { return e.name == n; });
    if (it == fetched->history.endpoints.end()) {
      Recommendation r;
      r.endpoint = n;
      r.note = "no history for endpoint " + n + " (no series names it)";
      recs.push_back(std::move(r));
      continue;
    }
    recs.push_back(recommend(it->second, fetched->history.node_cpu, decl->max_concurrency > 0, o.model));
  }
  Provenance p;
  p.command_line = command_line();
  p.made_unix = static_cast<int64_t>(std::time(nullptr));
  p.source = fetched->source;
  p.input = o.config;
  p.cumulative = o.prometheus.empty();
  p.options = o.model;

  std::ifstream in(o.config, std::ios::binary);
  const std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto text = tuned_file(input, o.config, recs, p);
  if (!text) return fail({kExitUsage, "--config: " + text.error().to_string()});
  if (auto c = check_tuned_file(*text, o.out.empty() ? "the recommendation" : o.out); !c)
    return fail({kExitSoftware, "the file made does not read back, nothing written: " + c.error().to_string()});
  if (!o.out.empty())
    if (auto w = write_atomically(o.out, *text); !w)
      return fail({kExitCantCreate, "--out " + o.out + ": " + w.error().message});
  const std::string shown = o.json ? render_json(recs, p, o.out, *text) : render_table(recs, p);
  std::fwrite(shown.data(), 1, shown.size(), stdout);
  if (!o.json && o.out.empty()) std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}

}  // namespace

std::pair<CLI::App*, Runner> add_tune_recommend_command(CLI::App& tune) {
  auto o = std::make_shared<RecommendOptions>();
  auto* c = tune.add_subcommand("recommend", "Propose each endpoint's target, max and shedding thresholds from history");
  c->footer(
      "Reads history from Prometheus (--prometheus, range queries over --since) or from\n"
      "headroomd's /metrics alone (--metrics: the histogram since headroomd started), and\n"
      "proposes for each endpoint of --config: target and max, the latency quantiles at peak\n"
      "(the steps with at least --peak-share of the busiest step's requests), and the\n"
      "shedder's [[endpoint.shed]] thresholds per signal from its expected level L at peak:\n"
      "shedding from L + 0.2 (1 - L), CRITICAL from L + 0.6 (1 - L). docs/tuning.md.\n"
      "Prints a table (or --json) and the file; --out writes the file (atomically) instead.\n"
      "Exit status: 0 done (endpoints without enough history are noted and kept), 64 usage or\n"
      "bad --config, 69 Prometheus or /metrics unreachable or refusing, 70 the file made does\n"
      "not read back (nothing written), 73 --out not written.");
  c->add_option("--prometheus", o->prometheus, "Prometheus' base URL, e.g. http://127.0.0.1:9090");
  c->add_option("--metrics", o->metrics, "headroomd's /metrics URL, e.g. http://127.0.0.1:9464/metrics");
  c->add_option("--since", o->since, "With --prometheus: how far back, e.g. 7d, 12h")->capture_default_str();
  c->add_option("--step", o->step,
                "With --prometheus: the query step (default 5m beyond a day, else 15s; raised so a series has at "
                "most 11000 points)");
  c->add_option("--until", o->until, "With --prometheus: the range's end, unix seconds (default now)");
  c->add_option("--config", o->config, "The headroom.toml whose endpoints are tuned")->capture_default_str();
  c->add_option("--endpoint", o->endpoints, "Tune only this endpoint (repeatable); it must be in --config");
  c->add_option("--autoscale-cpu", o->model.autoscale_cpu, "The CPU utilization the service autoscales at")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.95));
  c->add_option("--target-quantile", o->model.target_quantile, "target = this latency quantile at peak")
      ->capture_default_str();
  c->add_option("--max-quantile", o->model.max_quantile, "max = this latency quantile at peak, times --max-margin")->capture_default_str();
  c->add_option("--max-margin", o->model.max_margin, "max = --max-quantile at peak times this (at least 1)")->capture_default_str();
  c->add_option("--peak-share", o->model.peak_share, "Peak steps: at least this share of the busiest step's rate")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  c->add_option("--min-samples", o->model.min_samples, "Fewer requests at peak: no recommendation for the endpoint")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--out", o->out, "Write the proposed headroom.toml here (atomically)");
  c->add_flag("--json", o->json,
              "Print one JSON document instead of the table (with the file under \"file\" when there is no --out)");
  return {c, [o] { return run_recommend(*o); }};
}

}  // namespace headroom::ctl
