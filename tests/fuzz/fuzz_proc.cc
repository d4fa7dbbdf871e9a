// SPDX-License-Identifier: Apache-2.0
// The /proc parsers (probes/parse.h): /proc/stat, /proc/schedstat,
// /proc/meminfo and /proc/pressure/*. Input: a file's text, given to every
// parser (the corpus holds one real file of each kind). Invariants beyond
// "no crash": an error says what is wrong; a /proc/stat reading has CPUs and
// a busy total that does not wrap; a schedstat reading has CPUs; pressure
// averages are finite.
#include <cmath>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "probes/parse.h"

namespace probes = headroom::probes;
using headroom::fuzz::fail;

namespace {

constexpr std::string_view kTarget = "fuzz_proc";

template <class R>
bool accepted(const R& r, std::string_view parser) {
  if (!r && r.error().message.empty()) fail(kTarget, std::string(parser) + " rejects without a message");
  return r.ok();
}

void check_pressure_line(const probes::PressureLine& l) {
  if (!std::isfinite(l.avg10) || !std::isfinite(l.avg60) || !std::isfinite(l.avg300))
    fail(kTarget, "parse_pressure gave an average that is not finite");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = headroom::fuzz::as_text(data, size);
  if (auto r = probes::parse_proc_stat(text); accepted(r, "parse_proc_stat")) {
    if (r->ncpu == 0) fail(kTarget, "parse_proc_stat accepted a file without cpuN lines");
  }
  if (auto r = probes::parse_schedstat(text); accepted(r, "parse_schedstat")) {
    if (r->ncpu == 0) fail(kTarget, "parse_schedstat accepted a file without cpuN lines");
  }
  (void)accepted(probes::parse_meminfo(text), "parse_meminfo");
  if (auto r = probes::parse_pressure(text); accepted(r, "parse_pressure")) {
    check_pressure_line(r->some);
    if (r->full) check_pressure_line(*r->full);
  }
  return 0;
}
