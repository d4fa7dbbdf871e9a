// SPDX-License-Identifier: Apache-2.0
// `headroomctl tune validate` and `search`'s outputs: the criteria table, the
// JSON object and the comment header of the file search writes. Pure.
#pragma once

#include <string>
#include <vector>

#include "agent/ctl/buffer_model.h"
#include "agent/ctl/tune_validate.h"

namespace headroom::ctl::tune {

// One spike of validate or search, as the outputs show it.
struct RunSummary {
  double s = 1;                  // search: the position; validate: 1
  std::vector<ShedEntry> shed;   // the thresholds run
  Judgement judgement;
  buffer::Buffers buffers;
};

// The criteria, one line each: name, PASS/FAIL, each measure against its
// limit; then the buffers and, on a fail, the suggestion.
std::vector<std::string> render_judgement(const RunSummary& run);
// {"pass":bool,"criteria":[...],"buffers":{...},"suggestion":{...}|null}
std::string judgement_json(const RunSummary& run);
// One line per run: s, thresholds, PASS/FAIL with the cause, buffers.
std::vector<std::string> render_runs(const std::vector<RunSummary>& runs);
// {"pass":bool,"best":index|null,"out":path,"runs":[judgement objects with "s" and "shed"]}
std::string search_json(const std::vector<RunSummary>& runs, std::optional<std::size_t> best, const std::string& out);
// The comment block put before the file search writes: what made it, the
// command, and the runs table.
std::string search_header(const std::string& command, const std::vector<RunSummary>& runs, std::size_t best);

}  // namespace headroom::ctl::tune
