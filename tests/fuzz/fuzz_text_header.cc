// SPDX-License-Identifier: Apache-2.0
// The TEXT load header, parse_text_header_value. Input: an
// endpoint-load-metrics value. Invariants beyond "no crash":
//  - an error names the header and says what is wrong;
//  - an accepted value holds only finite values >= 0;
//  - text_header_value of what was accepted is accepted again and carries
//    the same values, less what the builder documents it drops
//    (mem_utilization and utilization above 1, keys that are not text-safe).
#include <algorithm>
#include <cmath>
#include <string>

#include "fuzz_support.h"
#include "headroom/orca/load_header.h"

namespace orca = headroom::orca;
using headroom::fuzz::fail;
using headroom::fuzz::report_difference;

namespace {

constexpr std::string_view kTarget = "fuzz_text_header";

bool text_safe_key(std::string_view key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c >= 0x21 && c <= 0x7e && c != ',' && c != '=' && c != ':';
  });
}

bool usable(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  headroom::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = orca::parse_text_header_value(headroom::fuzz::as_text(data, size));
  if (!r) {
    if (r.error().message.find(orca::kLoadMetricsHeader) == std::string::npos)
      fail(kTarget, "error does not name the header: " + r.error().message);
    return 0;
  }
  for (double v : {r->cpu_utilization(), r->mem_utilization(), r->application_utilization(), r->rps_fractional(),
                   r->eps()})
    if (!usable(v)) fail(kTarget, "accepted a value that is not finite and >= 0");
  for (const auto* m : {&r->named_metrics(), &r->utilization()})
    for (const auto& [key, v] : *m)
      if (key.empty() || !usable(v)) fail(kTarget, "accepted map entry \"" + key + "\"");

  const std::string again = orca::text_header_value(*r);
  auto back = orca::parse_text_header_value(again);
  if (!back) fail(kTarget, "text_header_value gave \"" + again + "\", which is rejected: " + back.error().message);
  orca::Report want;
  want.set_cpu_utilization(r->cpu_utilization());
  want.set_mem_utilization(r->mem_utilization() <= 1.0 ? r->mem_utilization() : 0.0);
  want.set_application_utilization(r->application_utilization());
  want.set_rps_fractional(r->rps_fractional());
  want.set_eps(r->eps());
  for (const auto& [key, v] : r->named_metrics())
    if (text_safe_key(key)) (*want.mutable_named_metrics())[key] = v;
  for (const auto& [key, v] : r->utilization())
    if (text_safe_key(key) && v <= 1.0) (*want.mutable_utilization())[key] = v;
  if (auto d = report_difference(want, *back); !d.empty()) fail(kTarget, "round trip of \"" + again + "\": " + d);
  return 0;
}
