// SPDX-License-Identifier: Apache-2.0
#include "probes/instance.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "headroom/orca/text.h"

namespace headroom::probes {

Result<ProcCgroups> parse_proc_cgroup(std::string_view text) {
  ProcCgroups out;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (trim(line).empty()) continue;
    const auto a = line.find(':');
    const auto b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos)
      return Error{EINVAL, "line " + std::to_string(line_no) + ": \"" + std::string(line) +
                               "\" is not ID:CONTROLLERS:PATH"};
    const std::string_view id = line.substr(0, a);
    std::string_view controllers = line.substr(a + 1, b - a - 1);
    const std::string path(line.substr(b + 1));
    if (path.empty() || path.front() != '/')
      return Error{EINVAL, "line " + std::to_string(line_no) + ": the path \"" + path + "\" is not absolute"};
    if (id == "0" && controllers.empty()) {
      out.unified = path;
      continue;
    }
    while (!controllers.empty()) {
      const auto comma = controllers.find(',');
      out.v1[std::string(controllers.substr(0, comma))] = path;
      controllers = comma == std::string_view::npos ? std::string_view() : controllers.substr(comma + 1);
    }
  }
  return out;
}

std::optional<std::string> controller_path(const ProcCgroups& groups, CgroupVersion version,
                                           std::string_view controller) {
  if (version == CgroupVersion::v2) return groups.unified;
  const auto find = [&](const char* name) -> std::optional<std::string> {
    auto it = groups.v1.find(name);
    if (it == groups.v1.end()) return std::nullopt;
    return it->second;
  };
  if (controller == "cpu") {
    if (auto p = find("cpuacct")) return p;
    return find("cpu");
  }
  return find(std::string(controller).c_str());
}

namespace {

bool is_hex_or_dash(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-' || c == '_'; }

// The UID after "pod" in one path segment: "pod<uid>" (cgroupfs) or
// "kubepods-<class>-pod<uid>.slice" (systemd, '_' for '-').
std::optional<std::string> pod_uid(std::string_view segment) {
  auto at = segment.rfind("pod");
  if (at == std::string_view::npos) return std::nullopt;
  if (at != 0 && segment[at - 1] != '-') return std::nullopt;
  std::string_view uid = segment.substr(at + 3);
  if (uid.ends_with(".slice")) uid.remove_suffix(6);
  if (uid.size() < 8) return std::nullopt;
  std::string out;
  for (const char c : uid) {
    if (!is_hex_or_dash(c)) return std::nullopt;
    out += c == '_' ? '-' : c;
  }
  return out;
}

std::string file_safe(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 100)) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    out += ok ? c : '_';
  }
  if (out == "." || out == "..") out = "_";
  return out;
}

}  // namespace

std::string instance_id(std::string_view cgroup_path, uint32_t netns, bool host_netns) {
  std::string_view rest = cgroup_path;
  std::string_view leaf;
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (segment.empty()) continue;
    if (auto uid = pod_uid(segment)) return file_safe(*uid);
    leaf = segment;
  }
  if (host_netns) return "host";
  if (!leaf.empty()) return file_safe(leaf);
  return "netns-" + std::to_string(netns);
}

Result<uint32_t> netns_of(const std::string& proc_root, pid_t pid) {
  const std::string link = proc_root + "/" + std::to_string(pid) + "/ns/net";
  char target[64];
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  if (n < 0) return Error{errno, link + ": " + std::strerror(errno)};
  target[n] = '\0';
  const std::string_view t(target, static_cast<std::size_t>(n));
  if (!t.starts_with("net:[") || !t.ends_with("]"))
    return Error{EINVAL, link + " points to \"" + std::string(t) + "\", not net:[inode]"};
  char* end = nullptr;
  const unsigned long v = std::strtoul(target + 5, &end, 10);
  if (end != target + n - 1 || v == 0 || v > UINT32_MAX)
    return Error{EINVAL, link + " points to \"" + std::string(t) + "\", not net:[inode]"};
  return static_cast<uint32_t>(v);
}

namespace {

// The LISTEN sockets (st 0A) on `ports` in one namespace's /proc/PID/net/tcp{,6}: inode -> port.
std::map<std::string, uint16_t> listening_inodes(const std::string& net_dir, const std::set<uint16_t>& ports) {
  std::map<std::string, uint16_t> out;
  for (const char* file : {"/tcp", "/tcp6"}) {
    std::ifstream in(net_dir + file);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
      if (!(f >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode)) continue;
      if (st != "0A" || inode == "0") continue;
      const auto colon = local.rfind(':');
      if (colon == std::string::npos) continue;
      const auto port = std::strtoul(local.c_str() + colon + 1, nullptr, 16);
      if (port <= UINT16_MAX && ports.count(static_cast<uint16_t>(port)))
        out["socket:[" + inode + "]"] = static_cast<uint16_t>(port);
    }
  }
  return out;
}

// The first of pids holding each socket of `inodes`: port -> pid.
std::map<uint16_t, pid_t> holders(const std::string& proc_root, const std::vector<pid_t>& pids,
                                  std::map<std::string, uint16_t> inodes) {
  std::map<uint16_t, pid_t> out;
  for (const pid_t pid : pids) {
    if (inodes.empty()) break;
    const std::string fd_dir = proc_root + "/" + std::to_string(pid) + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (!fds) continue;
    while (const dirent* f = ::readdir(fds)) {
      char target[64];
      const std::string link = fd_dir + "/" + f->d_name;
      const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      auto it = inodes.find(target);
      if (it == inodes.end()) continue;
      out.try_emplace(it->second, pid);
      inodes.erase(it);
    }
    ::closedir(fds);
  }
  return out;
}

}  // namespace

std::vector<ListeningServer> scan_listeners(const std::string& proc_root, const std::set<uint16_t>& ports) {
  std::vector<ListeningServer> out;
  if (ports.empty()) return out;
  std::map<uint32_t, std::vector<pid_t>> by_netns;
  DIR* proc = ::opendir(proc_root.c_str());
  if (!proc) return out;
  while (const dirent* d = ::readdir(proc)) {
    char* end = nullptr;
    const unsigned long pid = std::strtoul(d->d_name, &end, 10);
    if (end == d->d_name || *end != '\0') continue;
    if (auto ns = netns_of(proc_root, static_cast<pid_t>(pid)); ns) by_netns[*ns].push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  for (const auto& [netns, pids] : by_netns) {
    auto inodes = listening_inodes(proc_root + "/" + std::to_string(pids.front()) + "/net", ports);
    if (inodes.empty()) continue;
    std::map<uint16_t, int32_t> count;
    for (const auto& [inode, port] : inodes) ++count[port];
    const auto pid_of = holders(proc_root, pids, std::move(inodes));
    for (const auto& [port, n] : count) {
      auto it = pid_of.find(port);
      out.push_back({netns, port, it != pid_of.end() ? it->second : 0, n});
    }
  }
  return out;
}

}  // namespace headroom::probes
