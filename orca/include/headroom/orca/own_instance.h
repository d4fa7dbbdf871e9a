// SPDX-License-Identifier: Apache-2.0
// "My instance of endpoint E": an endpoint's servers are grouped into
// instances, one per network namespace (a pod, or the host), and each has its
// own report, endpoint.<E>@<instance>.orca, that names its namespace in
// headroom.instance.netns (docs/orca-files.md, "Instances"). A server, or a
// library inside it, finds its own report by its own network namespace: the
// inode that readlink /proc/self/ns/net shows as net:[inode]. It need not know
// its pod's UID or how the agent names instances.
//
//   auto scope = headroom::orca::own_instance_scope("/run/orca", "checkout");
//   // *scope == "endpoint.checkout@host", or an error saying what was looked
//   // for and which instance files exist
//
// OwnInstanceReader follows the directory instead, and picks the instance up
// when its file appears after the reader started, or another one when the
// file it followed is removed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "headroom/orca/report.h"
#include "headroom/orca/report_reader.h"
#include "headroom/orca/result.h"

namespace headroom::orca {

struct OwnInstanceOptions {
  // <proc_root>/self/ns/net names this process's network namespace.
  std::string proc_root = "/proc";
  // max_bytes and owner apply to the instance files read; OwnInstanceReader
  // also takes its staleness from here.
  ReaderOptions reader;
};

// An [[endpoint]] name as headroom accepts it: 1 to 64 of A-Z a-z 0-9 _ . -,
// not "." or "..".
bool is_endpoint_name(std::string_view name);

// "net:[4026532000]" -> 4026532000; nullopt for anything else.
std::optional<uint64_t> parse_netns_link(std::string_view link);

// The inode of this process's network namespace, from
// readlink(<proc_root>/self/ns/net). The error names the link.
Result<uint64_t> own_netns(const std::string& proc_root = "/proc");

// The instance part of one of `endpoint`'s instance scopes:
// ("endpoint.api@pod-1", "api") -> "pod-1". Empty when the scope is not an
// instance of that endpoint (the aggregate "endpoint.api", another
// endpoint's, "node").
std::string_view instance_of(std::string_view scope, std::string_view endpoint);

// headroom.instance.netns of a report; nullopt when absent or not an inode
// number (a whole number in 1..2^53).
std::optional<uint64_t> instance_netns(const Report& report);

// Which of one endpoint's instance scopes is the one in namespace `netns`:
// among those whose file is there (not removed) and whose last valid report
// names `netns`, a currently valid file before a rejected one, a serving
// instance before a gone one (a namespace inode may be reused by a new
// namespace after a pod ended), then the newest report. nullopt: none.
std::optional<std::size_t> pick_instance(const std::vector<ScopeState>& candidates, uint64_t netns);

// The error when no candidate is in `netns` (code ENOENT): the namespace
// looked for, every instance file of the endpoint with the namespace it
// names or why it was rejected, and what that means.
Error no_instance_error(std::string_view dir, std::string_view endpoint, uint64_t netns,
                        const std::vector<ScopeState>& candidates);

// Reads `dir` once: the scope of `endpoint`'s instance in this process's
// network namespace, e.g. "endpoint.checkout@host" (its file is
// <dir>/<scope>.orca). Errors: the endpoint name is not one, the namespace
// link cannot be read, the directory cannot be listed (not mounted?), or no
// instance file names this namespace (no_instance_error).
Result<std::string> own_instance_scope(const std::string& dir, std::string_view endpoint,
                                       const OwnInstanceOptions& options = {});

// The same among the scopes a ReportDirectory follows, without reading a
// file: a reader that already follows the directory re-resolves with this
// after each process_events().
Result<std::string> own_instance_scope(const ReportDirectory& reader, std::string_view endpoint, uint64_t netns,
                                       int64_t now_unix_ms);

// Follows `endpoint`'s instance in this process's network namespace. Not
// thread-safe, like ReportDirectory. The namespace is read once, at open.
class OwnInstanceReader {
 public:
  // Fails when the endpoint name is not one, the namespace link cannot be
  // read, or the directory cannot be watched (ReportDirectory::open). No
  // instance file is needed yet.
  static Result<OwnInstanceReader> open(std::string dir, std::string endpoint, OwnInstanceOptions options = {});

  // Poll for POLLIN, then process_events() (ReportDirectory::fd()).
  int fd() const { return reader_.fd(); }
  // Applies pending changes and resolves the instance again. True when the
  // followed scope changed (appeared, was replaced, went) or its report did.
  bool process_events();
  // Polls up to timeout_ms (-1: forever) until process_events() is true.
  bool wait(int timeout_ms);

  // The scope followed, "endpoint.<name>@<instance>"; "" while no instance
  // file names this namespace.
  const std::string& scope() const { return scope_; }
  // Its state, staleness at `now_unix_ms` (a gone instance's report is stale
  // with "the instance stopped serving"); while no instance is found, the
  // error of no_instance_error.
  Result<ScopeState> get(int64_t now_unix_ms) const;
  Result<ScopeState> get() const { return get(unix_now_ms()); }

  uint64_t netns() const { return netns_; }
  const std::string& endpoint() const { return endpoint_; }
  const ReportDirectory& directory() const { return reader_; }

 private:
  OwnInstanceReader(ReportDirectory reader, std::string endpoint, uint64_t netns);
  void resolve();
  ReportDirectory reader_;
  std::string endpoint_;
  uint64_t netns_ = 0;
  std::string scope_;
};

}  // namespace headroom::orca
