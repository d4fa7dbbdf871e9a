// SPDX-License-Identifier: Apache-2.0
// Debian's nginx as a third-party server for integration tests: a private
// configuration, pid file, logs and temp paths in a temporary directory,
// listening on 127.0.0.1 only, stopped (master and workers) at scope exit.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "process.h"
#include "temp_dir.h"

namespace headroom::testing {

inline constexpr const char* kNginxPath = "/usr/sbin/nginx";

// A TCP port on 127.0.0.1 that was free a moment ago (bind to 0, read, close).
inline uint16_t free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

// True once something accepts TCP connections on 127.0.0.1:port.
inline bool accepts_connections(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// Pids whose parent is `parent` (from /proc/<pid>/stat).
inline std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* d = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(d->d_name, &end, 10);
    if (end == d->d_name || *end != '\0') continue;
    std::ifstream in(std::string("/proc/") + d->d_name + "/stat");
    std::string stat;
    std::getline(in, stat);
    const auto paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 4 >= stat.size()) continue;
    // ") S PPID ..."
    const long ppid = std::strtol(stat.c_str() + paren + 4, nullptr, 10);
    if (ppid == parent) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return out;
}

class Nginx {
 public:
  // Serves `dir`/www (static files, sendfile on) on 127.0.0.1:port with
  // keep-alive, plus `/ok` answered by `return 200`. Runs in the foreground
  // (daemon off) as a master with `workers` worker processes, as root.
  // `locations`: more of the server block's configuration, as is.
  Nginx(const TempDir& dir, uint16_t port, int workers = 1, const std::string& locations = "")
      : dir_(dir), port_(port) {
    dir.mkdir("nginx/www");
    dir.mkdir("nginx/tmp");
    dir.write("nginx/www/index.html", "ok\n");
    const std::string root = dir / "nginx";
    const std::string conf =
        "user root;\n"
        "worker_processes " + std::to_string(workers) + ";\n"
        "pid " + root + "/nginx.pid;\n"
        "error_log " + root + "/error.log warn;\n"
        "events { worker_connections 1024; }\n"
        "http {\n"
        "  access_log off;\n"
        "  sendfile on;\n"
        "  keepalive_timeout 60s;\n"
        "  keepalive_requests 1000000;\n"
        "  client_body_temp_path " + root + "/tmp/body;\n"
        "  proxy_temp_path " + root + "/tmp/proxy;\n"
        "  fastcgi_temp_path " + root + "/tmp/fastcgi;\n"
        "  uwsgi_temp_path " + root + "/tmp/uwsgi;\n"
        "  scgi_temp_path " + root + "/tmp/scgi;\n"
        "  server {\n"
        "    listen 127.0.0.1:" + std::to_string(port) + ";\n"
        "    root " + root + "/www;\n"
        "    location = /ok { return 200 \"ok\\n\"; }\n" +
        locations +
        "  }\n"
        "}\n";
    conf_ = dir.write("nginx/nginx.conf", conf);
    proc_ = std::make_unique<Process>(
        std::vector<std::string>{kNginxPath, "-p", root + "/", "-e", root + "/error.log", "-c", conf_, "-g",
                                 "daemon off;"},
        dir);
  }
  ~Nginx() { stop(); }
  Nginx(const Nginx&) = delete;
  Nginx& operator=(const Nginx&) = delete;

  // Until it accepts connections; false if it exited or the timeout passed.
  bool wait_listening(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return eventually([&] { return !proc_->running() || accepts_connections(port_); }, timeout) &&
           proc_->running();
  }
  pid_t master_pid() const { return proc_->pid(); }
  std::vector<pid_t> worker_pids() const { return children_of(proc_->pid()); }
  std::string error_log() const { return read_file(dir_ / "nginx/error.log") + proc_->err(); }

  // Fast shutdown (SIGTERM): the master stops its workers. Anything left
  // after the deadline is killed by pid, workers first.
  void stop() {
    if (!proc_ || !proc_->running()) return;
    const auto workers = worker_pids();
    proc_->signal(SIGTERM);
    if (!proc_->wait(std::chrono::seconds(10))) {
      for (pid_t w : worker_pids()) ::kill(w, SIGKILL);
      proc_->signal(SIGKILL);
      proc_->wait(std::chrono::seconds(5));
    }
    // Workers whose master is gone are re-parented; stop them by their pid.
    for (pid_t w : workers)
      for (int i = 0; i < 200 && is_nginx(w); ++i) {
        if (i == 100) ::kill(w, SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
  }

 private:
  // The pid still names an nginx process (not a reused pid).
  // A zombie counts as gone.
  static bool is_nginx(pid_t pid) {
    const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    const auto paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z') return false;
    return stat.find("(nginx") != std::string::npos;
  }

  const TempDir& dir_;
  uint16_t port_;
  std::string conf_;
  std::unique_ptr<Process> proc_;
};

}  // namespace headroom::testing
