// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What the eBPF endpoint programs (endpoint.bpf.c) and headroomd share: map
 * layouts and the latency histogram's bucket arithmetic. Plain C with fixed
 * width types, so the BPF side (clang -target bpf, vmlinux.h types) and the
 * C++ side (<linux/types.h>) compile the same definitions. */
#ifndef HEADROOM_PROBES_EBPF_ENDPOINT_ABI_H
#define HEADROOM_PROBES_EBPF_ENDPOINT_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define HR_MAX_ENDPOINTS 256        /* endpoint indexes 0..255 */
#define HR_MAX_PATHS_PER_PORT 16    /* endpoints with a path prefix on one port */
#define HR_PATH_BYTES 64            /* prefix bytes incl. room for a NUL; prefix <= 63 */
#define HR_PEEK_BYTES 64            /* bytes of a request/response looked at */
#define HR_NO_ENDPOINT 0xffffffffu  /* a request on a traced port that no endpoint claims */
#define HR_PENDING 0xfffffffeu      /* data arrived, the server has not read it yet */

#define HR_MAX_INFLIGHT 16384       /* requests in flight or waiting to be read */
#define HR_MAX_CONNS 65536          /* server-side connections known (LRU) */
#define HR_MAX_PROCS 4096           /* server processes traced (LRU) */
#define HR_MAX_PORTS 256
#define HR_MAX_LISTENERS 4096       /* (network namespace, port) pairs with a listener known */
#define HR_DEFAULT_INSTANCES 256    /* instances per endpoint, unless configured */
#define HR_INSTANCE_OVERFLOW 0u     /* the netns of the entry that counts an endpoint's instances past the bound */

/* Latency histogram: log-linear over 256 ns units. Values below 16 units
 * (4.096 us) get one bucket per unit; above, 16 buckets per power of two, so
 * a bucket is at most 1/16 of its lower bound wide. The top bucket holds
 * everything from 31 * 2^35 units (about 75 hours) up. */
#define HR_HIST_UNIT_SHIFT 8
#define HR_HIST_SUB_BITS 4
#define HR_HIST_SUB (1u << HR_HIST_SUB_BITS)
#define HR_HIST_MAX_MSB 39
#define HR_HIST_BUCKETS ((HR_HIST_MAX_MSB - HR_HIST_SUB_BITS + 2) * HR_HIST_SUB) /* 592 */

/* Position of the highest set bit of a non-zero value (0..63). */
static inline __u32 hr_msb64(__u64 v) {
  __u32 r = 0;
  if (v >> 32) { v >>= 32; r += 32; }
  if (v >> 16) { v >>= 16; r += 16; }
  if (v >> 8) { v >>= 8; r += 8; }
  if (v >> 4) { v >>= 4; r += 4; }
  if (v >> 2) { v >>= 2; r += 2; }
  if (v >> 1) { r += 1; }
  return r;
}

static inline __u32 hr_hist_bucket(__u64 ns) {
  __u64 u = ns >> HR_HIST_UNIT_SHIFT;
  if (u < HR_HIST_SUB) return (__u32)u;
  __u32 m = hr_msb64(u);
  if (m > HR_HIST_MAX_MSB) return HR_HIST_BUCKETS - 1;
  return (m - HR_HIST_SUB_BITS + 1) * HR_HIST_SUB + (__u32)((u >> (m - HR_HIST_SUB_BITS)) & (HR_HIST_SUB - 1));
}

/* Lower bound of a bucket in ns; bucket b covers [lower(b), lower(b + 1)). */
static inline __u64 hr_hist_lower_ns(__u32 b) {
  if (b < HR_HIST_SUB) return (__u64)b << HR_HIST_UNIT_SHIFT;
  __u32 octave = b / HR_HIST_SUB - 1; /* 0 for msb == SUB_BITS */
  __u64 sub = b % HR_HIST_SUB;
  return ((HR_HIST_SUB + sub) << octave) << HR_HIST_UNIT_SHIFT;
}

/* Port configuration, global arrays the loader fills before attaching:
 * port_slot[local port] is 0 for a port no endpoint lives on, else 1 + an
 * index into port_cfg, which says which endpoints live there. An array
 * indexed by port costs every socket event one load, no map lookup. */
#define HR_PROTO_HTTP1 0 /* HTTP/1.x, or any protocol of one request at a time per connection */
#define HR_PROTO_HTTP2 1 /* cleartext HTTP/2 (h2c, gRPC): streams, from the frames */
/* Which program set measures a port. Both sets can be attached at once: a
 * port whose requests must be read (a path, HTTP/2) goes to the syscall set,
 * the others stay with the socket set, and each set's programs leave the
 * other's ports alone. */
#define HR_SET_SOCKETS 0
#define HR_SET_SYSCALLS 1
struct hr_port {
  __u32 generic_ep;                       /* endpoint without a path, or HR_NO_ENDPOINT */
  __u32 n_paths;                          /* entries used in path_eps */
  __u32 path_eps[HR_MAX_PATHS_PER_PORT];  /* endpoints with a path prefix */
  __u32 proto;                            /* HR_PROTO_*: every endpoint of a port speaks the same */
  __u32 set;                              /* HR_SET_*: which program set measures the port */
};

/* endpoints array: index -> SLO and path prefix. The prefix is stored as
 * 8-byte words (native byte order) with a mask of the bytes that count, so the
 * kernel compares a word at a time. */
#define HR_PATH_WORDS (HR_PATH_BYTES / 8)
struct hr_endpoint {
  __u64 target_ns;
  __u64 max_ns;
  __u32 path_len; /* 0: no path */
  __u32 pad;
  __u64 path_words[HR_PATH_WORDS];
  __u64 path_mask[HR_PATH_WORDS];
};

/* stats per-CPU array: index -> counters since load. User space sums CPUs and
 * takes differences between ticks (u64 wrap-around is harmless). */
struct hr_stats {
  __u64 completed;   /* first byte of a response written */
  __u64 errors;      /* responses "HTTP/1.x 5xx" */
  __u64 over_target; /* completed or aborted, latency > target */
  __u64 over_max;    /* completed or aborted, latency > max */
  __u64 aborted;     /* connection closed with a request in flight */
  __u64 busy_ns;     /* sum of the latencies of completed and aborted requests */
};

/* hist: counts per bucket (u32, differences wrap). */
struct hr_hist {
  __u32 counts[HR_HIST_BUCKETS];
};

/* instances per-CPU hash: (endpoint index, network namespace of the
 * server's socket) -> its counters and histogram, one lookup per request's
 * end. An entry is made at an instance's first request end, as long as the
 * endpoint has fewer than instance_bound entries (instances_used[], which
 * the loader decrements when it removes one); past the bound, requests count
 * in the endpoint's entry whose netns is HR_INSTANCE_OVERFLOW, which the
 * loader makes. An endpoint's totals are the sum of its entries. */
struct hr_inst_key {
  __u32 ep;
  __u32 netns; /* the namespace's inode (ns.inum), as /proc/PID/ns/net shows it */
};
struct hr_inst {
  struct hr_stats stats;
  struct hr_hist hist;
};

/* listeners hash: (network namespace, local port) of an endpoint -> the
 * listening sockets there, counted from the TCP state changes (to and from
 * LISTEN), and the process that last started listening. An instance whose
 * count falls to 0 stopped serving. */
struct hr_listen_key {
  __u32 netns;
  __u32 port;
};
struct hr_listener {
  __s32 listeners;
  __u32 tgid;
};

/* A connection's request in flight, the same record in both program sets:
 * the socket set keeps it in a slot of the requests array (struct hr_slot,
 * below), the syscall set in the inflight hash keyed by struct sock * (no
 * entry = idle). A request starts when its first bytes reach the socket
 * (sock:sk_data_ready, >= 6.6) or else when the server reads them.
 *
 * Waiting on the client is not server time (docs/endpoints.md, "Slow
 * clients"): when a piece of a request arrives after the server had read
 * every byte that arrived before it, the time since the previous piece came
 * was the client's and goes into paused_ns; the request is then HR_F_PIECES
 * (as is an HTTP/1 request known to be unfinished, http1.bpf.h), and while
 * the server has read all of it (HR_F_DRAINED) it waits for the client and
 * does not age, unless all of it has arrived (HR_F_WHOLE). */
struct hr_inflight {
  __u64 start_ns;   /* bpf_ktime_get_ns() when the request came in */
  __u64 paused_ns;  /* time the server spent waiting for the client's next piece */
  __u64 last_ns;    /* when its latest piece arrived */
  __u32 seq_start;  /* the socket's copied_seq at arrival: unread while it has not moved */
  __u32 seq_last;   /* the socket's rcv_nxt after the latest piece */
  __u32 ep;         /* endpoint index, HR_NO_ENDPOINT or HR_PENDING (port known, endpoint not yet) */
  __u16 port;       /* local port */
  __u16 flags;      /* HR_F_* */
  __u32 netns;      /* the server socket's network namespace: which instance */
  /* HTTP/1 (http1.bpf.h): is all of the request here? */
  __u32 tail;       /* its last 4 bytes so far, the latest lowest: a header block's end split between pieces */
  __u32 need_seq;   /* HR_F_HEAD: the receive sequence number where its body ends */
  __u32 clen;       /* HR_F_CLEN: the Content-Length its header block announced */
  __u32 pad;
};
#define HR_F_WAITING 1 /* arrived, the server has read none of it yet */
#define HR_F_PIECES 2  /* it came in pieces or is known unfinished: the server waits in between */
#define HR_F_DRAINED 4 /* the server has read every byte that arrived */
#define HR_F_WHOLE 8   /* HTTP/1: all of it arrived (its header block and body): server time from here on */
#define HR_F_OTHER 16  /* not looked at as HTTP/1 (not a request line, or unreadable): the pauses alone */
#define HR_F_HEAD 32   /* HTTP/1: its header block arrived, its body has not yet (need_seq) */
#define HR_F_CLEN 64   /* HTTP/1: a Content-Length was seen (clen) */
#define HR_F_OPEN 128  /* HTTP/1: known unfinished (until HR_F_WHOLE): the server can do nothing but wait */

/* Does a request start like an HTTP/1 request line: a method of 3 to 8
 * upper-case letters, a space, and a target that starts with '/' (origin
 * form), '*' or 'h' (absolute form)? So that a line protocol's command ("SET
 * k v", "PING") is not taken for one. b: the request's first 10 bytes, zero
 * past its end. */
static inline int hr_http1_request_line(const __u8 *b) {
  for (int i = 0; i < 9; i++) {
    const __u8 c = b[i];
    if (c == ' ') {
      const __u8 t = b[i + 1];
      return i >= 3 && (t == '/' || t == '*' || t == 'h');
    }
    if (c < 'A' || c > 'Z') return 0;
  }
  return 0;
}

/* The socket set's requests in flight: an array of slots, memory-mapped by
 * user space, which reads them each interval without a system call per
 * request. A connection's request takes a free slot among a few from a
 * position given by the connection's hash, and frees it when it ends. */
struct hr_slot {
  __u64 sk;   /* struct sock * of the connection, 0: free */
  __u32 hash; /* the connection's hash (skc_hash): a slot whose socket is gone is freed */
  __u16 seen; /* HR_F_WAITING, HR_F_DRAINED: how the socket was at the last refresh */
  __u16 pad;
  struct hr_inflight r;
};

/* HTTP/2 (docs/endpoints.md, "HTTP/2 and gRPC"): per connection, where each
 * direction's frames stand and up to HR_H2_SLOTS streams in flight. A stream
 * goes in the slot its id gives, (id >> 1) % HR_H2_SLOTS: client streams have
 * odd ids counting up by 2, so the streams in flight at once take
 * consecutive slots; one whose slot is taken is not counted (dropped). */
#define HR_H2_SLOTS 128          /* streams in flight measured per connection */
#define HR_MAX_H2_CONNS 4096     /* HTTP/2 connections known (allocated on demand) */
#define HR_H2_BODY 0x80000000u   /* in hr_h2_stream.sid: the client has not ended its request yet */
#define HR_H2_RING 256           /* dynamic-table entries remembered by insertion number */

struct hr_h2_stream {
  __u64 start_ns;  /* its HEADERS frame arrived; 0: free */
  __u64 last_ns;   /* its latest frame from the client arrived */
  __u32 sid;       /* stream id, | HR_H2_BODY while the request goes on */
  __u32 paused_us; /* time spent waiting for more of the request from the client */
};

/* One direction's frame parser: bytes of the current frame still to come
 * (skip), or a frame header split between two system calls (have bytes of it
 * in hdr). Unsynced: not at a known frame boundary (a connection older than
 * the probe, or bytes that are not HTTP/2); a system call that starts with
 * the preface or a plausible frame header syncs it again. */
struct hr_h2_dir {
  __u32 skip;
  __u8 have;
  __u8 synced;
  __u8 pad[2];
  __u8 hdr[24]; /* a frame header: 9 bytes used */
};

#define HR_H2_HPACK_LOST 1 /* a header block the probe could not walk: dynamic indexes are unknown */
struct hr_h2_conn {
  struct hr_h2_dir in;  /* client to server */
  struct hr_h2_dir out; /* server to client */
  __u32 ep;             /* the port's endpoint */
  __u16 port;
  __u16 flags;          /* HR_H2_HPACK_LOST */
  /* The server's HPACK encoder: entries it added to its dynamic table, and
   * for the latest HR_H2_RING, by insertion number: the entry's name is
   * grpc-status, the entry means an error (grpc-status other than 0,
   * :status 5xx). An indexed field refers to an entry by how recent it is, so
   * counting insertions is enough; no entry can live longer than the latest
   * HR_H2_RING while the table is at most 8 KiB (32 bytes per entry at least). */
  __u32 inserts;
  __u32 netns;          /* the socket's network namespace: which instance */
  /* Bytes from the client the server has not read yet: when the oldest and
   * the latest of them arrived (sock:sk_data_ready), 0: none. */
  __u64 unread_since;
  __u64 unread_last;
  __u64 grpc_status_name[HR_H2_RING / 64];
  __u64 error_entry[HR_H2_RING / 64];
  struct hr_h2_stream s[HR_H2_SLOTS];
};

/* h2_stats per-CPU array, one entry: how the HTTP/2 parsers fared, since load. */
struct hr_h2_stats {
  __u64 frames;         /* frame headers walked, both directions */
  __u64 split_headers;  /* frame headers split between two system calls (handled) */
  __u64 desyncs;        /* walks that lost the frame boundaries (bad bytes, the step budget) */
  __u64 resyncs;        /* connections synced at a system call's start */
  __u64 dropped;        /* streams not measured: their slot taken, or no connection entry free */
  __u64 hpack_lost;     /* header blocks the probe could not walk whole (too long, CONTINUATION, split) */
};

/* A request's server time at now: its age less the client's pauses. One
 * known unfinished (HTTP/1: HR_F_OPEN), read or not, or one that came in
 * pieces and whose bytes the server has all read, is waiting for the
 * client's next piece: its time stopped at the latest piece's arrival, unless
 * all of it has arrived (HR_F_WHOLE: then the server is working on it). A
 * response ends a request at now whatever the flags (the server was working
 * on it, not waiting). */
static inline __u64 hr_server_time(const struct hr_inflight *r, __u64 now) {
  const __u16 f = r->flags;
  const int waiting = !(f & HR_F_WHOLE) &&
                      ((f & HR_F_OPEN) || (f & (HR_F_PIECES | HR_F_DRAINED)) == (HR_F_PIECES | HR_F_DRAINED));
  const __u64 end = waiting ? r->last_ns : now;
  const __u64 spent = r->start_ns + r->paused_ns;
  return end > spent ? end - spent : 0;
}

#endif
