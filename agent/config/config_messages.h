// SPDX-License-Identifier: Apache-2.0
// The wording of configuration messages: values quoted as TOML writes them,
// dotted key paths, lists, and "did you mean" for a word that is almost a
// valid one. Pure text; nothing here knows a key or a TOML tree.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "agent/config/config.h"

namespace headroom::agent {

using Names = std::span<const std::string_view>;

// "a, b, c"
std::string join(Names names);
// Each quoted: "\"a\", \"b\", \"c\"", or with `last` before the last one:
// quoted_list(names, " or ") is "\"a\", \"b\" or \"c\"".
std::string quoted_list(Names names, std::string_view last = ", ");
// The position of `word` in `names`.
std::optional<std::size_t> index_of(Names names, std::string_view word);
// A TOML basic string, so values in messages look like what the user typed.
std::string quote(std::string_view s);
// One component of a dotted key path; signal names contain dots, so they are
// quoted the way TOML needs them ("node.weights.\"cpu.pressure\"").
std::string key_part(std::string_view k);
std::string dotted(std::string_view section, std::string_view key);
// As TOML writes a float: "1.5", "2.0", "nan", "-inf".
std::string format_double(double v);
// One byte for a message: "\"/\"" when printable ASCII, else "byte 0xC3".
std::string describe_byte(char c);

// Levenshtein distance; case is ignored so that "INFO" finds "info".
std::size_t edit_distance(std::string_view a, std::string_view b);
// The closest candidate, if it is close enough to be what the user meant.
std::optional<std::string_view> nearest(std::string_view word, Names candidates);
// "; did you mean \"x\"?" or "".
std::string did_you_mean(std::string_view word, Names candidates);
// For a value that must be one of a few words: the nearest one, and the list.
std::string choices(std::string_view word, Names candidates, std::string_view what);

// An error not yet placed in a file: the caller that knows where the value
// was written fills in file, line, column and, when empty, the key.
Error problem(std::string message, std::string key = {});

}  // namespace headroom::agent
