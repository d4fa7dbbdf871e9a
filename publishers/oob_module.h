// SPDX-License-Identifier: Apache-2.0
// [oob]'s publisher lives in a module of its own, headroom-oob.so, loaded
// only when [oob] listen or instance_listen names an address: gRPC and its libraries (about
// 10 MiB of a daemon's RSS) are mapped into headroomd only when it serves
// the out-of-band stream. oob_publisher.h is the module's side.
#pragma once

#include <string>

#include "headroom/orca/result.h"
#include "publishers/oob_config.h"
#include "publishers/publisher.h"

namespace headroom::publishers {

// Nothing without [oob] listen and instance_listen; otherwise the module's publishers, or why
// the module or a listener could not be had (exit 73, as for a listener).
Result<Publishers> build_oob_publishers(const OobOptions& options);

// Where headroomd looks for the module: the build tree's when it runs from
// there, else ../lib/headroom/headroom-oob.so from its own directory (the
// package: /usr/lib/headroom/headroom-oob.so).
std::string oob_module_path();

}  // namespace headroom::publishers

// The module's entry point (extern "C": found by name with dlsym).
extern "C" void headroom_oob_build(const headroom::publishers::OobOptions* options,
                                   headroom::Result<headroom::publishers::Publishers>* out);
