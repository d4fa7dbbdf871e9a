// SPDX-License-Identifier: Apache-2.0
// What the targets of headroomd's table flags (--endpoint, --dependency)
// check beyond "no crash", each against its own table's keys and parser.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config_keys.h"
#include "fuzz_support.h"
#include "headroom/orca/report.h"

namespace headroom::fuzz {

// A rejected flag: its error has a message and no file or place (the flag is
// not a file); its key, when set, is a key of [[table]].
inline void check_flag_error(std::string_view target, const Error& err, const char* table) {
  if (err.message.empty()) fail(target, "an error without a message");
  if (!err.file.empty() || err.line != 0) fail(target, "an error with a place: " + err.to_string());
  const auto keys = agent::keys_in(table);
  if (!err.key.empty() && std::find(keys.begin(), keys.end(), err.key) == keys.end())
    fail(target, "an error naming no key of [[" + std::string(table) + "]]: " + err.to_string());
}

// An accepted entry's report (scope) is a file name the writer takes.
inline void check_report_file(std::string_view target, const std::string& scope) {
  const std::string file = orca::report_file_name(scope);
  if (file.front() == '.' || file.find('/') != std::string::npos || file.find('\0') != std::string::npos ||
      file.size() >= 200)
    fail(target, "report file name \"" + file + "\" is not one the writer takes");
}

// An accepted entry written back as a flag (again) parses to the same entry.
template <typename Entry, typename Parse>
void check_round_trip(std::string_view target, const Entry& entry, const std::string& again, Parse parse,
                      std::string_view what) {
  auto back = parse(again);
  if (!back)
    fail(target, "\"" + again + "\", written from an accepted flag, is rejected: " + back.error().to_string());
  if (!(*back == entry)) fail(target, "\"" + again + "\" parses to another " + std::string(what));
}

}  // namespace headroom::fuzz
