// SPDX-License-Identifier: Apache-2.0
// Shared by the configuration tests: parse-or-fail helpers and the table
// row of an expected error (key, place in the file, parts of the message).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config.h"

namespace headroom::agent::config_cases {

inline Config must_parse(std::string_view text) {
  auto r = parse_config(text, "test.toml");
  if (!r) {
    ADD_FAILURE() << "unexpected error: " << r.error().to_string() << "\nin:\n" << text;
    return Config{};
  }
  return r.value();
}

inline Error must_fail(std::string_view text) {
  auto r = parse_config(text, "test.toml");
  if (r) {
    ADD_FAILURE() << "parsed without error:\n" << text;
    return Error{};
  }
  return r.error();
}

struct ErrorCase {
  const char* name;
  std::string text;
  const char* key;
  int line;
  int column;
  std::vector<const char*> message_parts;
};

inline void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

// The error of c.text has c's key, place and message parts.
inline void expect_error_case(const ErrorCase& c) {
  const Error e = must_fail(c.text);
  EXPECT_EQ(e.file, "test.toml");
  EXPECT_EQ(e.key, c.key) << e.to_string();
  EXPECT_EQ(e.line, c.line) << e.to_string();
  EXPECT_EQ(e.column, c.column) << e.to_string();
  for (const char* part : c.message_parts) EXPECT_THAT(e.message, ::testing::HasSubstr(part)) << e.to_string();
}

}  // namespace headroom::agent::config_cases
