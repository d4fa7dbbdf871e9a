// SPDX-License-Identifier: Apache-2.0
// What the running kernel offers the eBPF program sets (program_set.h's
// KernelFeatures), from its BTF type information: the tracepoints
// (btf_trace_<name> typedefs), the kfuncs (their FUNC entries) and the
// helpers (the enum bpf_func_id's names) it has. Both probes plan from it,
// so that a row the kernel cannot load is skipped with the reason, not
// tried and warned about at every start.
#pragma once

#include "headroom/orca/result.h"
#include "probes/program_set.h"

struct btf;

namespace headroom::probes {

// From a parsed BTF of the kernel.
KernelFeatures kernel_features_of(const btf* vmlinux);

// The running kernel's (btf__load_vmlinux_btf), read once per process:
// parsing its BTF takes tens of milliseconds and the answer cannot change
// while the kernel runs, so a reload that builds new probes does not hold
// up the sampling loop for it. An error (not kept: a later call tries
// again) when the kernel's BTF cannot be read.
Result<KernelFeatures> running_kernel_features();

}  // namespace headroom::probes
