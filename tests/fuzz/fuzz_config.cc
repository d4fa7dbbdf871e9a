// SPDX-License-Identifier: Apache-2.0
// The configuration parser, agent::parse_config. Input: the text of a
// headroom.toml. Invariants beyond "no crash": a rejected file gets a
// headroom::Error that names the file and says what is wrong; an accepted one is
// a configuration the agent can run with:
//  - agent.interval within kMinInterval..kMaxInterval, agent.smoothing within
//    0..kMaxSmoothing and at most kMaxWindowSlots intervals;
//  - every endpoint valid on its own and as a list (validate_endpoints), its
//    report file name one the atomic writer takes (no leading '.', no '/',
//    no NUL, under 200 bytes) and distinct from every other endpoint's;
//  - every [[envoy]] file absolute and lexically normal, with a file name the
//    writer takes that is not a report's; weights and neutral values in
//    [0, 1]; only known signals; the Prometheus and oob bounds.
#include <filesystem>
#include <set>
#include <string>

#include "agent/config/config.h"
#include "agent/config/config_checks.h"
#include "fuzz_support.h"
#include "headroom/orca/report.h"

namespace agent = headroom::agent;
namespace orca = headroom::orca;
using headroom::fuzz::fail;

namespace {

constexpr std::string_view kTarget = "fuzz_config";
constexpr const char* kFile = "fuzz.toml";

// orca/src/report_writer.cc: the names the atomic writer accepts.
bool writer_name(std::string_view name) {
  return !name.empty() && name.front() != '.' && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos && name.size() < 200;
}

bool is_signal(std::string_view key) {
  for (auto s : agent::kNodeSignals)
    if (s == key) return true;
  return false;
}

void check_endpoint(const agent::EndpointConfig& e) {
  if (e.name.empty() || e.name.size() > agent::kMaxEndpointNameBytes || e.name == "." || e.name == "..")
    fail(kTarget, "endpoint name \"" + e.name + "\"");
  for (char c : e.name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '-';
    if (!ok) fail(kTarget, "endpoint name \"" + e.name + "\" has a byte outside [A-Za-z0-9_.-]");
  }
  const std::string file = orca::report_file_name("endpoint." + e.name);
  if (!writer_name(file)) fail(kTarget, "report file name \"" + file + "\" is not one the writer takes");
  if (e.port == 0) fail(kTarget, "endpoint " + e.name + " has port 0");
  if (!e.path.empty()) {
    if (e.path.front() != '/' || e.path.size() > agent::kMaxEndpointPathBytes)
      fail(kTarget, "endpoint path \"" + e.path + "\"");
    for (char c : e.path)
      if (c <= ' ' || c > '~') fail(kTarget, "endpoint path \"" + e.path + "\" has a byte that is not printable");
  }
  if (e.target.count() <= 0 || e.max < e.target) fail(kTarget, "endpoint " + e.name + " target/max out of order");
  if (e.max_concurrency > agent::kMaxConcurrencyLimit)
    fail(kTarget, "endpoint " + e.name + " max_concurrency " + std::to_string(e.max_concurrency));
}

void check_config(const agent::Config& c) {
  if (c.interval < agent::kMinInterval || c.interval > agent::kMaxInterval)
    fail(kTarget, "interval " + agent::format_duration(c.interval) + " outside its bounds");
  if (c.smoothing.count() < 0 || c.smoothing > agent::kMaxSmoothing)
    fail(kTarget, "smoothing " + agent::format_duration(c.smoothing) + " outside its bounds");
  if (static_cast<std::size_t>(c.smoothing / c.interval) > agent::kMaxWindowSlots)
    fail(kTarget, "smoothing " + agent::format_duration(c.smoothing) + " is more than 10000 intervals of " +
                      agent::format_duration(c.interval));
  if (c.orca_dir.empty() || c.proc_root.empty() || c.sys_root.empty()) fail(kTarget, "an empty path in [agent]");

  if (c.endpoints.size() > agent::kMaxEndpoints) fail(kTarget, std::to_string(c.endpoints.size()) + " endpoints");
  std::set<std::string> files;
  for (const auto& e : c.endpoints) {
    check_endpoint(e);
    if (!files.insert(orca::report_file_name("endpoint." + e.name)).second)
      fail(kTarget, "two endpoints share the report file of \"" + e.name + "\"");
  }
  if (auto r = agent::validate_endpoints(c.endpoints, kFile); !r)
    fail(kTarget, "accepted endpoints fail validate_endpoints: " + r.error().to_string());

  for (const auto& s : c.signals)
    if (!is_signal(s)) fail(kTarget, "unknown signal \"" + s + "\" accepted");
  for (const auto& [key, w] : c.weights)
    if (!is_signal(key) || !(w >= 0.0 && w <= 1.0)) fail(kTarget, "weight of \"" + key + "\"");
  for (const auto& b : c.envoy) {
    const std::filesystem::path p(b.file);
    if (!p.is_absolute() || p.lexically_normal().string() != b.file)
      fail(kTarget, "envoy file \"" + b.file + "\" is not absolute and normal");
    const std::string name = p.filename().string();
    if (!writer_name(name) || name.ends_with(orca::kReportSuffix))
      fail(kTarget, "envoy file name \"" + name + "\" is not one the writer may use");
    if (!(b.neutral >= 0.0 && b.neutral <= 1.0)) fail(kTarget, "envoy neutral out of [0, 1]");
  }
  if (c.prometheus.textfile_interval < agent::kMinTextfileInterval ||
      c.prometheus.textfile_interval > agent::kMaxTextfileInterval)
    fail(kTarget, "prometheus.textfile_interval outside its bounds");
  if (!c.prometheus.textfile.empty() && (c.prometheus.textfile.front() != '/' || !c.prometheus.textfile.ends_with(".prom")))
    fail(kTarget, "prometheus.textfile \"" + c.prometheus.textfile + "\"");
  if (c.oob.max_streams < 1 || c.oob.max_streams > agent::kMaxOobStreams) fail(kTarget, "oob.max_streams");
  if (c.oob.default_interval < agent::kMinOobDefaultInterval || c.oob.default_interval > agent::kMaxOobDefaultInterval)
    fail(kTarget, "oob.default_interval outside its bounds");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  headroom::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = agent::parse_config(headroom::fuzz::as_text(data, size), kFile);
  if (!parsed) {
    const headroom::Error& err = parsed.error();
    if (err.file != kFile) fail(kTarget, "error does not name the file: " + err.to_string());
    if (err.message.empty()) fail(kTarget, "error without a message: " + err.to_string());
    return 0;
  }
  check_config(*parsed);
  return 0;
}
