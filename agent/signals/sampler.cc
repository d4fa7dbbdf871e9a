// SPDX-License-Identifier: Apache-2.0
#include "agent/signals/sampler.h"

#include <algorithm>

namespace headroom::agent {
namespace {

constexpr std::string_view kCgroupSignal = "cgroup";

template <std::size_t N>
bool written(const std::array<std::string_view, N>& keys, std::size_t n, std::string_view key) {
  return std::find(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(n), key) !=
         keys.begin() + static_cast<std::ptrdiff_t>(n);
}

}  // namespace

NodeSampler::NodeSampler(const Config& c) {
  for (const auto& row : kNodeSignalTable)
    if (c.signal_enabled(row.key)) signals_.push_back(row.open(c, row));
}

Result<std::unique_ptr<NodeSampler>> NodeSampler::create(const Config& config) {
  std::unique_ptr<NodeSampler> s(new NodeSampler(config));
  if (!config.cgroup.empty()) {
    auto cg = probes::CgroupProbe::open(config.sys_root, config.cgroup, config.cgroup_version);
    if (!cg) return cg.error();
    s->cgroup_ = std::make_unique<probes::CgroupProbe>(std::move(cg.value()));
  }
  return s;
}

NodeSample NodeSampler::sample(int64_t now_ns) {
  NodeSample out;
  sample(now_ns, out);
  return out;
}

void NodeSampler::sample(int64_t now_ns, NodeSample& out) {
  SampleContext ctx;
  ctx.now_ns = now_ns;
  ctx.availability = &availability_;
  ctx.out = &out;

  // cpu, memory and the pressure signals may all come from the cgroup: it is
  // read once, and its failure is logged once for all of them.
  std::optional<Error> cgroup_error;
  if (cgroup_) {
    auto r = cgroup_->read();
    if (r) {
      cgroup_reading_ = std::move(*r);
      ctx.cgroup_reading = &*cgroup_reading_;
    } else {
      cgroup_error = r.error();
      ctx.cgroup_error = &*cgroup_error;
    }
    availability_.mark(cgroup_latch_, kCgroupSignal, ctx.cgroup_error);
    ctx.cgroup = cgroup_.get();
  }

  for (auto& signal : signals_) signal->sample(ctx);

  // What was not written this time is not available: drop it, but leave
  // signals that are not the node's own.
  for (auto it = out.signals.begin(); it != out.signals.end();) {
    const bool node_signal =
        std::find(std::begin(kNodeSignalKeys), std::end(kNodeSignalKeys), it->first) != std::end(kNodeSignalKeys);
    if (node_signal && !written(ctx.written_signals, ctx.n_signals, it->first))
      it = out.signals.erase(it);
    else
      ++it;
  }
  for (auto it = out.raw.begin(); it != out.raw.end();) {
    if (!written(ctx.written_raw, ctx.n_raw, it->first))
      it = out.raw.erase(it);
    else
      ++it;
  }
}

}  // namespace headroom::agent
