// SPDX-License-Identifier: Apache-2.0
#include "probes/host.h"

namespace headroom::probes {
Result<HostCpuReading> HostCpuProbe::read() { return read_parsed(stat_, parse_proc_stat); }

Result<SchedStatReading> SchedStatProbe::read() { return read_parsed(file_, parse_schedstat); }

Result<MemInfoReading> MemInfoProbe::read() { return read_parsed(file_, parse_meminfo); }

Result<PressureReading> PressureProbe::read() { return read_parsed(file_, parse_pressure); }

const char* resource_name(Resource r) {
  switch (r) {
    case Resource::cpu:
      return "cpu";
    case Resource::memory:
      return "memory";
    case Resource::io:
      return "io";
  }
  return "unknown";
}

}  // namespace headroom::probes
