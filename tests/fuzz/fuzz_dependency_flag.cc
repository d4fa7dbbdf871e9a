// SPDX-License-Identifier: Apache-2.0
// headroomd --dependency: parse_dependency_flag. Input: the flag's text.
// Invariants beyond "no crash":
//  - an error has a message and no file or place (the flag is not a file);
//    its key, when set, is a key of [[dependency]];
//  - an accepted dependency passes validate_dependencies, has exactly one
//    of a host and "any host" with a port, and names a report file the
//    writer takes;
//  - an accepted dependency written back as a flag (durations through
//    format_duration, an IPv6 host in brackets, the error rule through
//    format_dependency_errors) parses to the same one.
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/config/config_checks.h"
#include "fuzz_flag_support.h"
#include "fuzz_support.h"
#include "headroom/orca/names.h"

namespace agent = headroom::agent;
namespace orca = headroom::orca;
using headroom::fuzz::fail;

namespace {

constexpr std::string_view kTarget = "fuzz_dependency_flag";

std::string as_flag(const agent::DependencyConfig& d) {
  std::string s = "name=" + d.name;
  if (d.host.empty()) s += ",port=" + std::to_string(d.port);
  else if (d.host.find(':') != std::string::npos) s += ",address=[" + d.host + "]:" + std::to_string(d.port);
  else s += ",address=" + d.host + ":" + std::to_string(d.port);
  if (!d.callers_cgroup.empty()) s += ",callers_cgroup=" + d.callers_cgroup;
  if (!d.callers_process.empty()) s += ",callers_process=" + d.callers_process;
  s += ",protocol=" + std::string(agent::dependency_protocol_name(d.protocol));
  s += ",target=" + agent::format_duration(d.target) + ",max=" + agent::format_duration(d.max);
  if (d.max_concurrency != 0) s += ",max_concurrency=" + std::to_string(d.max_concurrency);
  s += ",errors=" + agent::format_dependency_errors(d.errors);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  headroom::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = headroom::fuzz::as_text(data, size);
  auto parsed = agent::parse_dependency_flag(text);
  if (!parsed) {
    headroom::fuzz::check_flag_error(kTarget, parsed.error(), "dependency");
    return 0;
  }
  const agent::DependencyConfig& d = *parsed;
  if (auto r = agent::validate_dependencies({d}, "--dependency"); !r)
    fail(kTarget, "an accepted flag fails validate_dependencies: " + r.error().to_string());
  if (d.port == 0) fail(kTarget, "an accepted dependency without a port");
  headroom::fuzz::check_report_file(kTarget, orca::dependency_scope(d.name));
  const std::string again = as_flag(d);
  headroom::fuzz::check_round_trip(kTarget, d, again, agent::parse_dependency_flag, "dependency");
  return 0;
}
