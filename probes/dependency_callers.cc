// SPDX-License-Identifier: Apache-2.0
#include "probes/dependency_callers.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <utility>

namespace headroom::probes {

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t from = 0;
  for (;;) {
    const auto at = s.find(sep, from);
    out.push_back(s.substr(from, at == std::string_view::npos ? std::string_view::npos : at - from));
    if (at == std::string_view::npos) return out;
    from = at + 1;
  }
}

// "/a//b/" -> "/a/b"; "" -> "/".
std::string clean_path(std::string_view p) {
  std::string out;
  for (const auto part : split(p, '/'))
    if (!part.empty()) out.append("/").append(part);
  return out.empty() ? "/" : out;
}

bool under(std::string_view path, std::string_view top) {
  if (top == "/") return true;
  return path.starts_with(top) && (path.size() == top.size() || path[top.size()] == '/');
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

Result<CallerCgroup> parse_caller_cgroup(std::string_view dir, std::string_view mount, bool unified_mount,
                                         std::string_view hierarchy_name) {
  CallerCgroup c;
  const std::string d = clean_path(dir), m = clean_path(mount);
  for (const auto part : split(d, '/'))
    if (part == "..")
      return Error{EINVAL, "caller_cgroup \"" + std::string(dir) + "\" must not contain \"..\""};
  if (!under(d, m) || m == "/") {  // relative to the cgroup root
    c.any_hierarchy = true;
    c.path = d;
    return c;
  }
  const std::string rest = d.substr(m.size());  // "/<hierarchy>/<path>" (v1) or "/<path>" (v2)
  if (unified_mount) {
    c.unified = true;
    c.path = clean_path(rest);
    return c;
  }
  const auto parts = split(rest.empty() ? std::string_view() : std::string_view(rest).substr(1), '/');
  if (parts[0].empty())
    return Error{EINVAL, "caller_cgroup \"" + std::string(dir) + "\" names the cgroup mount " + m +
                             ", not a hierarchy in it: give a cgroup directory such as " + m + "/pids/<group>"};
  const std::string_view name = hierarchy_name.empty() ? parts[0] : hierarchy_name;
  c.path = clean_path(std::string_view(rest).substr(1 + parts[0].size()));
  if (name == "unified") {
    c.unified = true;
  } else if (name == "systemd") {
    c.controllers.emplace_back("name=systemd");
  } else {
    for (const auto ctl : split(name, ',')) c.controllers.emplace_back(ctl);
  }
  return c;
}

bool in_caller_cgroup(std::string_view proc_cgroup, const CallerCgroup& want) {
  for (const auto line : split(proc_cgroup, '\n')) {
    // "<id>:<controllers>:<path>"; v2: "0::<path>"
    const auto first = line.find(':');
    const auto second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const auto ctls = line.substr(first + 1, second - first - 1);
    const auto path = line.substr(second + 1);
    bool hierarchy = want.any_hierarchy;
    if (!hierarchy && want.unified) hierarchy = line.substr(0, first) == "0" && ctls.empty();
    if (!hierarchy && !ctls.empty()) {
      for (const auto ctl : split(ctls, ','))
        if (std::find(want.controllers.begin(), want.controllers.end(), ctl) != want.controllers.end())
          hierarchy = true;
    }
    if (hierarchy && under(path, want.path)) return true;
  }
  return false;
}

bool is_caller(const CallerRule& rule, std::string_view comm_text, std::string_view cgroup_text) {
  if (!rule.process.empty()) {
    std::string_view comm = comm_text;
    while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\0')) comm.remove_suffix(1);
    if (comm != rule.process) return false;
  }
  return !rule.has_cgroup || in_caller_cgroup(cgroup_text, rule.cgroup);
}

namespace {

std::vector<pid_t> list_pids(const std::string& proc_root) {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir(proc_root.c_str());
  if (proc == nullptr) return pids;
  while (const dirent* d = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(d->d_name, &end, 10);
    if (end != d->d_name && *end == '\0' && pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return pids;
}

// Which rules take the process; false when it is gone.
bool judge(const std::string& proc_root, pid_t pid, const std::vector<CallerRule>& rules, std::vector<bool>& takes) {
  const std::string base = proc_root + "/" + std::to_string(pid);
  const std::string comm = read_text(base + "/comm");
  if (comm.empty()) return false;
  const bool need_cgroup = std::any_of(rules.begin(), rules.end(), [](const CallerRule& r) { return r.has_cgroup; });
  const std::string cgroup = need_cgroup ? read_text(base + "/cgroup") : std::string();
  takes.assign(rules.size(), false);
  for (std::size_t i = 0; i < rules.size(); ++i) takes[i] = is_caller(rules[i], comm, cgroup);
  return true;
}

}  // namespace

std::vector<std::vector<pid_t>> find_callers(const std::string& proc_root, const std::vector<CallerRule>& rules) {
  std::vector<std::vector<pid_t>> out(rules.size());
  std::vector<bool> takes;
  for (const pid_t pid : list_pids(proc_root))
    if (judge(proc_root, pid, rules, takes))
      for (std::size_t i = 0; i < rules.size(); ++i)
        if (takes[i]) out[i].push_back(pid);
  return out;
}

CallerScan::CallerScan(std::string proc_root, std::vector<CallerRule> rules, int64_t recheck_ns)
    : proc_root_(std::move(proc_root)), rules_(std::move(rules)), recheck_ns_(recheck_ns) {}

const std::vector<std::pair<std::size_t, pid_t>>& CallerScan::renew(int64_t now_ns) {
  const bool full = !scanned_ || now_ns - last_full_ns_ >= recheck_ns_;
  if (full) last_full_ns_ = now_ns;
  // Processes found by the first scan count as old: a fork about to exec is
  // rare among them, and reading them all again for a whole recheck period
  // is what this class avoids.
  const int64_t born = scanned_ ? now_ns : now_ns - recheck_ns_;
  scanned_ = true;
  std::map<pid_t, Seen> next;
  for (const pid_t pid : list_pids(proc_root_)) {
    auto it = seen_.find(pid);
    Seen s = it != seen_.end() ? std::move(it->second) : Seen{born, {}};
    if (full || it == seen_.end() || now_ns - s.first_ns < recheck_ns_) {
      ++reads_;
      if (!judge(proc_root_, pid, rules_, s.takes)) continue;  // gone
    }
    next.emplace(pid, std::move(s));
  }
  seen_ = std::move(next);
  out_.clear();
  for (const auto& [pid, s] : seen_)
    for (std::size_t i = 0; i < s.takes.size(); ++i)
      if (s.takes[i]) out_.emplace_back(i, pid);
  return out_;
}

}  // namespace headroom::probes
