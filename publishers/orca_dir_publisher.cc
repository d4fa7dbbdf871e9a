// SPDX-License-Identifier: Apache-2.0
#include "publishers/orca_dir_publisher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>

#include "agent/report_builder.h"

namespace headroom::publishers {

Result<void> make_directories(const std::string& path, mode_t mode) {
  if (path.empty()) return logic_error("empty directory path");
  std::string partial;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty() || partial == "/") continue;
    if (::mkdir(partial.c_str(), mode) != 0 && errno != EEXIST)
      return system_error(errno, "cannot create directory " + partial);
    struct stat st{};
    if (::stat(partial.c_str(), &st) != 0) return system_error(errno, "cannot create directory " + partial);
    if (!S_ISDIR(st.st_mode)) return logic_error("cannot create directory " + path + ": " + partial + " is not a directory");
  }
  return {};
}

Result<OrcaDirPublisher> OrcaDirPublisher::open(const std::string& dir, orca::WriterOptions options) {
  if (auto made = make_directories(dir); !made) return made.error();
  // access(2) also reports a read-only mount (EROFS) to root.
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return system_error(errno, "cannot write report files into " + dir);
  auto writer = orca::ReportFileWriter::open(dir, options);
  if (!writer) return writer.error();
  writer->remove_stale_temporaries();
  return OrcaDirPublisher(std::move(writer.value()), options);
}

Result<void> OrcaDirPublisher::publish(std::string_view scope, const orca::Report& report) {
  name_.assign(scope);
  name_ += orca::kReportSuffix;
  auto r = writer_.write(name_, report);
  if (!r && r.error().code == ENOENT) {
    // Someone removed the directory: make it again and retry once.
    if (auto made = make_directories(writer_.dir()); !made) return made.error();
    r = writer_.write(name_, report);
  }
  return r;
}

Result<void> OrcaDirPublisher::remove(std::string_view scope) {
  const std::string path = writer_.dir() + "/" + std::string(scope) + std::string(orca::kReportSuffix);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return system_error(errno, "cannot remove " + path);
  return {};
}

namespace {
std::string endpoint_scope(const std::string& name) { return "endpoint." + name; }
}  // namespace

OrcaReportsPublisher::OrcaReportsPublisher(OrcaDirPublisher files, const agent::Config& config)
    : files_(std::move(files)) {
  for (const auto& e : config.endpoints) {
    endpoint_names_.push_back(e.name);
    endpoint_scopes_.push_back(endpoint_scope(e.name));
  }
  endpoint_reports_.resize(config.endpoints.size());
}

std::variant<Publishers, BuildError> OrcaReportsPublisher::build(const agent::Config& config) {
  auto files = OrcaDirPublisher::open(config.orca_dir, orca::WriterOptions{0644, config.fsync});
  if (!files) return BuildError{false, "agent.orca_dir: " + files.error().message};
  Publishers out;
  out.push_back(std::unique_ptr<Publisher>(new OrcaReportsPublisher(std::move(files.value()), config)));
  return out;
}

Result<void> OrcaReportsPublisher::publish(const Tick& tick) {
  agent::build_node_report_into(tick.values, tick.node, tick.meta, node_report_);
  if (auto r = files_.publish(orca::kNodeScope, node_report_); !r) {
    node_failing_.fail(spdlog::level::err, "cannot publish {}/node.orca: {}; the previous report stays in place",
                       files_.dir(), r.error().message);
    return r;
  }
  node_failing_.ok("publishing {}/node.orca again", files_.dir());

  // Each endpoint's failure never holds up the others.
  std::string first_error;
  bool failing = false;
  const std::size_t n = std::min(tick.endpoints.size(), endpoint_reports_.size());
  const auto cpu = agent::node_cpu(tick.values);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& e = tick.endpoints[i];
    agent::build_endpoint_report_into(*e.config, e.signals, tick.meta, endpoint_reports_[i], cpu);
    if (auto r = files_.publish(endpoint_scopes_[i], endpoint_reports_[i]); !r) {
      if (!failing) first_error = r.error().message;
      failing = true;
    }
  }
  if (failing)
    endpoints_failing_.fail(spdlog::level::err,
                            "cannot publish endpoint reports into {}: {}; the previous reports stay in place",
                            files_.dir(), first_error);
  else
    endpoints_failing_.ok("publishing endpoint reports again");
  return {};
}

void OrcaReportsPublisher::take_over(const agent::Config& previous) {
  for (const auto& old : previous.endpoints) {
    if (std::find(endpoint_names_.begin(), endpoint_names_.end(), old.name) != endpoint_names_.end()) continue;
    if (auto r = files_.remove(endpoint_scope(old.name)); !r)
      spdlog::warn("endpoint {} removed from the configuration, but its report stays: {}", old.name,
                   r.error().message);
    else
      spdlog::info("endpoint {} removed from the configuration; removed its report", old.name);
  }
}

}  // namespace headroom::publishers
