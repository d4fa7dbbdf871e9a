// Publishes one report file per scope into the ORCA directory (default /run/orca).
#pragma once

#include <string>
#include <string_view>

#include "headroom/orca/report.h"
#include "headroom/orca/report_writer.h"
#include "headroom/orca/result.h"

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

// mkdir -p with the given mode for each created component.
Result<void> make_directories(const std::string& path, mode_t mode = 0755);

}  // namespace headroom::publishers
