// SPDX-License-Identifier: Apache-2.0
// --config: the shedder's thresholds from a headroom.toml's [[endpoint.shed]]
// entries (headroom/orca/shedder_config.h), followed as the file changes.
// The reader thread (server.cc) calls poll() at each wake; a change of the
// file's identity (device, inode, size, modification time in ns) makes it
// read the file again: a good file replaces the thresholds, a bad one is
// reported once and the last good thresholds stay.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include <headroom/orca/result.h>
#include <headroom/orca/shedder.h>

namespace shedding_server {

namespace orca = headroom::orca;

// What tells one version of a file from the next; `error` when stat failed.
struct FileStamp {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  int error = 0;

  bool operator==(const FileStamp&) const = default;
};
FileStamp stamp_of(const std::string& path);

// "utilization.latency.slo_target 0.28..0.64..1, cpu_utilization 0.6..0.8..1.5"
std::string describe_thresholds(const orca::ShedderConfig& config);
// [{"signal":"cpu_utilization","shed_start":0.6,"critical_start":0.8,"all_shed":1.5}, ...]
std::string thresholds_json(const orca::ShedderConfig& config);

class ShedConfigWatch {
 public:
  // Reads the file once; its error (file:line: key: message) when it is bad.
  // `stale` is the stale policy the thresholds come with (the file has none).
  static headroom::Result<ShedConfigWatch> open(std::string path, std::string endpoint, orca::StalePolicy stale);

  const orca::ShedderConfig& config() const { return config_; }
  // The new thresholds when the file changed and is good; nullopt otherwise.
  // Says on stderr what it did: one line per change.
  std::optional<orca::ShedderConfig> poll();

 private:
  ShedConfigWatch(std::string path, std::string endpoint, orca::StalePolicy stale)
      : path_(std::move(path)), endpoint_(std::move(endpoint)), stale_(stale) {}
  headroom::Result<orca::ShedderConfig> read() const;

  std::string path_, endpoint_;
  orca::StalePolicy stale_;
  FileStamp stamp_;
  orca::ShedderConfig config_;
};

}  // namespace shedding_server
