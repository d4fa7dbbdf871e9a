// SPDX-License-Identifier: Apache-2.0
// headroomctl oob: opens OpenRcaService/StreamCoreMetrics on an address (a
// headroomd [oob] listener, or a gRPC server with OrcaService) and prints
// every report the stream brings, for trying a setup by hand.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "agent/ctl/commands.h"
#include "agent/ctl/render.h"
#include "agent/config/duration.h"
#include "headroom/orca/clock.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_reader.h"
#include "xds/service/orca/v3/orca.grpc.pb.h"

namespace headroom::ctl {
namespace {

constexpr int kExitStatus = 1;  // the stream ended with an error status
constexpr int kExitUsage = 64;

struct OobOptions {
  std::string address;
  std::string authority;
  std::string interval;  // "" : the request carries none (the server's default)
  std::string duration;
  long count = 0;
  bool json = false;
};

int run_oob(const OobOptions& o) {
  xds::service::orca::v3::OrcaLoadReportRequest request;
  if (!o.interval.empty()) {
    auto d = agent::parse_duration_checked(o.interval);
    if (!d) {
      std::fprintf(stderr, "headroomctl oob: --interval %s: %s\n", o.interval.c_str(), d.error().message.c_str());
      return kExitUsage;
    }
    const auto ns = d->count();
    request.mutable_report_interval()->set_seconds(ns / 1'000'000'000);
    request.mutable_report_interval()->set_nanos(static_cast<int32_t>(ns % 1'000'000'000));
  }
  grpc::ClientContext context;
  if (!o.duration.empty()) {
    auto d = agent::parse_duration_checked(o.duration);
    if (!d) {
      std::fprintf(stderr, "headroomctl oob: --duration %s: %s\n", o.duration.c_str(), d.error().message.c_str());
      return kExitUsage;
    }
    context.set_deadline(std::chrono::system_clock::now() + *d);
  }
  grpc::ChannelArguments args;
  if (!o.authority.empty()) args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, o.authority);
  auto channel = grpc::CreateCustomChannel(o.address, grpc::InsecureChannelCredentials(), args);
  auto stub = xds::service::orca::v3::OpenRcaService::NewStub(channel);
  auto reader = stub->StreamCoreMetrics(&context, request);

  orca::Report report;
  long received = 0;
  while (reader->Read(&report)) {
    ++received;
    const int64_t now = orca::unix_now_ms();
    std::string out;
    if (o.json) {
      out = "{\"received_unix_ms\":" + std::to_string(now) + ",\"report\":" + report_json(report) + "}\n";
    } else {
      for (const auto& line : render_report(o.address, report, now)) out += line + "\n";
      out += "\n";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    if (o.count > 0 && received >= o.count) {
      context.TryCancel();
      (void)reader->Finish();
      return 0;
    }
  }
  const grpc::Status status = reader->Finish();
  if (status.ok() || (!o.duration.empty() && status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)) return 0;
  static constexpr const char* kCodes[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                           "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                           "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  const auto code = static_cast<std::size_t>(status.error_code());
  std::fprintf(stderr, "headroomctl oob: %s: %s: %s (after %ld report(s))\n", o.address.c_str(),
               code < std::size(kCodes) ? kCodes[code] : "?", status.error_message().c_str(), received);
  return kExitStatus;
}

}  // namespace

std::pair<CLI::App*, Runner> add_oob_command(CLI::App& app) {
  auto options = std::make_shared<OobOptions>();
  auto* cmd = app.add_subcommand("oob", "Print the out-of-band ORCA stream (OpenRcaService) of an address");
  cmd->footer(
      "Opens xds.service.orca.v3.OpenRcaService/StreamCoreMetrics, as Envoy and gRPC\n"
      "clients do, and prints each report as it arrives. ADDRESS is host:port,\n"
      "[v6]:port or unix:/path. --authority sets the :authority that picks the\n"
      "report (headroomd: the port of an [[endpoint]]). Exit status: 0 stopped by\n"
      "--count or --duration, 1 the stream ended with an error status (printed),\n"
      "64 bad flags. docs/oob.md has the details.");
  cmd->add_option("ADDRESS", options->address, "e.g. 127.0.0.1:9447 or unix:/run/orca/oob.sock")->required();
  cmd->add_option("--authority", options->authority, "The :authority to send, e.g. 10.0.0.5:8080");
  cmd->add_option("--interval", options->interval, "The report_interval to ask for, e.g. 1s (default: none sent)");
  cmd->add_option("--count", options->count, "Stop after this many reports")->check(CLI::PositiveNumber);
  cmd->add_option("--duration", options->duration, "Stop after this long, e.g. 10s");
  cmd->add_flag("--json", options->json, "One JSON object per report: {\"received_unix_ms\", \"report\"}");
  return {cmd, [options] { return run_oob(*options); }};
}

}  // namespace headroom::ctl
