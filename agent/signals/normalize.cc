// SPDX-License-Identifier: Apache-2.0
#include "agent/signals/normalize.h"

#include <algorithm>
#include <cmath>

namespace headroom::agent {

namespace {
uint64_t busy_ticks(const probes::CpuTimes& t) { return t.user + t.nice + t.system + t.irq + t.softirq + t.steal; }
uint64_t idle_ticks(const probes::CpuTimes& t) { return t.idle + t.iowait; }

bool went_backwards(const probes::CpuTimes& a, const probes::CpuTimes& b) {
  return b.user < a.user || b.nice < a.nice || b.system < a.system || b.idle < a.idle || b.iowait < a.iowait ||
         b.irq < a.irq || b.softirq < a.softirq || b.steal < a.steal;
}
}  // namespace

double clamp01(double v) {
  if (!(v > 0.0)) return 0.0;  // also maps NaN to 0
  return v < 1.0 ? v : 1.0;
}

std::optional<double> cpu_busy_fraction(const probes::CpuTimes& prev, const probes::CpuTimes& cur) {
  if (went_backwards(prev, cur)) return std::nullopt;
  const uint64_t busy = busy_ticks(cur) - busy_ticks(prev);
  const uint64_t total = busy + (idle_ticks(cur) - idle_ticks(prev));
  if (total == 0) return std::nullopt;
  return static_cast<double>(busy) / static_cast<double>(total);
}

double runnable_excess(uint32_t procs_running, unsigned ncpu) {
  if (ncpu == 0) return 0.0;
  const double others = procs_running > 0 ? static_cast<double>(procs_running - 1) : 0.0;
  return std::max(0.0, others - ncpu) / ncpu;
}

std::optional<double> run_delay_excess(const probes::SchedStatReading& prev, const probes::SchedStatReading& cur,
                                       int64_t elapsed_ns) {
  if (elapsed_ns <= 0 || cur.ncpu == 0 || cur.run_delay_ns < prev.run_delay_ns) return std::nullopt;
  return static_cast<double>(cur.run_delay_ns - prev.run_delay_ns) /
         (static_cast<double>(elapsed_ns) * cur.ncpu);
}

std::optional<double> pressure_fraction(uint64_t prev_total_us, uint64_t cur_total_us, int64_t elapsed_ns) {
  if (elapsed_ns <= 0 || cur_total_us < prev_total_us) return std::nullopt;
  return clamp01(static_cast<double>(cur_total_us - prev_total_us) * 1000.0 / static_cast<double>(elapsed_ns));
}

std::optional<double> memory_fraction(const probes::MemInfoReading& m) {
  if (m.total_bytes == 0) return std::nullopt;
  const uint64_t available = std::min(m.available_bytes, m.total_bytes);
  return 1.0 - static_cast<double>(available) / static_cast<double>(m.total_bytes);
}

double cgroup_cpu_capacity(unsigned host_ncpu, std::optional<double> quota_cpus, unsigned cpuset_cpus) {
  double capacity = host_ncpu > 0 ? host_ncpu : 1.0;
  if (cpuset_cpus > 0) capacity = std::min(capacity, static_cast<double>(cpuset_cpus));
  if (quota_cpus && *quota_cpus > 0) capacity = std::min(capacity, *quota_cpus);
  return capacity;
}

std::optional<double> cgroup_cpu_fraction(uint64_t prev_usage_usec, uint64_t cur_usage_usec, int64_t elapsed_ns,
                                          double capacity_cpus) {
  if (elapsed_ns <= 0 || capacity_cpus <= 0 || cur_usage_usec < prev_usage_usec) return std::nullopt;
  return static_cast<double>(cur_usage_usec - prev_usage_usec) * 1000.0 /
         (static_cast<double>(elapsed_ns) * capacity_cpus);
}

std::optional<double> throttled_fraction(uint64_t prev_usec, uint64_t cur_usec, int64_t elapsed_ns) {
  return pressure_fraction(prev_usec, cur_usec, elapsed_ns);
}

std::optional<double> cgroup_memory_fraction(const probes::CgroupMemReading& m, uint64_t host_total_bytes) {
  uint64_t limit = m.limit_bytes.value_or(host_total_bytes);
  if (host_total_bytes > 0) limit = std::min(limit, host_total_bytes);
  if (limit == 0) return std::nullopt;
  return clamp01(static_cast<double>(m.current_bytes) / static_cast<double>(limit));
}

double ewma_alpha(int64_t interval_ns, int64_t tau_ns) {
  if (tau_ns <= 0 || interval_ns <= 0) return 1.0;
  return 1.0 - std::exp(-static_cast<double>(interval_ns) / static_cast<double>(tau_ns));
}

double Smoother::update(const std::string& key, double sample) {
  auto [it, inserted] = state_.try_emplace(key, sample);
  if (!inserted) it->second += alpha_ * (sample - it->second);
  return it->second;
}

std::optional<double> composite(const std::vector<std::pair<double, double>>& values_and_weights, CompositeMethod kind) {
  if (values_and_weights.empty()) return std::nullopt;
  if (kind == CompositeMethod::max) {
    double best = 0.0;
    for (const auto& [v, w] : values_and_weights) best = std::max(best, v * w);
    return best;
  }
  double sum = 0.0, weights = 0.0;
  for (const auto& [v, w] : values_and_weights) {
    sum += v * w;
    weights += w;
  }
  if (weights <= 0.0) return 0.0;
  return sum / weights;
}

}  // namespace headroom::agent
