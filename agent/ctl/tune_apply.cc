// SPDX-License-Identifier: Apache-2.0
#include "agent/ctl/tune_apply.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <toml++/toml.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "agent/config/config.h"
#include "headroom/orca/names.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_reader.h"
#include "headroom/orca/shedder.h"

namespace headroom::ctl::tune {
namespace {

Result<toml::table> parse(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, std::string_view(source));
  } catch (const toml::parse_error& e) {
    return logic_error(source + ":" + std::to_string(e.source().begin.line) + ":" +
                       std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
}

// The [[endpoint]] table named `name`.
Result<const toml::table*> endpoint_table(const toml::table& root, const std::string& source, const std::string& name) {
  const auto* endpoints = root.get_as<toml::array>("endpoint");
  if (endpoints != nullptr)
    for (const auto& e : *endpoints)
      if (const auto* t = e.as_table(); t != nullptr)
        if (const auto* n = t->get_as<std::string>("name"); n != nullptr && n->get() == name) return t;
  return logic_error(source + ": no [[endpoint]] with name = \"" + name + "\"; give --endpoint one of the file's endpoints");
}

// Replaces `key = <number>` on line `line` (1-based) of `lines`.
bool replace_value(std::vector<std::string>& lines, std::size_t line, const std::string& key, double value) {
  if (line == 0 || line > lines.size()) return false;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", value);
  const std::regex re("(\\b" + key + "\\s*=\\s*)[-+0-9.eE_]+");
  std::string& l = lines[line - 1];
  std::string replaced = std::regex_replace(l, re, "$01" + std::string(buf), std::regex_constants::format_first_only);
  if (replaced == l && l.find(buf) == std::string::npos) return false;
  l = std::move(replaced);
  return true;
}

}  // namespace

Result<EndpointUnderTest> endpoint_of(std::string_view text, const std::string& source, const std::string& name) {
  // The file as headroomd reads it: the canary's headroomd is about to run it,
  // and its [[endpoint.shed]] entries are checked there as the shedder checks them.
  auto config = agent::parse_config(text, source);
  if (!config) return std::move(config).error();
  for (const auto& endpoint : config->endpoints) {
    if (endpoint.name != name) continue;
    EndpointUnderTest e;
    e.name = name;
    e.target = endpoint.target;
    e.max = endpoint.max;
    for (const auto& [signal, thresholds] : endpoint.shed) e.shed.push_back(ShedEntry{signal, thresholds});
    return e;
  }
  std::string names;
  for (const auto& endpoint : config->endpoints) names += (names.empty() ? "" : ", ") + endpoint.name;
  return logic_error(source + ": no [[endpoint]] with name = \"" + name + "\"; give --endpoint one of the file's endpoints" +
                     (names.empty() ? " (it declares none)" : " (" + names + ")"));
}

Result<std::string> with_thresholds(std::string_view text, const std::string& source, const std::string& name,
                                    const std::vector<ShedEntry>& shed) {
  auto root = parse(text, source);
  if (!root) return std::move(root).error();
  auto t = endpoint_table(*root, source, name);
  if (!t) return std::move(t).error();
  std::vector<std::string> lines;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const auto* entries = (*t)->get_as<toml::array>("shed");
  for (const auto& want : shed) {
    bool done = false;
    for (std::size_t i = 0; entries != nullptr && i < entries->size() && !done; ++i) {
      const auto* st = entries->get(i)->as_table();
      const auto* signal = st == nullptr ? nullptr : st->get_as<std::string>("signal");
      if (signal == nullptr || signal->get() != want.signal) continue;
      for (const auto& [key, value] : {std::pair<std::string, double>{"shed_start", want.thresholds.shed_start},
                                       {"critical_start", want.thresholds.critical_start}}) {
        const auto* node = st->get(key);
        if (node == nullptr || !replace_value(lines, node->source().begin.line, key, value))
          return logic_error(source + ": cannot rewrite " + key + " of " + want.signal + " (write each on its own line)");
      }
      done = true;
    }
    if (!done) return logic_error(source + ": [[endpoint]] " + name + " has no [[endpoint.shed]] for " + want.signal);
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

Result<pid_t> find_headroomd(const std::string& proc) {
  DIR* dir = ::opendir(proc.c_str());
  if (dir == nullptr) return system_error(errno, proc);
  std::vector<pid_t> found;
  while (const dirent* d = ::readdir(dir)) {
    const std::string pid = d->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream comm(proc + "/" + pid + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == "headroomd") found.push_back(static_cast<pid_t>(std::stol(pid)));
  }
  ::closedir(dir);
  if (found.size() == 1) return found.front();
  return logic_error(found.empty() ? "no headroomd process found on this machine; start it, or pass --headroomd-pid PID"
                                   : std::to_string(found.size()) + " headroomd processes found; pass --headroomd-pid PID");
}

Result<void> replace_file(const std::string& path, const std::string& content) {
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  std::string tmp = path + ".tune-XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return system_error(errno, "cannot write next to " + path + " (mkstemp)");
  bool ok = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  int err = errno;
  if (ok) {
    ok = ::fchmod(fd, exists ? st.st_mode & 07777 : 0644) == 0;
    err = errno;
    if (ok && exists && ::fchown(fd, st.st_uid, st.st_gid) != 0 && errno != EPERM) ok = false, err = errno;
  }
  if (ok && ::fsync(fd) != 0) ok = false, err = errno;
  ::close(fd);
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) ok = false, err = errno;
  if (!ok) {
    ::unlink(tmp.c_str());
    return system_error(err, "cannot replace " + path);
  }
  return {};
}

Result<void> wait_for_target(const std::string& orca_dir, const std::string& name, std::chrono::nanoseconds target,
                             std::chrono::milliseconds timeout) {
  const std::string file = orca_dir + "/" + orca::report_file_name("endpoint." + name);
  const double want = static_cast<double>(target.count()) / 1e6;
  const auto until = std::chrono::steady_clock::now() + timeout;
  std::string seen = "no readable report";
  while (true) {
    if (auto r = orca::read_report_file(file); r) {
      const auto& m = r->named_metrics();
      if (auto it = m.find(std::string(orca::kMetricSloTargetMs)); it != m.end()) {
        if (std::abs(it->second - want) <= 0.001 * want) return {};
        char buf[64];
        std::snprintf(buf, sizeof buf, "target_ms %.4g", it->second);
        seen = buf;
      }
    } else {
      seen = r.error().message;
    }
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", want);
  return logic_error("headroomd did not take the file: " + file + " did not show headroom.slo.target_ms " + buf + " within " +
                     std::to_string(timeout.count()) + " ms (last: " + seen + "); see headroomd's log");
}

Result<CanaryConfig> CanaryConfig::open(const std::string& path, pid_t pid) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return system_error(errno, "--headroomd-config " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return CanaryConfig(path, text.str(), pid);
}

CanaryConfig::CanaryConfig(CanaryConfig&& other) noexcept
    : path_(std::move(other.path_)), original_(std::move(other.original_)), pid_(other.pid_), applied_(other.applied_) {
  other.applied_ = false;
}

CanaryConfig::~CanaryConfig() {
  if (applied_) {
    if (auto r = restore(); !r) std::fprintf(stderr, "headroomctl tune: %s\n", r.error().message.c_str());
  }
}

Result<void> CanaryConfig::apply(const std::string& content) {
  applied_ = true;  // even a failed write may have left something to undo
  if (auto w = replace_file(path_, content); !w) return w;
  if (::kill(pid_, SIGHUP) != 0) return system_error(errno, "SIGHUP to headroomd (pid " + std::to_string(pid_) + ")");
  return {};
}

Result<void> CanaryConfig::restore() {
  if (!applied_) return {};
  applied_ = false;
  if (auto w = replace_file(path_, original_); !w) return w;
  if (::kill(pid_, SIGHUP) != 0) return system_error(errno, "SIGHUP to headroomd (pid " + std::to_string(pid_) + ")");
  return {};
}

}  // namespace headroom::ctl::tune
