// SPDX-License-Identifier: Apache-2.0
// headroomd --endpoint: parse_endpoint_flag. Input: the flag's text.
// Invariants beyond "no crash":
//  - an error has a message and no file or place (the flag is not a file);
//    its key, when set, is a key of [[endpoint]];
//  - an accepted endpoint passes validate_endpoints
//    and names a report file the writer takes;
//  - an accepted endpoint written back as a flag (durations through
//    format_duration) parses to the same endpoint.
#include <algorithm>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/config/config_keys.h"
#include "fuzz_support.h"
#include "headroom/orca/report.h"

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
    const headroom::Error& err = parsed.error();
    if (err.message.empty()) fail(kTarget, "an error without a message");
    if (!err.file.empty() || err.line != 0) fail(kTarget, "an error with a place: " + err.to_string());
    const auto keys = agent::keys_in("endpoint");
    if (!err.key.empty() && std::find(keys.begin(), keys.end(), err.key) == keys.end())
      fail(kTarget, "an error naming no key of [[endpoint]]: " + err.to_string());
    return 0;
  }
  const agent::EndpointConfig& e = *parsed;
  if (auto r = agent::validate_endpoints({e}, "--endpoint"); !r)
    fail(kTarget, "an accepted flag fails validate_endpoints: " + r.error().to_string());
  const std::string file = orca::report_file_name("endpoint." + e.name);
  if (file.front() == '.' || file.find('/') != std::string::npos || file.find('\0') != std::string::npos ||
      file.size() >= 200)
    fail(kTarget, "report file name \"" + file + "\" is not one the writer takes");
  const std::string again = as_flag(e);
  auto back = agent::parse_endpoint_flag(again);
  if (!back)
    fail(kTarget, "\"" + again + "\", written from an accepted flag, is rejected: " + back.error().to_string());
  if (!(*back == e)) fail(kTarget, "\"" + again + "\" parses to another endpoint");
  return 0;
}
