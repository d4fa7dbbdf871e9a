// SPDX-License-Identifier: Apache-2.0
#include "publishers/prometheus_metrics.h"

#include <algorithm>
#include <initializer_list>
#include <limits>

#include "headroom/orca/names.h"

namespace headroom::publishers::prom {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

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


}  // namespace

std::size_t le_bucket_of(double seconds) {
  std::size_t i = 0;
  while (i < kLatencyBucketsSeconds.size() && seconds > kLatencyBucketsSeconds[i]) ++i;
  return i;
}

void EndpointTotals::add(const publishers::EndpointCounts& c) {
  // requests_total counts what the histogram counts: the kernel bumps the
  // completed counter and the histogram apart, and a read between the two
  // must not show _count and requests_total apart (docs/metrics.md).
  errors += c.errors;
  aborted += c.aborted;
  over_target += c.over_target;
  over_max += c.over_max;
  for (const auto& [seconds, n] : c.latencies) {
    requests += n;
    latency[le_bucket_of(seconds)] += n;
    latency_sum_seconds += static_cast<double>(n) * seconds;
  }
}

EndpointState& MetricsState::endpoint(std::size_t index, const std::string& name, const std::string& instance) {
  // A reload may remove, add or reorder endpoints, and instances come and
  // go: their counts follow the name and the instance.
  const auto same = [&](const EndpointState& e) { return e.name == name && e.instance == instance; };
  if (index < endpoints_.size() && same(endpoints_[index])) return endpoints_[index];
  auto it = std::find_if(endpoints_.begin(), endpoints_.end(), same);
  EndpointState moved;
  if (it != endpoints_.end()) {
    moved = std::move(*it);
    endpoints_.erase(it);
  } else {
    moved.name = name;
    moved.instance = instance;
  }
  if (index > endpoints_.size()) index = endpoints_.size();
  return *endpoints_.insert(endpoints_.begin() + static_cast<std::ptrdiff_t>(index), std::move(moved));
}

namespace {

double named(const orca::Report& r, std::string_view key) {
  const auto& m = r.named_metrics();
  auto it = m.find(std::string(key));
  return it == m.end() ? 0.0 : it->second;
}

// An endpoint's labels: endpoint="N", and endpoint_instance="<id>" on an
// instance's series (not "instance": that is Prometheus' target label).
std::vector<ClientMetric::Label> endpoint_labels(const EndpointState& e) {
  std::vector<ClientMetric::Label> out{label("endpoint", e.name)};
  if (!e.instance.empty()) out.push_back(label("endpoint_instance", e.instance));
  return out;
}

std::vector<ClientMetric::Label> with(std::vector<ClientMetric::Label> labels,
                                      std::initializer_list<ClientMetric::Label> more) {
  labels.insert(labels.end(), more.begin(), more.end());
  return labels;
}

// An endpoint report's utilization entries in the order the exposition
// lists them.
constexpr std::string_view kEndpointSignals[] = {orca::kSignalSloTarget, orca::kSignalSloMax, orca::kSignalConcurrency};
constexpr std::string_view kDependencySignals[] = {orca::kSignalSloTarget, orca::kSignalSloMax,
                                                   orca::kSignalConcurrency, orca::kSignalErrors};

// A latency histogram's series from per-bucket counts.
ClientMetric histogram(std::vector<ClientMetric::Label> labels, const EndpointTotals& c) {
  ClientMetric h;
  h.label = std::move(labels);
  uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kLatencyBuckets; ++i) {
    cumulative += c.latency[i];
    const double bound =
        i < kLatencyBucketsSeconds.size() ? kLatencyBucketsSeconds[i] : std::numeric_limits<double>::infinity();
    h.histogram.bucket.push_back({cumulative, bound});
  }
  h.histogram.sample_count = cumulative;
  h.histogram.sample_sum = c.latency_sum_seconds;
  return h;
}

}  // namespace

void MetricsState::update(const Tick& tick) {
  have_tick_ = true;
  const orca::Report& node = tick.node().report;
  node_utilization_.clear();
  for (const auto& [key, value] : node.utilization()) node_utilization_.emplace_back(key, value);
  std::sort(node_utilization_.begin(), node_utilization_.end());
  node_application_ = node.application_utilization();
  node_has_cpu_ = node.utilization().contains(std::string(orca::kSignalCpu));
  node_has_memory_ = node.utilization().contains(std::string(orca::kSignalMemory));
  node_cpu_ = node.cpu_utilization();
  node_memory_ = node.mem_utilization();

  for (std::size_t i = 0; i < tick.endpoints.size(); ++i) {
    const EndpointTick& t = tick.endpoints[i];
    EndpointState& e = endpoint(i, t.name, t.instance);
    e.target_seconds = t.target_seconds;
    e.max_seconds = t.max_seconds;
    if (t.counted) e.counts.add(t.counts);
    e.measured = t.measured;
    e.utilization.clear();
    e.latency_quantiles = {};
    e.window_requests = 0;
    if (!t.measured) continue;
    const orca::Report& r = tick.report_of(t);
    constexpr std::string_view kQuantileKeys[] = {orca::kMetricLatencyP50Ms, orca::kMetricLatencyP90Ms,
                                                  orca::kMetricLatencyP99Ms};
    for (std::size_t q = 0; q < e.latency_quantiles.size(); ++q)
      if (auto it = r.named_metrics().find(std::string(kQuantileKeys[q])); it != r.named_metrics().end())
        e.latency_quantiles[q] = it->second / 1e3;
    e.window_requests = named(r, orca::kMetricWindowRequests);
    for (std::string_view key : kEndpointSignals)
      if (auto it = r.utilization().find(std::string(key)); it != r.utilization().end())
        e.utilization.emplace_back(std::string(key), it->second);
    e.application_utilization = r.application_utilization();
    e.in_flight = named(r, orca::kMetricInflight);
    e.pending = named(r, orca::kMetricPending);
  }
  endpoints_.resize(tick.endpoints.size());
  update_dependencies(tick);
  health_ = tick.health;
  interval_ms_ = tick.meta.interval_ms;
}

std::vector<MetricFamily> MetricsState::families(const std::string& version) const {
  std::vector<MetricFamily> out;
  families_of_utilization(out);
  families_of_endpoints(out);
  families_of_dependencies(out);
  families_of_agent(out, version);
  // A family with no series (no failure yet, no endpoint) is left out.
  std::erase_if(out, [](const MetricFamily& f) { return f.metric.empty(); });
  return out;
}

// The utilization, as the reports carry it.
void MetricsState::families_of_utilization(std::vector<MetricFamily>& out) const {
  const auto node = [] { return label("scope", "node"); };
  const auto scope_endpoint = [] { return label("scope", "endpoint"); };
  auto util = family("headroom_utilization_ratio",
                     "Each entry of an ORCA report's utilization map, as published (0 to 1).", MetricType::Gauge);
  auto app = family("headroom_application_utilization_ratio",
                    "An ORCA report's application_utilization: the node's composite; an endpoint's largest signal or the node's "
                    "CPU; a dependency's largest signal.",
                    MetricType::Gauge);
  if (have_tick_) {
    for (const auto& [key, value] : node_utilization_) gauge(util, {node(), label("signal", key)}, value);
    gauge(app, {node()}, node_application_);
    for (const auto& e : endpoints_) {
      if (!e.measured) continue;
      for (const auto& [key, value] : e.utilization)
        gauge(util, with(endpoint_labels(e), {scope_endpoint(), label("signal", key)}), value);
      gauge(app, with(endpoint_labels(e), {scope_endpoint()}), e.application_utilization);
    }
    for (const auto& d : dependencies_) {
      if (!d.measured) continue;
      for (const auto& [key, value] : d.utilization)
        gauge(util, {label("dependency", d.name), label("scope", "dependency"), label("signal", key)}, value);
      gauge(app, {label("dependency", d.name), label("scope", "dependency")}, d.application_utilization);
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
}

// Each endpoint's counters since start and its last gauges.
void MetricsState::families_of_endpoints(std::vector<MetricFamily>& out) const {
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
  auto quantiles = family("headroom_endpoint_latency_seconds",
                          "The report's latency percentiles over its window (p50, p90, p99), completed requests.",
                          MetricType::Gauge);
  auto window = family("headroom_endpoint_window_requests",
                       "Requests that ended in the report's window (the base of its percentiles and shares).",
                       MetricType::Gauge);
  for (const auto& e : endpoints_) {
    const auto ep = endpoint_labels(e);
    const EndpointTotals& c = e.counts;
    counter(requests, ep, static_cast<double>(c.requests));
    counter(errors, ep, static_cast<double>(c.errors));
    counter(aborted, ep, static_cast<double>(c.aborted));
    counter(over, with(ep, {label("slo", "max")}), static_cast<double>(c.over_max));
    counter(over, with(ep, {label("slo", "target")}), static_cast<double>(c.over_target));
    duration.metric.push_back(histogram(ep, c));
    if (e.measured) {
      gauge(in_flight, ep, e.in_flight);
      gauge(pending, ep, e.pending);
      for (std::size_t q = 0; q < e.latency_quantiles.size(); ++q)
        if (e.latency_quantiles[q])
          gauge(quantiles, with(ep, {label("percentile", std::string(kLatencyPercentileLabels[q]))}),
                *e.latency_quantiles[q]);
      gauge(window, ep, e.window_requests);
    }
    gauge(slo, with(ep, {label("slo", "max")}), e.max_seconds);
    gauge(slo, with(ep, {label("slo", "target")}), e.target_seconds);
  }
  for (auto* f : {&requests, &errors, &aborted, &over, &duration, &in_flight, &pending, &slo, &quantiles, &window})
    out.push_back(std::move(*f));
}

void MetricsState::update_dependencies(const Tick& tick) {
  // Counts follow the name across reloads; a removed dependency is dropped.
  std::vector<DependencyState> next(tick.dependencies.size());
  for (std::size_t i = 0; i < tick.dependencies.size(); ++i) {
    const DependencyTick& t = tick.dependencies[i];
    DependencyState& d = next[i];
    auto it = std::find_if(dependencies_.begin(), dependencies_.end(),
                           [&](const DependencyState& o) { return o.name == t.name; });
    if (it != dependencies_.end()) d = std::move(*it);
    d.name = t.name;
    d.target_seconds = t.target_seconds;
    d.max_seconds = t.max_seconds;
    if (t.counted) {
      d.counts.add(t.counts);
      d.connect_failures += t.connect_failures;
      d.resets += t.resets;
    }
    d.measured = t.measured;
    d.utilization.clear();
    if (!t.measured) continue;
    const orca::Report& r = tick.reports[t.report].report;
    for (std::string_view key : kDependencySignals)
      if (auto u = r.utilization().find(std::string(key)); u != r.utilization().end())
        d.utilization.emplace_back(std::string(key), u->second);
    d.application_utilization = r.application_utilization();
    d.in_flight = named(r, orca::kMetricInflight);
  }
  dependencies_ = std::move(next);
}

// Each dependency's counters since start and its last gauges.
void MetricsState::families_of_dependencies(std::vector<MetricFamily>& out) const {
  auto calls = family("headroom_dependency_calls_total",
                      "Outbound calls answered (first byte of the answer received), since headroomd started.",
                      MetricType::Counter);
  auto errors = family("headroom_dependency_errors_total",
                       "Failed calls (error answers, resets, connect failures), since headroomd started.",
                       MetricType::Counter);
  auto aborted = family("headroom_dependency_calls_aborted_total",
                        "Calls that ended without an answer (resets, connect failures), since headroomd started.",
                        MetricType::Counter);
  auto connects = family("headroom_dependency_connect_failures_total",
                         "Connects refused, timed out or abandoned, since headroomd started.", MetricType::Counter);
  auto resets = family("headroom_dependency_resets_total",
                       "Calls ended by a reset or a close with the call in flight, since headroomd started.",
                       MetricType::Counter);
  auto over = family("headroom_dependency_calls_over_slo_total",
                     "Answered or aborted calls slower than the target or max, since headroomd started.",
                     MetricType::Counter);
  auto duration = family("headroom_dependency_call_duration_seconds",
                         "Time from a call's request to the first byte of its answer, answered calls.",
                         MetricType::Histogram);
  auto in_flight = family("headroom_dependency_calls_in_flight", "Calls in flight at the last sample.",
                          MetricType::Gauge);
  auto slo = family("headroom_dependency_slo_seconds", "The dependency's configured target and max.",
                    MetricType::Gauge);
  for (const auto& d : dependencies_) {
    const std::vector<ClientMetric::Label> dl{label("dependency", d.name)};
    const EndpointTotals& c = d.counts;
    counter(calls, dl, static_cast<double>(c.requests));
    counter(errors, dl, static_cast<double>(c.errors));
    counter(aborted, dl, static_cast<double>(c.aborted));
    counter(connects, dl, static_cast<double>(d.connect_failures));
    counter(resets, dl, static_cast<double>(d.resets));
    counter(over, with(dl, {label("slo", "max")}), static_cast<double>(c.over_max));
    counter(over, with(dl, {label("slo", "target")}), static_cast<double>(c.over_target));
    duration.metric.push_back(histogram(dl, c));
    if (d.measured) gauge(in_flight, dl, d.in_flight);
    gauge(slo, with(dl, {label("slo", "max")}), d.max_seconds);
    gauge(slo, with(dl, {label("slo", "target")}), d.target_seconds);
  }
  for (auto* f : {&calls, &errors, &aborted, &connects, &resets, &over, &duration, &in_flight, &slo})
    out.push_back(std::move(*f));
}

// headroomd's own health.
void MetricsState::families_of_agent(std::vector<MetricFamily>& out, const std::string& version) const {
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
  auto deps = family("headroom_dependencies", "Dependencies declared in the configuration.", MetricType::Gauge);
  gauge(deps, {}, static_cast<double>(dependencies_.size()));
  out.push_back(std::move(deps));
  auto declared = family("headroom_endpoints", "Endpoints declared in the configuration.", MetricType::Gauge);
  gauge(declared, {}, static_cast<double>(std::count_if(endpoints_.begin(), endpoints_.end(),
                                                        [](const EndpointState& e) { return e.instance.empty(); })));
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
}

}  // namespace headroom::publishers::prom
