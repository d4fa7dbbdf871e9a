// SPDX-License-Identifier: Apache-2.0
#include "agent/daemon/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace headroom::agent {
namespace {

// JOURNAL_STREAM is "<device>:<inode>" of the stream systemd connected to us.
bool stderr_is_journal() {
  const char* js = std::getenv("JOURNAL_STREAM");
  if (js == nullptr) return false;
  struct stat st{};
  if (::fstat(STDERR_FILENO, &st) != 0) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(js, "%llu:%llu", &dev, &ino) != 2) return false;
  return dev == st.st_dev && ino == st.st_ino;
}

class SyslogPriorityFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    // spdlog levels trace..critical -> syslog debug(7)..crit(2).
    static constexpr char kPriority[] = {'7', '7', '6', '4', '3', '2', '6'};
    const auto level = static_cast<std::size_t>(msg.level);
    const char text[] = {'<', kPriority[level < sizeof kPriority ? level : 6], '>'};
    dest.append(text, text + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<SyslogPriorityFlag>(); }
};

spdlog::level::level_enum to_spdlog(LogLevel l) {
  switch (l) {
    case LogLevel::trace: return spdlog::level::trace;
    case LogLevel::debug: return spdlog::level::debug;
    case LogLevel::info: return spdlog::level::info;
    case LogLevel::warn: return spdlog::level::warn;
    case LogLevel::error: return spdlog::level::err;
    case LogLevel::critical: return spdlog::level::critical;
    case LogLevel::off: return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

void setup_logging(LogLevel level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("headroomd", sink);
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (stderr_is_journal()) {
    formatter->add_flag<SyslogPriorityFlag>('*').set_pattern("%*%v");
  } else {
    formatter->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ %v");
  }
  logger->set_formatter(std::move(formatter));
  spdlog::set_default_logger(logger);
  set_log_level(level);
}

void set_log_level(LogLevel level) {
  spdlog::set_level(to_spdlog(level));
  spdlog::flush_on(spdlog::level::trace);
}

}  // namespace headroom::agent
