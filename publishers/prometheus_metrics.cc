// SPDX-License-Identifier: Apache-2.0
#include "publishers/prometheus_metrics.h"

#include <algorithm>
#include <limits>

#include "agent/signals/report_builder.h"
#include "probes/ebpf/endpoint_abi.h"

namespace headroom::publishers::prom {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// le_bucket_of for every kernel bucket, computed once.
const std::array<uint8_t, HR_HIST_BUCKETS>& le_table() {
  static const auto table = [] {
    std::array<uint8_t, HR_HIST_BUCKETS> t{};
    for (uint32_t b = 0; b < HR_HIST_BUCKETS; ++b) {
      const double mid = kernel_bucket_midpoint_seconds(b);
      std::size_t i = 0;
      while (i < kLatencyBucketsSeconds.size() && mid > kLatencyBucketsSeconds[i]) ++i;
      t[b] = static_cast<uint8_t>(i);
    }
    return t;
  }();
  return table;
}

ClientMetric::Label label(std::string name, std::string value) { return {std::move(name), std::move(value)}; }

MetricFamily family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void gauge(MetricFamily& f, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  f.metric.push_back(std::move(m));
}

void counter(MetricFamily& f, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = value;
  f.metric.push_back(std::move(m));
}

double seconds(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e9; }

}  // namespace

double kernel_bucket_midpoint_seconds(uint32_t b) {
  const double lo = static_cast<double>(hr_hist_lower_ns(b));
  if (b + 1 >= HR_HIST_BUCKETS) return lo / 1e9;
  const double hi = static_cast<double>(hr_hist_lower_ns(b + 1));
  return (lo + hi) / 2 / 1e9;
}

std::size_t le_bucket_of(uint32_t kernel_bucket) {
  if (kernel_bucket >= HR_HIST_BUCKETS) return kLatencyBuckets - 1;
  return le_table()[kernel_bucket];
}

void EndpointCounts::add(const agent::EndpointInterval& iv) {
  requests += iv.completed;
  errors += iv.errors;
  aborted += iv.aborted;
  over_target += iv.over_target;
  over_max += iv.over_max;
  for (const auto& [bucket, n] : iv.hist) {
    latency[le_bucket_of(bucket)] += n;
    latency_sum_seconds += n * kernel_bucket_midpoint_seconds(bucket);
  }
}

EndpointState& MetricsState::endpoint(std::size_t index, const agent::EndpointConfig& config) {
  // A reload may remove, add or reorder endpoints: their counts follow the name.
  if (index < endpoints_.size() && endpoints_[index].name == config.name) return endpoints_[index];
  auto it = std::find_if(endpoints_.begin(), endpoints_.end(), [&](const auto& e) { return e.name == config.name; });
  EndpointState moved;
  if (it != endpoints_.end()) {
    moved = std::move(*it);
    endpoints_.erase(it);
  } else {
    moved.name = config.name;
  }
  if (index > endpoints_.size()) index = endpoints_.size();
  return *endpoints_.insert(endpoints_.begin() + static_cast<std::ptrdiff_t>(index), std::move(moved));
}

void MetricsState::update(const Tick& tick) {
  have_tick_ = true;
  const agent::NodeValues& v = tick.values;
  node_utilization_.resize(v.utilization.size());
  for (std::size_t i = 0; i < v.utilization.size(); ++i) {
    node_utilization_[i].first.assign(v.utilization[i].first);
    node_utilization_[i].second = v.utilization[i].second;
  }
  node_application_ = v.application_utilization;
  node_has_cpu_ = v.find(orca::kSignalCpu) != nullptr;
  node_has_memory_ = v.find(orca::kSignalMemory) != nullptr;
  node_cpu_ = v.cpu_utilization;
  node_memory_ = v.mem_utilization;

  for (std::size_t i = 0; i < tick.endpoints.size(); ++i) {
    const EndpointTick& t = tick.endpoints[i];
    EndpointState& e = endpoint(i, *t.config);
    e.target_seconds = seconds(t.config->target);
    e.max_seconds = seconds(t.config->max);
    if (t.interval != nullptr) e.counts.add(*t.interval);
    e.measured = t.signals != nullptr;
    e.utilization.clear();
    if (t.signals == nullptr) continue;
    std::array<agent::KeyedValue, 3> shares;
    for (std::size_t k = 0, n = agent::endpoint_utilization(*t.signals, shares); k < n; ++k)
      e.utilization.emplace_back(std::string(shares[k].key), shares[k].value);
    e.application_utilization = agent::endpoint_application_utilization(*t.signals, agent::node_cpu(tick.values));
    e.in_flight = t.signals->inflight_now;
    e.pending = t.signals->pending;
  }
  endpoints_.resize(tick.endpoints.size());
  health_ = tick.health;
  interval_ms_ = tick.meta.interval_ms;
}

std::vector<MetricFamily> MetricsState::families(const std::string& version) const {
  std::vector<MetricFamily> out;
  const auto node = [] { return label("scope", "node"); };
  const auto scope_endpoint = [] { return label("scope", "endpoint"); };

  // -- utilization, as the reports carry it --
  auto util = family("headroom_utilization_ratio",
                     "Each entry of an ORCA report's utilization map, as published (0 to 1).", MetricType::Gauge);
  auto app = family("headroom_application_utilization_ratio",
                    "An ORCA report's application_utilization: the node's composite; an endpoint's largest signal or the node's CPU.",
                    MetricType::Gauge);
  if (have_tick_) {
    for (const auto& [key, value] : node_utilization_) gauge(util, {node(), label("signal", key)}, value);
    gauge(app, {node()}, node_application_);
    for (const auto& e : endpoints_) {
      if (!e.measured) continue;
      for (const auto& [key, value] : e.utilization)
        gauge(util, {label("endpoint", e.name), scope_endpoint(), label("signal", key)}, value);
      gauge(app, {label("endpoint", e.name), scope_endpoint()}, e.application_utilization);
    }
  }
  out.push_back(std::move(util));
  out.push_back(std::move(app));
  auto cpu = family("headroom_cpu_utilization_ratio",
                    "node.orca's cpu_utilization: CPU demand over capacity, above 1 when saturated.", MetricType::Gauge);
  if (have_tick_ && node_has_cpu_) gauge(cpu, {node()}, node_cpu_);
  out.push_back(std::move(cpu));
  auto mem = family("headroom_memory_utilization_ratio", "node.orca's mem_utilization.", MetricType::Gauge);
  if (have_tick_ && node_has_memory_) gauge(mem, {node()}, node_memory_);
  out.push_back(std::move(mem));

  // -- endpoints --
  auto requests = family("headroom_endpoint_requests_total",
                         "Requests answered (first byte of the response written), since headroomd started.",
                         MetricType::Counter);
  auto errors = family("headroom_endpoint_errors_total", "Answers with an HTTP 5xx status, since headroomd started.",
                       MetricType::Counter);
  auto aborted = family("headroom_endpoint_requests_aborted_total",
                        "Connections closed with a request in flight, since headroomd started.", MetricType::Counter);
  auto over = family("headroom_endpoint_requests_over_slo_total",
                     "Answered or aborted requests slower than the SLO's target or max, since headroomd started.",
                     MetricType::Counter);
  auto duration = family("headroom_endpoint_request_duration_seconds",
                         "Time from a request's arrival to the first byte of its answer, answered requests.",
                         MetricType::Histogram);
  auto in_flight = family("headroom_endpoint_requests_in_flight", "Requests being served at the last sample.",
                          MetricType::Gauge);
  auto pending = family("headroom_endpoint_requests_pending",
                        "Requests that arrived and the server has not read yet, at the last sample.", MetricType::Gauge);
  auto slo = family("headroom_endpoint_slo_seconds", "The endpoint's configured SLO target and max.",
                    MetricType::Gauge);
  for (const auto& e : endpoints_) {
    const auto ep = [&] { return label("endpoint", e.name); };
    const EndpointCounts& c = e.counts;
    counter(requests, {ep()}, static_cast<double>(c.requests));
    counter(errors, {ep()}, static_cast<double>(c.errors));
    counter(aborted, {ep()}, static_cast<double>(c.aborted));
    counter(over, {ep(), label("slo", "max")}, static_cast<double>(c.over_max));
    counter(over, {ep(), label("slo", "target")}, static_cast<double>(c.over_target));
    ClientMetric h;
    h.label = {ep()};
    uint64_t cumulative = 0;
    for (std::size_t i = 0; i < kLatencyBuckets; ++i) {
      cumulative += c.latency[i];
      const double bound =
          i < kLatencyBucketsSeconds.size() ? kLatencyBucketsSeconds[i] : std::numeric_limits<double>::infinity();
      h.histogram.bucket.push_back({cumulative, bound});
    }
    h.histogram.sample_count = cumulative;
    h.histogram.sample_sum = c.latency_sum_seconds;
    duration.metric.push_back(std::move(h));
    if (e.measured) {
      gauge(in_flight, {ep()}, e.in_flight);
      gauge(pending, {ep()}, e.pending);
    }
    gauge(slo, {ep(), label("slo", "max")}, e.max_seconds);
    gauge(slo, {ep(), label("slo", "target")}, e.target_seconds);
  }
  for (auto* f : {&requests, &errors, &aborted, &over, &duration, &in_flight, &pending, &slo})
    out.push_back(std::move(*f));

  // -- the agent --
  auto info = family("headroom_build_info", "headroomd's version; always 1.", MetricType::Gauge);
  gauge(info, {label("version", version)}, 1);
  out.push_back(std::move(info));
  auto ticks = family("headroom_ticks_total", "Sampling ticks whose node.orca was written.", MetricType::Counter);
  counter(ticks, {}, static_cast<double>(health_.ticks));
  out.push_back(std::move(ticks));
  auto failures = family("headroom_publish_failures_total",
                         "Ticks on which a publisher failed to write what it publishes.", MetricType::Counter);
  for (const auto& [name, n] : health_.publish_failures) counter(failures, {label("publisher", name)}, static_cast<double>(n));
  out.push_back(std::move(failures));
  auto last = family("headroom_last_publish_timestamp_seconds",
                     "Unix time of the last tick whose node.orca was written.", MetricType::Gauge);
  if (health_.last_publish_ms > 0) gauge(last, {}, static_cast<double>(health_.last_publish_ms) / 1e3);
  out.push_back(std::move(last));
  auto interval = family("headroom_interval_seconds", "agent.interval: how often the reports are rewritten.",
                         MetricType::Gauge);
  if (have_tick_) gauge(interval, {}, static_cast<double>(interval_ms_) / 1e3);
  out.push_back(std::move(interval));
  auto declared = family("headroom_endpoints", "Endpoints declared in the configuration.", MetricType::Gauge);
  gauge(declared, {}, static_cast<double>(endpoints_.size()));
  out.push_back(std::move(declared));
  auto ebpf = family("headroom_ebpf_available", "1 while the eBPF endpoint probe runs, else 0.", MetricType::Gauge);
  gauge(ebpf, {}, health_.ebpf_running ? 1 : 0);
  out.push_back(std::move(ebpf));
  auto generation = family("headroom_config_generation",
                           "1 at start, plus 1 for each configuration a reload put in force.", MetricType::Gauge);
  gauge(generation, {}, static_cast<double>(health_.config_generation));
  out.push_back(std::move(generation));
  auto reload = family("headroom_config_last_reload_successful",
                       "0 after a reload that was rejected, 1 otherwise.", MetricType::Gauge);
  gauge(reload, {}, health_.last_reload_ok ? 1 : 0);
  out.push_back(std::move(reload));
  // A family with no series (no failure yet, no endpoint) is left out.
  std::erase_if(out, [](const MetricFamily& f) { return f.metric.empty(); });
  return out;
}

}  // namespace headroom::publishers::prom
