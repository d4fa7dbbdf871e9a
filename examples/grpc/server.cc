// SPDX-License-Identifier: Apache-2.0
// A gRPC server that serves its own RPC (echo.proto) and headroom's
// out-of-band ORCA stream (xds.service.orca.v3.OpenRcaService) on one port,
// so that gRPC clients balancing with weighted_round_robin and
// enableOobLoadReport get headroom's load report on the connection of their
// calls. examples/grpc/README.md has the three steps.
//
//   headroom-example-grpc-server [--listen ADDRESS] [--orca-dir DIR] [--endpoint NAME]
//                                [--instance own|aggregate]
//
// --listen    where to listen (default 127.0.0.1:50051; port 0 picks one)
// --orca-dir  headroomd's agent.orca_dir (default /run/orca)
// --endpoint  the [[endpoint]] name headroomd reports this server under;
//             empty (the default) for node.orca
// --instance  with --endpoint: own (the default) serves this server's own
//             instance, endpoint.NAME@<instance>.orca of its network
//             namespace; aggregate serves endpoint.NAME.orca, the sum of
//             every instance on the node
//
// Prints "listening on ADDRESS" once it serves, stops on SIGINT or SIGTERM.
// Build (README.md, Makefile): protoc generates echo.pb.cc and echo.grpc.pb.cc,
//   c++ -std=c++20 server.cc echo.pb.cc echo.grpc.pb.cc $(pkg-config --cflags --libs headroom-orca-grpc)
#include <grpcpp/grpcpp.h>
#include <headroom/orca/orca_service.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>

#include "echo.grpc.pb.h"

namespace {

// The server's own service: what it is there for.
class EchoService final : public headroom::example::Echo::Service {
  grpc::Status Say(grpc::ServerContext*, const headroom::example::EchoRequest* request,
                   headroom::example::EchoReply* reply) override {
    reply->set_message(request->message());
    return grpc::Status::OK;
  }
};

int usage(const char* program, const std::string& problem) {
  if (!problem.empty()) std::cerr << program << ": " << problem << "\n";
  std::cerr << "usage: " << program << " [--listen ADDRESS] [--orca-dir DIR] [--endpoint NAME] [--instance own|aggregate]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:50051";
  headroom::orca::OrcaServiceOptions options;  // field by field: no missing-initializer warnings
  options.dir = "/run/orca";
  options.endpoint = "";

  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      usage(argv[0], "");
      return 0;
    }
    if (arg == "--instance") {
      const std::string_view value = i + 1 < argc ? std::string_view(argv[++i]) : std::string_view();
      if (value != "own" && value != "aggregate") return usage(argv[0], "--instance takes own or aggregate");
      options.instance = value == "own" ? headroom::orca::ServedInstance::own : headroom::orca::ServedInstance::aggregate;
      continue;
    }
    std::string* target = arg == "--listen"     ? &listen
                          : arg == "--orca-dir" ? &options.dir
                          : arg == "--endpoint" ? &options.endpoint
                                                : nullptr;
    if (target == nullptr) return usage(argv[0], "unknown argument " + std::string(arg));
    if (i + 1 >= argc) return usage(argv[0], std::string(arg) + " needs a value");
    *target = argv[++i];
  }

  // SIGINT and SIGTERM are taken by sigwait() below, so they are blocked
  // before any thread starts (gRPC's and the OrcaService's inherit the mask).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // 1. headroom's ORCA service: follows options.dir for this server's report.
  auto orca = headroom::orca::OrcaService::create(options);
  if (!orca) {
    std::cerr << argv[0] << ": " << orca.error().message << "\n";
    return 1;
  }

  // 2. Both services on one server, one port.
  EchoService echo;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&echo);
  builder.RegisterService(orca->get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << argv[0] << ": cannot listen on " << listen << "\n";
    return 1;
  }
  const std::string address = listen.substr(0, listen.rfind(':') + 1) + std::to_string(port);
  const bool own = !options.endpoint.empty() && options.instance == headroom::orca::ServedInstance::own;
  const std::string served = own ? "endpoint." + options.endpoint + ", this server's instance" : (*orca)->scope();
  std::cout << "listening on " << address << " (Echo; ORCA: " << served << " in " << options.dir << ")"
            << std::endl;

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);

  // 3. Shut the server down before the OrcaService is destroyed. An ORCA
  // stream never ends on its own: calls get a second to finish, then what is
  // still open (the streams) is cancelled.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  server.reset();
  orca->reset();
  std::cerr << "stopped (" << (signal_number == SIGINT ? "SIGINT" : "SIGTERM") << ")\n";
  return 0;
}
