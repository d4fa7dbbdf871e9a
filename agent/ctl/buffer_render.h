// SPDX-License-Identifier: Apache-2.0
// `headroomctl buffer`'s three outputs of one run: a table for a terminal,
// JSON for scripts (docs/buffers.md lists its fields) and an SVG chart a
// person can open in a browser. Pure: strings in, strings out.
#pragma once

#include <string>
#include <vector>

#include "agent/ctl/buffer_model.h"
#include "agent/ctl/buffer_retries.h"

namespace headroom::ctl::buffer {

// Everything one run produced, as the renderers need it.
struct RunReport {
  std::string target;       // "127.0.0.1:8080/play"
  std::string mode;         // "ramp" or "spike"
  double baseline_rps = 0;
  std::string baseline_source;  // "given" or "endpoint.play's rps_fractional"
  Criteria criteria;
  BufferRules rules;
  std::vector<MixEntry> mix;
  std::vector<StepResult> steps;
  Buffers buffers;
  std::optional<TimeToShed> time_to_shed;  // spike mode
  std::string signal_scope;  // "endpoint.play", empty when no report was sampled
  std::string signal;        // "application_utilization"
  double threshold = 0;      // the signal's shedding threshold, for time to shed
  loadgen::RunResult client;  // records are not rendered; the client's own figures are
  Verdict verdict;
  bool interrupted = false;
  // --retries: the mode, and per step (indexed like steps) the first
  // attempts, retries and suppressed retries. Mode none: no retries section.
  RetryMode retry_mode = RetryMode::none;
  int max_retries = 0;
  std::vector<StepRetries> retries;
  // Several instances of the target (TARGET given more than once; `target`
  // is the first): each one's attempts. Empty for one instance.
  std::vector<InstanceCounts> instances;
};

std::vector<std::string> render_table(const RunReport& report);
std::string render_json(const RunReport& report);
std::string render_svg(const RunReport& report);

}  // namespace headroom::ctl::buffer
