// SPDX-License-Identifier: Apache-2.0
// The out-of-band stream in one process, against Debian's gRPC: a real
// server on a unix socket, real client stubs. The hub as headroomd uses it
// (snapshots pushed each tick) and OrcaService as a gRPC server links it
// (report files followed with inotify, stale ones never sent).
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "headroom/orca/oob_streams.h"
#include "headroom/orca/orca_service.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_reader.h"
#include "headroom/orca/report_writer.h"
#include "temp_dir.h"

namespace headroom::orca {
namespace {

using namespace std::chrono_literals;
using headroom::testing::TempDir;
using xds::service::orca::v3::OpenRcaService;
using xds::service::orca::v3::OrcaLoadReportRequest;

Report report_at(int64_t timestamp_ms, uint64_t seq, double cpu, bool stopped = false) {
  Report r;
  r.set_cpu_utilization(cpu);
  (*r.mutable_named_metrics())[std::string(kTimestampMsKey)] = static_cast<double>(timestamp_ms);
  (*r.mutable_named_metrics())[std::string(kSeqKey)] = static_cast<double>(seq);
  (*r.mutable_named_metrics())[std::string(kIntervalMsKey)] = 100;
  if (stopped) (*r.mutable_named_metrics())[std::string(kStoppedKey)] = 1;
  return r;
}

Snapshot snapshot_of(const Report& r, uint64_t version, bool final = false) {
  const std::string bytes = r.SerializeAsString();
  grpc::Slice slice(bytes);
  Snapshot s{grpc::ByteBuffer(&slice, 1), {}};
  auto md = metadata_of(r);
  s.info.version = version;
  s.info.timestamp_ms = md->timestamp_ms;
  s.info.interval_ms = md->interval_ms;
  s.info.final = final;
  return s;
}

struct Server {
  std::unique_ptr<grpc::Server> server;
  std::string address;
  Server(grpc::Service* service, const std::string& dir) : address("unix:" + dir + "/oob.sock") {
    grpc::ServerBuilder b;
    b.AddListeningPort(address, grpc::InsecureServerCredentials());
    b.RegisterService(service);
    server = b.BuildAndStart();
  }
  ~Server() { server->Shutdown(std::chrono::system_clock::now() + 1s); }
};

struct Client {
  grpc::ClientContext context;
  std::unique_ptr<OpenRcaService::Stub> stub;
  std::unique_ptr<grpc::ClientReader<Report>> reader;
  Client(const std::string& address, std::optional<std::chrono::milliseconds> interval, const std::string& authority = "",
         std::chrono::milliseconds deadline = 10s) {
    grpc::ChannelArguments args;
    if (!authority.empty()) args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, authority);
    stub = OpenRcaService::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
    OrcaLoadReportRequest request;
    if (interval) {
      request.mutable_report_interval()->set_seconds(interval->count() / 1000);
      request.mutable_report_interval()->set_nanos(static_cast<int32_t>(interval->count() % 1000 * 1'000'000));
    }
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    reader = stub->StreamCoreMetrics(&context, request);
  }
};

int64_t seq_of(const Report& r) { return static_cast<int64_t>(metadata_of(r)->seq); }

TEST(OobStreamHub, FirstAtOnceThenOnePerIntervalAndTheScopeOfTheAuthority) {
  TempDir dir;
  StreamOptions options;
  options.min_interval = 100ms;
  auto hub = StreamHub::create(options,
                               [](std::string_view authority) -> std::variant<std::string, grpc::Status> {
                                 if (authority_port(authority) == 8080) return std::string("endpoint.api");
                                 return std::string("node");
                               });
  StreamService service(hub);
  Server server(&service, dir.path());
  hub->set("node", snapshot_of(report_at(10'000, 1, 0.1), 1));
  hub->set("endpoint.api", snapshot_of(report_at(10'000, 1, 0.9), 2));

  Client node(server.address, 300ms, "10.0.0.5:9447");
  Client api(server.address, 100ms, "10.0.0.5:8080");
  Report r;
  ASSERT_TRUE(node.reader->Read(&r));
  EXPECT_DOUBLE_EQ(r.cpu_utilization(), 0.1);
  ASSERT_TRUE(api.reader->Read(&r));
  EXPECT_DOUBLE_EQ(r.cpu_utilization(), 0.9);

  // Ten ticks of 100 ms: the 100 ms stream gets each, the 300 ms stream every third.
  for (uint64_t seq = 2; seq <= 10; ++seq) {
    hub->set("node", snapshot_of(report_at(10'000 + static_cast<int64_t>(seq - 1) * 100, seq, 0.1), 10 + seq));
    hub->set("endpoint.api", snapshot_of(report_at(10'000 + static_cast<int64_t>(seq - 1) * 100, seq, 0.9), 30 + seq));
    std::this_thread::sleep_for(20ms);
  }
  std::vector<int64_t> api_seqs, node_seqs;
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(api.reader->Read(&r));
    api_seqs.push_back(seq_of(r));
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(node.reader->Read(&r));
    node_seqs.push_back(seq_of(r));
  }
  EXPECT_EQ(api_seqs, (std::vector<int64_t>{2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(node_seqs, (std::vector<int64_t>{4, 7, 10}));
  EXPECT_EQ(hub->open_streams(), 2u);
}

TEST(OobStreamHub, RefusesBadIntervalsAndStreamsBeyondTheLimit) {
  TempDir dir;
  StreamOptions options;
  options.max_streams = 2;
  auto hub = StreamHub::create(options, [](std::string_view) -> std::variant<std::string, grpc::Status> {
    return std::string("node");
  });
  StreamService service(hub);
  Server server(&service, dir.path());
  hub->set("node", snapshot_of(report_at(10'000, 1, 0.1), 1));
  Report r;
  Client a(server.address, 100ms), b(server.address, 100ms);
  ASSERT_TRUE(a.reader->Read(&r));
  ASSERT_TRUE(b.reader->Read(&r));
  Client c(server.address, 100ms);
  EXPECT_FALSE(c.reader->Read(&r));
  const auto status = c.reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("at most 2"), std::string::npos) << status.error_message();

  // A negative interval.
  grpc::ClientContext ctx;
  auto stub = OpenRcaService::NewStub(grpc::CreateChannel(server.address, grpc::InsecureChannelCredentials()));
  OrcaLoadReportRequest bad;
  bad.mutable_report_interval()->set_seconds(-3);
  auto reader = stub->StreamCoreMetrics(&ctx, bad);
  EXPECT_FALSE(reader->Read(&r));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(OobStreamHub, AnAuthorityThatResolvesToAStatusEndsTheStream) {
  TempDir dir;
  auto hub = StreamHub::create({}, [](std::string_view a) -> std::variant<std::string, grpc::Status> {
    if (a == "known:1") return std::string("node");
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown authority");
  });
  StreamService service(hub);
  Server server(&service, dir.path());
  hub->set("node", snapshot_of(report_at(10'000, 1, 0.1), 1));
  Report r;
  Client unknown(server.address, 100ms, "other:2");
  EXPECT_FALSE(unknown.reader->Read(&r));
  EXPECT_EQ(unknown.reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);

  // A reload whose rules no longer know the authority ends an open stream.
  Client known(server.address, 100ms, "known:1");
  ASSERT_TRUE(known.reader->Read(&r));
  hub->configure({}, [](std::string_view) -> std::variant<std::string, grpc::Status> {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "gone");
  });
  EXPECT_FALSE(known.reader->Read(&r));
  EXPECT_EQ(known.reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

// A service that opens every stream on one scope (as headroomd's listener
// inside an endpoint instance's network namespace does).
class FixedScopeService final
    : public OpenRcaService::WithRawCallbackMethod_StreamCoreMetrics<OpenRcaService::Service> {
 public:
  using OpenRcaService::WithRawCallbackMethod_StreamCoreMetrics<OpenRcaService::Service>::StreamCoreMetrics;
  FixedScopeService(std::shared_ptr<StreamHub> hub, std::string scope) : hub_(std::move(hub)), scope_(std::move(scope)) {}
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamCoreMetrics(grpc::CallbackServerContext* context,
                                                                const grpc::ByteBuffer* request) override {
    return hub_->open(context, request, scope_);
  }

 private:
  std::shared_ptr<StreamHub> hub_;
  std::string scope_;
};

TEST(OobStreamHub, AStreamOpenedOnAFixedScopeIgnoresItsAuthorityAndEveryResolver) {
  TempDir dir;
  auto hub = StreamHub::create({}, [](std::string_view) -> std::variant<std::string, grpc::Status> {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no authority is known");
  });
  FixedScopeService service(hub, "endpoint.api@pod-1");
  Server server(&service, dir.path());
  hub->set("node", snapshot_of(report_at(10'000, 1, 0.1), 1));
  hub->set("endpoint.api@pod-1", snapshot_of(report_at(10'000, 1, 0.6), 2));
  Report r;
  Client c(server.address, 100ms, "10.0.0.5:8080");
  ASSERT_TRUE(c.reader->Read(&r));
  EXPECT_DOUBLE_EQ(r.cpu_utilization(), 0.6);
  // A reload's rules resolve every other stream again; not this one.
  hub->configure({}, [](std::string_view) -> std::variant<std::string, grpc::Status> { return std::string("node"); });
  hub->set("endpoint.api@pod-1", snapshot_of(report_at(10'100, 2, 0.7), 3));
  ASSERT_TRUE(c.reader->Read(&r));
  EXPECT_DOUBLE_EQ(r.cpu_utilization(), 0.7);
}

TEST(OobStreamHub, FinishAllSendsTheFinalReportThenEndsEveryStream) {
  TempDir dir;
  auto hub = StreamHub::create({}, [](std::string_view) -> std::variant<std::string, grpc::Status> {
    return std::string("node");
  });
  StreamService service(hub);
  Server server(&service, dir.path());
  hub->set("node", snapshot_of(report_at(10'000, 1, 0.1), 1));
  std::vector<std::unique_ptr<Client>> clients;
  Report r;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(std::make_unique<Client>(server.address, std::chrono::milliseconds(3'600'000)));
    ASSERT_TRUE(clients.back()->reader->Read(&r));
  }
  // The final report comes at once whatever the streams' hour-long interval.
  hub->set("node", snapshot_of(report_at(10'050, 2, 0.2, true), 2, true));
  hub->finish_all(grpc::Status(grpc::StatusCode::UNAVAILABLE, "stopping"), 2s);
  EXPECT_EQ(hub->open_streams(), 0u);
  for (auto& c : clients) {
    ASSERT_TRUE(c->reader->Read(&r));
    EXPECT_TRUE(metadata_of(r)->stopped);
    EXPECT_FALSE(c->reader->Read(&r));
    const auto status = c->reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(status.error_message(), "stopping");
  }
  // New streams are refused from then on.
  Client late(server.address, 100ms);
  EXPECT_FALSE(late.reader->Read(&r));
  EXPECT_EQ(late.reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

// --- OrcaService: from the files --------------------------------------------------

TEST(OrcaServiceFromFiles, ServesEachNewFreshReportAndNeverAStaleOne) {
  TempDir dir;
  auto writer = ReportFileWriter::open(dir.path());
  ASSERT_TRUE(writer) << writer.error().message;
  const int64_t t0 = unix_now_ms();
  ASSERT_TRUE(writer->write("endpoint.api.orca", report_at(t0, 1, 0.25)));
  ASSERT_TRUE(writer->write("node.orca", report_at(t0, 1, 0.75)));

  OrcaServiceOptions options;
  options.dir = dir.path();
  options.endpoint = "api";
  options.instance = ServedInstance::aggregate;
  options.streams.min_interval = 100ms;
  auto service = OrcaService::create(options);
  ASSERT_TRUE(service) << service.error().message;
  EXPECT_EQ((*service)->scope(), "endpoint.api");
  Server server(service->get(), dir.path());

  Client c(server.address, 100ms, "", 20s);
  Report r;
  ASSERT_TRUE(c.reader->Read(&r));
  EXPECT_DOUBLE_EQ(r.cpu_utilization(), 0.25);  // the endpoint's, not the node's
  EXPECT_EQ(seq_of(r), 1);
  // One sampling interval later (the stream asked for 100 ms).
  ASSERT_TRUE(writer->write("endpoint.api.orca", report_at(t0 + 100, 2, 0.5)));
  ASSERT_TRUE(c.reader->Read(&r));
  EXPECT_EQ(seq_of(r), 2);
  EXPECT_DOUBLE_EQ(r.cpu_utilization(), 0.5);

  // A report from long ago is stale: not sent, to the open stream or a new one.
  ASSERT_TRUE(writer->write("endpoint.api.orca", report_at(t0 - 60'000, 3, 0.6)));
  Client fresh_only(server.address, 100ms, "", 1500ms);
  EXPECT_FALSE(fresh_only.reader->Read(&r)) << "a stale report was sent: seq " << seq_of(r);
  EXPECT_EQ(fresh_only.reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The agent's final report is stale too.
  ASSERT_TRUE(writer->write("endpoint.api.orca", report_at(unix_now_ms(), 4, 0.7, true)));
  std::this_thread::sleep_for(300ms);
  // Fresh again: the open stream resumes with it.
  ASSERT_TRUE(writer->write("endpoint.api.orca", report_at(unix_now_ms(), 5, 0.8)));
  ASSERT_TRUE(c.reader->Read(&r));
  EXPECT_EQ(seq_of(r), 5);
  EXPECT_EQ((*service)->open_streams(), 1u);
}

TEST(OrcaServiceFromFiles, RefusesANameThatIsNoEndpointName) {
  TempDir dir;
  OrcaServiceOptions options;
  options.dir = dir.path();
  options.endpoint = "../etc";
  auto service = OrcaService::create(options);
  ASSERT_FALSE(service);
  EXPECT_NE(service.error().message.find("is not an endpoint name"), std::string::npos) << service.error().message;
}

// An endpoint instance's report: its network namespace and a CPU figure to
// tell it from the others.
Report instance_at(uint64_t netns, int64_t timestamp_ms, uint64_t seq, double cpu, bool gone = false) {
  Report r = report_at(timestamp_ms, seq, cpu, gone);
  (*r.mutable_named_metrics())[std::string(kMetricInstanceNetns)] = static_cast<double>(netns);
  if (gone) (*r.mutable_named_metrics())[std::string(kMetricInstanceGone)] = 1;
  return r;
}

uint64_t own_netns_inode() {
  struct stat st{};
  EXPECT_EQ(::stat("/proc/self/ns/net", &st), 0);
  return static_cast<uint64_t>(st.st_ino);
}

TEST(OrcaServiceFromFiles, ServesItsOwnInstanceAndNotAnotherOnesNorTheAggregate) {
  TempDir dir;
  auto writer = ReportFileWriter::open(dir.path());
  ASSERT_TRUE(writer) << writer.error().message;
  const uint64_t own = own_netns_inode();
  const int64_t t0 = unix_now_ms();
  ASSERT_TRUE(writer->write("endpoint.api.orca", report_at(t0, 1, 0.9)));                 // the aggregate
  ASSERT_TRUE(writer->write("endpoint.api@pod-x.orca", instance_at(own + 1, t0, 1, 0.8)));  // another namespace

  OrcaServiceOptions options;
  options.dir = dir.path();
  options.endpoint = "api";  // instance: own, the default
  options.streams.min_interval = 100ms;
  auto service = OrcaService::create(options);
  ASSERT_TRUE(service) << service.error().message;
  EXPECT_EQ((*service)->scope(), "");
  EXPECT_NE((*service)->unresolved_reason().find("net:[" + std::to_string(own) + "]"), std::string::npos)
      << (*service)->unresolved_reason();
  Server server(service->get(), dir.path());

  // Nothing of this namespace yet: the stream waits, sending neither the
  // other instance's report nor the aggregate.
  Client early(server.address, 100ms, "", 1500ms);
  Report r;
  EXPECT_FALSE(early.reader->Read(&r)) << "sent cpu " << r.cpu_utilization();
  EXPECT_EQ(early.reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);

  // The instance of this namespace appears: found, and served.
  Client c(server.address, 100ms, "", 20s);
  const int64_t t1 = unix_now_ms();
  ASSERT_TRUE(writer->write("endpoint.api@host.orca", instance_at(own, t1, 1, 0.25)));
  ASSERT_TRUE(c.reader->Read(&r));
  EXPECT_DOUBLE_EQ(r.cpu_utilization(), 0.25);
  EXPECT_EQ((*service)->scope(), "endpoint.api@host");
  // The others go on publishing; only the own instance's reports arrive,
  // one sampling interval apart (the stream asked for 100 ms).
  for (uint64_t seq = 2; seq <= 4; ++seq) {
    std::this_thread::sleep_for(100ms);
    const int64_t t = t1 + static_cast<int64_t>(seq - 1) * 100;
    ASSERT_TRUE(writer->write("endpoint.api.orca", report_at(t, seq, 0.9)));
    ASSERT_TRUE(writer->write("endpoint.api@pod-x.orca", instance_at(own + 1, t, seq, 0.8)));
    ASSERT_TRUE(writer->write("endpoint.api@host.orca", instance_at(own, t, seq, 0.25 + 0.01 * static_cast<double>(seq))));
    ASSERT_TRUE(c.reader->Read(&r));
    EXPECT_EQ(seq_of(r), static_cast<int64_t>(seq));
    EXPECT_DOUBLE_EQ(r.cpu_utilization(), 0.25 + 0.01 * static_cast<double>(seq));
  }

  // Its file is removed and the instance comes back under another id (a new
  // pod in this namespace): found again; the stream resumes with it.
  ASSERT_TRUE(std::filesystem::remove(dir.path() + "/endpoint.api@host.orca"));
  std::this_thread::sleep_for(200ms);
  ASSERT_TRUE(writer->write("endpoint.api@pod-y.orca", instance_at(own, t1 + 500, 7, 0.5)));
  ASSERT_TRUE(c.reader->Read(&r)) << (*service)->scope() << " / " << (*service)->unresolved_reason();
  EXPECT_DOUBLE_EQ(r.cpu_utilization(), 0.5);
  EXPECT_EQ((*service)->scope(), "endpoint.api@pod-y");

  // Its servers stopped (gone): stale, not sent to a new stream.
  ASSERT_TRUE(writer->write("endpoint.api@pod-y.orca", instance_at(own, unix_now_ms(), 8, 0.6, /*gone=*/true)));
  std::this_thread::sleep_for(300ms);
  Client after(server.address, 100ms, "", 1500ms);
  EXPECT_FALSE(after.reader->Read(&r)) << "a gone instance's report was sent: cpu " << r.cpu_utilization();
}

TEST(OrcaServiceFromFiles, TwoServersOfTheHostNamespaceEachGetTheirEndpoints) {
  TempDir dir;
  auto writer = ReportFileWriter::open(dir.path());
  ASSERT_TRUE(writer) << writer.error().message;
  const uint64_t own = own_netns_inode();
  const int64_t t0 = unix_now_ms();
  ASSERT_TRUE(writer->write("endpoint.e1@host.orca", instance_at(own, t0, 1, 0.1)));
  ASSERT_TRUE(writer->write("endpoint.e2@host.orca", instance_at(own, t0, 1, 0.2)));
  for (const auto& [endpoint, cpu] : {std::pair{"e1", 0.1}, std::pair{"e2", 0.2}}) {
    OrcaServiceOptions options;
    options.dir = dir.path();
    options.endpoint = endpoint;
    auto service = OrcaService::create(options);
    ASSERT_TRUE(service) << service.error().message;
    EXPECT_EQ((*service)->scope(), std::string("endpoint.") + endpoint + "@host");
    TempDir sock;
    Server server(service->get(), sock.path());
    Client c(server.address, 100ms, "", 10s);
    Report r;
    ASSERT_TRUE(c.reader->Read(&r)) << endpoint;
    EXPECT_DOUBLE_EQ(r.cpu_utilization(), cpu) << endpoint;
  }
}

TEST(OrcaServiceFromFiles, OwnInstanceNeedsItsNamespace) {
  TempDir dir;
  OrcaServiceOptions options;
  options.dir = dir.path();
  options.endpoint = "api";
  options.proc_root = dir / "no-proc";
  auto service = OrcaService::create(options);
  ASSERT_FALSE(service);
  EXPECT_NE(service.error().message.find("no-proc/self/ns/net"), std::string::npos) << service.error().message;
  options.instance = ServedInstance::aggregate;  // needs no namespace
  EXPECT_TRUE(OrcaService::create(options));
}

}  // namespace
}  // namespace headroom::orca
