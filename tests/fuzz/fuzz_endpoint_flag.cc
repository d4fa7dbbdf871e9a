// SPDX-License-Identifier: Apache-2.0
// headroomd --endpoint: parse_endpoint_flag and parse_endpoint_flag_checked.
// Input: the flag's text. Invariants beyond "no crash":
//  - both entry points agree (same endpoint, or both an error; the string
//    form's message is the checked form's, with its key);
//  - an error has a message; an accepted endpoint passes validate_endpoints
//    and names a report file the writer takes;
//  - an accepted endpoint written back as a flag (durations through
//    format_duration) parses to the same endpoint.
#include <string>
#include <variant>
#include <vector>

#include "agent/config/config.h"
#include "agent/config/config_endpoint_flag.h"
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
  auto checked = agent::parse_endpoint_flag_checked(text);
  auto plain = agent::parse_endpoint_flag(text);
  if (const auto* err = std::get_if<agent::ConfigError>(&checked)) {
    if (err->message.empty()) fail(kTarget, "an error without a message");
    const auto* msg = std::get_if<std::string>(&plain);
    if (msg == nullptr) fail(kTarget, "parse_endpoint_flag accepts what parse_endpoint_flag_checked rejects");
    const std::string want = err->key.empty() ? err->message : err->key + ": " + err->message;
    if (*msg != want) fail(kTarget, "the two messages differ: \"" + *msg + "\" vs \"" + want + "\"");
    return 0;
  }
  const auto& e = std::get<agent::EndpointConfig>(checked);
  const auto* same = std::get_if<agent::EndpointConfig>(&plain);
  if (same == nullptr || !(*same == e)) fail(kTarget, "the two entry points disagree");
  if (auto err = agent::validate_endpoints({e}, "--endpoint"))
    fail(kTarget, "an accepted flag fails validate_endpoints: " + err->to_string());
  const std::string file = orca::report_file_name("endpoint." + e.name);
  if (file.front() == '.' || file.find('/') != std::string::npos || file.find('\0') != std::string::npos ||
      file.size() >= 200)
    fail(kTarget, "report file name \"" + file + "\" is not one the writer takes");
  const std::string again = as_flag(e);
  auto back = agent::parse_endpoint_flag_checked(again);
  const auto* b = std::get_if<agent::EndpointConfig>(&back);
  if (b == nullptr)
    fail(kTarget, "\"" + again + "\", written from an accepted flag, is rejected: " +
                      std::get<agent::ConfigError>(back).to_string());
  if (!(*b == e)) fail(kTarget, "\"" + again + "\" parses to another endpoint");
  return 0;
}
