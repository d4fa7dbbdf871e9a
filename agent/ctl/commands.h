// SPDX-License-Identifier: Apache-2.0
// headroomctl subcommands that live in their own files. Each adds itself to the
// application and returns the function main() runs when it was chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <utility>

namespace headroom::ctl {

using Runner = std::function<int()>;

// headroomctl shed [--orca-dir DIR] [--scope S] [--priority P] [--signal NAME]... [--stale-policy P]
std::pair<CLI::App*, Runner> add_shed_command(CLI::App& app);
// headroomctl header FILE [--text|--bin]
std::pair<CLI::App*, Runner> add_header_command(CLI::App& app);
// headroomctl oob ADDRESS [--authority A] [--interval D] [--count N] [--duration D] [--json]
std::pair<CLI::App*, Runner> add_oob_command(CLI::App& app);
// headroomctl buffer TARGET --baseline RPS [--ramp M,...|--spike N] [--mix ...] [--expect-...] [--json] [--svg F]
std::pair<CLI::App*, Runner> add_buffer_command(CLI::App& app);
// headroomctl tune SUBCOMMAND: generated configurations (docs/tuning.md); adds the subcommands below
std::pair<CLI::App*, Runner> add_tune_command(CLI::App& app);
// headroomctl tune validate FILE --target T --endpoint NAME [--baseline RPS|report] [--spike N] [--no-apply] [--keep] [--json]
std::pair<CLI::App*, Runner> add_tune_validate_command(CLI::App& tune);
// headroomctl tune search FILE --target T --endpoint NAME --out BEST [--max-spikes N] (validate's flags)
std::pair<CLI::App*, Runner> add_tune_search_command(CLI::App& tune);

// headroomctl tune recommend [--prometheus URL [--since 7d] [--step D] | --metrics URL] [--config F]
//   [--endpoint NAME]... [--autoscale-cpu 0.5] [--target-quantile 0.9] [--max-quantile 0.99]
//   [--peak-share 0.8] [--min-samples 1000] [--out FILE] [--json]; added under `tune`.
std::pair<CLI::App*, Runner> add_tune_recommend_command(CLI::App& tune);

}  // namespace headroom::ctl
