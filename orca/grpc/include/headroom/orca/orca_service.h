// SPDX-License-Identifier: Apache-2.0
// For gRPC servers (libheadroom-orca-grpc, pkg-config headroom-orca-grpc):
// the out-of-band ORCA service, answered from headroom's report files.
//
// gRPC clients that balance with weighted_round_robin open
// OpenRcaService/StreamCoreMetrics on the connection of their calls, so the
// server they call must offer it. Register an OrcaService next to the
// server's own services and its clients' streams get headroom's report for
// this server's endpoint (endpoint.<name>.orca) or the node (node.orca):
//
//   headroom::orca::OrcaServiceOptions options;
//   options.endpoint = "checkout";
//   auto orca = headroom::orca::OrcaService::create(options);
//   if (!orca) { /* orca.error(): the directory cannot be watched */ }
//   grpc::ServerBuilder builder;
//   builder.RegisterService(&my_service);
//   builder.RegisterService(orca->get());
//   auto server = builder.BuildAndStart();
//   ...
//   // Before the OrcaService is destroyed; with a deadline, since a stream
//   // never ends on its own:
//   server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
//
// The files are followed with inotify (report_reader.h); each new report is
// serialized once and shared by every stream. A stale report (older than
// three sampling intervals, at least 1 s, or the agent's final one) is never
// sent: the stream stays silent until a fresh one appears, and the client's
// own expiry decides what its weight becomes. docs/oob.md has the details.
#pragma once

#include <memory>
#include <string>

#include "headroom/orca/oob_streams.h"
#include "headroom/orca/report_reader.h"
#include "headroom/orca/result.h"

namespace headroom::orca {

struct OrcaServiceOptions {
  std::string dir = "/run/orca";  // headroomd's agent.orca_dir
  std::string endpoint;           // the [[endpoint]] name of this server; "" for node.orca
  StreamOptions streams;          // intervals and max_streams
  ReaderOptions reader;           // staleness
};

class OrcaService final
    : public xds::service::orca::v3::OpenRcaService::WithRawCallbackMethod_StreamCoreMetrics<
          xds::service::orca::v3::OpenRcaService::Service> {
 public:
  // The synchronous form stays the base's (it is never called).
  using xds::service::orca::v3::OpenRcaService::WithRawCallbackMethod_StreamCoreMetrics<
      xds::service::orca::v3::OpenRcaService::Service>::StreamCoreMetrics;
  // Fails when the directory cannot be watched (inotify, permissions) or the
  // endpoint name is not one headroom accepts; the error says which.
  static Result<std::unique_ptr<OrcaService>> create(OrcaServiceOptions options);
  ~OrcaService() override;

  std::size_t open_streams() const { return hub_->open_streams(); }
  uint64_t messages_sent() const { return hub_->messages_sent(); }
  const std::string& scope() const { return scope_; }

  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamCoreMetrics(grpc::CallbackServerContext* context,
                                                                const grpc::ByteBuffer* request) override;

 private:
  OrcaService(std::shared_ptr<StreamHub> hub, std::string scope);
  std::shared_ptr<StreamHub> hub_;
  std::string scope_;
};

}  // namespace headroom::orca
