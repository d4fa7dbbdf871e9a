// SPDX-License-Identifier: Apache-2.0
// headroomctl tune: the parent of the commands that generate, prove and
// search a configuration (docs/tuning.md). Each subcommand adds itself.
#include <utility>
#include <vector>

#include "agent/ctl/commands.h"

namespace headroom::ctl {

std::pair<CLI::App*, Runner> add_tune_command(CLI::App& app) {
  auto* tune = app.add_subcommand("tune", "Generate, prove and search shedding configurations (docs/tuning.md)");
  tune->require_subcommand(1);
  const std::vector<std::pair<CLI::App*, Runner>> subcommands{add_tune_recommend_command(*tune),
                                                               add_tune_validate_command(*tune),
                                                               add_tune_search_command(*tune)};
  return {tune, [subcommands] {
            for (const auto& [command, run] : subcommands)
              if (command->parsed()) return run();
            return 64;  // unreachable: require_subcommand(1)
          }};
}

}  // namespace headroom::ctl
