// SPDX-License-Identifier: Apache-2.0
// Durations as the configuration writes them: a number and a unit, no spaces
// ("100ms", "1.5s"). parse_duration and format_duration are declared in
// agent/config/config.h; this adds the parse that says why a text is refused.
#pragma once

#include <chrono>
#include <string_view>

#include "agent/config/config.h"

namespace headroom::agent {

// The duration, or an Error without key or place whose message quotes
// the text, says what is wrong with it and how to write one.
Result<std::chrono::nanoseconds> parse_duration_checked(std::string_view text);

}  // namespace headroom::agent
