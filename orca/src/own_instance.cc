// SPDX-License-Identifier: Apache-2.0
#include "headroom/orca/own_instance.h"

#include <dirent.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <tuple>

#include "headroom/orca/names.h"

namespace headroom::orca {
namespace {

constexpr std::size_t kMaxEndpointName = 64;
constexpr double kMaxInode = 9'007'199'254'740'992.0;  // 2^53: every inode below is exact as a double

std::string netns_text(uint64_t inode) { return "net:[" + std::to_string(inode) + "]"; }

bool is_gone(const Report& report) {
  auto md = metadata_of(report);
  return md && md->instance_gone;
}

int64_t timestamp_of(const Report& report) {
  auto md = metadata_of(report);
  return md ? md->timestamp_ms : 0;
}

// One instance file, as read from the directory: its report or why not.
ScopeState read_candidate(const std::string& dir, std::string scope, const ReaderOptions& options) {
  ScopeState st;
  const std::string path = dir + "/" + report_file_name(scope);
  st.scope = std::move(scope);
  auto r = read_report_file(path, options.max_bytes, options.owner);
  if (!r) {
    st.error = r.error().message;
  } else if (auto md = metadata_of(*r); !md) {
    st.error = path + ": not a headroom report: " + md.error().message;
  } else {
    st.report = std::move(*r);
  }
  return st;
}

}  // namespace

bool is_endpoint_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxEndpointName || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

std::optional<uint64_t> parse_netns_link(std::string_view link) {
  constexpr std::string_view kPrefix = "net:[";
  if (!link.starts_with(kPrefix) || !link.ends_with(']')) return std::nullopt;
  const std::string_view digits = link.substr(kPrefix.size(), link.size() - kPrefix.size() - 1);
  if (digits.empty() || digits.size() > 19) return std::nullopt;  // 19 digits always fit 64 bits
  uint64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

Result<uint64_t> own_netns(const std::string& proc_root) {
  const std::string link = proc_root + "/self/ns/net";
  char buf[64];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n < 0) return system_error(errno, "readlink " + link + " (this process's network namespace)");
  const std::string_view target(buf, static_cast<std::size_t>(n));
  auto inode = parse_netns_link(target);
  if (!inode)
    return logic_error(link + " points to \"" + std::string(target) + "\", not net:[<inode>]: is " + proc_root +
                       " a procfs?");
  return *inode;
}

std::string_view instance_of(std::string_view scope, std::string_view endpoint) {
  const std::string prefix = instance_scope(endpoint, "");
  if (!scope.starts_with(prefix)) return {};
  return scope.substr(prefix.size());
}

std::optional<uint64_t> instance_netns(const Report& report) {
  const auto& nm = report.named_metrics();
  auto it = nm.find(std::string(kMetricInstanceNetns));
  if (it == nm.end()) return std::nullopt;
  const double v = it->second;
  if (!(v >= 1.0 && v <= kMaxInode) || v != std::trunc(v)) return std::nullopt;
  return static_cast<uint64_t>(v);
}

std::optional<std::size_t> pick_instance(const std::vector<ScopeState>& candidates, uint64_t netns) {
  std::optional<std::size_t> best;
  std::tuple<bool, bool, int64_t> best_rank{};
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const ScopeState& c = candidates[i];
    if (c.removed || !c.report || instance_netns(*c.report) != netns) continue;
    const std::tuple<bool, bool, int64_t> rank{c.error.empty(), !is_gone(*c.report), timestamp_of(*c.report)};
    if (!best || rank > best_rank) {
      best = i;
      best_rank = rank;
    }
  }
  return best;
}

Error no_instance_error(std::string_view dir, std::string_view endpoint, uint64_t netns,
                        const std::vector<ScopeState>& candidates) {
  const std::string ep(endpoint);
  std::string message = "no report of an instance of endpoint " + ep + " in this process's network namespace, " +
                        netns_text(netns) + ", in " + std::string(dir) + ": ";
  std::string listed;
  for (const auto& c : candidates) {
    if (c.removed) continue;
    if (!listed.empty()) listed += ", ";
    listed += report_file_name(c.scope);
    if (c.report && c.error.empty()) {
      auto ns = instance_netns(*c.report);
      listed += ns ? " (" + netns_text(*ns) + ")" : " (names no " + std::string(kMetricInstanceNetns) + ")";
    } else {
      listed += " (rejected: " + (c.error.empty() ? std::string("no valid report") : c.error) + ")";
    }
  }
  if (listed.empty())
    message += "there is no instance file (" + instance_scope(endpoint, "*") + std::string(kReportSuffix) + ") at all";
  else
    message += "the instance files there are " + listed;
  message += ". Either the agent has not seen a server of " + ep +
             " listening in this namespace yet (it writes the file within an interval of the first), or " +
             std::string(dir) + " is not the agent's report directory (in a container, mount the host's " +
             "/run/orca there)";
  return Error{ENOENT, std::move(message)};
}

Result<std::string> own_instance_scope(const std::string& dir, std::string_view endpoint,
                                       const OwnInstanceOptions& options) {
  if (!is_endpoint_name(endpoint))
    return logic_error("endpoint \"" + std::string(endpoint) +
                       "\" is not an endpoint name (1 to 64 of A-Z a-z 0-9 _ . -, as in [[endpoint]] name)");
  auto netns = own_netns(options.proc_root);
  if (!netns) return netns.error();
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return system_error(errno, "list report directory " + dir +
                                   " (in a container, is the host's /run/orca mounted there?)");
  std::vector<std::string> scopes;
  while (const dirent* de = ::readdir(d)) {
    const std::string_view name = de->d_name;
    if (name.empty() || name.front() == '.' || !name.ends_with(kReportSuffix)) continue;
    std::string scope(name.substr(0, name.size() - kReportSuffix.size()));
    if (!instance_of(scope, endpoint).empty()) scopes.push_back(std::move(scope));
  }
  ::closedir(d);
  std::sort(scopes.begin(), scopes.end());
  std::vector<ScopeState> candidates;
  candidates.reserve(scopes.size());
  for (auto& scope : scopes) candidates.push_back(read_candidate(dir, std::move(scope), options.reader));
  auto picked = pick_instance(candidates, *netns);
  if (!picked) return no_instance_error(dir, endpoint, *netns, candidates);
  return candidates[*picked].scope;
}

Result<std::string> own_instance_scope(const ReportDirectory& reader, std::string_view endpoint, uint64_t netns,
                                       int64_t now_unix_ms) {
  std::vector<ScopeState> candidates;
  for (const auto& scope : reader.scopes()) {
    if (instance_of(scope, endpoint).empty()) continue;
    if (auto st = reader.get(scope, now_unix_ms)) candidates.push_back(std::move(*st));
  }
  auto picked = pick_instance(candidates, netns);
  if (!picked) return no_instance_error(reader.dir(), endpoint, netns, candidates);
  return candidates[*picked].scope;
}

// ---------------------------------------------------------------- the reader

Result<OwnInstanceReader> OwnInstanceReader::open(std::string dir, std::string endpoint,
                                                  OwnInstanceOptions options) {
  if (!is_endpoint_name(endpoint))
    return logic_error("endpoint \"" + endpoint +
                       "\" is not an endpoint name (1 to 64 of A-Z a-z 0-9 _ . -, as in [[endpoint]] name)");
  auto netns = own_netns(options.proc_root);
  if (!netns) return netns.error();
  auto reader = ReportDirectory::open(std::move(dir), options.reader);
  if (!reader) return reader.error();
  OwnInstanceReader own(std::move(*reader), std::move(endpoint), *netns);
  own.resolve();
  return own;
}

OwnInstanceReader::OwnInstanceReader(ReportDirectory reader, std::string endpoint, uint64_t netns)
    : reader_(std::move(reader)), endpoint_(std::move(endpoint)), netns_(netns) {}

void OwnInstanceReader::resolve() {
  auto scope = own_instance_scope(reader_, endpoint_, netns_, unix_now_ms());
  scope_ = scope ? std::move(*scope) : std::string();
}

bool OwnInstanceReader::process_events() {
  const auto changed = reader_.process_events();
  const std::string before = scope_;
  resolve();
  if (scope_ != before) return true;
  return !scope_.empty() && std::binary_search(changed.begin(), changed.end(), scope_);
}

bool OwnInstanceReader::wait(int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      wait_ms = static_cast<int>(std::max<int64_t>(left, 0));
    }
    pollfd p{reader_.fd(), POLLIN, 0};
    const int n = ::poll(&p, 1, wait_ms);
    if (n < 0 && errno != EINTR) return false;
    if (n > 0 && process_events()) return true;
    if (timeout_ms >= 0 && Clock::now() >= deadline) return false;
  }
}

Result<ScopeState> OwnInstanceReader::get(int64_t now_unix_ms) const {
  if (!scope_.empty())
    if (auto st = reader_.get(scope_, now_unix_ms)) return std::move(*st);
  // scope_ is resolved from the reader's state, which changes only in
  // process_events(): no instance matches.
  auto scope = own_instance_scope(reader_, endpoint_, netns_, now_unix_ms);
  if (!scope) return scope.error();
  return no_instance_error(reader_.dir(), endpoint_, netns_, {});
}

}  // namespace headroom::orca
