// SPDX-License-Identifier: Apache-2.0
// The reference shedder's function per endpoint, read from a headroom.toml:
// each [[endpoint]] may carry [[endpoint.shed]] entries, one per signal,
//
//   [[endpoint]]
//   name = "play"
//   ...
//   [[endpoint.shed]]
//   signal = "utilization.latency.slo_target"  # is_known_signal, once per endpoint
//   shed_start = 0.28                          # required
//   critical_start = 0.64                      # required
//   all_shed = 1.0                             # optional: default_thresholds(signal).all_shed
//
// headroomd checks these entries with check_shed_entry (the same checks) and
// does not otherwise use them; a shedder reads its endpoint's with
// read_shedder_config_file. docs/shedding.md, "The shedder's function in
// headroom.toml".
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "headroom/orca/result.h"
#include "headroom/orca/shedder.h"

namespace headroom::orca {

// The most [[endpoint.shed]] entries one endpoint may have.
inline constexpr std::size_t kMaxShedEntries = 16;

// The keys of an [[endpoint.shed]] entry, in the order the docs list them.
inline constexpr std::string_view kShedEntryKeys[] = {"signal", "shed_start", "critical_start", "all_shed"};

// One [[endpoint.shed]] entry as written; an absent key is empty.
struct ShedEntry {
  std::optional<std::string> signal;
  std::optional<double> shed_start;
  std::optional<double> critical_start;
  std::optional<double> all_shed;
};

// A signal name is_known_signal accepts; the error says which are.
Result<void> check_shed_signal(std::string_view signal);

// The checks of one entry: signal, shed_start and critical_start given, the
// signal known, the thresholds valid (validate_thresholds) with all_shed
// defaulting to default_thresholds(signal).all_shed. The error's key is the
// field at fault ("signal", "shed_start", "critical_start", "all_shed"); it
// has no file or line (the caller knows where the entry was written).
Result<std::pair<std::string, SignalThresholds>> check_shed_entry(const ShedEntry& entry);

// The [[endpoint.shed]] entries of the [[endpoint]] named `endpoint` in a
// headroom.toml text, as a ShedderConfig (signals in file order, the stale
// policy the default). `source_name` names the text in errors. Errors carry
// the file, the line and the key ("endpoint[0].shed[1].critical_start")
// where they have one: a TOML syntax error, no [[endpoint]] of that name, an
// endpoint without [[endpoint.shed]], an unknown key, a value of the wrong
// type, an unknown or repeated signal, thresholds out of order.
Result<ShedderConfig> shedder_config_from_toml(std::string_view text, std::string_view endpoint,
                                               std::string_view source_name);

// Reads the file (at most 1 MiB) and parses it as above; a file that cannot
// be read is an error with its errno.
Result<ShedderConfig> read_shedder_config_file(const std::string& path, std::string_view endpoint);

}  // namespace headroom::orca
