// SPDX-License-Identifier: Apache-2.0
// The ORCA load report as headroom publishes it, and the metadata every report
// carries in named_metrics. docs/orca-files.md is the contract these names follow.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "headroom/orca/names.h"  // the metadata keys
#include "headroom/orca/result.h"
#include "xds/data/orca/v3/orca_load_report.pb.h"

namespace headroom::orca {

using Report = xds::data::orca::v3::OrcaLoadReport;

// Largest report file a reader accepts. A real report is a few hundred bytes.
inline constexpr std::size_t kMaxReportBytes = 64 * 1024;

// File names: "node.orca", "endpoint.<name>.orca".
inline constexpr std::string_view kReportSuffix = ".orca";
inline constexpr std::string_view kNodeScope = "node";
std::string report_file_name(std::string_view scope);

struct ReportMetadata {
  int64_t timestamp_ms = 0;  // Unix time of the sample, milliseconds
  uint64_t seq = 0;          // increments on every publish of this scope
  int64_t interval_ms = 0;   // the agent's sampling interval
  bool stopped = false;      // the agent has shut down; values are frozen
  // An endpoint instance's report (endpoint.<name>@<instance>.orca) whose
  // servers all stopped listening: headroom.instance.gone = 1, always with
  // headroom.stopped. The agent runs on; the instance is gone.
  bool instance_gone = false;
};

// Reads the headroom metadata; an error names the missing or invalid key.
Result<ReportMetadata> metadata_of(const Report& report);

// Checks every range the ORCA message defines: all values finite and >= 0,
// mem_utilization and every utilization value in [0, 1]. The deprecated rps
// field is accepted (other writers may still set it); headroom never writes it.
// The error names the offending field.
Result<void> validate_report(const Report& report);

// Parses bytes as a report and validates it.
Result<Report> parse_report(std::string_view bytes);

// Reads one report file: refuses files larger than max_bytes, then parses and
// validates. With `owner`, it also refuses a file that another user owns or
// that its group or others may write (check_file_owner): a consumer that
// trusts only the agent's user trusts nothing else in the directory. Errors
// name the path.
Result<Report> read_report_file(const std::string& path, std::size_t max_bytes = kMaxReportBytes,
                                std::optional<uid_t> owner = std::nullopt);

// Whether a file with this owner and mode may be trusted as written by
// `owner` alone: owned by it, and writable by nobody else. The error says
// who owns it or who else may write it.
Result<void> check_file_owner(uid_t file_uid, mode_t file_mode, uid_t owner);

struct Staleness {
  bool stale = false;
  int64_t age_ms = 0;   // now - timestamp; negative if the report is from the future
  std::string reason;   // empty when fresh
};

// A report is stale when the agent says it stopped (the reason is "the agent
// stopped", or "the instance stopped serving" for a gone instance's report),
// when it lacks metadata, or
// when it is older than max_intervals sampling intervals (never less than
// min_age_ms, so very short intervals do not flap). A report from the future by
// more than that threshold (the clock was stepped back) is stale too.
Staleness check_staleness(const Report& report, int64_t now_unix_ms, double max_intervals = 3.0,
                          int64_t min_age_ms = 1000);

}  // namespace headroom::orca
