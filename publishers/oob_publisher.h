// SPDX-License-Identifier: Apache-2.0
// [oob] (docs/oob.md): the out-of-band ORCA stream,
// xds.service.orca.v3.OpenRcaService/StreamCoreMetrics, served by headroomd
// on each `listen` address. Every tick the reports the pipeline built and
// serialized (the same bytes as the files) are handed to the process's stream hub
// (headroom/orca/oob_streams.h); its own thread sends them, so no client
// can hold up a tick. A stream picks its report by :authority: the port of
// an [[endpoint]] gives that endpoint's, any other the node's (or
// NOT_FOUND, unknown_authority = "error").
//
// Like the Prometheus listener, the hub and the listeners outlive a reload:
// a listener whose address the new configuration keeps keeps its streams.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "headroom/orca/oob_streams.h"
#include "headroom/orca/report.h"
#include "headroom/orca/result.h"
#include "publishers/oob_config.h"
#include "publishers/process_shared.h"
#include "publishers/publisher.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace headroom::publishers {

class OobInstanceListeners;
class OobGate;

// A started gRPC server with `service` on `address` and the listener's rules
// (no port sharing, message sizes, handshake and keepalive limits, a memory
// quota); `port` gets the bound TCP port. Null or port 0 when it could not
// listen: why_not(address) says why.
std::unique_ptr<grpc::Server> start_oob_server(const std::string& address, grpc::Service& service, int* port);
// Why gRPC could not listen on `address`, found by trying it ourselves (in
// the calling thread's network namespace): gRPC's own message goes to its
// log only.
std::string why_not(const std::string& address);

// One gRPC server on one address.
class OobListener {
 public:
  ~OobListener();  // shuts the server down: its streams end with CANCELLED
  OobListener(const OobListener&) = delete;
  OobListener& operator=(const OobListener&) = delete;
  const std::string& address() const { return address_; }
  int port() const { return port_; }  // the bound TCP port (0 for unix:)

 private:
  friend class OobHub;
  OobListener() = default;
  std::string address_;
  int port_ = 0;
  std::unique_ptr<orca::StreamService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<OobGate> gate_;  // a TCP address's accept() (oob_gate.h); none for unix:
};

// The report a stream reads, by its :authority (docs/oob.md, "Which
// report"): "dependency.<name>" (any port) a dependency's; an endpoint's
// port, then an endpoint's name as the host, that endpoint's; any other the
// node's, or NOT_FOUND with unknown_authority = "error".
orca::StreamHub::Resolver authority_resolver(const OobOptions& options);

// The process's streams and listeners.
class OobHub {
 public:
  static std::shared_ptr<OobHub> shared() { return process_shared<OobHub>(); }
  OobHub();

  // The listener on `address`: the running one, or a new one started now.
  Result<std::shared_ptr<OobListener>> listener(const std::string& address);
  // The instance listeners on `address` (instance_listen): the running ones,
  // or a new empty set.
  std::shared_ptr<OobInstanceListeners> instance_listeners(const std::string& address, const std::string& proc_root);
  // The rules of a configuration: intervals, max_streams, the authority map.
  void configure(const OobOptions& options);
  // Hands this tick's reports to the streams once (a second publisher with
  // the same tick changes nothing).
  void update(const Tick& tick);
  orca::StreamHub& streams() { return *streams_; }

 private:
  std::shared_ptr<orca::StreamHub> streams_;
  std::mutex listeners_mutex_;
  std::map<std::string, std::weak_ptr<OobListener>> listeners_;
  std::map<std::string, std::weak_ptr<OobInstanceListeners>> instance_listeners_;

  std::mutex reports_mutex_;
  uint64_t last_seq_ = 0;
  bool have_seq_ = false;
  uint64_t version_ = 0;
  std::vector<std::string> scopes_;  // of the reports the last tick had
};

class OobPublisher final : public Publisher {
 public:
  static Result<Publishers> build(const OobOptions& options);
  // The instance listeners (instance_listen), or null.
  const OobInstanceListeners* instances() const { return instances_.get(); }

  Result<void> publish(const Tick& tick) override;
  // Every stream gets the final report (headroom.stopped = 1), then ends
  // with UNAVAILABLE.
  void stop(const Tick& final) override;
  void announce() const override;
  std::string_view name() const override { return "oob"; }
  const std::string& target() const override { return target_; }

 private:
  OobPublisher(std::shared_ptr<OobHub> hub, std::vector<std::shared_ptr<OobListener>> listeners,
               std::shared_ptr<OobInstanceListeners> instances, OobOptions options);
  std::shared_ptr<OobHub> hub_;
  std::vector<std::shared_ptr<OobListener>> listeners_;
  std::shared_ptr<OobInstanceListeners> instances_;  // null without instance_listen
  OobOptions options_;
  bool configured_ = false;
  std::string target_;
};

}  // namespace headroom::publishers
