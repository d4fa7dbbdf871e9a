#include "agent/report_builder.h"

namespace headroom::agent {

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
    if (!config.signal_enabled(key)) continue;
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
  nm[std::string(orca::kTimestampMsKey)] = static_cast<double>(meta.timestamp_ms);
  nm[std::string(orca::kSeqKey)] = static_cast<double>(meta.seq);
  nm[std::string(orca::kIntervalMsKey)] = static_cast<double>(meta.interval_ms);
  if (meta.stopped) nm[std::string(orca::kStoppedKey)] = 1.0;
  return r;
}

}  // namespace headroom::agent
