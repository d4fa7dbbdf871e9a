// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What the eBPF dependency programs (dependency.bpf.c) and headroomd share:
 * the remote ports and addresses that name the dependencies, their SLOs,
 * counters and calls in flight. The counters and the histogram are the
 * endpoint probe's (endpoint_abi.h), so one summing and one percentile code
 * serve both. */
#ifndef HEADROOM_PROBES_EBPF_DEPENDENCY_ABI_H
#define HEADROOM_PROBES_EBPF_DEPENDENCY_ABI_H

#include "endpoint_abi.h"

#define HR_MAX_DEPS 256              /* dependency indexes 0..255 */
#define HR_DEP_MAX_PORTS 256         /* remote ports with a dependency */
#define HR_DEP_ADDRS_PER_PORT 16     /* (address, port) dependencies on one port */
#define HR_DEP_SLOTS 16384           /* calls in flight, connects included */
#define HR_DEP_SLOT_TRIES 8          /* slots looked at from a connection's position */
#define HR_DEP_MAX_CALLERS 65536     /* (dependency, process) pairs allowed */
#define HR_DEP_MAX_PROCS 8192        /* syscall set: processes with connections to a dependency's port (LRU) */
#define HR_DEP_PROC_MARKS 16384      /* syscall set: marks in front of those (dep_proc_marks), a power of 2 */
#define HR_NO_DEP 0xffffffffu

/* dep_port_slot[remote port, network byte order] is 0 for a port no
 * dependency lives on, else 1 + an index into dep_port_cfg, with
 * HR_DEP_PORT_H2 set when one of the port's dependencies speaks HTTP/2: one
 * load is all an untraced connection pays, and an HTTP/1 or generic one
 * reads no other page of the globals to learn that its port has no HTTP/2.
 * Indexed by the socket's skc_dport as it is, so no byte swap either. */
#define HR_DEP_PORT_H2 0x8000u
#define HR_DEP_PORT_INDEX 0x7fffu
struct hr_dep_port {
  __u32 any_dep;                               /* the dependency of any host on this port, or HR_NO_DEP */
  __u32 n_addrs;                               /* entries used below */
  __u32 deps[HR_DEP_ADDRS_PER_PORT];           /* dependency of addrs[i] */
  __u32 addrs[HR_DEP_ADDRS_PER_PORT][4];       /* IPv6 address (IPv4 as ::ffff:a.b.c.d), network byte order */
};

#define HR_DEP_PROTO_HTTP1 0
#define HR_DEP_PROTO_GENERIC 1

/* The error rule: which failed calls count in s.errors. An answer's kind
 * (HR_DEP_ERR_5XX, HR_DEP_ERR_4XX) is what the programs read in it. */
#define HR_DEP_ERR_5XX 1     /* an HTTP 5xx answer; http2: also a grpc-status other than OK */
#define HR_DEP_ERR_4XX 2     /* an HTTP 4xx answer */
#define HR_DEP_ERR_CONNECT 4 /* a failed connect */
#define HR_DEP_ERR_RESET 8   /* a reset or a close with the call in flight; http2: RST_STREAM too */

/* deps array: index -> how its calls are judged. */
struct hr_dep {
  __u64 target_ns;
  __u64 max_ns;
  __u32 proto;   /* HR_DEP_PROTO_* */
  __u32 callers; /* 1: only the processes in the callers map count; 0: every process */
  __u32 errors;  /* HR_DEP_ERR_* that count as errors */
  __u32 pad;
};

/* dep_stats per-CPU array: index -> counters since load (user space sums the
 * CPUs and takes differences). s.aborted includes the two below; s.errors
 * includes them where the error rule (hr_dep.errors) counts them. */
struct hr_dep_stats {
  struct hr_stats s;
  __u64 connect_failures; /* SYN_SENT -> CLOSE: refused, timed out, abandoned */
  __u64 resets;           /* calls ended by a reset or a close */
  struct hr_hist hist;    /* completed calls */
};

/* callers hash: (dependency, tgid) -> 1, for dependencies with callers. */
struct hr_dep_caller {
  __u32 dep;
  __u32 tgid;
};

/* Per connection, in the socket's local storage: the decision, taken once
 * (at connect, or for a connection older than the probe at its first
 * write), and the slot of its call in flight. A dependency without callers
 * keeps only its connects here: its writes decide from the peer each time
 * and find their calls from the socket's hash. */
#define HR_DEP_UNDECIDED 0
#define HR_DEP_UNTRACED 0xffffffffu
struct hr_dep_sk {
  __u32 dep;  /* HR_DEP_UNDECIDED, HR_DEP_UNTRACED or 1 + dependency index */
  __u32 slot; /* 1 + index into calls while a call is in flight, else 0 */
};

/* calls array (memory-mapped by user space): one slot per call in flight.
 * A slot is taken by plain stores (sk last but one, start_ns last) and
 * freed by storing 0 in start_ns, then sk; user space reads the slots in
 * place each interval. A connection's calls have a home slot, from its
 * hash (dependency.bpf.c, take_slot): a call goes there when it is free,
 * else to one of the next HR_DEP_SLOT_TRIES - 1, flagged HR_DEP_F_AWAY with
 * its home's index in the flags' high half, and the home's `away` counts it
 * while it is there, so that a search for a connection's call looks at its
 * home alone when nothing of the home's is away. */
#define HR_DEP_F_CONNECT 1 /* the connect itself, in progress (SYN_SENT) */
#define HR_DEP_F_TXSTART 4 /* start_ns is the clock of its tick (under a tick early); the start is its first send stamp (dependency.bpf.c) */
#define HR_DEP_F_AWAY 8    /* not in its home slot, whose index is flags >> HR_DEP_F_HOME_SHIFT */
#define HR_DEP_F_HOME_SHIFT 16
struct hr_dep_call {
  __u64 sk;       /* struct sock * of the connection; 0: free */
  __u64 start_ns; /* the clock at the write (or the connect) that began it; under a tick early with HR_DEP_F_TXSTART */
  __u32 dep;      /* dependency index */
  __u32 rcv_start; /* the socket's rcv_nxt when the call began: answer bytes move it */
  __u32 flags;    /* HR_DEP_F_* */
  __u32 away;     /* of the calls whose home this slot is, how many sit in another (atomic adds) */
};

/* HTTP/2 (dependency_http2.bpf.h): a call is a stream. Each stream in
 * flight takes a slot of the calls array like any call (flags
 * HR_DEP_F_STREAM, rcv_start: its id), so user space sees it age; the
 * connection keeps, in a second socket storage, where each direction's
 * frames stand (the endpoint probe's struct hr_h2_dir) and which calls slot
 * each of its streams holds, by (id >> 1) % HR_DEP_H2_STREAMS: the streams
 * in flight at once have consecutive ids, so they take consecutive entries;
 * a stream whose entry is taken is not counted (dropped). */
#define HR_DEP_PROTO_HTTP2 2
#define HR_DEP_F_STREAM 2    /* an HTTP/2 stream in flight; rcv_start holds its id */
#define HR_DEP_H2_STREAMS 64 /* streams in flight measured per connection */
#define HR_DEP_H2_BLOCK 256  /* server header block bytes read (a longer one: hpack lost) */

struct hr_dep_h2_stream {
  __u32 sid;  /* stream id, 0: free; with the top bit: answered, its trailers to come (not in flight) */
  __u32 slot; /* 1 + index into calls */
};

struct hr_dep_h2 {
  struct hr_h2_dir out; /* the client's frames, from its writes */
  struct hr_h2_dir in;  /* the server's frames, from the arrived bytes (syscalls: the reads) */
  __u32 dep;            /* dependency index */
  __u32 snd_end;        /* write_seq up to which the writes were walked */
  __u32 rcv_seen;       /* rcv_nxt up to which the arrivals were walked (syscalls: copied_seq, the reads) */
  __u32 last_sid;       /* the highest stream id the client opened */
  /* The server's HPACK encoder, followed as the endpoint side follows it
   * (struct hr_h2_conn): the entries it inserted, and for the latest
   * HR_H2_RING by insertion number whether the entry's name is grpc-status
   * and whether it means an error (5xx or grpc, 4xx). hpack_lost: a block the walk could not
   * follow, so indexes into the dynamic table are no longer known. */
  __u32 inserts;
  __u32 hpack_lost;
  __u32 fin; /* the server's FIN was counted: it took a sequence number, not a byte */
  __u32 ahead; /* the highest stream id the server's frames named before the client's walk saw it open */
  __u64 grpc_status_name[HR_H2_RING / 64];
  __u64 error_entry[HR_H2_RING / 64];        /* :status 5xx or grpc-status not OK */
  __u64 client_error_entry[HR_H2_RING / 64]; /* :status 4xx */
  struct hr_dep_h2_stream s[HR_DEP_H2_STREAMS];
  /* A server header block that runs past the piece its frame header is in
   * (a read that ends there): its stream, flags and length (0: none), and its
   * bytes so far; twice the block: a masked position plus a bounded length
   * stays inside. */
  __u32 blk_sid;
  __u32 blk_flags;
  __u32 blk_len;
  __u32 blk_have;
  __u8 blk[2 * HR_DEP_H2_BLOCK];
};

/* dep_h2_stats per-CPU array, one entry: how the HTTP/2 walks fared. */
struct hr_dep_h2_stats {
  __u64 frames;  /* frame headers walked, both directions */
  __u64 streams; /* streams that took a calls slot */
  __u64 dropped; /* streams not measured: their entry or every calls slot tried was taken */
  __u64 desyncs; /* walks that lost the frame boundaries (unreadable bytes, bad frames, the step budget) */
  __u64 resyncs; /* directions synced again at a piece that starts with a plausible frame */
  __u64 lost;    /* streams in flight given up uncounted because the server's frames were lost */
  __u64 hpack_lost; /* connections whose server header blocks could no longer be followed */
};

#endif
