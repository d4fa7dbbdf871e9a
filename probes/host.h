// SPDX-License-Identifier: Apache-2.0
// Host-wide probes: /proc/stat, /proc/schedstat, /proc/meminfo, /proc/pressure/*.
// Each takes the proc root (default "/proc") so tests hand it a fixture tree.
#pragma once

#include <string>

#include "probes/parse.h"
#include "probes/proc_file.h"

namespace headroom::probes {

class HostCpuProbe {
 public:
  explicit HostCpuProbe(const std::string& proc_root) : stat_(proc_root + "/stat") {}
  Result<HostCpuReading> read();

 private:
  ProcFile stat_;
};

// Unavailable on kernels built without CONFIG_SCHEDSTATS.
class SchedStatProbe {
 public:
  explicit SchedStatProbe(const std::string& proc_root) : file_(proc_root + "/schedstat") {}
  Result<SchedStatReading> read();

 private:
  ProcFile file_;
};

class MemInfoProbe {
 public:
  explicit MemInfoProbe(const std::string& proc_root) : file_(proc_root + "/meminfo") {}
  Result<MemInfoReading> read();

 private:
  ProcFile file_;
};

enum class Resource { cpu, memory, io };
const char* resource_name(Resource r);

// Unavailable when PSI is disabled (no /proc/pressure, or psi=0 on the command line).
class PressureProbe {
 public:
  PressureProbe(const std::string& proc_root, Resource resource)
      : file_(proc_root + "/pressure/" + resource_name(resource)) {}
  Result<PressureReading> read();

 private:
  ProcFile file_;
};

}  // namespace headroom::probes
