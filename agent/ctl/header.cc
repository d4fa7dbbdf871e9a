// SPDX-License-Identifier: Apache-2.0
// headroomctl header: prints a report file as the HTTP response headers Envoy
// reads, so an operator can paste them into a backend or check what a sidecar
// would send.
#include <cstdio>
#include <memory>
#include <string>

#include "agent/ctl/commands.h"
#include "agent/ctl/render.h"
#include "headroom/orca/load_header.h"
#include "headroom/orca/report.h"

namespace headroom::ctl {
namespace {

constexpr int kExitUnreadable = 1;  // the same status as `headroomctl cat`

struct HeaderOptions {
  std::string file;
  bool text = false;
  bool bin = false;
};

int run_header(const HeaderOptions& o) {
  auto report = orca::read_report_file(o.file);
  if (!report) {
    std::fprintf(stderr, "headroomctl: %s: %s\n", o.file.c_str(), without_path(report.error().message, o.file).c_str());
    return kExitUnreadable;
  }
  // No flag means both, like giving both.
  const bool both = o.text == o.bin;
  std::string out;
  if (o.text || both) {
    out += orca::kLoadMetricsHeader;
    out += ": " + orca::text_header_value(*report) + "\n";
  }
  if (o.bin || both) {
    out += orca::kLoadMetricsBinHeader;
    out += ": " + orca::bin_header_value(*report) + "\n";
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : kExitUnreadable;
}

}  // namespace

std::pair<CLI::App*, Runner> add_header_command(CLI::App& app) {
  // Owned by the runner, which outlives parsing: CLI11 writes into it.
  auto options = std::make_shared<HeaderOptions>();
  auto* cmd = app.add_subcommand("header", "Print a report file as the ORCA response headers Envoy reads");
  cmd->footer(
      "Prints 'endpoint-load-metrics: TEXT ...' and 'endpoint-load-metrics-bin: <base64>',\n"
      "one header per line; --text or --bin prints only that one. Values Envoy would\n"
      "reject (and the keys its TEXT syntax cannot carry) are left out, so Envoy never\n"
      "drops the report. Exit status: 0 printed, 1 the file cannot be read or parsed.");
  cmd->add_option("FILE", options->file, "Report file, e.g. /run/orca/node.orca")->required();
  cmd->add_flag("--text", options->text, "Print the endpoint-load-metrics TEXT header");
  cmd->add_flag("--bin", options->bin, "Print the endpoint-load-metrics-bin header (base64 protobuf)");
  return {cmd, [options] { return run_header(*options); }};
}

}  // namespace headroom::ctl
