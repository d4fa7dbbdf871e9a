// SPDX-License-Identifier: Apache-2.0
// hr-wrr-backend: the backend of tests/oob/wrr_test.py. A gRPC server with a
// cost the test chooses, and headroom's out-of-band ORCA stream on the same
// port, as a real server serves it: OrcaService with its endpoint, serving
// this process's own instance (endpoint.<name>@<instance>.orca), so that a
// weighted_round_robin client weighs it by its own load.
//
//   hr-wrr-backend --listen ADDRESS --orca-dir DIR --endpoint NAME [--name ID]
//                  [--cost-ms X] [--slow-every N --slow-ms M] [--instance own|aggregate]
//
// Each call of /headroom.test.Backend/Call burns --cost-ms of this thread's
// CPU time (not wall time: on a busy machine the call takes longer, its cost
// stays); every --slow-every'th call then sleeps --slow-ms before answering
// (a slow dependency: latency without CPU). The reply names the backend.
// --instance aggregate serves endpoint.<name>.orca instead, for comparison.
//
// Prints "listening on HOST:PORT" once it serves. Stops on SIGINT or SIGTERM
// and then prints, on stderr, what its ORCA service served:
// "orca scope=SCOPE messages=N calls=N".
#include <grpcpp/grpcpp.h>
#include <headroom/orca/orca_service.h>
#include <signal.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "wrr_backend.grpc.pb.h"

namespace {

struct Cost {
  double cpu_ms = 0;
  uint64_t slow_every = 0;
  double slow_ms = 0;
};

int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Spins until this thread has run for `ms` of CPU time.
void burn_cpu(double ms) {
  if (ms <= 0) return;
  const int64_t until = thread_cpu_ns() + static_cast<int64_t>(ms * 1e6);
  volatile uint64_t sink = 0;
  while (thread_cpu_ns() < until) {
    for (int i = 0; i < 1000; ++i) sink = sink + static_cast<uint64_t>(i);
  }
}

class BackendService final : public headroom::test::Backend::Service {
 public:
  BackendService(std::string name, Cost cost) : name_(std::move(name)), cost_(cost) {}

  grpc::Status Call(grpc::ServerContext*, const headroom::test::CallRequest*,
                    headroom::test::CallReply* reply) override {
    const uint64_t n = calls_.fetch_add(1, std::memory_order_relaxed) + 1;
    burn_cpu(cost_.cpu_ms);
    if (cost_.slow_every > 0 && n % cost_.slow_every == 0)
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(cost_.slow_ms * 1000)));
    reply->set_backend(name_);
    reply->set_call(n);
    return grpc::Status::OK;
  }

  uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }

 private:
  const std::string name_;
  const Cost cost_;
  std::atomic<uint64_t> calls_{0};
};

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0";
  std::string name;
  Cost cost;
  headroom::orca::OrcaServiceOptions options;
  options.dir = "/run/orca";
  options.endpoint = "";
  options.instance = headroom::orca::ServedInstance::own;

  CLI::App app{"hr-wrr-backend: a gRPC backend of a chosen cost, with headroom's ORCA stream"};
  app.add_option("--listen", listen, "where to listen (port 0 picks one)");
  app.add_option("--orca-dir", options.dir, "headroomd's agent.orca_dir");
  app.add_option("--endpoint", options.endpoint, "the [[endpoint]] this server is")->required();
  app.add_option("--name", name, "the backend's name in replies (default: the endpoint's)");
  app.add_option("--cost-ms", cost.cpu_ms, "CPU time burnt per call, in ms")->check(CLI::Range(0.0, 10000.0));
  app.add_option("--slow-every", cost.slow_every, "every Nth call is slow (0: none)");
  app.add_option("--slow-ms", cost.slow_ms, "how long a slow call sleeps, in ms")->check(CLI::Range(0.0, 60000.0));
  app.add_option("--instance", options.instance, "which report: own (this instance's) or aggregate")
      ->transform(CLI::CheckedTransformer(std::map<std::string, headroom::orca::ServedInstance>{
          {"own", headroom::orca::ServedInstance::own}, {"aggregate", headroom::orca::ServedInstance::aggregate}}));
  CLI11_PARSE(app, argc, argv);
  if (name.empty()) name = options.endpoint;

  // SIGINT and SIGTERM are taken by sigwait() below: blocked before any
  // thread starts, so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto orca = headroom::orca::OrcaService::create(options);
  if (!orca) {
    std::cerr << "hr-wrr-backend: " << orca.error().message << "\n";
    return 1;
  }
  BackendService backend(name, cost);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&backend);
  builder.RegisterService(orca->get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << "hr-wrr-backend: cannot listen on " << listen << "\n";
    return 1;
  }
  std::cout << "listening on " << listen.substr(0, listen.rfind(':') + 1) << port << std::endl;

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  const std::string scope = (*orca)->scope();
  const uint64_t messages = (*orca)->messages_sent();
  // Before the OrcaService goes: its streams never end on their own.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  server.reset();
  orca->reset();
  std::cerr << "orca scope=" << (scope.empty() ? "-" : scope) << " messages=" << messages
            << " calls=" << backend.calls() << "\n";
  return 0;
}
