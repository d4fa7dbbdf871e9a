// SPDX-License-Identifier: Apache-2.0
// The C interface over ReportDirectory. Every entry point catches everything:
// an exception crossing into C is undefined behaviour.
#include "headroom/orca/headroom_orca.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "headroom/orca/dependency_gate.h"
#include "headroom/orca/own_instance.h"
#include "headroom/orca/report_reader.h"
#include "headroom/orca/shedder.h"

#ifndef HEADROOM_VERSION
#define HEADROOM_VERSION "unknown"  // orca/CMakeLists.txt passes the project version
#endif

namespace orca = headroom::orca;

struct headroom_reader {
  explicit headroom_reader(orca::ReportDirectory d) : dir(std::move(d)) {}
  orca::ReportDirectory dir;
  std::vector<std::string> scopes;  // what the index-based enumeration walks
  headroom_reader_callback callback = nullptr;
  void* user = nullptr;
  bool scopes_refreshed = false;  // during one process call
  std::optional<uint64_t> netns;  // this process's network namespace, read at the first instance lookup
};

namespace {

void set_error(char* err, std::size_t errlen, const std::string& message) {
  if (err == nullptr || errlen == 0) return;
  const std::size_t n = std::min(message.size(), errlen - 1);
  std::memcpy(err, message.data(), n);
  err[n] = '\0';
}

// Maps whatever escaped the C++ side to an errno value.
int current_exception_code(char* err = nullptr, std::size_t errlen = 0) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    set_error(err, errlen, "out of memory");
    return -ENOMEM;
  } catch (const std::exception& e) {
    set_error(err, errlen, e.what());
    return -EIO;
  } catch (...) {
    set_error(err, errlen, "unknown error");
    return -EIO;
  }
}

int process(headroom_reader* r) {
  r->scopes_refreshed = false;
  const auto changed = r->dir.process_events();
  r->scopes = r->dir.scopes();
  return static_cast<int>(std::min<std::size_t>(changed.size(), INT_MAX));
}

// Looks up a scope that must hold a valid report: 0/1 fresh/stale, or -errno.
int lookup(const headroom_reader* r, const char* scope, std::optional<orca::ScopeState>& st) {
  st = r->dir.get(scope);
  if (!st) return -ENOENT;
  if (!st->report) return -ENODATA;
  return st->staleness.stale ? 1 : 0;
}

int map_value(headroom_reader* r, const char* scope, const char* key, double* out, bool utilization) {
  if (r == nullptr || scope == nullptr || key == nullptr || out == nullptr) return -EINVAL;
  try {
    std::optional<orca::ScopeState> st;
    const int rc = lookup(r, scope, st);
    if (rc < 0) return rc;
    const auto& m = utilization ? st->report->utilization() : st->report->named_metrics();
    auto it = m.find(key);
    if (it == m.end()) return -ENOENT;
    *out = it->second;
    return rc;
  } catch (...) {
    return current_exception_code();
  }
}

}  // namespace

extern "C" {

const char* headroom_orca_version(void) { return HEADROOM_VERSION; }

namespace {

headroom_reader* open_reader(const char* dir, const orca::ReaderOptions& options, char* err, size_t errlen) {
  try {
    auto d = orca::ReportDirectory::open(dir, options);
    if (!d) {
      set_error(err, errlen, d.error().message);
      return nullptr;
    }
    auto* r = new headroom_reader(std::move(*d));
    r->scopes = r->dir.scopes();
    return r;
  } catch (...) {
    (void)current_exception_code(err, errlen);
    return nullptr;
  }
}

void set_stale_intervals(orca::ReaderOptions& options, double stale_intervals) {
  if (std::isfinite(stale_intervals) && stale_intervals > 0) options.stale_intervals = stale_intervals;
}

}  // namespace

headroom_reader* headroom_reader_open(const char* dir, double stale_intervals, char* err, size_t errlen) {
  set_error(err, errlen, "");
  if (dir == nullptr) {
    set_error(err, errlen, "headroom_reader_open: dir is NULL");
    return nullptr;
  }
  orca::ReaderOptions options;
  set_stale_intervals(options, stale_intervals);
  return open_reader(dir, options, err, errlen);
}

headroom_reader* headroom_reader_open_with(const char* dir, const headroom_reader_options* options, char* err,
                                           size_t errlen) {
  set_error(err, errlen, "");
  if (dir == nullptr || options == nullptr) {
    set_error(err, errlen, dir == nullptr ? "headroom_reader_open_with: dir is NULL"
                                          : "headroom_reader_open_with: options is NULL");
    return nullptr;
  }
  // The fields up to owner_uid are the least a caller can have set; a field
  // beyond the caller's struct_size keeps its default.
  constexpr std::size_t kMinSize = offsetof(headroom_reader_options, owner_uid) + sizeof options->owner_uid;
  if (options->struct_size < kMinSize) {
    set_error(err, errlen, "headroom_reader_open_with: options->struct_size is " +
                               std::to_string(options->struct_size) + ", less than the " + std::to_string(kMinSize) +
                               " bytes of its first fields: set it to sizeof(headroom_reader_options)");
    return nullptr;
  }
  orca::ReaderOptions o;
  if (options->require_owner != 0) o.owner = static_cast<uid_t>(options->owner_uid);
  if (options->struct_size >= offsetof(headroom_reader_options, stale_intervals) + sizeof(double))
    set_stale_intervals(o, options->stale_intervals);
  return open_reader(dir, o, err, errlen);
}

void headroom_reader_close(headroom_reader* reader) { delete reader; }

int headroom_reader_fd(const headroom_reader* reader) { return reader == nullptr ? -EINVAL : reader->dir.fd(); }

int headroom_reader_process(headroom_reader* reader) {
  if (reader == nullptr) return -EINVAL;
  try {
    return process(reader);
  } catch (...) {
    return current_exception_code();
  }
}

int headroom_reader_wait(headroom_reader* reader, int timeout_ms) {
  if (reader == nullptr) return -EINVAL;
  try {
    reader->scopes_refreshed = false;
    const bool changed = reader->dir.wait(timeout_ms);
    reader->scopes = reader->dir.scopes();
    return changed ? 1 : 0;
  } catch (...) {
    return current_exception_code();
  }
}

int headroom_reader_get(headroom_reader* reader, const char* scope, headroom_report* out, char* err,
                        size_t errlen) {
  set_error(err, errlen, "");
  // The caller's struct must at least hold struct_size and stale.
  constexpr uint32_t kMinSize = offsetof(headroom_report, stale) + sizeof(int32_t);
  if (reader == nullptr || scope == nullptr || out == nullptr) {
    set_error(err, errlen, "headroom_reader_get: NULL argument");
    return -EINVAL;
  }
  if (out->struct_size < kMinSize) {
    set_error(err, errlen, "headroom_reader_get: struct_size " + std::to_string(out->struct_size) +
                               " is smaller than " + std::to_string(kMinSize) + "; set it to sizeof(headroom_report)");
    return -EINVAL;
  }
  try {
    std::optional<orca::ScopeState> st;
    const int rc = lookup(reader, scope, st);
    if (rc == -ENOENT) {
      set_error(err, errlen, std::string("no report for scope \"") + scope + "\" in " + reader->dir.dir());
      return rc;
    }
    if (rc == -ENODATA) {
      set_error(err, errlen, st->error.empty() ? "no valid report" : st->error);
      return rc;
    }
    const orca::Report& rep = *st->report;
    auto md = orca::metadata_of(rep);  // present: the reader accepts no report without it
    headroom_report full{};
    full.stale = st->staleness.stale ? 1 : 0;
    full.cpu_utilization = rep.cpu_utilization();
    full.mem_utilization = rep.mem_utilization();
    full.application_utilization = rep.application_utilization();
    full.rps_fractional = rep.rps_fractional();
    full.eps = rep.eps();
    if (md) {
      full.seq = md->seq;
      full.timestamp_ms = md->timestamp_ms;
      full.interval_ms = md->interval_ms;
      full.stopped = md->stopped ? 1 : 0;
    }
    full.age_ms = st->staleness.age_ms;
    full.rejected = st->error.empty() ? 0 : 1;
    // Never write past what the caller's (possibly older) struct holds.
    const uint32_t n = std::min<uint32_t>(out->struct_size, static_cast<uint32_t>(sizeof(headroom_report)));
    full.struct_size = n;
    std::memcpy(static_cast<void*>(out), &full, n);
    if (st->staleness.stale) set_error(err, errlen, st->staleness.reason);
    return rc;
  } catch (...) {
    return current_exception_code(err, errlen);
  }
}

int headroom_reader_utilization(headroom_reader* reader, const char* scope, const char* key, double* out) {
  return map_value(reader, scope, key, out, true);
}

int headroom_reader_named_metric(headroom_reader* reader, const char* scope, const char* key, double* out) {
  return map_value(reader, scope, key, out, false);
}

int headroom_reader_scope_count(const headroom_reader* reader) {
  if (reader == nullptr) return -EINVAL;
  return static_cast<int>(std::min<std::size_t>(reader->scopes.size(), INT_MAX));
}

int headroom_reader_scope_name(const headroom_reader* reader, size_t index, char* buf, size_t buflen) {
  if (reader == nullptr || (buf == nullptr && buflen > 0)) return -EINVAL;
  if (index >= reader->scopes.size()) return -ENOENT;
  const std::string& name = reader->scopes[index];
  set_error(buf, buflen, name);
  return static_cast<int>(std::min<std::size_t>(name.size(), INT_MAX));
}

int headroom_reader_set_callback(headroom_reader* reader, headroom_reader_callback callback, void* user) {
  if (reader == nullptr) return -EINVAL;
  try {
    reader->callback = callback;
    reader->user = user;
    if (callback == nullptr) {
      reader->dir.set_callback(nullptr);
      return 0;
    }
    reader->dir.set_callback([reader](const orca::ScopeState& st) {
      // The callback may enumerate scopes: show it the current set.
      if (!reader->scopes_refreshed) {
        reader->scopes = reader->dir.scopes();
        reader->scopes_refreshed = true;
      }
      reader->callback(reader->user, st.scope.c_str());
    });
    return 0;
  } catch (...) {
    return current_exception_code();
  }
}

namespace {

int copy_scope(const headroom::Result<std::string>& scope, char* buf, size_t buflen, char* err, size_t errlen) {
  if (!scope) {
    set_error(err, errlen, scope.error().message);
    return scope.error().code > 0 ? -scope.error().code : -EINVAL;
  }
  set_error(buf, buflen, *scope);
  return static_cast<int>(std::min<std::size_t>(scope->size(), INT_MAX));
}

bool instance_arguments_ok(const char* fn, const char* endpoint, char* buf, size_t buflen, char* err, size_t errlen) {
  if (endpoint == nullptr || (buf == nullptr && buflen > 0)) {
    set_error(err, errlen, std::string(fn) + ": NULL argument");
    return false;
  }
  if (!orca::is_endpoint_name(endpoint)) {
    set_error(err, errlen, std::string(fn) + ": \"" + endpoint +
                               "\" is not an endpoint name (1 to 64 of A-Z a-z 0-9 _ . -, as in [[endpoint]] name)");
    return false;
  }
  return true;
}

}  // namespace

int headroom_orca_own_instance_scope(const char* dir, const char* endpoint, char* buf, size_t buflen, char* err,
                                     size_t errlen) {
  set_error(err, errlen, "");
  if (dir == nullptr) {
    set_error(err, errlen, "headroom_orca_own_instance_scope: dir is NULL");
    return -EINVAL;
  }
  if (!instance_arguments_ok("headroom_orca_own_instance_scope", endpoint, buf, buflen, err, errlen)) return -EINVAL;
  try {
    return copy_scope(orca::own_instance_scope(dir, endpoint), buf, buflen, err, errlen);
  } catch (...) {
    return current_exception_code(err, errlen);
  }
}

int headroom_reader_own_instance(headroom_reader* reader, const char* endpoint, char* buf, size_t buflen, char* err,
                                 size_t errlen) {
  set_error(err, errlen, "");
  if (reader == nullptr) {
    set_error(err, errlen, "headroom_reader_own_instance: reader is NULL");
    return -EINVAL;
  }
  if (!instance_arguments_ok("headroom_reader_own_instance", endpoint, buf, buflen, err, errlen)) return -EINVAL;
  try {
    if (!reader->netns) {
      auto netns = orca::own_netns();
      if (!netns) return copy_scope(netns.error(), buf, buflen, err, errlen);
      reader->netns = *netns;
    }
    return copy_scope(orca::own_instance_scope(reader->dir, endpoint, *reader->netns, orca::unix_now_ms()), buf,
                      buflen, err, errlen);
  } catch (...) {
    return current_exception_code(err, errlen);
  }
}

}  // extern "C"

// ---------------------------------------------------------------- the gate

// The C values are the C++ enums' values.
static_assert(HEADROOM_GATE_CALL == static_cast<int>(orca::GateDecision::call));
static_assert(HEADROOM_GATE_CALL_NO_DATA == static_cast<int>(orca::GateDecision::call_no_data));
static_assert(HEADROOM_GATE_CALL_PROBE == static_cast<int>(orca::GateDecision::call_probe));
static_assert(HEADROOM_GATE_FAIL_FAST_BREAKER == static_cast<int>(orca::GateDecision::fail_fast_breaker));
static_assert(HEADROOM_GATE_FAIL_FAST_BULKHEAD == static_cast<int>(orca::GateDecision::fail_fast_bulkhead));
static_assert(HEADROOM_GATE_STATE_CLOSED == static_cast<int>(orca::GateState::closed));
static_assert(HEADROOM_GATE_STATE_OPEN == static_cast<int>(orca::GateState::open));
static_assert(HEADROOM_GATE_STATE_HALF_OPEN == static_cast<int>(orca::GateState::half_open));
static_assert(HEADROOM_GATE_STATE_NO_DATA == static_cast<int>(orca::GateState::no_data));
static_assert(sizeof(headroom_gate_options::buckets) / sizeof(headroom_gate_bucket_limits) == orca::kBucketCount);

struct headroom_gate {
  explicit headroom_gate(const orca::GateOptions& options) : gate(options) {}
  orca::DependencyGate gate;
};

namespace {

orca::GateOptions gate_options_from(const headroom_gate_options& c) {
  orca::GateOptions o;
  // Zero (or less) is "the default": a caller zeroes what it leaves alone.
  if (c.late_share != 0) o.late = static_cast<orca::LateShare>(c.late_share);
  if (c.min_calls > 0) o.min_calls = c.min_calls;
  if (c.min_probe_calls > 0) o.min_probe_calls = c.min_probe_calls;
  if (c.open_for_ms > 0) o.open_for_ms = c.open_for_ms;
  if (c.probes_per_second > 0) o.probes_per_second = c.probes_per_second;
  if (c.stale_intervals > 0) o.stale_intervals = c.stale_intervals;
  if (c.min_stale_ms > 0) o.min_stale_ms = c.min_stale_ms;
  if (c.struct_size >= offsetof(headroom_gate_options, buckets) + sizeof c.buckets && c.set_buckets != 0) {
    for (std::size_t b = 0; b < orca::kBucketCount; ++b) {
      const headroom_gate_bucket_limits& l = c.buckets[b];
      o.buckets[b] = orca::GateBucketLimits{l.errors_open, l.errors_close, l.late_open, l.late_close, l.concurrency};
    }
  }
  return o;
}

// 0 fresh, 1 stale: what the update functions return once the gate was fed.
int gate_freshness(const headroom_gate* g, int64_t now_ns) {
  return g->gate.state(orca::Bucket::CRITICAL, now_ns) == orca::GateState::no_data ? 1 : 0;
}

}  // namespace

extern "C" {

headroom_gate* headroom_gate_create(const headroom_gate_options* options, char* err, size_t errlen) {
  set_error(err, errlen, "");
  try {
    orca::GateOptions o;
    if (options != nullptr) {
      constexpr std::size_t kMinSize = offsetof(headroom_gate_options, min_stale_ms) + sizeof(int64_t);
      if (options->struct_size < kMinSize) {
        set_error(err, errlen, "headroom_gate_create: options->struct_size is " +
                                   std::to_string(options->struct_size) + ", less than the " +
                                   std::to_string(kMinSize) + " bytes of its first fields: set it to "
                                   "sizeof(headroom_gate_options)");
        return nullptr;
      }
      o = gate_options_from(*options);
    }
    if (auto r = orca::validate_gate_options(o); !r) {
      set_error(err, errlen, "headroom_gate_create: " + r.error().message);
      return nullptr;
    }
    return new headroom_gate(o);
  } catch (...) {
    (void)current_exception_code(err, errlen);
    return nullptr;
  }
}

void headroom_gate_destroy(headroom_gate* gate) { delete gate; }

int headroom_gate_update_from_reader(headroom_gate* gate, headroom_reader* reader, const char* scope, int64_t now_ns,
                                     char* err, size_t errlen) {
  set_error(err, errlen, "");
  if (gate == nullptr || reader == nullptr || scope == nullptr) {
    set_error(err, errlen, "headroom_gate_update_from_reader: NULL argument");
    return -EINVAL;
  }
  try {
    std::optional<orca::ScopeState> st;
    const int rc = lookup(reader, scope, st);
    if (rc < 0) {
      gate->gate.mark_stale();
      set_error(err, errlen, rc == -ENOENT ? std::string("no report for scope \"") + scope + "\" in " + reader->dir.dir()
                                           : (st->error.empty() ? std::string("no valid report") : st->error));
      return rc;
    }
    // A removed or rejected file: the report held is no longer the agent's word.
    if (st->removed || !st->error.empty()) {
      gate->gate.mark_stale();
      set_error(err, errlen, st->staleness.reason.empty() ? st->error : st->staleness.reason);
      return 1;
    }
    gate->gate.update(*st->report, orca::unix_now_ms(), now_ns);
    const int fresh = gate_freshness(gate, now_ns);
    if (fresh != 0) set_error(err, errlen, st->staleness.reason.empty() ? "stale" : st->staleness.reason);
    return fresh;
  } catch (...) {
    gate->gate.mark_stale();
    return current_exception_code(err, errlen);
  }
}

int headroom_gate_update_from_file(headroom_gate* gate, const char* path, int64_t now_ns, char* err, size_t errlen) {
  set_error(err, errlen, "");
  if (gate == nullptr || path == nullptr) {
    set_error(err, errlen, "headroom_gate_update_from_file: NULL argument");
    return -EINVAL;
  }
  try {
    auto report = orca::read_report_file(path);
    if (!report) {
      gate->gate.mark_stale();
      set_error(err, errlen, report.error().message);
      return report.error().code > 0 ? -report.error().code : -EBADMSG;
    }
    const int64_t now_ms = orca::unix_now_ms();
    gate->gate.update(*report, now_ms, now_ns);
    const int fresh = gate_freshness(gate, now_ns);
    if (fresh != 0) {
      const auto staleness = orca::check_staleness(*report, now_ms, gate->gate.options().stale_intervals,
                                                   gate->gate.options().min_stale_ms);
      set_error(err, errlen, std::string(path) + ": " + (staleness.reason.empty() ? "stale" : staleness.reason));
    }
    return fresh;
  } catch (...) {
    gate->gate.mark_stale();
    return current_exception_code(err, errlen);
  }
}

int headroom_gate_decide(const headroom_gate* gate, int priority, int64_t now_ns) {
  if (gate == nullptr) return HEADROOM_GATE_CALL_NO_DATA;
  return static_cast<int>(gate->gate.decide(priority, now_ns));
}

int headroom_gate_state(const headroom_gate* gate, int priority, int64_t now_ns) {
  if (gate == nullptr) return -EINVAL;
  return static_cast<int>(gate->gate.state(priority, now_ns));
}

}  // extern "C"

// ---------------------------------------------------------------- retries

extern "C" {

int headroom_reader_shed_probabilities(headroom_reader* reader, const char* scope, double probability[4], char* err,
                                       size_t errlen) {
  set_error(err, errlen, "");
  if (reader == nullptr || scope == nullptr || probability == nullptr) {
    set_error(err, errlen, "headroom_reader_shed_probabilities: NULL argument");
    return -EINVAL;
  }
  try {
    std::optional<orca::ScopeState> st;
    const int rc = lookup(reader, scope, st);
    if (rc < 0) {
      set_error(err, errlen, rc == -ENOENT ? std::string("no report for scope \"") + scope + "\" in " + reader->dir.dir()
                                           : (st->error.empty() ? std::string("no valid report") : st->error));
      return rc;
    }
    // A removed or rejected file: the report held is no longer the agent's word.
    const bool stale = rc == 1 || st->removed || !st->error.empty();
    static const orca::ShedderConfig kDefaults;  // built once; read-only after
    for (int b = 0; b < orca::kBucketCount; ++b)
      probability[b] = orca::shed_probability(*st->report, static_cast<orca::Bucket>(b), kDefaults, stale);
    if (stale) set_error(err, errlen, st->staleness.reason.empty() ? "stale" : st->staleness.reason);
    return stale ? 1 : 0;
  } catch (...) {
    return current_exception_code(err, errlen);
  }
}

}  // extern "C"
