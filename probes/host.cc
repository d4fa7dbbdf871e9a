#include "probes/host.h"

namespace headroom::probes {
namespace {

// Reads the file and parses it; parse errors get the path in front, read
// errors already carry it.
template <class Parse>
auto read_and_parse(ProcFile& file, Parse parse) -> decltype(parse(std::string_view())) {
  auto text = file.read();
  if (!text) return text.error();
  auto reading = parse(*text);
  if (!reading) return Error{reading.error().code, file.path() + ": " + reading.error().message};
  return reading;
}

}  // namespace

Result<HostCpuReading> HostCpuProbe::read() { return read_and_parse(stat_, parse_proc_stat); }

Result<SchedStatReading> SchedStatProbe::read() { return read_and_parse(file_, parse_schedstat); }

Result<MemInfoReading> MemInfoProbe::read() { return read_and_parse(file_, parse_meminfo); }

Result<PressureReading> PressureProbe::read() { return read_and_parse(file_, parse_pressure); }

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
