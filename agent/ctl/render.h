// SPDX-License-Identifier: Apache-2.0
// headroomctl's rendering: reports -> text lines and table rows. Pure: the
// caller passes the current time and the file contents, so every output here is
// reproducible in tests. I/O (files, inotify, the terminal) lives in
// headroomctl_main.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "headroom/orca/report.h"

namespace headroom::ctl {

// A report older than this many sampling intervals is shown as STALE; the same
// threshold a consumer of the files should use.
inline constexpr double kStaleIntervals = 3.0;

// 0.632 -> "63.2 %". cpu_utilization may exceed 1: 1.5 -> "150.0 %".
std::string format_percent(double fraction);
// Age of a report, milliseconds -> "0.3 s", "5 min 03 s", "2 h 05 min", "3 d 04 h".
// Negative (a report from the future) -> "-0.3 s".
std::string format_age(int64_t age_ms);
// Bytes -> "512.0 MiB".
std::string format_mib(double bytes);
// Integral values without decimals ("3", "1700000000123"), others with up to six
// significant digits ("0.125", "1.5e-07").
std::string format_number(double value);
// Unix milliseconds -> ISO-8601 UTC, "2023-11-14T22:13:20.123Z".
std::string format_utc(int64_t unix_ms);
// One named_metrics value, formatted by what its key means: *_bytes as MiB,
// headroom.cpu.busy/saturation as percentages, headroom.timestamp_ms with its
// UTC time, anything else as a plain number.
std::string format_named_metric(std::string_view key, double value);

// A JSON string literal, quotes included.
std::string json_quote(std::string_view text);

// read_report_file's messages embed the path ("open /x/y.orca: ...",
// "/x/y.orca: not a valid ..."). The caller prints the path first, so this
// drops it from the message: "open: ...", "not a valid ...".
std::string without_path(std::string_view message, std::string_view path);

// "node.orca" -> "node", "endpoint.api.orca" -> "endpoint.api". Empty for names
// that are not report files: hidden (the writer's temporaries start with '.'),
// wrong suffix, or nothing before the suffix.
std::string scope_of_file_name(std::string_view name);
std::string scope_of_path(std::string_view path);

// An endpoint instance's scope, "endpoint.<name>@<instance>", split at the
// separator: {"endpoint.<name>", "<instance>"}; any other scope is
// {scope, ""}.
struct ScopeParts {
  std::string_view base;
  std::string_view instance;
};
ScopeParts split_instance(std::string_view scope);

// `cat --instances`: of the file names in a directory, those of the
// instances of the endpoint whose aggregate is `aggregate_name`
// ("endpoint.api.orca" -> "endpoint.api@<id>.orca"), sorted. Empty when
// `aggregate_name` is no endpoint's aggregate.
std::vector<std::string> instance_file_names(std::string_view aggregate_name, std::vector<std::string> names);

// Set in endpoint reports whose latency signals are unavailable (docs/endpoints.md).
inline constexpr std::string_view kEbpfUnavailableMetric = orca::kMetricEbpfUnavailable;

// `headroomctl cat`: header line (file, seq, age, interval, STALE/STOPPED, or
// GONE for an instance whose servers stopped), the top-level fields, then the
// maps sorted by key. No trailing newlines. An endpoint's aggregate leaves
// out the machine's CPU and memory; an instance's report shows its cgroup's.
std::vector<std::string> render_report(std::string_view file, const orca::Report& report, int64_t now_unix_ms);

// A report as one line of JSON (protobuf's mapping, field names as in the
// .proto, zeros printed): the "report" of `cat --json` and `oob --json`.
std::string report_json(const orca::Report& report);

// `headroomctl cat --json`: one line, {"file", "age_ms", "stale", "stale_reason",
// "report"}; age_ms is null when the report lacks its metadata.
std::string render_report_json(std::string_view file, const orca::Report& report, int64_t now_unix_ms);

// One row of `headroomctl watch`: a report, or why it could not be read.
struct WatchEntry {
  std::string scope;
  std::optional<orca::Report> report;
  std::string error;  // used when report is empty
};

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each as long as header
  std::vector<bool> right_aligned;             // per column
};

// SCOPE AGE SEQ CPU MEM APP <one column per utilization key in any report>
// STATUS. The node's signals come first in their usual order, other keys
// sorted; the node row first, other scopes sorted, each endpoint's instances
// right under its row, as "  @<instance>" (the whole scope when the
// endpoint's own row is absent). STATUS is "ok", "STALE: <reason>",
// "STOPPED", "GONE (stopped serving)" or "ERROR: <reason>"; a missing value
// is "-".
Table build_watch_table(std::vector<WatchEntry> entries, int64_t now_unix_ms);

// Columns padded to their widest cell, two spaces apart; no trailing spaces.
std::vector<std::string> format_table(const Table& table);

struct WatchFrame {
  std::string dir;
  int64_t now_unix_ms = 0;
  // Non-empty while the directory cannot be watched (e.g. "No such file or
  // directory"); the frame then says it is waiting for it.
  std::string waiting_reason;
  std::vector<WatchEntry> entries;
};

// Title line (directory and time), then the table or a waiting/empty notice.
// Never contains an empty line: in a log, a blank line separates frames.
std::vector<std::string> render_watch_frame(const WatchFrame& frame);

}  // namespace headroom::ctl
