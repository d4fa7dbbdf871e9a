// SPDX-License-Identifier: Apache-2.0
// The file `headroomctl tune recommend` writes: the input headroom.toml with
// each tuned endpoint's target and max replaced and its [[endpoint.shed]]
// replaced by the recommended thresholds, after a comment header that says
// with which command, when, and from what data it was made.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/ctl/tune_model.h"
#include "headroom/orca/result.h"

namespace headroom::ctl::tune {

struct Provenance {
  std::string command_line;  // as run, quoted where needed
  int64_t made_unix = 0;     // when (UTC)
  // Where the history came from, one line each:
  // "Prometheus http://prom:9090, 2026-11-29 17:40 to 2026-12-06 17:40 UTC (7d), 300 s steps".
  std::vector<std::string> source;
  std::string input;         // the --config file rewritten
  bool cumulative = false;  // from /metrics: "now" instead of a range over the peak steps
  Options options;
};

// "2026-12-06 17:40:03 UTC".
std::string utc_time(int64_t unix_seconds);

// The header, every line a '#' comment.
std::string header(const std::vector<Recommendation>& recs, const Provenance& p);

// The input (already checked by agent::parse_config) with the
// recommendations applied, serialized by toml++ after the header. The error
// names `input_name` when its text cannot be read as TOML.
Result<std::string> tuned_file(std::string_view input, const std::string& input_name,
                               const std::vector<Recommendation>& recs, const Provenance& p);

// Reads `text` back as headroomd does (agent::parse_config, errors as
// file:line) and checks each [[endpoint.shed]] as the shedder does
// (orca::is_known_signal, validate_thresholds, each signal once).
Result<void> check_tuned_file(std::string_view text, const std::string& name);

}  // namespace headroom::ctl::tune
