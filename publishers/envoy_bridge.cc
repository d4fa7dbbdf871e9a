// SPDX-License-Identifier: Apache-2.0
#include "publishers/envoy_bridge.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <iterator>

#include "publishers/orca_dir_publisher.h"  // make_directories

namespace headroom::publishers {
// kEnvoyValueNames (envoy_bridge_config.h) lists the kinds before
// `utilization`, in their order.
static_assert(std::size(kEnvoyValueNames) == static_cast<std::size_t>(EnvoyValue::Kind::utilization));

std::optional<EnvoyValue> parse_envoy_value(std::string_view text) {
  for (std::size_t i = 0; i < std::size(kEnvoyValueNames); ++i)
    if (text == kEnvoyValueNames[i].name) return EnvoyValue{static_cast<EnvoyValue::Kind>(i), {}};
  constexpr std::string_view prefix = kEnvoyUtilizationPrefix;
  if (text.starts_with(prefix) && text.size() > prefix.size())
    return EnvoyValue{EnvoyValue::Kind::utilization, std::string(text.substr(prefix.size()))};
  return std::nullopt;
}

std::string envoy_value_name(const EnvoyValue& value) {
  if (value.kind == EnvoyValue::Kind::utilization) return std::string(kEnvoyUtilizationPrefix) + value.key;
  return std::string(kEnvoyValueNames[static_cast<std::size_t>(value.kind)].name);
}

std::optional<double> select_envoy_value(const orca::Report& report, const EnvoyValue& value) {
  const auto& u = report.utilization();
  switch (value.kind) {
    case EnvoyValue::Kind::application_utilization:
      if (u.empty()) return std::nullopt;
      return report.application_utilization();
    case EnvoyValue::Kind::cpu_utilization:
      if (!u.contains(std::string(orca::kSignalCpu))) return std::nullopt;
      return report.cpu_utilization();
    case EnvoyValue::Kind::mem_utilization:
      if (!u.contains(std::string(orca::kSignalMemory))) return std::nullopt;
      return report.mem_utilization();
    case EnvoyValue::Kind::utilization:
      if (auto it = u.find(value.key); it != u.end()) return it->second;
      return std::nullopt;
  }
  return std::nullopt;
}

double envoy_pressure(std::optional<double> value, double neutral) {
  if (!value || std::isnan(*value)) return neutral;
  if (*value >= 1.0) return 1.0;
  if (*value > 0.0) return *value;
  return 0.0;  // also turns -0.0 into 0.0, so the text never has a sign
}

std::string format_envoy_pressure(double pressure) {
  if (!(pressure > 0.0)) pressure = 0.0;  // NaN, negatives, -0.0
  if (pressure > 1.0) pressure = 1.0;
  std::array<char, 32> buf{};
  // to_chars is locale-independent, unlike printf: Envoy's parser wants '.'.
  const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), pressure, std::chars_format::fixed, 6);
  std::string out(buf.data(), res.ptr);
  while (out.ends_with('0')) out.pop_back();
  if (out.ends_with('.')) out.pop_back();
  out += '\n';
  return out;
}

Result<EnvoyBridge> EnvoyBridge::open(EnvoyBridgeOptions options) {
  const std::string& file = options.file;
  const auto slash = file.rfind('/');
  if (file.empty() || file.front() != '/' || slash == std::string::npos || slash + 1 == file.size())
    return logic_error("envoy bridge file must be an absolute path naming a file, got \"" + file + "\"");
  const std::string dir = slash == 0 ? std::string("/") : file.substr(0, slash);
  std::string name = file.substr(slash + 1);
  if (!(options.neutral >= 0.0 && options.neutral <= 1.0))
    return logic_error("envoy bridge neutral value must be in [0, 1]");

  if (auto made = make_directories(dir); !made) return made.error();
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return system_error(errno, "cannot write into " + dir);
  auto writer = orca::ReportFileWriter::open(dir, orca::WriterOptions{0644, options.fsync});
  if (!writer) return writer.error();
  writer->remove_stale_temporaries(name);  // only this file's: the directory may be shared
  return EnvoyBridge(std::move(options), std::move(writer.value()), std::move(name));
}

Result<void> EnvoyBridge::write_pressure(double pressure) {
  const std::string text = format_envoy_pressure(envoy_pressure(pressure, options_.neutral));
  auto r = writer_.write_bytes(name_, text);
  if (!r && r.error().code == ENOENT) {
    // The directory was removed (someone cleaned /run): recreate it, retry once.
    if (auto made = make_directories(writer_.dir()); !made) return made.error();
    r = writer_.write_bytes(name_, text);
  }
  return r;
}

Result<void> EnvoyBridge::publish(const orca::Report& node) {
  return write_pressure(envoy_pressure(select_envoy_value(node, options_.value), options_.neutral));
}

Result<void> EnvoyBridge::publish_neutral() { return write_pressure(options_.neutral); }

Result<Publishers> EnvoyPublisher::build(const std::vector<EnvoyBridgeConfig>& bridges, bool fsync) {
  Publishers out;
  for (std::size_t i = 0; i < bridges.size(); ++i) {
    const auto& e = bridges[i];
    const std::string key = "envoy[" + std::to_string(i) + "]";
    auto value = parse_envoy_value(e.value);  // the configuration validated it
    if (!value) return Error{0, key + ".value: unknown value \"" + e.value + "\""};
    auto bridge = EnvoyBridge::open({e.file, *value, e.neutral, fsync});
    if (!bridge) {
      Error err = bridge.error();
      err.message = key + ".file: " + err.message;
      if (err.code == 0) err.code = EINVAL;  // a file that cannot be written: not the file's syntax
      return err;
    }
    out.push_back(std::unique_ptr<Publisher>(new EnvoyPublisher(std::move(bridge.value()))));
  }
  return out;
}

Result<void> EnvoyPublisher::logged(Result<void> r) {
  if (!r)
    failing_.fail(spdlog::level::err, "cannot publish Envoy pressure to {}: {}; Envoy keeps the previous value",
                  bridge_.file(), r.error().message);
  else
    failing_.ok("publishing Envoy pressure to {} again", bridge_.file());
  return r;
}

Result<void> EnvoyPublisher::publish(const Tick& tick) { return logged(bridge_.publish(tick.node().report)); }

// Envoy would otherwise keep the last pressure for ever.
void EnvoyPublisher::stop(const Tick&) { (void)logged(bridge_.publish_neutral()); }

void EnvoyPublisher::retire() {
  spdlog::info("Envoy bridge {} removed from the configuration; writing its neutral value", bridge_.file());
  (void)logged(bridge_.publish_neutral());
}

void EnvoyPublisher::announce() const {
  const auto& o = bridge_.options();
  std::string neutral = format_envoy_pressure(o.neutral);
  neutral.pop_back();  // the newline
  spdlog::info("Envoy bridge: node {} -> {} (neutral {})", envoy_value_name(o.value), o.file, neutral);
}

}  // namespace headroom::publishers
