// SPDX-License-Identifier: Apache-2.0
// The default spdlog logger's lines, captured while an instance lives, for
// tests of what a component says (and how often).
#pragma once

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>

namespace headroom::testing {

class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  // Lines that contain `text`.
  int count(const std::string& text) const {
    std::istringstream in(out_.str());
    int n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(text) != std::string::npos ? 1 : 0;
    return n;
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace headroom::testing
