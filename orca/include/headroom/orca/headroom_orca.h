// SPDX-License-Identifier: Apache-2.0
/*
 * headroom_orca.h: the stable C interface of libheadroom-orca, for programs
 * that cannot use the C++ API (C, or languages with a C FFI). It follows an
 * ORCA report directory (docs/orca-files.md) and answers "how loaded is this
 * scope, and is that still true?".
 *
 * Conventions:
 * - Functions that can fail return a negative errno value (-ENOENT, -EINVAL,
 *   -ENOMEM, ...). Where an `err` buffer is taken, a message naming the file
 *   or argument and the reason is written to it (always NUL-terminated,
 *   truncated to errlen; err may be NULL when errlen is 0).
 * - Functions that return a value for a scope return 0 when it is fresh and
 *   1 when it is STALE (the values are still filled in). Fail open: treat 1
 *   like "no data", e.g. `if (headroom_reader_get(...) == 0) use(report);`.
 * - A reader is not thread-safe: use one from one thread at a time. A gate's
 *   decisions are (headroom_gate, below), and so is a retry budget
 *   (headroom_retry_budget).
 * - No function blocks except headroom_reader_wait(), and none lets a C++
 *   exception escape.
 * - Nothing here is ever removed or changed in meaning; new functions and new
 *   fields at the end of headroom_report may be added.
 */
#ifndef HEADROOM_ORCA_H
#define HEADROOM_ORCA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define HEADROOM_ORCA_API __attribute__((visibility("default")))
#else
#define HEADROOM_ORCA_API
#endif

/* The library's version, e.g. "0.1.0". */
HEADROOM_ORCA_API const char *headroom_orca_version(void);

/* An opaque reader of one report directory. */
typedef struct headroom_reader headroom_reader;

/*
 * Opens a reader of `dir` (e.g. "/run/orca"). The directory need not exist
 * yet; it is picked up when it appears, and again after being deleted and
 * recreated. A report is stale when it is older than `stale_intervals`
 * sampling intervals (at least one second; <= 0 or NaN selects the default,
 * 3), when the agent stopped, when its file was removed, or when the file now
 * on disk is rejected. Returns NULL on failure, with the reason in err.
 */
HEADROOM_ORCA_API headroom_reader *headroom_reader_open(const char *dir, double stale_intervals, char *err,
                                                        size_t errlen);

/*
 * Options for headroom_reader_open_with. Set struct_size to
 * sizeof(headroom_reader_options) and zero what you leave to the defaults
 * (e.g. `headroom_reader_options o = {sizeof o};`): fields added later
 * default to 0 = "as before".
 */
typedef struct headroom_reader_options {
  uint32_t struct_size;
  int32_t require_owner;   /* 1: trust only files that owner_uid owns and nobody else may write */
  uint32_t owner_uid;      /* the agent's user, e.g. getpwnam("headroom")->pw_uid */
  uint32_t reserved;       /* 0 */
  double stale_intervals;  /* as for headroom_reader_open; <= 0 or NaN: 3 */
} headroom_reader_options;

/*
 * headroom_reader_open with options. With require_owner, a file under a
 * report name that another user owns, or that its group or others may write,
 * is rejected like a broken file: the scope keeps its last trusted report and
 * reads as stale, and err of headroom_reader_get says whose the file is.
 * Returns NULL with the reason in err, also for NULL options or a struct_size
 * smaller than the fields up to owner_uid.
 */
HEADROOM_ORCA_API headroom_reader *headroom_reader_open_with(const char *dir, const headroom_reader_options *options,
                                                             char *err, size_t errlen);

/* Releases the reader and its descriptor. NULL is accepted. */
HEADROOM_ORCA_API void headroom_reader_close(headroom_reader *reader);

/*
 * A descriptor to poll for POLLIN in an event loop; when readable, call
 * headroom_reader_process(). Owned by the reader: do not read or close it.
 * -EINVAL for NULL.
 */
HEADROOM_ORCA_API int headroom_reader_fd(const headroom_reader *reader);

/*
 * Applies pending changes without blocking. Returns how many scopes changed
 * (0 when none), or a negative errno.
 */
HEADROOM_ORCA_API int headroom_reader_process(headroom_reader *reader);

/*
 * Waits up to timeout_ms (-1: no limit) for a scope to change and applies the
 * change. Returns 1 when a scope changed, 0 on timeout, or a negative errno.
 */
HEADROOM_ORCA_API int headroom_reader_wait(headroom_reader *reader, int timeout_ms);

/*
 * One scope's newest valid report. Fractions, not percentages (0.6 = 60 %).
 * Set struct_size to sizeof(headroom_report) before the call: the library
 * writes at most that many bytes (so a program built against an older, shorter
 * struct keeps working) and sets struct_size to the number it wrote.
 */
typedef struct headroom_report {
  uint32_t struct_size;
  int32_t stale;                  /* 1: treat as no data (fail open); see the reason in err */
  double cpu_utilization;         /* CPU demand over capacity; exceeds 1.0 when oversubscribed */
  double mem_utilization;         /* [0, 1] */
  double application_utilization; /* the composite headroom stands behind; can exceed 1.0 */
  double rps_fractional;          /* requests per second (endpoint reports), else 0 */
  double eps;                     /* errors per second (endpoint reports), else 0 */
  uint64_t seq;                   /* increments on every publish; restarts at 1 with the agent */
  int64_t timestamp_ms;           /* Unix time of the sample, milliseconds */
  int64_t interval_ms;            /* the agent's sampling interval */
  int64_t age_ms;                 /* now - timestamp_ms, at the call */
  int32_t stopped;                /* 1: the agent shut down cleanly; values are frozen */
  int32_t rejected;               /* 1: the current file is broken; these are the last valid values */
} headroom_report;

/*
 * Fills *out for `scope` ("node", "endpoint.<name>"). Returns 0 (fresh) or 1
 * (stale; err receives why), -ENOENT when the scope is unknown, -ENODATA
 * when its file exists but never held a valid report (err says why), -EINVAL
 * for NULL arguments or a struct_size smaller than the first two fields.
 */
HEADROOM_ORCA_API int headroom_reader_get(headroom_reader *reader, const char *scope, headroom_report *out,
                                          char *err, size_t errlen);

/*
 * One entry of the report's `utilization` map ("cpu", "memory",
 * "cpu.pressure", ...), or of `named_metrics` ("headroom.cpu.capacity", ...).
 * Returns 0 (fresh) or 1 (stale) with *out set, -ENOENT when the scope or the
 * key is absent, -ENODATA when the scope has no valid report, -EINVAL for NULL
 * arguments.
 */
HEADROOM_ORCA_API int headroom_reader_utilization(headroom_reader *reader, const char *scope, const char *key,
                                                  double *out);
HEADROOM_ORCA_API int headroom_reader_named_metric(headroom_reader *reader, const char *scope, const char *key,
                                                   double *out);

/*
 * Enumerates the known scopes, sorted; indexes are valid until the next
 * process/wait call. headroom_reader_scope_count returns the number (or
 * -EINVAL). headroom_reader_scope_name copies name `index` into buf like
 * snprintf: returns its length (>= buflen means truncated), -ENOENT past the
 * end, -EINVAL for NULL arguments.
 */
HEADROOM_ORCA_API int headroom_reader_scope_count(const headroom_reader *reader);
HEADROOM_ORCA_API int headroom_reader_scope_name(const headroom_reader *reader, size_t index, char *buf,
                                                 size_t buflen);

/*
 * Called from headroom_reader_process/wait once per changed scope, with the
 * scope's name (valid during the call only). It may call headroom_reader_get
 * and the other query functions, not process or wait. NULL removes it.
 * Returns 0 or -EINVAL.
 */
typedef void (*headroom_reader_callback)(void *user, const char *scope);
HEADROOM_ORCA_API int headroom_reader_set_callback(headroom_reader *reader, headroom_reader_callback callback,
                                                   void *user);

/*
 * Endpoint instances (docs/orca-files.md, "Instances"): an endpoint's
 * servers in one network namespace (a pod, or the host) have their own
 * report, scope "endpoint.<name>@<instance>", which names that namespace in
 * headroom.instance.netns. These find the instance of `endpoint` (its
 * [[endpoint]] name) in the calling process's own network namespace
 * (readlink /proc/self/ns/net), so a server reads its own report without
 * knowing its pod or how the agent names instances.
 *
 * Both copy the scope into buf like snprintf and return its length (>=
 * buflen means truncated). -ENOENT when no instance file names this
 * namespace: err says which namespace was looked for and which instance
 * files exist (the agent has not seen a server of the endpoint in this
 * namespace yet, or dir is not the agent's report directory). -EINVAL for
 * NULL arguments or a name that is no endpoint name; another negative errno
 * when /proc/self/ns/net cannot be read (or, for the first, dir cannot be
 * listed), with the reason in err.
 *
 * headroom_orca_own_instance_scope reads dir once (each instance file).
 */
HEADROOM_ORCA_API int headroom_orca_own_instance_scope(const char *dir, const char *endpoint, char *buf,
                                                       size_t buflen, char *err, size_t errlen);

/*
 * The same among the scopes `reader` follows, without reading a file. To
 * follow "my instance", call it after each headroom_reader_process/wait and
 * headroom_reader_get the scope it gives: the instance's file may appear
 * after the reader was opened, and when the file it named is removed it names
 * another instance of this namespace, or returns -ENOENT. A gone instance's
 * report (its servers stopped listening) is still named; headroom_reader_get
 * reads it as stale, "the instance stopped serving".
 */
HEADROOM_ORCA_API int headroom_reader_own_instance(headroom_reader *reader, const char *endpoint, char *buf,
                                                   size_t buflen, char *err, size_t errlen);

/*
 * The fail-fast gate of a dependency (docs/dependencies.md, "The fail-fast
 * gate"): from headroom's report of a remote service the node calls
 * (scope "dependency.<name>"), decide per call "call it" or "fail fast" with
 * a circuit breaker (open on the report's error or late share, half-open
 * letting a bounded trickle through, closed when the report shows recovery)
 * and a bulkhead (fail fast while calls in flight / max_concurrency is at or
 * past a threshold). Priority 1 is the most important, 100 the least; less
 * important calls fail fast first.
 *
 * FAIL OPEN: with no report, a stale one or a stopped agent, every decision
 * is "call" (HEADROOM_GATE_CALL_NO_DATA): a crashed agent never takes the
 * dependency down.
 *
 * Times: now_ns is the caller's monotonic clock in nanoseconds (e.g.
 * CLOCK_MONOTONIC), the same for every call on one gate. headroom_gate_decide
 * reads no clock and makes no system call; the update functions read the
 * wall clock once, to judge the report's age.
 *
 * Threads: headroom_gate_decide and headroom_gate_state may be called from
 * any number of threads at once, also while another thread updates; updates
 * serialize among themselves. A reader (headroom_reader) stays one thread's.
 */
typedef struct headroom_gate headroom_gate;

/* One priority bucket's thresholds, fractions (0.5 = 50 %). */
typedef struct headroom_gate_bucket_limits {
  double errors_open;  /* the breaker opens at an error share at or above this... */
  double errors_close; /* ...and closes from half-open at or below this */
  double late_open;    /* the same for the late share */
  double late_close;
  double concurrency; /* the bulkhead fails fast at calls in flight / max_concurrency at or above this */
} headroom_gate_bucket_limits;

/*
 * Options for headroom_gate_create. Set struct_size to
 * sizeof(headroom_gate_options) and zero what you leave to the defaults
 * (`headroom_gate_options o = {sizeof o};`).
 */
typedef struct headroom_gate_options {
  uint32_t struct_size;
  int32_t late_share;       /* 0: latency.slo_max is the late share (default); 1: latency.slo_target */
  double min_calls;         /* calls a report must cover before the breaker opens; <= 0: 10 */
  double min_probe_calls;   /* calls half-open needs to close or open again; <= 0: 3 */
  int64_t open_for_ms;      /* open this long before half-open; <= 0: 5000 */
  double probes_per_second; /* the half-open trickle's rate; <= 0: 10 */
  double stale_intervals;   /* a report older than this many intervals is stale; <= 0: 3 */
  int64_t min_stale_ms;     /* ...but never sooner than this; <= 0: 1000 */
  int32_t set_buckets;      /* 1: use buckets[]; 0: the defaults */
  int32_t reserved;         /* 0 */
  /* Indexed CRITICAL (1-25), DEGRADED (26-50), BEST_EFFORT (51-75), BULK (76-100).
   * Defaults: errors/late open 0.5 0.4 0.3 0.2, close 0.2 0.15 0.1 0.1,
   * concurrency 1.0 0.9 0.8 0.7. */
  headroom_gate_bucket_limits buckets[4];
} headroom_gate_options;

/* What headroom_gate_decide returns. The first three call, the last two fail fast. */
#define HEADROOM_GATE_CALL 0               /* closed */
#define HEADROOM_GATE_CALL_NO_DATA 1       /* no fresh report: fail open */
#define HEADROOM_GATE_CALL_PROBE 2         /* half-open: this call is part of the trickle */
#define HEADROOM_GATE_FAIL_FAST_BREAKER 3  /* open, or half-open beyond the trickle */
#define HEADROOM_GATE_FAIL_FAST_BULKHEAD 4 /* the bulkhead is full for this priority */
#define HEADROOM_GATE_SHOULD_CALL(decision) ((decision) < HEADROOM_GATE_FAIL_FAST_BREAKER)

/* What headroom_gate_state returns. */
#define HEADROOM_GATE_STATE_CLOSED 0
#define HEADROOM_GATE_STATE_OPEN 1
#define HEADROOM_GATE_STATE_HALF_OPEN 2
#define HEADROOM_GATE_STATE_NO_DATA 3

/*
 * Creates a gate; options may be NULL (the defaults). Returns NULL with the
 * reason in err for invalid options (it names the field, e.g.
 * "buckets[BULK].errors_open (0.6) must be at most ...") or a struct_size
 * smaller than the fields up to min_stale_ms.
 */
HEADROOM_ORCA_API headroom_gate *headroom_gate_create(const headroom_gate_options *options, char *err,
                                                      size_t errlen);

/* Releases the gate. NULL is accepted. No decide may run on it any more. */
HEADROOM_ORCA_API void headroom_gate_destroy(headroom_gate *gate);

/*
 * Feeds the gate the report of `scope` ("dependency.<name>") as `reader`
 * holds it; call it after headroom_reader_process/wait said the scope
 * changed, or once per interval. Returns 0 when the report was fresh and
 * judged, 1 when it is stale (the gate fails open; err says why), -ENOENT
 * or -ENODATA when the reader has no valid report of the scope (the gate
 * fails open), -EINVAL for NULL arguments.
 */
HEADROOM_ORCA_API int headroom_gate_update_from_reader(headroom_gate *gate, headroom_reader *reader,
                                                       const char *scope, int64_t now_ns, char *err,
                                                       size_t errlen);

/*
 * Feeds the gate the report file at `path` (e.g.
 * "/run/orca/dependency.payments.orca"), read and validated like the
 * reader's files. Returns 0 when fresh, 1 when stale, a negative errno when
 * the file cannot be read (-ENOENT, -EACCES, ...) or -EBADMSG when it is no
 * valid report (err names the file); in every case but 0 the gate fails
 * open. -EINVAL for NULL arguments.
 */
HEADROOM_ORCA_API int headroom_gate_update_from_file(headroom_gate *gate, const char *path, int64_t now_ns,
                                                     char *err, size_t errlen);

/*
 * Per call: one of HEADROOM_GATE_*. priority 1..100 (clamped). A NULL gate
 * gives HEADROOM_GATE_CALL_NO_DATA: failing open.
 */
HEADROOM_ORCA_API int headroom_gate_decide(const headroom_gate *gate, int priority, int64_t now_ns);

/*
 * The breaker's state for `priority`'s bucket at now_ns: one of
 * HEADROOM_GATE_STATE_*, or -EINVAL for NULL.
 */
HEADROOM_ORCA_API int headroom_gate_state(const headroom_gate *gate, int priority, int64_t now_ns);

/*
 * Retries (docs/retries.md). A shed answer carries retry dials,
 * {"maxRetries":N,"retryAfterSeconds":S}: how often and how soon the client
 * may retry the call. A client keeps a retry budget per target: the retries
 * per first attempt of its calls over a sliding window, per priority bucket
 * (less important calls stop retrying first), the latest dials per bucket,
 * and the target's own report (a bucket the target sheds heavily retries
 * nothing). Priority 1 is the most important, 100 the least.
 *
 * Times: now_ns is the caller's monotonic clock in nanoseconds, the same for
 * every call on one budget. No function here reads a clock or makes a
 * system call.
 *
 * Threads: every budget function may be called from any number of threads
 * at once; none takes a lock.
 */
typedef struct headroom_retry_dials {
  int32_t max_retries;        /* retry the call at most this many more times, 0 to 10 */
  int32_t reserved;           /* 0 */
  double retry_after_seconds; /* and not before this long after the answer, 0 to 3600 */
} headroom_retry_dials;

/*
 * The dials of a request of `priority` (1..100, clamped) shed with
 * probability shed_probability (clamped to [0, 1]; NaN counts as 1), with
 * the default dials: max_retries ceil(base x (1 - p)), retry_after_seconds
 * base x (1 + 3p), bases CRITICAL 2 / 0.5 s, DEGRADED 1 / 1 s, BEST_EFFORT
 * 1 / 2 s, BULK 0 / 5 s. Returns 0, or -EINVAL for a NULL out.
 */
HEADROOM_ORCA_API int headroom_retry_dials_for(int priority, double shed_probability, headroom_retry_dials *out);

/*
 * The wire form of dials (clamped to the caps first), e.g.
 * {"maxRetries":1,"retryAfterSeconds":2.5}, copied into buf like snprintf:
 * returns its length (>= buflen means truncated), -EINVAL for NULL dials or
 * a NULL buf with a buflen above 0.
 */
HEADROOM_ORCA_API int headroom_retry_dials_format(const headroom_retry_dials *dials, char *buf, size_t buflen);

/*
 * Reads the wire form strictly (both keys, each once, no other; JSON
 * numbers; whitespace between tokens). Values past the caps are clamped
 * (maxRetries to 10, retryAfterSeconds to 3600). Returns 0, -EBADMSG with
 * the reason in err (a missing, repeated or unknown key, a negative or
 * fractional maxRetries, garbage, ...), or -EINVAL for NULL arguments.
 * text need not be NUL-terminated: len bytes are read.
 */
HEADROOM_ORCA_API int headroom_retry_dials_parse(const char *text, size_t len, headroom_retry_dials *out, char *err,
                                                 size_t errlen);

/*
 * HTTP's Retry-After for the dials: the wait in whole seconds, rounded up,
 * at least 1 when the wait is above 0. -EINVAL for NULL.
 */
HEADROOM_ORCA_API int headroom_retry_after_header_seconds(const headroom_retry_dials *dials);

/*
 * gRPC (docs/retries.md, "gRPC"): a shed call ends with status
 * HEADROOM_GRPC_SHED_STATUS and two trailers. grpc-retry-pushback-ms is
 * gRPC's own pushback (gRFC A6), which its clients honour when their
 * retryPolicy lists the status: a wait in milliseconds before the retry,
 * or -1, "do not retry". x-headroom-retry carries the dials' wire form, for
 * clients that keep a retry budget.
 */
#define HEADROOM_GRPC_SHED_STATUS 8 /* RESOURCE_EXHAUSTED */
#define HEADROOM_GRPC_PUSHBACK_TRAILER "grpc-retry-pushback-ms"
#define HEADROOM_RETRY_DIALS_HEADER "x-headroom-retry"
#define HEADROOM_GRPC_SHED_TRAILER_COUNT 2

/* One trailer: key is a static string; value is NUL-terminated. */
typedef struct headroom_grpc_trailer {
  const char *key;
  char value[88];
} headroom_grpc_trailer;

/*
 * The trailers of a shed gRPC answer for the dials (clamped to the caps
 * first), in this order: HEADROOM_GRPC_PUSHBACK_TRAILER, the wait in
 * milliseconds rounded up ("2500"), or "-1" when max_retries is 0; then
 * HEADROOM_RETRY_DIALS_HEADER, as headroom_retry_dials_format writes it.
 * Returns HEADROOM_GRPC_SHED_TRAILER_COUNT, or -EINVAL for NULL arguments.
 */
HEADROOM_ORCA_API int headroom_retry_grpc_trailers(const headroom_retry_dials *dials,
                                                   headroom_grpc_trailer out[HEADROOM_GRPC_SHED_TRAILER_COUNT]);

/* The pushback alone: -1 (do not retry) or 0 to 3600000 ms. -EINVAL for NULL. */
HEADROOM_ORCA_API int headroom_retry_grpc_pushback_ms(const headroom_retry_dials *dials);

typedef struct headroom_retry_budget headroom_retry_budget;

/*
 * Options for headroom_retry_budget_create. Set struct_size to
 * sizeof(headroom_retry_budget_options) and zero what you leave to the
 * defaults (`headroom_retry_budget_options o = {sizeof o};`).
 */
typedef struct headroom_retry_budget_options {
  uint32_t struct_size;
  int32_t slots;                 /* time slots of the window, 1 to 64; <= 0: 10 */
  int64_t window_ms;             /* the sliding window; <= 0: 10000 */
  double min_retries_per_second; /* retries any bucket may make, per second of the window; 0: 1, < 0: none */
  double heavy_shed;             /* a bucket the target sheds at this or more retries nothing; <= 0: 0.5 */
  int64_t dials_ttl_ms;          /* dials are forgotten this long after they came; <= 0: 30000 */
  int32_t set_max_ratio;         /* 1: use max_ratio[]; 0: the defaults */
  int32_t reserved;              /* 0 */
  /* Retries per first attempt over the window, indexed CRITICAL (1-25),
   * DEGRADED (26-50), BEST_EFFORT (51-75), BULK (76-100); each at most the
   * one before it. Defaults 0.10 0.075 0.05 0.025. */
  double max_ratio[4];
} headroom_retry_budget_options;

/* What headroom_retry_budget_may_retry returns. Only HEADROOM_RETRY retries. */
#define HEADROOM_RETRY 0                      /* retry: counted in the window */
#define HEADROOM_RETRY_DENY_BUDGET 1          /* the window's retries reached the bucket's share */
#define HEADROOM_RETRY_DENY_DIALS_COUNT 2     /* past the dials' maxRetries */
#define HEADROOM_RETRY_DENY_DIALS_WAIT 3      /* the dials' retryAfterSeconds has not passed */
#define HEADROOM_RETRY_DENY_TARGET_SHEDDING 4 /* the target's report sheds the bucket heavily */

/*
 * Creates the budget of one target; options may be NULL (the defaults).
 * Returns NULL with the reason in err for invalid options (it names the
 * field, e.g. "max_ratio[BULK] (0.2) must be at most ...") or a struct_size
 * smaller than the fields up to dials_ttl_ms. Allocates once; nothing after.
 */
HEADROOM_ORCA_API headroom_retry_budget *headroom_retry_budget_create(const headroom_retry_budget_options *options,
                                                                      char *err, size_t errlen);

/* Releases the budget. NULL is accepted. No other call may run on it any more. */
HEADROOM_ORCA_API void headroom_retry_budget_destroy(headroom_retry_budget *budget);

/* Every call's first attempt. NULL is ignored. */
HEADROOM_ORCA_API void headroom_retry_budget_first_attempt(headroom_retry_budget *budget, int64_t now_ns);

/*
 * After a failed attempt of a call of `priority` (1..100, clamped): may it
 * try again at now_ns? HEADROOM_RETRY or a HEADROOM_RETRY_DENY_* (the rules:
 * the target's report, the dials' count, their wait, the budget).
 * retry_number is 1 for the call's first retry. failed_at_ns is when the
 * attempt it follows failed: the dials' wait is counted from there, for
 * this call (pass now_ns when asking at the failure). -EINVAL for a NULL
 * budget: never retry then.
 */
HEADROOM_ORCA_API int headroom_retry_budget_may_retry(headroom_retry_budget *budget, int priority, int retry_number,
                                                      int64_t now_ns, int64_t failed_at_ns);

/*
 * The dials of a shed answer to a call of `priority`, received at now_ns
 * (clamped to the caps); they replace the bucket's earlier ones. Returns 0
 * or -EINVAL for NULL arguments.
 */
HEADROOM_ORCA_API int headroom_retry_budget_record_dials(headroom_retry_budget *budget, int priority,
                                                         const headroom_retry_dials *dials, int64_t now_ns);

/*
 * The shed probability of each bucket (CRITICAL, DEGRADED, BEST_EFFORT,
 * BULK) that the reference shedder's default configuration
 * (application_utilization, 0.6 / 0.8 / 1.5, fail open; docs/shedding.md)
 * gives for the report of `scope` as `reader` holds it: what the target's
 * own report says about retrying it. Returns 0 when the report is fresh, 1
 * when it is stale (the probabilities are then 0: fail open), -ENOENT or
 * -ENODATA when the reader has no valid report of the scope (err says
 * which), -EINVAL for NULL arguments.
 */
HEADROOM_ORCA_API int headroom_reader_shed_probabilities(headroom_reader *reader, const char *scope,
                                                         double probability[4], char *err, size_t errlen);

/*
 * The target's shed probabilities per bucket (e.g. from
 * headroom_reader_shed_probabilities), indexed CRITICAL, DEGRADED,
 * BEST_EFFORT, BULK; NaN reads as 1. stale != 0: the report rule denies
 * nothing until fresh ones come. Returns 0 or -EINVAL for NULL arguments.
 */
HEADROOM_ORCA_API int headroom_retry_budget_update_probabilities(headroom_retry_budget *budget,
                                                                 const double probability[4], int stale);

/*
 * The window's first attempts and retries at now_ns, for tools and tests.
 * Returns 0 or -EINVAL for NULL arguments.
 */
HEADROOM_ORCA_API int headroom_retry_budget_window(const headroom_retry_budget *budget, int64_t now_ns,
                                                   int64_t *first_attempts, int64_t *retries);

/*
 * Priority travels with the call (docs/retries.md): a server reads a
 * request's priority from its header once, keeps it as the calling thread's
 * current priority for the work the request causes, and stamps it on the
 * calls that work makes. Such a call may be less important than the request
 * (a downgrade), never more: an upgrade is refused and counted. Priority 1
 * is the most important, 100 the least. None of these allocates, takes a
 * lock or fails for lack of memory.
 */
#define HEADROOM_PRIORITY_HEADER "x-priority"

/*
 * Reads a header's value: a number 1..100, or a bucket's name in any case
 * ('-' for '_'), which reads as the bucket's least important level
 * (CRITICAL 25, DEGRADED 50, BEST_EFFORT 75, BULK 100); ASCII whitespace
 * around it is trimmed. Returns the level, with *bucket_name (may be NULL)
 * set to 1 when the value named a bucket and 0 when it was a number;
 * -ENODATA for a missing header (text NULL, len 0); -EBADMSG for anything
 * else: empty text, 0, 101, a sign, a fraction, an exponent, garbage
 * (refused rather than clamped: a typo never becomes the most important
 * priority); -EINVAL for a NULL text with len above 0. text need not be
 * NUL-terminated: len bytes are read.
 */
HEADROOM_ORCA_API int headroom_priority_parse(const char *text, size_t len, int *bucket_name);

/*
 * parsed (clamped to 1..100) when it is a level, default_priority (clamped)
 * when it is negative: pass headroom_priority_parse's result, so that a
 * missing or unreadable header gets the documented default.
 */
HEADROOM_ORCA_API int headroom_priority_or_default(int parsed, int default_priority);

/*
 * The header's value for a priority (clamped to 1..100), e.g. "40", copied
 * into buf like snprintf: returns its length (>= buflen means truncated),
 * -EINVAL for a NULL buf with a buflen above 0.
 */
HEADROOM_ORCA_API int headroom_priority_format(int priority, char *buf, size_t buflen);

/*
 * The calling thread's priority scope as a begin/end pair. begin makes
 * priority (clamped to 1..100) the thread's current priority and returns a
 * token (> 0) that end needs; end restores the priority before the begin.
 * Scopes nest like brackets: end the innermost first, on the thread that
 * began it. A token that is not the innermost open scope's of the calling
 * thread (ended twice, an outer scope ended before an inner one, a token
 * from another thread, a made-up value) is refused: end returns -EINVAL and
 * changes nothing (as far as a token can tell: it carries a tag of its
 * thread, its depth and the priority it replaced). begin returns -EOVERFLOW, opening nothing, when 64
 * scopes are open on the thread already (a begin without its end, in a
 * loop). A thread that returns to a pool with a scope open keeps it for its
 * next task: end every scope on every path. C++'s PriorityScope nests with
 * these the same way, each ending inside the one around it.
 */
HEADROOM_ORCA_API int headroom_priority_scope_begin(int priority);
HEADROOM_ORCA_API int headroom_priority_scope_end(int token);

/* The calling thread's current priority; fallback when no scope is open. */
HEADROOM_ORCA_API int headroom_priority_current(int fallback);

/*
 * The priority to stamp on an outgoing call of the current work.
 * requested HEADROOM_PRIORITY_NO_REQUEST (or any value <= 0): the current
 * priority. Else requested is clamped to 100: at the current level or less
 * important (a larger number), the request (a downgrade); more important,
 * refused: the current priority, and the refusal is counted. Without a
 * scope the current priority is 100: work no request caused claims no
 * importance.
 */
#define HEADROOM_PRIORITY_NO_REQUEST 0
HEADROOM_ORCA_API int headroom_priority_outgoing(int requested);

/* Upgrades refused since the process started, by every thread (C++ and C). */
HEADROOM_ORCA_API uint64_t headroom_priority_upgrades_refused(void);

#ifdef __cplusplus
}
#endif

#endif /* HEADROOM_ORCA_H */
