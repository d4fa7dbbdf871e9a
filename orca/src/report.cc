// SPDX-License-Identifier: Apache-2.0
#include "headroom/orca/report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace headroom::orca {
namespace {

std::string describe(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+inf" : "-inf";
  return std::to_string(v);
}

Result<void> check_value(std::string_view field, double v, bool at_most_one) {
  if (!std::isfinite(v) || v < 0.0 || (at_most_one && v > 1.0)) {
    return logic_error(std::string(field) + " = " + describe(v) + " is outside " +
                       (at_most_one ? "[0, 1]" : "[0, +inf)"));
  }
  return {};
}

Result<void> check_map(std::string_view field, const google::protobuf::Map<std::string, double>& m,
                       bool at_most_one) {
  for (const auto& [key, v] : m) {
    if (key.empty()) return logic_error(std::string(field) + " has an empty key");
    auto r = check_value(std::string(field) + "[\"" + key + "\"]", v, at_most_one);
    if (!r) return r;
  }
  return {};
}

}  // namespace

std::string report_file_name(std::string_view scope) {
  std::string name(scope);
  name += kReportSuffix;
  return name;
}

Result<ReportMetadata> metadata_of(const Report& report) {
  const auto& nm = report.named_metrics();
  // Each value must fit the integer it becomes (casting a larger double is
  // undefined behaviour), and a report may not declare an interval longer
  // than an agent can run with: it would never read as stale.
  constexpr double kExactIntegers = 9'007'199'254'740'992.0;  // 2^53
  constexpr double kMaxIntervalMs = 3'600'000.0;               // agent.interval's bound, 1 h
  auto get = [&](std::string_view key, double max) -> Result<double> {
    auto it = nm.find(std::string(key));
    if (it == nm.end()) return logic_error("named_metrics lacks \"" + std::string(key) + "\"");
    if (!std::isfinite(it->second) || it->second < 0)
      return logic_error("named_metrics[\"" + std::string(key) + "\"] is not a finite value >= 0");
    if (it->second > max)
      return logic_error("named_metrics[\"" + std::string(key) + "\"] is larger than " +
                         std::to_string(static_cast<int64_t>(max)));
    return it->second;
  };
  auto ts = get(kTimestampMsKey, kExactIntegers);
  if (!ts) return ts.error();
  auto seq = get(kSeqKey, kExactIntegers);
  if (!seq) return seq.error();
  auto interval = get(kIntervalMsKey, kMaxIntervalMs);
  if (!interval) return interval.error();
  ReportMetadata md;
  md.timestamp_ms = static_cast<int64_t>(*ts);
  md.seq = static_cast<uint64_t>(*seq);
  md.interval_ms = static_cast<int64_t>(*interval);
  auto stopped = nm.find(std::string(kStoppedKey));
  md.stopped = stopped != nm.end() && stopped->second != 0.0;
  auto gone = nm.find(std::string(kMetricInstanceGone));
  md.instance_gone = md.stopped && gone != nm.end() && gone->second != 0.0;
  return md;
}

Result<void> validate_report(const Report& r) {
  if (auto c = check_value("cpu_utilization", r.cpu_utilization(), false); !c) return c;
  if (auto c = check_value("mem_utilization", r.mem_utilization(), true); !c) return c;
  if (auto c = check_value("rps_fractional", r.rps_fractional(), false); !c) return c;
  if (auto c = check_value("eps", r.eps(), false); !c) return c;
  if (auto c = check_value("application_utilization", r.application_utilization(), false); !c) return c;
  if (auto c = check_map("utilization", r.utilization(), true); !c) return c;
  if (auto c = check_map("request_cost", r.request_cost(), false); !c) return c;
  for (const auto& [key, v] : r.named_metrics()) {
    if (key.empty()) return logic_error("named_metrics has an empty key");
    if (!std::isfinite(v)) return logic_error("named_metrics[\"" + key + "\"] = " + describe(v) + " is not finite");
  }
  return {};
}

Result<Report> parse_report(std::string_view bytes) {
  Report report;
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      !report.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return logic_error("not a valid xds.data.orca.v3.OrcaLoadReport (" + std::to_string(bytes.size()) +
                       " bytes)");
  }
  if (auto v = validate_report(report); !v) return v.error();
  return report;
}

Result<void> check_file_owner(uid_t file_uid, mode_t file_mode, uid_t owner) {
  const std::string whose = "uid " + std::to_string(owner);
  if (file_uid != owner)
    return Error{EPERM, "owned by uid " + std::to_string(file_uid) + ", not by " + whose +
                            ", the only owner this reader accepts"};
  if ((file_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(file_mode & 07777));
    return Error{EPERM, std::string("mode ") + mode + " lets " +
                            ((file_mode & S_IWOTH) != 0 ? "other users" : "its group") +
                            " write it, so not only " + whose + " could have written it"};
  }
  return {};
}

Result<Report> read_report_file(const std::string& path, std::size_t max_bytes, std::optional<uid_t> owner) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return system_error(errno, "open " + path);
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return system_error(e, "stat " + path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return logic_error(path + ": not a regular file");
  }
  if (owner) {
    if (auto trusted = check_file_owner(st.st_uid, st.st_mode, *owner); !trusted) {
      ::close(fd);
      return Error{trusted.error().code, path + ": " + trusted.error().message};
    }
  }
  if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return logic_error(path + ": " + std::to_string(st.st_size) + " bytes exceeds the limit of " +
                       std::to_string(max_bytes));
  }
  // Read one byte more than allowed so a file that grew after fstat is caught.
  std::string buf(max_bytes + 1, '\0');
  std::size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::read(fd, buf.data() + got, buf.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return system_error(e, "read " + path);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got > max_bytes) return logic_error(path + ": larger than the limit of " + std::to_string(max_bytes) + " bytes");
  buf.resize(got);
  auto report = parse_report(buf);
  if (!report) return logic_error(path + ": " + report.error().message);
  return report;
}

Staleness check_staleness(const Report& report, int64_t now_unix_ms, double max_intervals, int64_t min_age_ms) {
  Staleness s;
  auto md = metadata_of(report);
  if (!md) {
    s.stale = true;
    s.reason = md.error().message;
    return s;
  }
  s.age_ms = now_unix_ms - md->timestamp_ms;
  if (md->stopped) {
    s.stale = true;
    s.reason = md->instance_gone ? "the instance stopped serving" : "the agent stopped";
    return s;
  }
  double limit = std::max(static_cast<double>(min_age_ms), max_intervals * static_cast<double>(md->interval_ms));
  if (static_cast<double>(s.age_ms) > limit) {
    s.stale = true;
    s.reason = "older than " + std::to_string(static_cast<int64_t>(limit)) + " ms";
  } else if (static_cast<double>(-s.age_ms) > limit) {
    s.stale = true;
    s.reason = "timestamp is in the future (clock stepped back?)";
  }
  return s;
}

}  // namespace headroom::orca
