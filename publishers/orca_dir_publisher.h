// SPDX-License-Identifier: Apache-2.0
// Publishes one report file per scope into the ORCA directory (default
// /run/orca): OrcaDirPublisher writes the files, OrcaReportsPublisher makes
// node.orca and endpoint.<name>.orca of each tick.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "agent/state_log.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_writer.h"
#include "headroom/orca/result.h"
#include "publishers/publisher.h"

namespace headroom::publishers {

class OrcaDirPublisher {
 public:
  // Creates the directory (and its parents, mode 0755) when missing, checks that
  // this process may write into it, and removes temporary files a crashed
  // writer left behind. The error says which of these failed and why.
  static Result<OrcaDirPublisher> open(const std::string& dir, orca::WriterOptions options = {});

  // Atomically replaces "<scope>.orca". Recreates the directory if it was
  // removed while running. On failure the previous file is left as it was.
  Result<void> publish(std::string_view scope, const orca::Report& report);

  // Removes "<scope>.orca" (a scope the configuration no longer has). A file
  // that is already gone is not an error.
  Result<void> remove(std::string_view scope);

  const std::string& dir() const { return writer_.dir(); }

 private:
  explicit OrcaDirPublisher(orca::ReportFileWriter writer, orca::WriterOptions options)
      : writer_(std::move(writer)), options_(options) {}
  orca::ReportFileWriter writer_;
  orca::WriterOptions options_;
  std::string name_;  // reused file-name buffer
};

// node.orca and one endpoint.<name>.orca per [[endpoint]], built from the
// tick by agent/report_builder. A failure is logged once per change, for
// node.orca and for the endpoint reports as a whole; endpoint reports are
// written only after node.orca was. The reports are kept and refilled every
// tick.
class OrcaReportsPublisher final : public Publisher {
 public:
  static std::variant<Publishers, BuildError> build(const agent::Config& config);

  Result<void> publish(const Tick& tick) override;
  void stop(const Tick& final) override { (void)publish(final); }
  // Removes the reports of endpoints the previous configuration had and this
  // one has not: they would only go stale.
  void take_over(const agent::Config& previous) override;

  std::string_view name() const override { return "orca_dir"; }
  const std::string& target() const override { return files_.dir(); }
  bool essential() const override { return true; }

 private:
  OrcaReportsPublisher(OrcaDirPublisher files, const agent::Config& config);

  OrcaDirPublisher files_;
  std::vector<std::string> endpoint_names_;
  std::vector<std::string> endpoint_scopes_;  // "endpoint.<name>"
  orca::Report node_report_;
  std::vector<orca::Report> endpoint_reports_;
  agent::FailureLatch node_failing_, endpoints_failing_;
};

// mkdir -p with the given mode for each created component.
Result<void> make_directories(const std::string& path, mode_t mode = 0755);

}  // namespace headroom::publishers
