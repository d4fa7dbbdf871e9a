// placeholder: being written
#include "agent/ctl_commands.h"
namespace headroom::ctl {
std::pair<CLI::App*, Runner> add_shed_command(CLI::App& app) {
  auto* c = app.add_subcommand("shed", "(not yet available)");
  return {c, [] { return 1; }};
}
}  // namespace headroom::ctl
