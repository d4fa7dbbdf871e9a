// SPDX-License-Identifier: Apache-2.0
// system_error() is inline in result.h. Programs built when it was defined
// here still link against the symbol, so libheadroom-orca keeps exporting it.
#include "headroom/orca/result.h"

namespace headroom {
namespace {

[[gnu::used]] constexpr Error (*kExportSystemError)(int, std::string) = &system_error;

}  // namespace
}  // namespace headroom
