// SPDX-License-Identifier: Apache-2.0
#include "probes/instance.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "probes/proc_file.h"

namespace headroom::probes {
namespace {

// Splits `text` at '\n', calling line(number, text) for each line until it
// returns an error.
template <class Fn>
Result<void> for_each_line(std::string_view text, Fn line) {
  int number = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view l = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++number;
    if (auto r = line(number, l); !r) return r;
  }
  return {};
}

Error line_error(int number, std::string_view line, std::string_view why) {
  return logic_error("line " + std::to_string(number) + " \"" + std::string(line) + "\": " + std::string(why));
}

template <class T>
bool parse_number(std::string_view s, T& out, int base = 10) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && end == s.data() + s.size();
}

// The whitespace-separated fields of a line.
std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// The components of a cgroup path, empty ones left out.
std::vector<std::string_view> components(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

bool is_pod_uid(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-';
  });
}

// The pod UID a Kubernetes cgroup path shows (instance.h, rule 1).
std::optional<std::string> pod_uid(std::string_view path) {
  constexpr std::string_view kSlice = ".slice";
  bool below_kubepods = false;
  for (std::string_view c : components(path)) {
    if (c.starts_with("kubepods")) {
      // systemd driver: kubepods[-<qos>]-pod<uid with '_' for '-'>.slice
      if (c.ends_with(kSlice)) {
        const std::string_view body = c.substr(0, c.size() - kSlice.size());
        if (const size_t at = body.rfind("-pod"); at != std::string_view::npos) {
          std::string uid(body.substr(at + 4));
          std::replace(uid.begin(), uid.end(), '_', '-');
          if (is_pod_uid(uid)) return uid;
        }
      }
      below_kubepods = true;
      continue;
    }
    // cgroupfs driver: /kubepods[/<qos>]/pod<uid>/<container>
    if (below_kubepods && c.starts_with("pod") && is_pod_uid(c.substr(3))) return std::string(c.substr(3));
  }
  return std::nullopt;
}

std::string sanitized(std::string_view id) {
  std::string out(id);
  for (char& c : out) {
    const bool allowed = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                         c == '_' || c == '-';
    if (!allowed) c = '_';
  }
  return out;
}

// "<prefix>[<number>]" -> number: the link text of ns/net and of a socket fd.
template <class T>
std::optional<T> bracketed(std::string_view link, std::string_view prefix) {
  if (!link.starts_with(prefix) || !link.ends_with(']')) return std::nullopt;
  T value{};
  if (!parse_number(link.substr(prefix.size(), link.size() - prefix.size() - 1), value)) return std::nullopt;
  return value;
}

// The numeric entries of the proc root, ascending.
std::vector<pid_t> list_pids(const std::string& proc_root) {
  std::vector<pid_t> pids;
  DIR* dir = ::opendir(proc_root.c_str());
  if (dir == nullptr) return pids;
  while (const dirent* e = ::readdir(dir)) {
    pid_t pid = 0;
    if (parse_number(std::string_view(e->d_name), pid) && pid > 0) pids.push_back(pid);
  }
  ::closedir(dir);
  std::sort(pids.begin(), pids.end());
  return pids;
}

// The LISTEN sockets of one namespace, read through the first of its
// processes whose net/tcp can be read; nullopt when none could.
std::optional<std::vector<ListeningSocket>> namespace_listeners(const std::string& proc_root,
                                                                const std::vector<pid_t>& pids,
                                                                const std::set<uint16_t>& ports) {
  for (pid_t pid : pids) {
    const std::string net = proc_root + "/" + std::to_string(pid) + "/net/";
    ProcFile tcp(net + "tcp");
    auto text = tcp.read();
    if (!text) continue;  // gone meanwhile: the next process of the namespace
    auto sockets = parse_tcp_listeners(*text, ports);
    if (!sockets) continue;
    ProcFile tcp6(net + "tcp6");  // absent when IPv6 is off
    if (auto text6 = tcp6.read()) {
      if (auto more = parse_tcp_listeners(*text6, ports)) sockets->insert(sockets->end(), more->begin(), more->end());
    }
    return std::move(*sockets);
  }
  return std::nullopt;
}

// Gives each port of `servers` a pid holding one of its sockets (`wanted`:
// socket inode -> port), reading the fds of `pids` until every port has one.
void find_holders(const std::string& proc_root, const std::vector<pid_t>& pids, std::map<uint64_t, uint16_t> wanted,
                  std::map<uint16_t, ListeningServer>& servers) {
  std::array<char, 64> link{};
  for (pid_t pid : pids) {
    if (wanted.empty()) return;
    const std::string fd_dir = proc_root + "/" + std::to_string(pid) + "/fd";
    DIR* dir = ::opendir(fd_dir.c_str());
    if (dir == nullptr) continue;  // gone, or another user's
    while (!wanted.empty()) {
      const dirent* e = ::readdir(dir);
      if (e == nullptr) break;
      if (e->d_name[0] == '.') continue;
      const ssize_t n = ::readlinkat(::dirfd(dir), e->d_name, link.data(), link.size());
      if (n <= 0) continue;
      const auto inode = bracketed<uint64_t>(std::string_view(link.data(), static_cast<size_t>(n)), "socket:[");
      if (!inode) continue;
      const auto it = wanted.find(*inode);
      if (it == wanted.end()) continue;
      const uint16_t port = it->second;
      servers[port].pid = pid;
      // One holder per port is all a ListeningServer keeps.
      std::erase_if(wanted, [port](const auto& entry) { return entry.second == port; });
    }
    ::closedir(dir);
  }
}

}  // namespace

Result<ProcCgroups> parse_proc_cgroup(std::string_view text) {
  ProcCgroups out;
  auto parsed = for_each_line(text, [&out](int number, std::string_view line) -> Result<void> {
    if (line.empty()) return {};
    const size_t c1 = line.find(':');
    const size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos)
      return line_error(number, line, "expected \"<hierarchy id>:<controllers>:<path>\"");
    unsigned id = 0;
    if (!parse_number(line.substr(0, c1), id))
      return line_error(number, line, "the hierarchy id \"" + std::string(line.substr(0, c1)) + "\" is not a number");
    const std::string_view list = line.substr(c1 + 1, c2 - c1 - 1);
    std::string_view path = line.substr(c2 + 1);
    constexpr std::string_view kDeleted = " (deleted)";
    if (path.ends_with(kDeleted)) path.remove_suffix(kDeleted.size());
    if (!path.starts_with('/')) return line_error(number, line, "the cgroup path does not start with '/'");

    if (id == 0) {
      if (!list.empty()) return line_error(number, line, "hierarchy 0 (cgroup v2) lists controllers");
      if (out.unified) return line_error(number, line, "a second cgroup v2 (\"0::\") line");
      out.unified = std::string(path);
      return {};
    }
    // A v1 hierarchy: every controller in the list (or its name=) at `path`.
    std::string_view rest = list;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view name = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (name.empty()) return line_error(number, line, "an empty controller name");
      if (!out.controllers.emplace(std::string(name), std::string(path)).second)
        return line_error(number, line, "controller \"" + std::string(name) + "\" appears twice");
    }
    return {};
  });
  if (!parsed) return parsed.error();
  return out;
}

std::optional<std::string> controller_path(const ProcCgroups& cgroups, CgroupVersion version,
                                           std::string_view controller) {
  auto v1 = [&]() -> std::optional<std::string> {
    // The CPU usage is in cpuacct; the quota in cpu, usually the same hierarchy.
    for (std::string_view name : controller == "cpu" ? std::vector<std::string_view>{"cpuacct", "cpu"}
                                                     : std::vector<std::string_view>{controller}) {
      if (auto it = cgroups.controllers.find(name); it != cgroups.controllers.end()) return it->second;
    }
    return std::nullopt;
  };
  switch (version) {
    case CgroupVersion::v2:
      return cgroups.unified;
    case CgroupVersion::v1:
      return v1();
    case CgroupVersion::automatic:
      if (auto path = v1()) return path;
      return cgroups.unified;
  }
  return std::nullopt;
}

std::string instance_id(std::string_view cgroup_path, uint32_t netns, bool host_netns) {
  if (auto uid = pod_uid(cgroup_path)) return sanitized(*uid);
  if (host_netns) return "host";
  const auto parts = components(cgroup_path);
  if (!parts.empty() && parts.back() != "." && parts.back() != "..") return sanitized(parts.back());
  return "netns-" + std::to_string(netns);
}

Result<uint32_t> netns_of(const std::string& proc_root, pid_t pid) {
  const std::string path = proc_root + "/" + std::to_string(pid) + "/ns/net";
  std::array<char, 64> link{};
  const ssize_t n = ::readlink(path.c_str(), link.data(), link.size());
  if (n < 0) return system_error(errno, "readlink " + path);
  const std::string_view text(link.data(), static_cast<size_t>(n));
  if (auto inode = bracketed<uint32_t>(text, "net:[")) return *inode;
  return logic_error(path + ": the link reads \"" + std::string(text) +
                     "\", not \"net:[<inode>]\" (is this the proc root of a Linux procfs?)");
}

Result<std::vector<ListeningSocket>> parse_tcp_listeners(std::string_view text, const std::set<uint16_t>& ports) {
  constexpr std::string_view kListen = "0A";
  std::vector<ListeningSocket> out;
  auto parsed = for_each_line(text, [&](int number, std::string_view line) -> Result<void> {
    const auto f = fields(line);
    if (f.empty() || f[0] == "sl") return {};  // the header
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
    if (f.size() < 10) return line_error(number, line, "fewer than 10 fields");
    const size_t colon = f[1].rfind(':');
    uint16_t port = 0;
    if (colon == std::string_view::npos || !parse_number(f[1].substr(colon + 1), port, 16))
      return line_error(number, line, "the local address is not \"<hex address>:<hex port>\"");
    if (f[3] != kListen || !ports.contains(port)) return {};
    uint64_t inode = 0;
    if (!parse_number(f[9], inode)) return line_error(number, line, "the inode is not a number");
    out.push_back({port, inode});
    return {};
  });
  if (!parsed) return parsed.error();
  return out;
}

std::vector<ListeningServer> scan_listeners(const std::string& proc_root, const std::set<uint16_t>& ports) {
  std::map<uint32_t, std::vector<pid_t>> by_netns;
  for (pid_t pid : list_pids(proc_root)) {
    if (auto ns = netns_of(proc_root, pid)) by_netns[*ns].push_back(pid);
  }
  std::vector<ListeningServer> out;
  for (const auto& [netns, pids] : by_netns) {
    const auto sockets = namespace_listeners(proc_root, pids, ports);
    if (!sockets || sockets->empty()) continue;
    std::map<uint16_t, ListeningServer> servers;
    std::map<uint64_t, uint16_t> wanted;
    for (const ListeningSocket& s : *sockets) {
      ListeningServer& server = servers[s.port];
      server.netns = netns;
      server.port = s.port;
      ++server.listeners;
      wanted.emplace(s.inode, s.port);
    }
    find_holders(proc_root, pids, std::move(wanted), servers);
    for (const auto& [port, server] : servers) out.push_back(server);
  }
  return out;
}

std::vector<pid_t> socket_holders(const std::string& proc_root, const std::set<uint32_t>& ports, SocketEnd end,
                                  pid_t skip) {
  std::vector<pid_t> holders;
  std::set<std::string> inodes;
  for (const char* file : {"/1/net/tcp", "/1/net/tcp6", "/net/tcp", "/net/tcp6"}) {
    std::ifstream in(proc_root + file);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
      if (!(f >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode)) continue;
      const std::string& at = end == SocketEnd::local ? local : remote;
      const auto colon = at.rfind(':');
      if (colon == std::string::npos) continue;
      const auto port = static_cast<uint32_t>(std::strtoul(at.c_str() + colon + 1, nullptr, 16));
      if (ports.count(port) && inode != "0") inodes.insert("socket:[" + inode + "]");
    }
  }
  if (inodes.empty()) return holders;
  DIR* proc = ::opendir(proc_root.c_str());
  if (!proc) return holders;
  while (dirent* d = ::readdir(proc)) {
    char* last = nullptr;
    const unsigned long pid = std::strtoul(d->d_name, &last, 10);
    if (last == d->d_name || *last != '\0' || static_cast<pid_t>(pid) == skip) continue;
    const std::string fd_dir = proc_root + "/" + d->d_name + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (!fds) continue;
    while (dirent* f = ::readdir(fds)) {
      char target[64];
      const std::string link = fd_dir + "/" + f->d_name;
      const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      if (inodes.count(target)) {
        holders.push_back(static_cast<pid_t>(pid));
        break;
      }
    }
    ::closedir(fds);
  }
  ::closedir(proc);
  return holders;
}

}  // namespace headroom::probes
