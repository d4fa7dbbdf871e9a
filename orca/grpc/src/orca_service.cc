// SPDX-License-Identifier: Apache-2.0
#include "headroom/orca/orca_service.h"

#include <algorithm>
#include <optional>

#include "headroom/orca/report.h"

namespace headroom::orca {

namespace {

bool valid_endpoint_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

// Follows the scope's file and hands each new valid, fresh report to the hub,
// serialized once. A report goes stale at the reader's threshold (the same
// rule as check_staleness): fresh_until tells the hub.
class FileSource final : public StreamHub::Source {
 public:
  FileSource(ReportDirectory reader, std::string scope, ReaderOptions options)
      : reader_(std::move(reader)), scope_(std::move(scope)), options_(options) {}

  int fd() const override { return reader_.fd(); }
  int poll_ms() const override { return 1000; }

  void update(StreamHub& hub) override {
    reader_.process_events();
    const int64_t now = unix_now_ms();
    auto state = reader_.get(scope_, now);
    const Report* report = state && state->report && state->error.empty() && !state->removed ? &*state->report : nullptr;
    std::optional<ReportMetadata> meta;
    if (report != nullptr) {
      auto m = metadata_of(*report);
      if (m && !m->stopped && !state->staleness.stale) meta = *m;
    }
    if (!meta) {
      if (have_) hub.clear(scope_);
      have_ = false;
      return;
    }
    if (have_ && meta->seq == seq_ && meta->timestamp_ms == timestamp_ms_) return;  // nothing new
    const std::string bytes = report->SerializeAsString();
    grpc::Slice slice(bytes);
    Snapshot snapshot{grpc::ByteBuffer(&slice, 1), {}};
    snapshot.info.version = ++version_;
    snapshot.info.timestamp_ms = meta->timestamp_ms;
    snapshot.info.interval_ms = meta->interval_ms;
    const double threshold = std::max(options_.stale_intervals * static_cast<double>(meta->interval_ms),
                                      static_cast<double>(options_.min_stale_ms));
    snapshot.info.fresh_until_ms = meta->timestamp_ms + static_cast<int64_t>(threshold);
    hub.set(scope_, std::move(snapshot));
    have_ = true;
    seq_ = meta->seq;
    timestamp_ms_ = meta->timestamp_ms;
  }

 private:
  ReportDirectory reader_;
  std::string scope_;
  ReaderOptions options_;
  bool have_ = false;
  uint64_t seq_ = 0, version_ = 0;
  int64_t timestamp_ms_ = 0;
};

}  // namespace

Result<std::unique_ptr<OrcaService>> OrcaService::create(OrcaServiceOptions options) {
  std::string scope(kNodeScope);
  if (!options.endpoint.empty()) {
    if (!valid_endpoint_name(options.endpoint))
      return logic_error("OrcaService: endpoint " + options.endpoint +
                         " is not an endpoint name (1 to 64 of A-Z a-z 0-9 _ . -, as in [[endpoint]] name)");
    scope = endpoint_scope(options.endpoint);
  }
  auto reader = ReportDirectory::open(options.dir, options.reader);
  if (!reader) return reader.error();
  auto source = std::make_unique<FileSource>(std::move(*reader), scope, options.reader);
  const std::string served = scope;
  auto hub = StreamHub::create(
      options.streams, [served](std::string_view) -> std::variant<std::string, grpc::Status> { return served; },
      std::move(source));
  return std::unique_ptr<OrcaService>(new OrcaService(std::move(hub), std::move(scope)));
}

OrcaService::OrcaService(std::shared_ptr<StreamHub> hub, std::string scope)
    : hub_(std::move(hub)), scope_(std::move(scope)) {}

OrcaService::~OrcaService() = default;

grpc::ServerWriteReactor<grpc::ByteBuffer>* OrcaService::StreamCoreMetrics(grpc::CallbackServerContext* context,
                                                                          const grpc::ByteBuffer* request) {
  return hub_->open(context, request);
}

}  // namespace headroom::orca
