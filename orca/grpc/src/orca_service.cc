// SPDX-License-Identifier: Apache-2.0
#include "headroom/orca/orca_service.h"

#include <algorithm>
#include <mutex>
#include <optional>

#include "headroom/orca/own_instance.h"
#include "headroom/orca/report.h"

namespace headroom::orca {

struct ServedScope {
  mutable std::mutex mutex;
  std::string scope;
  std::string unresolved;
};

namespace {

// Which scope the service serves: a fixed one (the node, an endpoint's
// aggregate), or the endpoint's instance in this process's network
// namespace, resolved again among the directory's scopes at each update.
struct Target {
  std::string fixed;      // "" for the own instance
  std::string endpoint;   // the own instance's endpoint
  uint64_t netns = 0;     // this process's network namespace
};

// Follows the scope's file and hands each new valid, fresh report to the hub,
// serialized once, under one key (the hub's resolver gives every stream that
// key). A report goes stale at the reader's threshold (the same rule as
// check_staleness): fresh_until tells the hub.
class FileSource final : public StreamHub::Source {
 public:
  FileSource(ReportDirectory reader, Target target, std::string key, ReaderOptions options,
             std::shared_ptr<ServedScope> served)
      : reader_(std::move(reader)),
        target_(std::move(target)),
        key_(std::move(key)),
        options_(options),
        served_(std::move(served)) {
    resolve(unix_now_ms());
  }

  int fd() const override { return reader_.fd(); }
  int poll_ms() const override { return 1000; }

  void update(StreamHub& hub) override {
    reader_.process_events();
    const int64_t now = unix_now_ms();
    if (resolve(now)) have_ = false;  // another file: its report is new even at the same seq
    auto state = scope_.empty() ? std::nullopt : reader_.get(scope_, now);
    const Report* report = state && state->report && state->error.empty() && !state->removed ? &*state->report : nullptr;
    std::optional<ReportMetadata> meta;
    if (report != nullptr) {
      auto m = metadata_of(*report);
      if (m && !m->stopped && !state->staleness.stale) meta = *m;
    }
    if (!meta) {
      if (have_ || !cleared_) hub.clear(key_);
      have_ = false;
      cleared_ = true;
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
    hub.set(key_, std::move(snapshot));
    have_ = true;
    cleared_ = false;
    seq_ = meta->seq;
    timestamp_ms_ = meta->timestamp_ms;
  }

 private:
  // The scope to serve now; true when it changed.
  bool resolve(int64_t now) {
    std::string scope = target_.fixed, unresolved;
    if (scope.empty()) {
      auto own = own_instance_scope(reader_, target_.endpoint, target_.netns, now);
      if (own)
        scope = std::move(*own);
      else
        unresolved = own.error().message;
    }
    std::lock_guard lock(served_->mutex);
    served_->unresolved = std::move(unresolved);
    if (scope == scope_) return false;
    scope_ = scope;
    served_->scope = std::move(scope);
    return true;
  }

  ReportDirectory reader_;
  Target target_;
  std::string key_;
  ReaderOptions options_;
  std::shared_ptr<ServedScope> served_;
  std::string scope_;
  bool have_ = false, cleared_ = true;
  uint64_t seq_ = 0, version_ = 0;
  int64_t timestamp_ms_ = 0;
};

}  // namespace

Result<std::unique_ptr<OrcaService>> OrcaService::create(OrcaServiceOptions options) {
  Target target;
  target.fixed = std::string(kNodeScope);
  if (!options.endpoint.empty()) {
    if (!is_endpoint_name(options.endpoint))
      return logic_error("OrcaService: endpoint " + options.endpoint +
                         " is not an endpoint name (1 to 64 of A-Z a-z 0-9 _ . -, as in [[endpoint]] name)");
    target.fixed = endpoint_scope(options.endpoint);
    if (options.instance == ServedInstance::own) {
      auto netns = own_netns(options.proc_root);
      if (!netns) return Error{netns.error().code, "OrcaService: " + netns.error().message};
      target.fixed.clear();
      target.endpoint = options.endpoint;
      target.netns = *netns;
    }
  }
  auto reader = ReportDirectory::open(options.dir, options.reader);
  if (!reader) return reader.error();
  // The hub's key for the one scope served: the own instance's is a name no
  // report file has, since the scope behind it changes.
  const std::string key = target.fixed.empty() ? instance_scope(target.endpoint, "") : target.fixed;
  auto served = std::make_shared<ServedScope>();
  auto source = std::make_unique<FileSource>(std::move(*reader), std::move(target), key, options.reader, served);
  auto hub = StreamHub::create(
      options.streams, [key](std::string_view) -> std::variant<std::string, grpc::Status> { return key; },
      std::move(source));
  return std::unique_ptr<OrcaService>(new OrcaService(std::move(hub), std::move(served)));
}

OrcaService::OrcaService(std::shared_ptr<StreamHub> hub, std::shared_ptr<ServedScope> served)
    : hub_(std::move(hub)), served_(std::move(served)) {}

OrcaService::~OrcaService() = default;

std::string OrcaService::scope() const {
  std::lock_guard lock(served_->mutex);
  return served_->scope;
}

std::string OrcaService::unresolved_reason() const {
  std::lock_guard lock(served_->mutex);
  return served_->unresolved;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* OrcaService::StreamCoreMetrics(grpc::CallbackServerContext* context,
                                                                          const grpc::ByteBuffer* request) {
  return hub_->open(context, request);
}

}  // namespace headroom::orca
