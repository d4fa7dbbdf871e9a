// SPDX-License-Identifier: Apache-2.0
// spdlog to stderr. Under systemd (JOURNAL_STREAM names our stderr) each line
// starts with a syslog priority prefix ("<3>") so the journal keeps the level
// and no timestamp is printed twice.
#pragma once

#include "agent/config/config.h"

namespace headroom::agent {

void setup_logging(LogLevel level);
void set_log_level(LogLevel level);

}  // namespace headroom::agent
