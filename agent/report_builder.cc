#include "agent/report_builder.h"

namespace headroom::agent {

namespace {
void add_meta(google::protobuf::Map<std::string, double>& nm, const ReportMeta& meta) {
  nm[std::string(orca::kTimestampMsKey)] = static_cast<double>(meta.timestamp_ms);
  nm[std::string(orca::kSeqKey)] = static_cast<double>(meta.seq);
  nm[std::string(orca::kIntervalMsKey)] = static_cast<double>(meta.interval_ms);
  if (meta.stopped) nm[std::string(orca::kStoppedKey)] = 1.0;
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

orca::Report build_node_report(const NodeSample& sample, const Config& config, const ReportMeta& meta) {
  orca::Report r;
  std::vector<std::pair<double, double>> parts;
  for (const auto& [key, value] : sample.signals) {
    const bool endpoint_signal = config.include_endpoints && key.starts_with(orca::kEndpointSignalPrefix);
    if (!config.signal_enabled(key) && !endpoint_signal) continue;
    (*r.mutable_utilization())[key] = clamp01(value);
    parts.emplace_back(value < 0 ? 0.0 : value, config.weight(key));
  }
  if (auto cpu = sample.signals.find(kSignalCpu); cpu != sample.signals.end() && config.signal_enabled(kSignalCpu))
    r.set_cpu_utilization(cpu->second > 0 ? cpu->second : 0.0);
  if (auto mem = sample.signals.find(kSignalMemory);
      mem != sample.signals.end() && config.signal_enabled(kSignalMemory))
    r.set_mem_utilization(clamp01(mem->second));
  if (auto app = composite(parts, config.composite)) r.set_application_utilization(*app);

  auto& nm = *r.mutable_named_metrics();
  for (const auto& [key, value] : sample.raw) nm[key] = value;
  add_meta(nm, meta);
  return r;
}

orca::Report build_endpoint_report(const EndpointConfig& endpoint, const EndpointSignals* s, const ReportMeta& meta) {
  orca::Report r;
  auto& nm = *r.mutable_named_metrics();
  if (s == nullptr) {
    nm[std::string(kEbpfUnavailableKey)] = 1.0;
    add_meta(nm, meta);
    return r;
  }
  auto& u = *r.mutable_utilization();
  if (s->share_over_target) u[std::string(kSignalSloTarget)] = clamp01(*s->share_over_target);
  if (s->share_over_max) u[std::string(kSignalSloMax)] = clamp01(*s->share_over_max);
  if (s->concurrency) u[std::string(kSignalConcurrency)] = clamp01(*s->concurrency);
  if (auto app = endpoint_composite(*s)) r.set_application_utilization(*app);
  r.set_rps_fractional(s->rps);
  r.set_eps(s->eps);
  nm[std::string(orca::kMetricInflight)] = s->inflight_now;
  nm[std::string(orca::kMetricInflightAvg)] = s->inflight_avg;
  nm[std::string(orca::kMetricPending)] = s->pending;
  if (s->concurrency) nm[std::string(orca::kMetricConcurrency)] = *s->concurrency;
  if (s->p50_ms) nm[std::string(orca::kMetricLatencyP50Ms)] = *s->p50_ms;
  if (s->p90_ms) nm[std::string(orca::kMetricLatencyP90Ms)] = *s->p90_ms;
  if (s->p99_ms) nm[std::string(orca::kMetricLatencyP99Ms)] = *s->p99_ms;
  nm[std::string(orca::kMetricWindowRequests)] = static_cast<double>(s->window_requests);
  nm[std::string(orca::kMetricWindowSeconds)] = s->window_seconds;
  nm[std::string(orca::kMetricSloTargetMs)] = static_cast<double>(endpoint.target.count()) / 1e6;
  nm[std::string(orca::kMetricSloMaxMs)] = static_cast<double>(endpoint.max.count()) / 1e6;
  add_meta(nm, meta);
  return r;
}

}  // namespace headroom::agent
