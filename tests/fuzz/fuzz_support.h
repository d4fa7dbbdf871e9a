// SPDX-License-Identifier: Apache-2.0
// What the fuzz targets share: failing on a broken invariant (libFuzzer saves
// the input as a crash), quieting libraries that log on bad input, and
// comparing reports field by field.
#pragma once

#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "headroom/orca/report.h"

namespace headroom::fuzz {

// A broken invariant: names it and aborts, which libFuzzer reports as a crash.
[[noreturn]] inline void fail(std::string_view target, const std::string& what) {
  std::fprintf(stderr, "%.*s: invariant broken: %s\n", static_cast<int>(target.size()), target.data(), what.c_str());
  std::abort();
}

inline std::string_view as_text(const uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// protobuf logs every string field with invalid UTF-8, spdlog whatever a
// parser warns about: at fuzzing speed that is noise, and slow.
inline void quiet_logs() {
  google::protobuf::SetLogHandler(nullptr);
  spdlog::set_level(spdlog::level::off);
}

// Empty when a and b hold the same values (doubles compared with ==, so 0 and
// -0 are equal), else the first difference.
inline std::string report_difference(const orca::Report& a, const orca::Report& b) {
  auto num = [](double v) { return std::to_string(v); };
  if (a.cpu_utilization() != b.cpu_utilization())
    return "cpu_utilization " + num(a.cpu_utilization()) + " != " + num(b.cpu_utilization());
  if (a.mem_utilization() != b.mem_utilization())
    return "mem_utilization " + num(a.mem_utilization()) + " != " + num(b.mem_utilization());
  if (a.application_utilization() != b.application_utilization())
    return "application_utilization " + num(a.application_utilization()) + " != " + num(b.application_utilization());
  if (a.rps_fractional() != b.rps_fractional())
    return "rps_fractional " + num(a.rps_fractional()) + " != " + num(b.rps_fractional());
  if (a.eps() != b.eps()) return "eps " + num(a.eps()) + " != " + num(b.eps());
  // The deprecated rps: headroom never writes it, but other writers may, and
  // what is accepted must survive a round trip.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  if (a.rps() != b.rps()) return "rps " + std::to_string(a.rps()) + " != " + std::to_string(b.rps());
#pragma GCC diagnostic pop
  auto maps = [&](std::string_view field, const auto& x, const auto& y) -> std::string {
    if (x.size() != y.size())
      return std::string(field) + " has " + std::to_string(x.size()) + " entries, not " + std::to_string(y.size());
    for (const auto& [key, v] : x) {
      auto it = y.find(key);
      if (it == y.end()) return std::string(field) + "[\"" + key + "\"] is missing";
      if (it->second != v) return std::string(field) + "[\"" + key + "\"] " + num(v) + " != " + num(it->second);
    }
    return {};
  };
  if (auto d = maps("utilization", a.utilization(), b.utilization()); !d.empty()) return d;
  if (auto d = maps("request_cost", a.request_cost(), b.request_cost()); !d.empty()) return d;
  if (auto d = maps("named_metrics", a.named_metrics(), b.named_metrics()); !d.empty()) return d;
  return {};
}

}  // namespace headroom::fuzz
