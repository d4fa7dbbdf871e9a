// SPDX-License-Identifier: Apache-2.0
// headroomd --endpoint: parse_endpoint_flag. Input: the flag's text.
// Invariants beyond "no crash":
//  - an error has a message and no file or place (the flag is not a file);
//    its key, when set, is a key of [[endpoint]];
//  - an accepted endpoint passes validate_endpoints
//    and names a report file the writer takes;
//  - an accepted endpoint written back as a flag (durations through
//    format_duration) parses to the same endpoint.
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "fuzz_flag_support.h"
#include "fuzz_support.h"

namespace agent = headroom::agent;
namespace orca = headroom::orca;
using headroom::fuzz::fail;

namespace {

constexpr std::string_view kTarget = "fuzz_endpoint_flag";

std::string as_flag(const agent::EndpointConfig& e) {
  std::string s = "name=" + e.name + ",port=" + std::to_string(e.port);
  if (!e.path.empty()) s += ",path=" + e.path;
  s += ",target=" + agent::format_duration(e.target) + ",max=" + agent::format_duration(e.max);
  if (e.max_concurrency != 0) s += ",max_concurrency=" + std::to_string(e.max_concurrency);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  headroom::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = headroom::fuzz::as_text(data, size);
  auto parsed = agent::parse_endpoint_flag(text);
  if (!parsed) {
    headroom::fuzz::check_flag_error(kTarget, parsed.error(), "endpoint");
    return 0;
  }
  const agent::EndpointConfig& e = *parsed;
  if (auto r = agent::validate_endpoints({e}, "--endpoint"); !r)
    fail(kTarget, "an accepted flag fails validate_endpoints: " + r.error().to_string());
  headroom::fuzz::check_report_file(kTarget, "endpoint." + e.name);
  const std::string again = as_flag(e);
  headroom::fuzz::check_round_trip(kTarget, e, again, agent::parse_endpoint_flag, "endpoint");
  return 0;
}
