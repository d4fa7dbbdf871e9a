// SPDX-License-Identifier: Apache-2.0
// The shedding server's workers (server.cc): the FIFO queue in front of them,
// what each does with a request (--cost of CPU, then --delay of wall-clock
// sleep, then the dependency call), and the way back to the I/O thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "dependency.h"
#include "options.h"

namespace shedding_server {

struct Job {
  uint64_t conn = 0;  // the connection's id, not its fd: it may close meanwhile
  int bucket = 0;
  int priority = 0;         // 1..100: what its dependency call is stamped with
  bool head = false;        // HEAD: the response carries no body
  bool keep_alive = true;
  bool dependency = false;  // under --dependency-path: the worker calls the dependency for `path`
  std::string path;
  CallResult result = CallResult::ok;
};

// What every worker does with a request.
struct WorkerSettings {
  int64_t cost_ns = 0;  // --cost, on the thread's CPU clock
  Delay delay;          // --delay, in wall-clock time after the cost
};

// The FIFO queue in front of the workers, and the way back: finished jobs
// are collected in `done` and the I/O thread woken through an eventfd.
class WorkQueue {
 public:
  explicit WorkQueue(int eventfd) : eventfd_(eventfd) {}
  void push(Job job);
  std::size_t size();
  int in_progress() const { return active_.load(); }
  void stop();
  // One worker's loop, until stop(). The k-th job any worker takes sleeps
  // the k-th --delay of a fixed sequence (options.h, standard_normal).
  // dependency: this worker's connection to --dependency, null without one.
  void work(const WorkerSettings& settings, DependencyClient* dependency, const std::atomic<bool>& stop);
  std::vector<Job> take_done();

 private:
  int eventfd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::atomic<int> active_{0};  // jobs being worked on
  std::atomic<uint64_t> taken_{0};  // jobs taken so far: the index of the next delay
  std::mutex done_mu_;
  std::vector<Job> done_;
};

}  // namespace shedding_server
