// SPDX-License-Identifier: Apache-2.0
// Runs a real binary for integration tests: fork+exec with stdout and stderr
// captured to files, optional user switch, signals, and waiting with a deadline.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "temp_dir.h"

namespace headroom::testing {

struct ProcessOptions {
  std::optional<uid_t> uid;  // switch to this user (and gid) before exec; needs root
  std::optional<gid_t> gid;
  std::string stdin_path = "/dev/null";
};

class Process {
 public:
  using Options = ProcessOptions;

  Process(std::vector<std::string> argv, const TempDir& logs, Options options = {})
      : out_path_(logs / ("out." + std::to_string(counter()))), err_path_(out_path_ + ".err") {
    pid_ = ::fork();
    if (pid_ == 0) {
      int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int null = ::open(options.stdin_path.c_str(), O_RDONLY);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::dup2(null, 0);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      if (options.gid && ::setgid(*options.gid) != 0) ::_exit(126);
      if (options.uid && ::setuid(*options.uid) != 0) ::_exit(126);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
  }
  ~Process() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }

  // Exit code (or 128 + signal), or nullopt if still running at the deadline.
  std::optional<int> wait(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    if (status_) return status_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    do {
      int st = 0;
      pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } while (std::chrono::steady_clock::now() < deadline);
    return std::nullopt;
  }
  bool running() {
    if (status_) return false;
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return false;
    }
    return true;
  }

  std::string out() const { return read_file(out_path_); }
  std::string err() const { return read_file(err_path_); }

 private:
  static int counter() {
    static int n = 0;
    return ++n;
  }
  std::string out_path_, err_path_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Runs to completion and returns {exit code, stdout, stderr}.
struct RunResult {
  int code = -1;
  std::string out, err;
};
inline RunResult run(std::vector<std::string> argv, const TempDir& logs,
                     std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  Process p(std::move(argv), logs);
  auto code = p.wait(timeout);
  return {code.value_or(-1), p.out(), p.err()};
}

// Polls `pred` every 10 ms until it holds or the timeout passes.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

}  // namespace headroom::testing
