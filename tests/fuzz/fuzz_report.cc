// SPDX-License-Identifier: Apache-2.0
// The report parser (parse_report, validate_report), its metadata and
// staleness, and the load headers built from what it accepts. Input: the
// bytes of a report file. Invariants beyond "no crash":
//  - parse_report accepts exactly the messages protobuf parses and
//    validate_report passes;
//  - an accepted report re-serializes and re-parses to the same values and
//    the same metadata;
//  - metadata_of only ever returns values in range (timestamp and seq exact
//    integers, interval at most an hour), and check_staleness calls a report
//    fresh only when it has such metadata, was not stopped, and its age is
//    within the limit; a stale verdict always has a reason;
//  - text_header_value and bin_header_value of an accepted report parse back
//    (never a header our own parser, or Envoy, rejects) to its usable values.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_support.h"
#include "headroom/orca/load_header.h"
#include "headroom/orca/report.h"

namespace orca = headroom::orca;
using headroom::fuzz::fail;
using headroom::fuzz::report_difference;

namespace {

constexpr std::string_view kTarget = "fuzz_report";
constexpr double kExactIntegers = 9'007'199'254'740'992.0;  // 2^53
constexpr int64_t kMaxIntervalMs = 3'600'000;

void check_metadata_range(const orca::ReportMetadata& md) {
  if (md.timestamp_ms < 0 || static_cast<double>(md.timestamp_ms) > kExactIntegers)
    fail(kTarget, "metadata_of gave timestamp_ms " + std::to_string(md.timestamp_ms));
  if (static_cast<double>(md.seq) > kExactIntegers) fail(kTarget, "metadata_of gave seq " + std::to_string(md.seq));
  if (md.interval_ms < 0 || md.interval_ms > kMaxIntervalMs)
    fail(kTarget, "metadata_of gave interval_ms " + std::to_string(md.interval_ms));
}

void check_staleness_at(const orca::Report& r, int64_t now, double max_intervals, int64_t min_age_ms) {
  const orca::Staleness s = orca::check_staleness(r, now, max_intervals, min_age_ms);
  if (s.stale) {
    if (s.reason.empty()) fail(kTarget, "stale without a reason");
    return;
  }
  if (!s.reason.empty()) fail(kTarget, "fresh with a reason: " + s.reason);
  auto md = orca::metadata_of(r);
  if (!md) fail(kTarget, "fresh without valid metadata: " + md.error().message);
  check_metadata_range(*md);
  if (md->stopped) fail(kTarget, "fresh although stopped");
  if (s.age_ms != now - md->timestamp_ms) fail(kTarget, "age_ms " + std::to_string(s.age_ms) + " is not now - timestamp");
  const double limit = std::max(static_cast<double>(min_age_ms), max_intervals * static_cast<double>(md->interval_ms));
  if (std::abs(static_cast<double>(s.age_ms)) > limit)
    fail(kTarget, "fresh at age " + std::to_string(s.age_ms) + " ms, beyond the limit " + std::to_string(limit));
}

// Staleness around the report's own timestamp (the interesting edges), and
// at fixed times for reports without metadata.
void check_staleness(const orca::Report& r) {
  auto md = orca::metadata_of(r);
  if (md) check_metadata_range(*md);
  const int64_t ts = md ? md->timestamp_ms : 1'700'000'000'000;
  const int64_t interval = md ? md->interval_ms : 100;
  const int64_t offsets[] = {0,     1,     -1,           999,          1000,         1001,        -1000,
                             -1001, 3 * interval, 3 * interval + 1, -3 * interval - 1, int64_t{1} << 53};
  for (const int64_t off : offsets) {
    check_staleness_at(r, ts + off, 3.0, 1000);
    check_staleness_at(r, ts + off, 1.0, 0);
    check_staleness_at(r, ts - off, 0.5, 1000);
  }
  check_staleness_at(r, 0, 3.0, 1000);
  check_staleness_at(r, ts, 1e300, 0);
  check_staleness_at(r, ts + 5, 1e-300, 0);
}

// S2 of load_header.cc: keys the TEXT form can carry.
bool text_safe_key(std::string_view key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c >= 0x21 && c <= 0x7e && c != ',' && c != '=' && c != ':';
  });
}

void check_text_header(const orca::Report& r) {
  const std::string value = orca::text_header_value(r);
  auto back = orca::parse_text_header_value(value);
  if (!back) fail(kTarget, "text_header_value gave \"" + value + "\", which is rejected: " + back.error().message);
  // What the TEXT form carries of a valid report: the five top-level values,
  // named_metrics that are >= 0, every utilization, under text-safe keys.
  orca::Report want;
  want.set_cpu_utilization(r.cpu_utilization());
  want.set_mem_utilization(r.mem_utilization());
  want.set_application_utilization(r.application_utilization());
  want.set_rps_fractional(r.rps_fractional());
  want.set_eps(r.eps());
  for (const auto& [key, v] : r.named_metrics())
    if (text_safe_key(key) && v >= 0) (*want.mutable_named_metrics())[key] = v;
  for (const auto& [key, v] : r.utilization())
    if (text_safe_key(key)) (*want.mutable_utilization())[key] = v;
  if (auto d = report_difference(want, *back); !d.empty())
    fail(kTarget, "TEXT round trip of \"" + value + "\": " + d);
}

void check_bin_header(const orca::Report& r) {
  const std::string value = orca::bin_header_value(r);
  if (value.empty()) fail(kTarget, "bin_header_value is empty");
  auto back = orca::parse_bin_header_value(value);
  if (!back) fail(kTarget, "bin_header_value gave \"" + value + "\", which is rejected: " + back.error().message);
  // BIN keeps everything but negative named_metrics (validate_report allows
  // them, Envoy does not).
  orca::Report want = r;
  auto& nm = *want.mutable_named_metrics();
  for (auto it = nm.begin(); it != nm.end();) it = it->second < 0 ? nm.erase(it) : std::next(it);
  if (auto d = report_difference(want, *back); !d.empty()) fail(kTarget, "BIN round trip: " + d);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  headroom::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = headroom::fuzz::as_text(data, size);
  // Metadata and staleness apply to any message protobuf takes, valid or not.
  orca::Report raw;
  const bool protobuf_ok = size <= INT_MAX && raw.ParseFromArray(data, static_cast<int>(size));
  if (protobuf_ok) check_staleness(raw);

  auto r = orca::parse_report(bytes);
  if (!r) {
    if (r.error().message.empty()) fail(kTarget, "rejected without a message");
    if (protobuf_ok && orca::validate_report(raw)) fail(kTarget, "rejects a message that validates");
    return 0;
  }
  if (!protobuf_ok) fail(kTarget, "accepts bytes protobuf does not parse");
  if (auto v = orca::validate_report(*r); !v) fail(kTarget, "accepted a report that does not validate");

  std::string again;
  if (!r->SerializeToString(&again)) fail(kTarget, "an accepted report does not serialize");
  auto r2 = orca::parse_report(again);
  if (!r2) fail(kTarget, "re-serialized report rejected: " + r2.error().message);
  if (auto d = report_difference(*r, *r2); !d.empty()) fail(kTarget, "re-serialized report differs: " + d);
  auto md = orca::metadata_of(*r);
  auto md2 = orca::metadata_of(*r2);
  if (md.ok() != md2.ok()) fail(kTarget, "metadata differs after re-serializing");
  if (md && (md->timestamp_ms != md2->timestamp_ms || md->seq != md2->seq || md->interval_ms != md2->interval_ms ||
             md->stopped != md2->stopped))
    fail(kTarget, "metadata values differ after re-serializing");

  check_text_header(*r);
  check_bin_header(*r);
  return 0;
}
