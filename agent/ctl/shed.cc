// SPDX-License-Identifier: Apache-2.0
// `headroomctl shed`: what the reference shedder (headroom/orca/shedder.h)
// would drop right now, read from one report file.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/ctl/commands.h"
#include "agent/ctl/render.h"
#include "headroom/orca/report.h"
#include "headroom/orca/clock.h"
#include "headroom/orca/report_reader.h"
#include "headroom/orca/shedder.h"

namespace headroom::ctl {
namespace {

namespace orca = headroom::orca;

constexpr int kExitUnreadable = 1;

struct ShedOptions {
  std::string dir = "/run/orca";
  std::string scope{orca::kNodeScope};
  std::string priority;             // empty: every bucket
  std::vector<std::string> signals;  // empty: the default configuration
  std::string stale_policy = "fail_open";
};

// One decimal, but never "0.0 %" for a probability that is not 0 nor
// "100.0 %" for one that is not 1: whether anything is shed at all matters.
std::string format_drop(double p) {
  if (p > 0.0 && p < 0.0005) return "<0.1 %";
  if (p < 1.0 && p >= 0.9995) return ">99.9 %";
  return format_percent(p);
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}
std::string pad_left(std::string s, std::size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

// "90" -> 90, "bulk" -> its bucket; anything else -> nullopt.
struct Level {
  bool numeric = false;
  int priority = 0;
  orca::Bucket bucket = orca::Bucket::BULK;
};
std::optional<Level> parse_level(const std::string& text) {
  if (auto b = orca::parse_bucket(text)) return Level{false, 0, *b};
  if (text.empty() || text.size() > 3 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const int p = std::stoi(text);
  if (p < orca::kMostImportantPriority || p > orca::kLeastImportantPriority) return std::nullopt;
  return Level{true, p, orca::bucket_of_priority(p)};
}

std::string stale_note(orca::StalePolicy policy) {
  if (policy == orca::StalePolicy::fail_open)
    return "stale policy fail_open (the default): stale data sheds nothing, so every probability is 0";
  return "stale policy use_last: shedding continues on the last values, except CRITICAL, which stale data never "
         "sheds";
}

int run(const ShedOptions& o) {
  std::string dir = o.dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string path = dir + "/" + orca::report_file_name(o.scope);
  auto report = orca::read_report_file(path);
  if (!report) {
    std::fprintf(stderr, "headroomctl: shed: cannot read %s: %s\n", path.c_str(),
                 without_path(report.error().message, path).c_str());
    return kExitUnreadable;
  }

  orca::ShedderConfig config;
  if (!o.signals.empty()) {
    config.signals.clear();
    for (const auto& s : o.signals) config.signals.emplace_back(s, orca::default_thresholds(s));
  }
  config.stale = *orca::parse_stale_policy(o.stale_policy);  // checked by the option's validator
  if (auto v = orca::validate_config(config); !v) {  // e.g. a signal given twice
    std::fprintf(stderr, "headroomctl: shed: %s\n", v.error().message.c_str());
    return 64;  // EX_USAGE, as for other bad arguments
  }

  const int64_t now = orca::unix_now_ms();
  const auto staleness = orca::check_staleness(*report, now, kStaleIntervals);
  std::vector<std::string> lines;

  std::string head = path + ":";
  if (auto meta = orca::metadata_of(*report)) {
    head += " seq " + std::to_string(meta->seq) + ", " + format_age(staleness.age_ms) + " ago, interval " +
            std::to_string(meta->interval_ms) + " ms";
  } else {
    head += " no headroom metadata";
  }
  if (staleness.stale) head += ", STALE: " + staleness.reason;
  lines.push_back(head);
  if (staleness.stale) lines.push_back("  " + stale_note(config.stale));

  const auto summary = orca::summarize_shedding(*report, config, staleness.stale);
  lines.push_back(config.signals.size() == 1 ? "signal:" : "signals (each request gets the highest probability any gives):");
  std::size_t name_width = 0;
  for (const auto& s : summary.signals) name_width = std::max(name_width, s.name.size());
  for (const auto& s : summary.signals) {
    std::string line = "  " + pad(s.name, name_width) + "  ";
    if (s.value) {
      line += pad_left(format_percent(*s.value), 7) + "  (shedding from " + format_percent(s.thresholds.shed_start) +
              ", CRITICAL from " + format_percent(s.thresholds.critical_start) + ", everything at " +
              format_percent(s.thresholds.all_shed) + ")";
    } else {
      line += "absent from the report (sheds nothing)";
    }
    lines.push_back(line);
  }

  lines.push_back("would be dropped right now (priority 1 is the most important, 100 the least):");
  if (!o.priority.empty()) {
    const Level level = *parse_level(o.priority);  // checked by the option's validator
    std::string label;
    double p = 0.0;
    if (level.numeric) {
      label = "priority " + std::to_string(level.priority) + " (" + std::string(orca::bucket_name(level.bucket)) + ")";
      p = orca::shed_probability(*report, level.priority, config, staleness.stale);
    } else {
      const auto range = orca::priority_range(level.bucket);
      label = std::string(orca::bucket_name(level.bucket)) + " (priorities " + std::to_string(range.first) + "-" +
              std::to_string(range.last) + ")";
      p = summary.probability[static_cast<std::size_t>(level.bucket)];
    }
    lines.push_back("  " + label + "  " + format_drop(p));
  } else {
    for (int b = 0; b < orca::kBucketCount; ++b) {
      const auto bucket = static_cast<orca::Bucket>(b);
      const auto range = orca::priority_range(bucket);
      lines.push_back("  " + pad(std::string(orca::bucket_name(bucket)), 13) +
                      pad("priorities " + std::to_string(range.first) + "-" + std::to_string(range.last), 17) +
                      pad_left(format_drop(summary.probability[static_cast<std::size_t>(b)]), 9));
    }
  }

  std::string out;
  for (const auto& l : lines) out += l + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

std::pair<CLI::App*, Runner> add_shed_command(CLI::App& app) {
  auto opts = std::make_shared<ShedOptions>();
  auto* c = app.add_subcommand("shed", "What the reference prioritized shedder would drop right now");
  c->footer(
      "Reads <ORCA_DIR>/<SCOPE>.orca and prints, per priority bucket, the probability with which\n"
      "a proxy using headroom's reference shedder (headroom/orca/shedder.h, docs/shedding.md)\n"
      "would drop a request. Priority 1 is the most important, 100 the least:\n"
      "CRITICAL 1-25, DEGRADED 26-50, BEST_EFFORT 51-75, BULK 76-100.\n"
      "A report older than 3 intervals (and 1 s) is stale; stale data sheds nothing by default.");
  // --orca-dir, as headroomd and the other commands name it; --dir is the
  // name it had first.
  c->add_option("--orca-dir,--dir", opts->dir, "Directory of report files (agent.orca_dir)")->capture_default_str();
  c->add_option("--scope", opts->scope, "Report to read: node, endpoint.<name>")->capture_default_str();
  c->add_option("--priority", opts->priority, "Only this priority: a bucket name (any case) or a number 1-100")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return parse_level(text) ? "" : "must be CRITICAL, DEGRADED, BEST_EFFORT, BULK or a number from 1 to 100";
          },
          "BUCKET|1-100"));
  c->add_option("--signal", opts->signals,
                "Shed on this signal with its default thresholds (repeatable; default application_utilization): "
                "application_utilization, cpu_utilization, mem_utilization, utilization.<key>")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return orca::is_known_signal(text)
                       ? ""
                       : "unknown signal; expected application_utilization, cpu_utilization, mem_utilization or "
                         "utilization.<key>";
          },
          "NAME"));
  c->add_option("--stale-policy", opts->stale_policy, "fail_open: stale data sheds nothing; use_last: keep shedding "
                                                      "on the last values, never CRITICAL")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return orca::parse_stale_policy(text) ? "" : "must be fail_open or use_last";
          },
          "POLICY"));
  return {c, [opts] { return run(*opts); }};
}

}  // namespace headroom::ctl
