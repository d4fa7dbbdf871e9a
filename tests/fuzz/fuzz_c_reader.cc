// SPDX-License-Identifier: Apache-2.0
// The C ABI reader (headroom_orca.h) over one report file. Input: the first
// byte picks the scope's name and the staleness setting, the rest is the
// file's content, written into a scratch directory before the reader opens
// it. Invariants beyond "no crash", against the C++ API as the reference:
//  - the scope is served (0 fresh / 1 stale) exactly when parse_report
//    accepts the bytes and they carry headroom metadata; otherwise
//    headroom_reader_get says -ENODATA with a reason;
//  - what it serves equals the report: the five values, the metadata, every
//    utilization and named_metrics entry through the lookup functions;
//  - a stale answer always carries a reason, and a caller's shorter struct
//    is never written past its struct_size (ASan checks the buffer).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "headroom/orca/headroom_orca.h"
#include "headroom/orca/report.h"

namespace orca = headroom::orca;
using headroom::fuzz::fail;

namespace {

constexpr std::string_view kTarget = "fuzz_c_reader";
std::string g_dir;  // the scratch directory, created once

void remove_scratch() {
  std::error_code ec;
  std::filesystem::remove_all(g_dir, ec);
}

void write_file(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(kTarget, "cannot create " + path + ": " + std::strerror(errno));
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) fail(kTarget, "cannot write " + path + ": " + std::strerror(errno));
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  ::close(fd);
}

// Fresh or stale (0 or 1) may change between two calls as the clock moves.
void check_map(headroom_reader* reader, const char* scope, const google::protobuf::Map<std::string, double>& m,
               bool utilization) {
  for (const auto& [key, v] : m) {
    double got = -1;
    const int rc = utilization ? headroom_reader_utilization(reader, scope, key.c_str(), &got)
                               : headroom_reader_named_metric(reader, scope, key.c_str(), &got);
    // A key with a NUL byte reads as its prefix through the C string: only
    // keys without one must be found with their own value.
    if (key.find('\0') != std::string::npos) continue;
    if (rc != 0 && rc != 1) fail(kTarget, "lookup of \"" + key + "\" returned " + std::to_string(rc));
    if (got != v) fail(kTarget, "lookup of \"" + key + "\" gave " + std::to_string(got) + ", not " + std::to_string(v));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  headroom::fuzz::quiet_logs();
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/headroom-fuzz-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) fail(kTarget, "mkdtemp " + tmpl + ": " + std::strerror(errno));
  g_dir = tmpl;
  std::atexit(remove_scratch);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const std::string_view bytes = headroom::fuzz::as_text(data + 1, size - 1);
  const std::string scope = (selector & 1) == 0 ? "node" : "endpoint.e" + std::to_string(selector >> 4);
  const double stale_intervals = (selector & 2) == 0 ? 0.0 : static_cast<double>(selector >> 2);
  const std::string path = g_dir + "/" + orca::report_file_name(scope);
  write_file(path, bytes);

  // The reference: what the C++ API makes of the same bytes.
  auto want = orca::parse_report(bytes);
  const bool served = bytes.size() <= orca::kMaxReportBytes && want && want->ByteSizeLong() > 0 &&
                      orca::metadata_of(*want).ok();

  char err[256];
  headroom_reader* reader = headroom_reader_open(g_dir.c_str(), stale_intervals, err, sizeof err);
  if (reader == nullptr) fail(kTarget, std::string("headroom_reader_open failed: ") + err);
  if (headroom_reader_scope_count(reader) != 1)
    fail(kTarget, "scope count " + std::to_string(headroom_reader_scope_count(reader)) + " for one file");
  char name[128];
  const int len = headroom_reader_scope_name(reader, 0, name, sizeof name);
  if (len != static_cast<int>(scope.size()) || scope != name) fail(kTarget, "scope name is not " + scope);

  headroom_report out{};
  out.struct_size = sizeof out;
  const int rc = headroom_reader_get(reader, scope.c_str(), &out, err, sizeof err);
  if (!served) {
    if (rc != -ENODATA) fail(kTarget, "a rejected file gives " + std::to_string(rc) + ", not -ENODATA");
    if (err[0] == '\0') fail(kTarget, "a rejected file gives no reason");
    double v = 0;
    if (headroom_reader_utilization(reader, scope.c_str(), "cpu", &v) != -ENODATA)
      fail(kTarget, "utilization of a rejected file is not -ENODATA");
  } else {
    if (rc != 0 && rc != 1) fail(kTarget, "a valid file gives " + std::to_string(rc));
    if (out.struct_size != sizeof out) fail(kTarget, "struct_size not set to the size written");
    if (out.stale != rc) fail(kTarget, "stale field disagrees with the return value");
    if (rc == 1 && err[0] == '\0') fail(kTarget, "stale without a reason");
    const auto md = *orca::metadata_of(*want);
    if (out.cpu_utilization != want->cpu_utilization() || out.mem_utilization != want->mem_utilization() ||
        out.application_utilization != want->application_utilization() ||
        out.rps_fractional != want->rps_fractional() || out.eps != want->eps())
      fail(kTarget, "values differ from parse_report's");
    if (out.seq != md.seq || out.timestamp_ms != md.timestamp_ms || out.interval_ms != md.interval_ms ||
        out.stopped != (md.stopped ? 1 : 0) || out.rejected != 0)
      fail(kTarget, "metadata differs from metadata_of's");
    if (md.stopped && rc != 1) fail(kTarget, "a stopped report is fresh");
    check_map(reader, scope.c_str(), want->utilization(), true);
    check_map(reader, scope.c_str(), want->named_metrics(), false);
    const char* absent = "no such key\x01";
    double v = 0;
    if (!want->utilization().contains(absent) &&
        headroom_reader_utilization(reader, scope.c_str(), absent, &v) != -ENOENT)
      fail(kTarget, "an absent key is not -ENOENT");
  }
  // An older caller's struct: exactly struct_size bytes, never more written.
  const uint32_t short_size = offsetof(headroom_report, stale) + sizeof(int32_t) + 8u * (selector % 4);
  std::vector<unsigned char> small(short_size, 0xa5);
  uint32_t header = short_size;
  std::memcpy(small.data(), &header, sizeof header);
  const int rc2 = headroom_reader_get(reader, scope.c_str(), reinterpret_cast<headroom_report*>(small.data()),
                                      nullptr, 0);
  if ((rc2 >= 0) != (rc >= 0)) fail(kTarget, "a short struct changes the answer");
  if (headroom_reader_get(reader, "absent", &out, err, sizeof err) != -ENOENT)
    fail(kTarget, "an absent scope is not -ENOENT");
  headroom_reader_close(reader);
  ::unlink(path.c_str());
  return 0;
}
