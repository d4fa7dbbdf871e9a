// SPDX-License-Identifier: Apache-2.0
// --config (shed_config_watch.h).
#include "shed_config_watch.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <system_error>
#include <utility>

#include <headroom/orca/shedder_config.h>

namespace shedding_server {

namespace {
constexpr const char* kProgram = "headroom-example-shedding-server";

// The shortest text that reads back as the same double: 0.28, not 0.28000000000000003.
std::string number(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc{} ? std::string(buf, end) : "0";
}
}  // namespace

FileStamp stamp_of(const std::string& path) {
  struct stat st {};
  FileStamp s;
  if (::stat(path.c_str(), &st) != 0) {
    s.error = errno;
    return s;
  }
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.size = st.st_size;
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return s;
}

std::string describe_thresholds(const orca::ShedderConfig& config) {
  std::string out;
  for (const auto& [signal, t] : config.signals) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " %g..%g..%g", t.shed_start, t.critical_start, t.all_shed);
    out += (out.empty() ? "" : ", ") + signal + buf;
  }
  return out;
}

std::string thresholds_json(const orca::ShedderConfig& config) {
  std::string out = "[";
  for (const auto& [signal, t] : config.signals) {
    // Signal names are is_known_signal's: no character JSON must escape but
    // a quote or a backslash, which the names cannot carry usefully anyway.
    std::string name;
    for (char c : signal)
      if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) name += c;
    out += (out.size() > 1 ? "," : "") + std::string("{\"signal\":\"") + name + "\",\"shed_start\":" +
           number(t.shed_start) + ",\"critical_start\":" + number(t.critical_start) + ",\"all_shed\":" +
           number(t.all_shed) + "}";
  }
  return out + "]";
}

headroom::Result<ShedConfigWatch> ShedConfigWatch::open(std::string path, std::string endpoint,
                                                         orca::StalePolicy stale) {
  ShedConfigWatch w(std::move(path), std::move(endpoint), stale);
  w.stamp_ = stamp_of(w.path_);
  auto config = w.read();
  if (!config) return std::move(config).error();
  w.config_ = std::move(*config);
  return w;
}

headroom::Result<orca::ShedderConfig> ShedConfigWatch::read() const {
  auto config = orca::read_shedder_config_file(path_, endpoint_);
  if (!config) return config;
  config->stale = stale_;
  // The shedder's own check (the file's reader checks each entry the same way).
  if (auto valid = orca::validate_config(*config); !valid) return headroom::logic_error(path_ + ": " + valid.error().message);
  return config;
}

std::optional<orca::ShedderConfig> ShedConfigWatch::poll() {
  const FileStamp now = stamp_of(path_);
  if (now == stamp_) return std::nullopt;
  stamp_ = now;
  auto config = read();
  if (!config) {
    std::fprintf(stderr, "%s: shed config not reloaded from %s: %s; keeping %s\n", kProgram, path_.c_str(),
                 config.error().to_string().c_str(), describe_thresholds(config_).c_str());
    return std::nullopt;
  }
  config_ = std::move(*config);
  std::fprintf(stderr, "%s: shed config reloaded from %s: %s\n", kProgram, path_.c_str(),
               describe_thresholds(config_).c_str());
  return config_;
}

}  // namespace shedding_server
