// SPDX-License-Identifier: Apache-2.0
// Stands in for the dependency probe (probes/dependency_probe.h) until its
// loader is merged: open() says it is not built, so the agent publishes the
// dependency reports with headroom.ebpf.unavailable = 1.
#include "probes/dependency_probe.h"

#include <string>
#include <utility>

namespace headroom::probes {

struct DependencyProbe::Impl {
  std::string kind;
};

Result<std::unique_ptr<DependencyProbe>> DependencyProbe::open(const std::vector<DependencySpec>& dependencies,
                                                               const DependencyProbeOptions& options) {
  (void)dependencies;
  (void)options;
  return Error{0, "the dependency probe is not built yet"};
}

DependencyProbe::DependencyProbe(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DependencyProbe::~DependencyProbe() = default;

Result<void> DependencyProbe::read(DependencySnapshot& out, int64_t now_ns) {
  (void)out;
  (void)now_ns;
  return Error{0, "the dependency probe is not built yet"};
}

void DependencyProbe::detach() {}
Result<void> DependencyProbe::attach() { return Error{0, "the dependency probe is not built yet"}; }
const std::string& DependencyProbe::attach_kind() const { return impl_->kind; }
uint64_t DependencyProbe::map_bytes() const { return 0; }

}  // namespace headroom::probes
