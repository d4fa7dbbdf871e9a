// SPDX-License-Identifier: Apache-2.0
#include "agent/signals/report_builder.h"

#include <algorithm>
#include <array>

namespace headroom::agent {

namespace {

using ProtoMap = google::protobuf::Map<std::string, double>;

// Writes a map's entries over the previous tick's, then drops the entries not
// written this time. Keys are looked up as string_views: an existing entry
// costs no allocation.
class MapRefill {
 public:
  explicit MapRefill(ProtoMap& map) : map_(map) {}
  MapRefill(const MapRefill&) = delete;
  MapRefill& operator=(const MapRefill&) = delete;
  ~MapRefill() {
    if (overflow_) return;  // more keys than tracked: those written are all kept
    for (auto it = map_.begin(); it != map_.end();) {
      const std::string_view key = it->first;
      if (std::find(written_.begin(), written_.begin() + static_cast<std::ptrdiff_t>(n_), key) ==
          written_.begin() + static_cast<std::ptrdiff_t>(n_))
        it = map_.erase(it);
      else
        ++it;
    }
  }
  void set(std::string_view key, double value) {
    map_[key] = value;
    if (n_ < written_.size())
      written_[n_++] = key;
    else
      overflow_ = true;
  }

 private:
  ProtoMap& map_;
  std::array<std::string_view, 24> written_{};
  std::size_t n_ = 0;
  bool overflow_ = false;
};

void add_meta(MapRefill& nm, const ReportMeta& meta) {
  nm.set(orca::kTimestampMsKey, static_cast<double>(meta.timestamp_ms));
  nm.set(orca::kSeqKey, static_cast<double>(meta.seq));
  nm.set(orca::kIntervalMsKey, static_cast<double>(meta.interval_ms));
  if (meta.stopped) nm.set(orca::kStoppedKey, 1.0);
}

// Many keys (node.include_endpoints with many endpoints): the keys to keep are
// looked up in the sorted utilization instead of a list.
void refill_utilization(ProtoMap& u, const NodeValues& v) {
  for (const auto& [key, value] : v.utilization) u[key] = value;
  if (u.size() == v.utilization.size()) return;  // every entry was just written
  for (auto it = u.begin(); it != u.end();) {
    if (v.find(it->first) == nullptr)
      it = u.erase(it);
    else
      ++it;
  }
}

}  // namespace

void smooth(Smoother& smoother, NodeSample& sample) {
  for (auto key : kNodeSignals) {
    auto it = sample.signals.find(key);
    if (it == sample.signals.end())
      smoother.forget(std::string(key));
    else
      it->second = smoother.update(it->first, it->second);
  }
}

const double* NodeValues::find(std::string_view key) const {
  auto it = std::lower_bound(utilization.begin(), utilization.end(), key,
                             [](const auto& entry, std::string_view k) { return entry.first < k; });
  return it != utilization.end() && it->first == key ? &it->second : nullptr;
}

void node_values(const NodeSample& sample, const Config& config, NodeValues& out) {
  out.utilization.clear();
  out.parts.clear();
  for (const auto& [key, value] : sample.signals) {
    const bool endpoint_signal = config.include_endpoints && key.starts_with(orca::kEndpointSignalPrefix);
    if (!config.signal_enabled(key) && !endpoint_signal) continue;
    out.utilization.emplace_back(key, clamp01(value));
    out.parts.emplace_back(value < 0 ? 0.0 : value, config.weight(key));
  }
  out.application_utilization = composite(out.parts, config.composite).value_or(0.0);
  out.cpu_utilization = 0;
  if (auto cpu = sample.signals.find(kSignalCpu); cpu != sample.signals.end() && config.signal_enabled(kSignalCpu))
    out.cpu_utilization = cpu->second > 0 ? cpu->second : 0.0;
  out.mem_utilization = 0;
  if (auto mem = sample.signals.find(kSignalMemory);
      mem != sample.signals.end() && config.signal_enabled(kSignalMemory))
    out.mem_utilization = clamp01(mem->second);
}

void build_node_report_into(const NodeValues& values, const NodeSample& sample, const ReportMeta& meta,
                            orca::Report& r) {
  refill_utilization(*r.mutable_utilization(), values);
  r.set_cpu_utilization(values.cpu_utilization);
  r.set_mem_utilization(values.mem_utilization);
  r.set_application_utilization(values.application_utilization);
  MapRefill nm(*r.mutable_named_metrics());
  for (const auto& [key, value] : sample.raw) nm.set(key, value);
  add_meta(nm, meta);
}

orca::Report build_node_report(const NodeSample& sample, const Config& config, const ReportMeta& meta) {
  NodeValues values;
  node_values(sample, config, values);
  orca::Report r;
  build_node_report_into(values, sample, meta, r);
  return r;
}

std::size_t endpoint_utilization(const EndpointSignals& s, std::array<KeyedValue, 3>& out) {
  std::size_t n = 0;
  if (s.share_over_target) out[n++] = {kSignalSloTarget, clamp01(*s.share_over_target)};
  if (s.share_over_max) out[n++] = {kSignalSloMax, clamp01(*s.share_over_max)};
  if (s.concurrency) out[n++] = {kSignalConcurrency, clamp01(*s.concurrency)};
  return n;
}

std::optional<double> node_cpu(const NodeValues& values) {
  if (values.find(kSignalCpu) == nullptr) return std::nullopt;
  return values.cpu_utilization;
}

double endpoint_application_utilization(const EndpointSignals& s, std::optional<double> cpu) {
  return std::max(endpoint_composite(s).value_or(0.0), cpu.value_or(0.0));
}

namespace {

void add_instance(MapRefill& nm, const InstanceFigures& f, orca::Report& r) {
  nm.set(orca::kMetricInstanceNetns, static_cast<double>(f.netns));
  if (f.cgroup_unavailable) nm.set(orca::kMetricInstanceCgroupUnavailable, 1.0);
  if (!f.serving) {
    nm.set(orca::kMetricInstanceGone, 1.0);
    nm.set(orca::kStoppedKey, 1.0);
  }
  if (f.memory) r.set_mem_utilization(clamp01(*f.memory));
  else r.set_mem_utilization(0);
}

}  // namespace

void build_endpoint_report_into(const EndpointConfig& endpoint, const EndpointSignals* s, const ReportMeta& meta,
                                orca::Report& r, std::optional<double> cpu, const InstanceFigures* instance) {
  MapRefill nm(*r.mutable_named_metrics());
  MapRefill u(*r.mutable_utilization());
  if (instance) add_instance(nm, *instance, r);
  if (s == nullptr) {
    r.set_application_utilization(0);
    r.set_cpu_utilization(0);
    r.set_rps_fractional(0);
    r.set_eps(0);
    nm.set(kEbpfUnavailableKey, 1.0);
    add_meta(nm, meta);
    return;
  }
  std::array<KeyedValue, 3> shares;
  for (std::size_t i = 0, n = endpoint_utilization(*s, shares); i < n; ++i) u.set(shares[i].key, shares[i].value);
  r.set_cpu_utilization(cpu.value_or(0.0));
  double application = endpoint_application_utilization(*s, cpu);
  if (instance && instance->serving) application = std::max(application, kInstanceUtilizationFloor);
  r.set_application_utilization(application);
  r.set_rps_fractional(s->rps);
  r.set_eps(s->eps);
  nm.set(orca::kMetricInflight, s->inflight_now);
  nm.set(orca::kMetricInflightAvg, s->inflight_avg);
  nm.set(orca::kMetricPending, s->pending);
  if (s->concurrency) nm.set(orca::kMetricConcurrency, *s->concurrency);
  if (s->p50_ms) nm.set(orca::kMetricLatencyP50Ms, *s->p50_ms);
  if (s->p90_ms) nm.set(orca::kMetricLatencyP90Ms, *s->p90_ms);
  if (s->p99_ms) nm.set(orca::kMetricLatencyP99Ms, *s->p99_ms);
  nm.set(orca::kMetricWindowRequests, static_cast<double>(s->window_requests));
  nm.set(orca::kMetricWindowSeconds, s->window_seconds);
  nm.set(orca::kMetricSloTargetMs, static_cast<double>(endpoint.target.count()) / 1e6);
  nm.set(orca::kMetricSloMaxMs, static_cast<double>(endpoint.max.count()) / 1e6);
  add_meta(nm, meta);
}

void build_instance_report_into(const EndpointConfig& endpoint, const EndpointSignals* s, const InstanceFigures& f,
                                const ReportMeta& meta, orca::Report& out) {
  std::optional<double> cpu = f.cpu;
  if (cpu && f.serving) cpu = std::max(*cpu, kInstanceUtilizationFloor);
  build_endpoint_report_into(endpoint, s, meta, out, cpu, &f);
}

void build_dependency_report_into(const DependencyConfig& dependency, const DependencySignals* s,
                                  const ReportMeta& meta, orca::Report& r) {
  MapRefill nm(*r.mutable_named_metrics());
  MapRefill u(*r.mutable_utilization());
  r.set_cpu_utilization(0);
  r.set_mem_utilization(0);
  if (s == nullptr) {
    r.set_application_utilization(0);
    r.set_rps_fractional(0);
    r.set_eps(0);
    nm.set(kEbpfUnavailableKey, 1.0);
    add_meta(nm, meta);
    return;
  }
  const EndpointSignals& c = s->calls;
  std::array<KeyedValue, 3> shares;
  for (std::size_t i = 0, n = endpoint_utilization(c, shares); i < n; ++i) u.set(shares[i].key, shares[i].value);
  if (s->error_share) u.set(orca::kSignalErrors, clamp01(*s->error_share));
  r.set_application_utilization(clamp01(dependency_composite(*s).value_or(0.0)));
  r.set_rps_fractional(c.rps);
  r.set_eps(c.eps);
  nm.set(orca::kMetricInflight, c.inflight_now);
  nm.set(orca::kMetricInflightAvg, c.inflight_avg);
  if (c.concurrency) nm.set(orca::kMetricConcurrency, *c.concurrency);
  if (c.p50_ms) nm.set(orca::kMetricLatencyP50Ms, *c.p50_ms);
  if (c.p90_ms) nm.set(orca::kMetricLatencyP90Ms, *c.p90_ms);
  if (c.p99_ms) nm.set(orca::kMetricLatencyP99Ms, *c.p99_ms);
  nm.set(orca::kMetricWindowRequests, static_cast<double>(c.window_requests));
  nm.set(orca::kMetricWindowSeconds, c.window_seconds);
  nm.set(orca::kMetricConnectFailures, static_cast<double>(s->window_connect_failures));
  nm.set(orca::kMetricResets, static_cast<double>(s->window_resets));
  nm.set(orca::kMetricSloTargetMs, static_cast<double>(dependency.target.count()) / 1e6);
  nm.set(orca::kMetricSloMaxMs, static_cast<double>(dependency.max.count()) / 1e6);
  add_meta(nm, meta);
}

orca::Report build_endpoint_report(const EndpointConfig& endpoint, const EndpointSignals* s, const ReportMeta& meta,
                                   std::optional<double> cpu) {
  orca::Report r;
  build_endpoint_report_into(endpoint, s, meta, r, cpu);
  return r;
}

}  // namespace headroom::agent
