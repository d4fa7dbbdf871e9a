// SPDX-License-Identifier: Apache-2.0
// The consumer side of docs/orca-files.md: follows a report directory with
// inotify and keeps the newest valid report of every scope in memory, so a
// proxy or library asks "how loaded is X, and is that still true?" without
// touching the file system on its hot path.
//
// Fail open by default: a stale scope means "no data". The reader only says
// whether a report is stale and why; what to do then is the caller's choice,
// and the safe one is to act as if no report existed (shed nothing, weigh
// the endpoint as unknown).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "headroom/orca/clock.h"  // unix_now_ms
#include "headroom/orca/report.h"
#include "headroom/orca/result.h"

namespace headroom::orca {

struct ReaderOptions {
  double stale_intervals = 3.0;         // stale when older than this many sampling intervals...
  int64_t min_stale_ms = 1000;          // ...but never sooner than this (short intervals would flap)
  std::size_t max_bytes = kMaxReportBytes;  // larger files are rejected without being parsed
  // Trust only files this user owns and nobody else may write (the agent's
  // user, e.g. the uid of "headroom"): any other file under a report name is
  // rejected like a broken one, so the scope keeps its last trusted report
  // and reads as stale. Unset: any valid file is accepted.
  std::optional<uid_t> owner = std::nullopt;
};

struct ScopeState {
  std::string scope;             // "node", "endpoint.<name>"
  std::optional<Report> report;  // the newest valid report seen for this scope, if any
  // Why the file now on disk was rejected (it names the file), empty when the
  // newest file was valid. While it is set, `report` is the last valid one and
  // the scope is stale: the agent never publishes a broken file, so the
  // current load is unknown.
  std::string error;
  bool removed = false;  // the file (or the whole directory) went away: stale
  Staleness staleness;   // computed when the state is handed out
};

// Follows one report directory. Not thread-safe: use it from one thread (the
// callback runs on that thread, inside process_events()). A moved-from reader
// may only be destroyed or assigned to.
//
// A file is accepted when it is a regular file (symbolic links are followed)
// of at most max_bytes that parses as an OrcaLoadReport, passes
// validate_report() and carries the headroom metadata (timestamp, seq,
// interval), and, with ReaderOptions::owner, that user owns and nobody else
// may write. Anything else is rejected with a reason and never blocks or
// crashes the reader (FIFOs are opened non-blocking; devices and directories
// are refused before any read).
class ReportDirectory {
 public:
  // Starts watching `dir`. The directory need not exist yet: the nearest
  // existing ancestor is watched until it appears, and the same happens when
  // it is deleted or renamed later, so a recreated directory is followed
  // again. Fails when inotify is unavailable, or when `dir` exists but cannot
  // be watched (permissions); the error names the directory.
  static Result<ReportDirectory> open(std::string dir, ReaderOptions options = {});

  ReportDirectory(ReportDirectory&&) noexcept;
  ReportDirectory& operator=(ReportDirectory&&) noexcept;
  ReportDirectory(const ReportDirectory&) = delete;
  ReportDirectory& operator=(const ReportDirectory&) = delete;
  ~ReportDirectory();

  // A non-blocking inotify descriptor: poll it for POLLIN, then call
  // process_events(). Owned by the reader; do not read or close it.
  int fd() const;

  // Drains pending events without blocking and re-reads the report files they
  // concern (several events for one file cost one read). Returns the scopes
  // whose state changed (sorted) and calls the callback once for each.
  std::vector<std::string> process_events();

  // Polls fd() up to timeout_ms (-1: forever) until some scope changed, then
  // processes. True when a scope changed, false on timeout.
  bool wait(int timeout_ms);

  // The state of one scope with staleness computed for `now_unix_ms`, or
  // nullopt when the scope was never seen (or its file was removed before it
  // ever held a valid report).
  std::optional<ScopeState> get(std::string_view scope, int64_t now_unix_ms) const;
  // Same, at the current wall-clock time.
  std::optional<ScopeState> get(std::string_view scope) const;

  // Every known scope, sorted. A scope stays known (stale, `removed`) after its
  // file is deleted, as long as it once held a valid report.
  std::vector<std::string> scopes() const;

  // Called from process_events() for each changed scope, with staleness at the
  // current wall-clock time. It may call get() and scopes(), not
  // process_events() or wait().
  void set_callback(std::function<void(const ScopeState&)> callback);

  const std::string& dir() const;
  // True while the directory itself is watched (false while it is missing).
  bool watching() const;

 private:
  class Impl;
  explicit ReportDirectory(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace headroom::orca
