// SPDX-License-Identifier: Apache-2.0
// The shedding server's workers (workers.h).
#include "workers.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include <headroom/orca/priority.h>

namespace shedding_server {
namespace {

int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Spends `cost_ns` of this thread's CPU time. Measured on the thread's own
// CPU clock, so when the machine is contended a request takes longer in wall
// time, as real work would.
std::atomic<uint64_t> burn_result{0};  // keeps the arithmetic from being optimized away

void burn_cpu(int64_t cost_ns, const std::atomic<bool>& stop) {
  uint64_t x = 0x9e3779b97f4a7c15u;
  const int64_t start = thread_cpu_ns();
  while (thread_cpu_ns() - start < cost_ns && !stop.load(std::memory_order_relaxed))
    for (int i = 0; i < 512; ++i) x = x * 6364136223846793005u + 1442695040888963407u;
  burn_result.store(x, std::memory_order_relaxed);
}

// Sleeps `ns` of wall-clock time, in slices, so that a stop is not kept waiting.
void sleep_ns(int64_t ns, const std::atomic<bool>& stop) {
  using namespace std::chrono;
  const auto until = steady_clock::now() + nanoseconds(ns);
  for (auto now = steady_clock::now(); now < until && !stop.load(std::memory_order_relaxed);
       now = steady_clock::now())
    std::this_thread::sleep_for(std::min<steady_clock::duration>(until - now, milliseconds(50)));
}

}  // namespace

void WorkQueue::push(Job job) {
  { std::lock_guard lock(mu_); jobs_.push_back(std::move(job)); }
  cv_.notify_one();
}

std::size_t WorkQueue::size() {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

void WorkQueue::stop() {
  { std::lock_guard lock(mu_); stopping_ = true; }
  cv_.notify_all();
}

void WorkQueue::work(const WorkerSettings& settings, DependencyClient* dependency, const std::atomic<bool>& stop) {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = jobs_.front();
      jobs_.pop_front();
      active_.fetch_add(1);
    }
    {
      // The request's work at its priority: the dependency call carries it.
      const orca::PriorityScope scope(job.priority);
      burn_cpu(settings.cost_ns, stop);
      if (settings.delay.kind != Delay::Kind::none)
        sleep_ns(delay_ns(settings.delay, standard_normal(taken_.fetch_add(1, std::memory_order_relaxed))), stop);
      if (job.dependency && dependency) job.result = dependency->call(job.path);
    }
    active_.fetch_sub(1);
    { std::lock_guard lock(done_mu_); done_.push_back(job); }
    const uint64_t one = 1;
    (void)!::write(eventfd_, &one, sizeof one);
  }
}

std::vector<Job> WorkQueue::take_done() {
  std::lock_guard lock(done_mu_);
  return std::exchange(done_, {});
}

}  // namespace shedding_server
