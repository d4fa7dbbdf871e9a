// SPDX-License-Identifier: Apache-2.0
// `headroomctl tune validate` and `search` at the edges: the endpoint under
// test read from a headroom.toml, the same file with other shedding
// thresholds (only their values change: comments and layout stay), and the
// canary on this machine made to run a file: headroomd's configuration
// replaced atomically, headroomd told (SIGHUP), its endpoint report awaited,
// and the original put back afterwards.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/ctl/tune_validate.h"
#include "headroom/orca/result.h"

namespace headroom::ctl::tune {

// The [[endpoint]] named `name` in the TOML `text` (read from `source`, which
// errors name): its target and max (both required) and its [[endpoint.shed]]
// entries (signal, shed_start and critical_start required; all_shed defaults
// to orca::default_thresholds(signal).all_shed; each checked valid).
Result<EndpointUnderTest> endpoint_of(std::string_view text, const std::string& source, const std::string& name);

// `text` with the endpoint's [[endpoint.shed]] thresholds set to `shed`
// (matched by signal): each shed_start and critical_start value replaced on
// its own line, everything else as it was.
Result<std::string> with_thresholds(std::string_view text, const std::string& source, const std::string& name,
                                    const std::vector<ShedEntry>& shed);

// The one process whose <proc>/PID/comm is "headroomd".
Result<pid_t> find_headroomd(const std::string& proc = "/proc");

// Writes `content` to `path` by a temporary file in its directory renamed
// over it, keeping the file's mode (and owner, when allowed).
Result<void> replace_file(const std::string& path, const std::string& content);

// Waits until <orca_dir>/endpoint.<name>.orca carries named_metrics
// headroom.slo.target_ms within 0.1 % of `target`.
Result<void> wait_for_target(const std::string& orca_dir, const std::string& name, std::chrono::nanoseconds target,
                             std::chrono::milliseconds timeout);

// headroomd's configuration replaced by other files while this object lives;
// restore() (or the destructor, unless keep()) puts the original back and
// tells headroomd again.
class CanaryConfig {
 public:
  // Reads the original of `path` (the error names it); `pid` is headroomd's.
  static Result<CanaryConfig> open(const std::string& path, pid_t pid);
  CanaryConfig(CanaryConfig&& other) noexcept;
  CanaryConfig& operator=(CanaryConfig&&) = delete;
  ~CanaryConfig();

  // Writes `content` and sends SIGHUP.
  Result<void> apply(const std::string& content);
  // The original back, and SIGHUP; nothing when nothing was applied.
  Result<void> restore();
  void keep() { applied_ = false; }
  const std::string& path() const { return path_; }

 private:
  CanaryConfig(std::string path, std::string original, pid_t pid)
      : path_(std::move(path)), original_(std::move(original)), pid_(pid) {}
  std::string path_, original_;
  pid_t pid_ = 0;
  bool applied_ = false;
};

}  // namespace headroom::ctl::tune
