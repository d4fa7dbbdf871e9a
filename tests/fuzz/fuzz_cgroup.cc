// SPDX-License-Identifier: Apache-2.0
// The cgroup parsers (probes/parse.h): v2 cpu.stat, cpu.max, memory.max,
// cpuset lists, v1 cpu.stat, and the single numbers (parse_u64, parse_i64)
// the v1 files and memory.current hold. Input: a file's text, given to every
// parser. Invariants beyond "no crash": an error says what is wrong; a cpu.max
// quota is a finite number of CPUs > 0; a CPU list counts at least one CPU;
// memory.max is "max" exactly when it has no limit, else parse_u64's number;
// a parsed number prints back to the same number; parse_u64 and parse_i64
// agree where both apply. /proc/PID/cgroup (probes/instance.h): every path
// accepted starts with '/', and the instance id made from it is not empty and
// holds only [A-Za-z0-9._-].
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "fuzz_support.h"
#include "probes/instance.h"
#include "probes/parse.h"

namespace probes = headroom::probes;
using headroom::fuzz::fail;

namespace {

constexpr std::string_view kTarget = "fuzz_cgroup";

template <class R>
bool accepted(const R& r, std::string_view parser) {
  if (!r && r.error().message.empty()) fail(kTarget, std::string(parser) + " rejects without a message");
  return r.ok();
}

void check_instance_id(std::string_view path) {
  for (bool host : {false, true}) {
    const std::string id = probes::instance_id(path, 4026532001u, host);
    if (id.empty()) fail(kTarget, "instance_id gave an empty id for \"" + std::string(path) + "\"");
    for (char c : id) {
      const bool allowed = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                           c == '_' || c == '-';
      if (!allowed) fail(kTarget, "instance_id gave \"" + id + "\" for \"" + std::string(path) + "\"");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = headroom::fuzz::as_text(data, size);
  (void)accepted(probes::parse_cgroup2_cpu_stat(text), "parse_cgroup2_cpu_stat");
  (void)accepted(probes::parse_cgroup1_cpu_stat(text), "parse_cgroup1_cpu_stat");
  if (auto r = probes::parse_cgroup2_cpu_max(text); accepted(r, "parse_cgroup2_cpu_max") && *r) {
    if (!std::isfinite(**r) || !(**r > 0)) fail(kTarget, "cpu.max gave " + std::to_string(**r) + " CPUs");
  }
  if (auto r = probes::parse_cpu_list_count(text); accepted(r, "parse_cpu_list_count")) {
    if (*r == 0) fail(kTarget, "a CPU list counted no CPU");
  }
  auto u = probes::parse_u64(text);
  auto i = probes::parse_i64(text);
  (void)accepted(u, "parse_u64");
  (void)accepted(i, "parse_i64");
  if (u) {
    auto again = probes::parse_u64(std::to_string(*u));
    if (!again || *again != *u) fail(kTarget, "parse_u64 does not read back " + std::to_string(*u));
    if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
        (!i || static_cast<uint64_t>(*i) != *u))
      fail(kTarget, "parse_i64 disagrees with parse_u64 on " + std::to_string(*u));
  }
  if (i) {
    auto again = probes::parse_i64(std::to_string(*i));
    if (!again || *again != *i) fail(kTarget, "parse_i64 does not read back " + std::to_string(*i));
  }
  if (auto m = probes::parse_cgroup2_memory_max(text); accepted(m, "parse_cgroup2_memory_max")) {
    if (!*m && !(text.find("max") != std::string_view::npos)) fail(kTarget, "memory.max unlimited without \"max\"");
    if (*m && (!u || **m != *u)) fail(kTarget, "memory.max disagrees with parse_u64");
  }
  if (auto c = probes::parse_proc_cgroup(text); accepted(c, "parse_proc_cgroup")) {
    if (c->unified && !c->unified->starts_with('/')) fail(kTarget, "parse_proc_cgroup: a v2 path without '/'");
    for (const auto& [controller, path] : c->controllers) {
      if (controller.empty() || !path.starts_with('/')) fail(kTarget, "parse_proc_cgroup: v1 " + controller + " " + path);
    }
    if (c->unified) check_instance_id(*c->unified);
  }
  check_instance_id(text);
  return 0;
}
