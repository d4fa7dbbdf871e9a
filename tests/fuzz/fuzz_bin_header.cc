// SPDX-License-Identifier: Apache-2.0
// The binary load header, parse_bin_header_value. Input: the first byte
// chooses the form: even, the rest is the header value as sent (base64
// text); odd, the rest is a serialized message, base64-encoded here, so the
// fuzzer reaches the message checks without having to write base64.
// Invariants beyond "no crash":
//  - an error names the header;
//  - an accepted value holds only finite values >= 0;
//  - bin_header_value of what was accepted is accepted again and carries the
//    same values, less what the builder documents it drops (mem_utilization
//    and utilization above 1).
#include <cmath>
#include <string>

#include "fuzz_support.h"
#include "headroom/orca/load_header.h"

namespace orca = headroom::orca;
using headroom::fuzz::fail;
using headroom::fuzz::report_difference;

namespace {

constexpr std::string_view kTarget = "fuzz_bin_header";

bool usable(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  headroom::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = headroom::fuzz::as_text(data + 1, size - 1);
  const std::string value = (data[0] & 1) == 0 ? std::string(rest) : orca::base64_encode(rest);
  auto r = orca::parse_bin_header_value(value);
  if (!r) {
    if (r.error().message.find(orca::kLoadMetricsBinHeader) == std::string::npos)
      fail(kTarget, "error does not name the header: " + r.error().message);
    return 0;
  }
  for (double v : {r->cpu_utilization(), r->mem_utilization(), r->application_utilization(), r->rps_fractional(),
                   r->eps()})
    if (!usable(v)) fail(kTarget, "accepted a value that is not finite and >= 0");
  for (const auto* m : {&r->named_metrics(), &r->utilization(), &r->request_cost()})
    for (const auto& [key, v] : *m)
      if (!usable(v)) fail(kTarget, "accepted map entry \"" + key + "\"");

  const std::string again = orca::bin_header_value(*r);
  auto back = orca::parse_bin_header_value(again);
  if (!back) fail(kTarget, "bin_header_value gave \"" + again + "\", which is rejected: " + back.error().message);
  orca::Report want = *r;
  if (want.mem_utilization() > 1.0) want.set_mem_utilization(0.0);
  auto& u = *want.mutable_utilization();
  for (auto it = u.begin(); it != u.end();) it = it->second > 1.0 || it->first.empty() ? u.erase(it) : std::next(it);
  for (auto* m : {want.mutable_named_metrics(), want.mutable_request_cost()})
    for (auto it = m->begin(); it != m->end();) it = it->first.empty() ? m->erase(it) : std::next(it);
  if (auto d = report_difference(want, *back); !d.empty()) fail(kTarget, "round trip: " + d);
  return 0;
}
