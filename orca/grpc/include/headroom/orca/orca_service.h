// SPDX-License-Identifier: Apache-2.0
// For gRPC servers (libheadroom-orca-grpc, pkg-config headroom-orca-grpc):
// the out-of-band ORCA service, answered from headroom's report files.
//
// gRPC clients that balance with weighted_round_robin open
// OpenRcaService/StreamCoreMetrics on the connection of their calls, so the
// server they call must offer it. Register an OrcaService next to the
// server's own services and its clients' streams get headroom's report for
// this server's instance of its endpoint, or the endpoint's aggregate, or
// the node (node.orca):
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
// With an endpoint, the default is the server's own instance
// (ServedInstance::own): the endpoint's servers in one network namespace (a
// pod, or the host) have their own report, endpoint.<name>@<instance>.orca,
// which names the namespace in headroom.instance.netns; the service serves
// the one naming this process's namespace (own_instance.h), so a server's
// clients weigh it by its own load, not by the sum of every pod that serves
// the endpoint on this node. Two servers of the host namespace with
// endpoints E1 and E2 serve endpoint.E1@host and endpoint.E2@host: the
// namespace matches both, the endpoint name picks. Until that report exists
// nothing is sent (the stream waits, as for a missing file); it is found
// when it appears, and again when the file it was found in is removed.
// ServedInstance::aggregate serves endpoint.<name>.orca, the node's
// aggregate of all the endpoint's instances.
//
// The files are followed with inotify (report_reader.h); each new report is
// serialized once and shared by every stream. A stale report (older than
// three sampling intervals, at least 1 s, or the agent's final one) is never
// sent: the stream stays silent until a fresh one appears, and the client's
// own expiry decides what its weight becomes. A gone instance's report
// (headroom.instance.gone, its servers stopped listening) is stale too.
// docs/oob.md has the details.
#pragma once

#include <memory>
#include <string>

#include "headroom/orca/oob_streams.h"
#include "headroom/orca/report_reader.h"
#include "headroom/orca/result.h"

namespace headroom::orca {

struct ServedScope;  // orca_service.cc

// Which of an endpoint's reports a service serves.
enum class ServedInstance {
  own,        // endpoint.<name>@<instance> of this process's network namespace
  aggregate,  // endpoint.<name>, the node's aggregate of every instance
};

struct OrcaServiceOptions {
  std::string dir = "/run/orca";  // headroomd's agent.orca_dir
  std::string endpoint;           // the [[endpoint]] name of this server; "" for node.orca
  ServedInstance instance = ServedInstance::own;  // with an endpoint
  std::string proc_root = "/proc";  // <proc_root>/self/ns/net names this process's namespace
  StreamOptions streams;            // intervals and max_streams
  ReaderOptions reader;             // staleness
};

class OrcaService final
    : public xds::service::orca::v3::OpenRcaService::WithRawCallbackMethod_StreamCoreMetrics<
          xds::service::orca::v3::OpenRcaService::Service> {
 public:
  // The synchronous form stays the base's (it is never called).
  using xds::service::orca::v3::OpenRcaService::WithRawCallbackMethod_StreamCoreMetrics<
      xds::service::orca::v3::OpenRcaService::Service>::StreamCoreMetrics;
  // Fails when the directory cannot be watched (inotify, permissions), the
  // endpoint name is not one headroom accepts, or (own instance) this
  // process's network namespace cannot be read; the error says which.
  static Result<std::unique_ptr<OrcaService>> create(OrcaServiceOptions options);
  ~OrcaService() override;

  std::size_t open_streams() const { return hub_->open_streams(); }
  uint64_t messages_sent() const { return hub_->messages_sent(); }
  // The scope served now: "node", "endpoint.<name>", or the own instance's
  // "endpoint.<name>@<instance>" ("" while no instance file names this
  // process's namespace).
  std::string scope() const;
  // Why nothing is served, while scope() is "" (own instance): the namespace
  // looked for and the instance files there; "" otherwise.
  std::string unresolved_reason() const;

  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamCoreMetrics(grpc::CallbackServerContext* context,
                                                                const grpc::ByteBuffer* request) override;

 private:
  OrcaService(std::shared_ptr<StreamHub> hub, std::shared_ptr<ServedScope> served);
  std::shared_ptr<StreamHub> hub_;
  std::shared_ptr<ServedScope> served_;  // what the hub's thread resolved, read by scope()
};

}  // namespace headroom::orca
