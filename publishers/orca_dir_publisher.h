// SPDX-License-Identifier: Apache-2.0
// Publishes one report file per scope into the ORCA directory (default
// /run/orca): OrcaDirPublisher writes the files, OrcaReportsPublisher writes
// each tick's reports (node.orca, endpoint.<name>.orca) as the pipeline
// built them.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "publishers/failure_latch.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_writer.h"
#include "headroom/orca/result.h"
#include "publishers/failure_latch.h"
#include "publishers/publisher.h"

namespace headroom::publishers {

// Keeps a second agent out of an ORCA directory: flock(LOCK_EX|LOCK_NB) on
// "<dir>/.headroomd.lock" (a hidden name: readers list "*.orca" only), which
// also holds the holder's pid. A process takes a directory's lock once: a
// reload's new publisher for the same directory shares the running one's
// (the process-wide table of held locks finds it by the lock file), so the
// lock is held without a gap for as long as either exists.
class DirectoryLock {
 public:
  static constexpr std::string_view kFileName = ".headroomd.lock";

  // Takes (or shares) the lock of the directory `dirfd` refers to; `dir` is
  // its path, for messages. `fresh` says whether this call took it. Fails
  // naming the lock file and the holder's pid when another process holds it.
  static Result<std::shared_ptr<DirectoryLock>> acquire(int dirfd, const std::string& dir, bool* fresh = nullptr);
  // The lock of that directory if this process holds it already (a reload),
  // else null. Creates and takes nothing.
  static std::shared_ptr<DirectoryLock> held(int dirfd);

  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  ~DirectoryLock();

  const std::string& path() const { return path_; }
  // Whether `st` is the status of the file this lock holds.
  bool is(const struct stat& st) const { return st.st_dev == dev_ && st.st_ino == ino_; }

 private:
  DirectoryLock(int fd, dev_t dev, ino_t ino, std::string path) : fd_(fd), dev_(dev), ino_(ino), path_(std::move(path)) {}
  int fd_;
  dev_t dev_;
  ino_t ino_;
  std::string path_;
};

// What is unsafe about a directory with this status for a process whose
// effective uid is `euid`: writable by its group or by everyone (unless the
// sticky bit is set on a directory `euid` owns), or owned by a user other
// than `euid` and root. nullopt when only `euid` (and root) can write into it.
std::optional<std::string> unsafe_directory(const struct stat& st, uid_t euid);

struct OrcaDirOptions {
  orca::WriterOptions writer{};
  bool refuse_unsafe = true;  // agent.unsafe_orca_dir: refuse (true) or warn
};

class OrcaDirPublisher {
 public:
  // Creates the directory (and its parents, mode 0755) when missing, checks that
  // this process may write into it and that nobody else can (unsafe_directory:
  // refused, or a warning), takes its lock (DirectoryLock), and, when it
  // took the lock afresh, removes the temporary files a crashed writer of
  // ours left behind (".<scope>.orca.<pid>.tmp"; nobody else's). The error
  // says which of these failed and why. A directory this process already
  // holds the lock of (a reload) is accepted while it cannot be written
  // into: publishing fails, and recovers, as the running publisher's does.
  static Result<OrcaDirPublisher> open(const std::string& dir, OrcaDirOptions options);
  static Result<OrcaDirPublisher> open(const std::string& dir, orca::WriterOptions options = {}) {
    return open(dir, OrcaDirOptions{options, true});
  }

  // Atomically replaces "<scope>.orca" with `bytes` (a serialized report).
  // Recreates the directory if it was removed while running, and takes the
  // lock of a directory that replaced ours before writing into it. On
  // failure the previous file is left as it was.
  Result<void> publish_bytes(std::string_view scope, std::string_view bytes);
  Result<void> publish(std::string_view scope, const orca::Report& report);

  // Removes "<scope>.orca" (a scope the configuration no longer has). A file
  // that is already gone is not an error.
  Result<void> remove(std::string_view scope);

  // Whether a new directory replaced the one written into (removed and made
  // again, renamed away) since the last call; clears it.
  bool take_replaced() { return std::exchange(state_->replaced, false); }

  const std::string& dir() const { return writer_.dir(); }
  const std::string& lock_path() const { return state_->lock->path(); }

 private:
  // What the writer's directory hook shares with the publisher: a moved
  // publisher keeps the same state.
  struct State {
    std::string dir;
    bool refuse_unsafe = true;
    std::shared_ptr<DirectoryLock> lock;
    bool replaced = false;
  };
  static void watch_new_directories(orca::ReportFileWriter& writer, const std::shared_ptr<State>& state);
  // Every kLockCheckEvery publishes: the lock file is still the one held (not
  // removed or replaced, which would let a second agent in); else takes the
  // lock again before writing, or fails.
  Result<void> check_lock();
  OrcaDirPublisher(orca::ReportFileWriter writer, std::shared_ptr<State> state)
      : writer_(std::move(writer)), state_(std::move(state)) {}
  orca::ReportFileWriter writer_;
  std::shared_ptr<State> state_;
  std::string name_;  // reused file-name buffer
  unsigned publishes_ = 0;
  bool check_lock_ = false;  // look at the lock file before the next publish
};

struct OrcaReportsOptions {
  std::string dir;  // agent.orca_dir
  OrcaDirOptions files;
  // The scopes this configuration publishes: a reload's new publisher
  // removes the reports of those only the previous one had.
  std::vector<std::string> scopes;
};

// Every report of a tick as a file: node.orca first, then the others only
// once it was written. A failure is logged once per change, for node.orca
// and for the other reports as a whole.
class OrcaReportsPublisher final : public Publisher {
 public:
  static Result<Publishers> build(const OrcaReportsOptions& options);

  Result<void> publish(const Tick& tick) override;
  void stop(const Tick& final) override { (void)publish(final); }
  // Removes the reports the previous configuration had and this one has
  // not: they would only go stale. Instance reports are left to the next
  // tick, which removes those it does not publish.
  void take_over(const std::vector<std::string>& previous_scopes) override;

  std::string_view name() const override { return "orca_dir"; }
  const std::string& target() const override { return files_.dir(); }
  bool essential() const override { return true; }

 private:
  OrcaReportsPublisher(OrcaDirPublisher files, std::vector<std::string> scopes)
      : files_(std::move(files)), scopes_(std::move(scopes)) {}
  // The instance reports (endpoint.<name>@<instance>.orca) of the previous
  // tick that this one no longer has: their instances were forgotten.
  void remove_forgotten_instances(const Tick& tick);

  OrcaDirPublisher files_;
  std::vector<std::string> scopes_;
  // Instance reports written at the previous tick; at start, those a
  // previous run left in the directory.
  std::vector<std::string> instances_;
  FailureLatch node_failing_, others_failing_;
};

// mkdir -p with the given mode for each created component.
Result<void> make_directories(const std::string& path, mode_t mode = 0755);

}  // namespace headroom::publishers
