// SPDX-License-Identifier: Apache-2.0
// Durations as the configuration and --endpoint write them: parse_duration,
// parse_duration_checked, format_duration. Input: the text of a duration;
// its first 8 bytes are also read as a count of nanoseconds. Invariants
// beyond "no crash":
//  - both parsers agree, and an error says what is wrong;
//  - a parsed duration is >= 0 and format_duration of it parses back to it;
//  - format_duration of any non-negative count parses back to that count.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "agent/config/config.h"
#include "agent/config/duration.h"
#include "fuzz_support.h"

namespace agent = headroom::agent;
using headroom::fuzz::fail;

namespace {

constexpr std::string_view kTarget = "fuzz_duration";

void check_round_trip(std::chrono::nanoseconds d) {
  const std::string text = agent::format_duration(d);
  auto back = agent::parse_duration(text);
  if (!back) fail(kTarget, "format_duration(" + std::to_string(d.count()) + ") = \"" + text + "\" does not parse");
  if (*back != d)
    fail(kTarget, "\"" + text + "\" parses to " + std::to_string(back->count()) + ", not " + std::to_string(d.count()));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  headroom::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = headroom::fuzz::as_text(data, size);
  auto d = agent::parse_duration(text);
  auto checked = agent::parse_duration_checked(text);
  if (!checked) {
    if (d) fail(kTarget, "parse_duration accepts what parse_duration_checked rejects");
    if (checked.error().message.empty()) fail(kTarget, "an error without a message");
  } else {
    if (!d || *d != *checked) fail(kTarget, "the two parsers disagree");
    if (d->count() < 0) fail(kTarget, "a negative duration parsed");
    check_round_trip(*d);
  }
  if (size >= sizeof(int64_t)) {
    int64_t n = 0;
    std::memcpy(&n, data, sizeof n);
    if (n >= 0) check_round_trip(std::chrono::nanoseconds(n));
  }
  return 0;
}
