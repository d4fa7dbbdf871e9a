// placeholder: being written
#include "agent/ctl_commands.h"
namespace headroom::ctl {
std::pair<CLI::App*, Runner> add_header_command(CLI::App& app) {
  auto* c = app.add_subcommand("header", "(not yet available)");
  return {c, [] { return 1; }};
}
}  // namespace headroom::ctl
