// SPDX-License-Identifier: Apache-2.0
// Shared helpers for the standalone benchmarks: clock, percentiles, flags, the
// realistic node sample, table output. Header-only so each benchmark is one file.
#pragma once

#include <stdlib.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "agent/signals/sampler.h"

namespace headroom::bench {

inline int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline int64_t unix_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

struct Summary {
  std::size_t n = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};

// Nearest-rank percentile of a sorted sample: the value at or below which q of
// the observations lie. No interpolation, so every figure was actually observed.
inline double percentile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<std::size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

inline Summary summarize(std::vector<double> v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.p50 = percentile_sorted(v, 0.50);
  s.p90 = percentile_sorted(v, 0.90);
  s.p99 = percentile_sorted(v, 0.99);
  s.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

inline const char* verdict(bool met) { return met ? "goal met" : "goal MISSED"; }

// Minimal flag parser: "--name=value", "--name value" and bare "--name".
class Flags {
 public:
  Flags(int argc, char** argv) : args_(argv + 1, argv + argc) {}

  bool has(std::string_view name) const {
    for (const auto& a : args_)
      if (a == name || (a.starts_with(name) && a.size() > name.size() && a[name.size()] == '=')) return true;
    return false;
  }
  std::string get(std::string_view name, std::string fallback) const {
    for (std::size_t i = 0; i < args_.size(); ++i) {
      const std::string& a = args_[i];
      if (a == name && i + 1 < args_.size()) return args_[i + 1];
      if (a.starts_with(name) && a.size() > name.size() && a[name.size()] == '=') return a.substr(name.size() + 1);
    }
    return fallback;
  }
  long get_long(std::string_view name, long fallback) const {
    const std::string v = get(name, "");
    if (v.empty()) return fallback;
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (end == v.c_str() || *end != '\0' || n <= 0) {
      std::fprintf(stderr, "%.*s: expected a positive integer, got \"%s\"\n", static_cast<int>(name.size()),
                   name.data(), v.c_str());
      std::exit(2);
    }
    return n;
  }

 private:
  std::vector<std::string> args_;
};

// What the sampler hands build_node_report on a 2-CPU host under moderate load:
// the five signals and the raw figures of docs/orca-files.md. The values have
// full double precision on purpose, as real ratios do (no short varints).
inline agent::NodeSample realistic_sample() {
  agent::NodeSample s;
  s.signals.emplace("cpu", 0.43728191723);
  s.signals.emplace("memory", 0.61230975212);
  s.signals.emplace("cpu.pressure", 0.03121587341);
  s.signals.emplace("memory.pressure", 0.00048213957);
  s.signals.emplace("io.pressure", 0.00512873140);
  s.raw.emplace("headroom.cpu.busy", 0.41281234917);
  s.raw.emplace("headroom.cpu.saturation", 0.02446956806);
  s.raw.emplace("headroom.cpu.capacity", 2.0);
  s.raw.emplace("headroom.procs_running", 1.0);
  s.raw.emplace("headroom.procs_blocked", 0.0);
  s.raw.emplace("headroom.memory.used_bytes", 15'112'667'136.0);
  return s;
}

// A fresh directory under `parent` (mkdtemp), removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& parent, const char* prefix = "headroom-bench") {
    std::string tmpl = parent + "/" + prefix + ".XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "mkdtemp %s: %s\n", tmpl.c_str(), std::strerror(errno));
      return;
    }
    path_ = tmpl;
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Filesystem type of a path as df -T names the common ones.
inline std::string fs_type(const std::string& path) {
  struct statfs st{};
  if (::statfs(path.c_str(), &st) != 0) return "?";
  // Magic numbers from linux/magic.h; only the ones worth telling apart here.
  switch (static_cast<unsigned long>(st.f_type)) {
    case 0x01021994UL: return "tmpfs";
    case 0xEF53UL: return "ext4";
    case 0x9123683EUL: return "btrfs";
    case 0x58465342UL: return "xfs";
    case 0x794C7630UL: return "overlayfs";
    default: return "other";
  }
}

}  // namespace headroom::bench
