// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* HTTP/2 dependencies (gRPC clients, cleartext), for dependency.bpf.c, which
 * includes this after its helpers and calls the three hooks below before
 * its own; the syscall set feeds the same walk (dh2_begin, dh2_walk) from
 * the syscalls' buffers (dependency_http2_syscalls.bpf.h). A call is a
 * stream:
 *
 *   client HEADERS, new odd stream id     a call starts (tcp_sendmsg_locked,
 *                                         the frames read in the user's iovecs)
 *   server HEADERS or DATA on the stream  the answer's first frame ends it
 *                                         (sk_data_ready, the frames read in
 *                                         the arrived bytes, arrived.bpf.h)
 *   RST_STREAM (either side)              aborts it (a reset)
 *   close or reset of the connection      aborts the streams in flight
 *
 * The preface, SETTINGS, PING, WINDOW_UPDATE and GOAWAY are not calls. Each
 * direction's walk keeps its place between pieces (bytes left of the current
 * frame, a frame header split between pieces). A direction whose boundaries
 * are lost (bytes it cannot read, an implausible frame, too many frames in
 * one piece) stops counting until a piece starts with the preface or a
 * plausible frame header (resynced); losing the server's side gives up the
 * streams in flight uncounted, as their ends may be among the bytes lost. */
#ifndef HEADROOM_PROBES_EBPF_DEPENDENCY_HTTP2_BPF_H
#define HEADROOM_PROBES_EBPF_DEPENDENCY_HTTP2_BPF_H

#include "h2_frame.bpf.h"

#define DH2_STEPS 512 /* steps per piece: a skip or a frame header, ~2 per frame */
#define DH2_BLOCK HR_DEP_H2_BLOCK /* server header block bytes read (a longer one: hpack lost) */
#define DH2_FIELDS 32 /* header fields walked per block */
#define DH2_ANSWERED 0x80000000u /* in hr_dep_h2_stream.sid: answered, its trailers to come */

struct {
  __uint(type, BPF_MAP_TYPE_SK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct hr_dep_h2);
} dep_h2 SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct hr_dep_h2_stats);
} dep_h2_stats SEC(".maps");

/* One walk's numbers, per CPU: entry 0 for writes, 1 for arrivals and
 * reads (an arrival's program may interrupt a write's on the same CPU). In
 * map memory: the verifier keeps no exact range for them between a loop's
 * steps. */
struct dh2_v {
  __u64 base; /* where the current segment's unwalked bytes are */
  __u64 iov;  /* the next iovec */
  __u64 now;
  __u64 sk;
  __u32 seg;      /* bytes left in the current segment */
  __u32 left;     /* bytes of the piece not walked yet */
  __u32 iov_left; /* iovecs not loaded yet */
  __u32 kernel;   /* 1: kernel memory (arrivals), 0: the writer's memory */
  __u32 uiov;     /* 1: the iovecs are in the user's memory (syscalls), 0: the kernel's */
  __u32 discard;  /* bytes at the start walked before (a write sent again) */
  __u32 out;      /* 1: the client's side */
  __u32 hash;     /* the connection's position in calls */
  __u32 drop;     /* the server's side was lost: give up the streams after the walk */
  /* walking a server header block copied into b: position, end, findings */
  __u32 bp;
  __u32 bend;
  __u32 berror;
  __u32 bbroken;
  /* twice the block: a masked position plus a bounded length stays inside */
  __u8 b[2 * DH2_BLOCK];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, struct dh2_v);
} dep_h2_walk SEC(".maps");

struct dh2_walk {
  struct hr_dep_h2 *c;
  struct hr_h2_dir *d;
  struct dh2_v *v;
  struct hr_dep_h2_stats *st; /* may be 0 */
};

#define DH2_STAT(st, field) do { if (st) (st)->field++; } while (0)

static __always_inline __u32 write_seq(const struct sock *sk) {
  const struct tcp_sock *tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
  return tp->write_seq;
}

/* The connection's HTTP/2 state, or 0 (not on an HTTP/2 port, or none). */
static __always_inline struct hr_dep_h2 *dh2_of(struct sock *sk) {
  const __u32 slot = dep_port_slot[sk->__sk_common.skc_dport];
  if (!(slot & HR_DEP_PORT_H2)) return 0; /* HTTP/1 and generic ports: that one load */
  return bpf_sk_storage_get(&dep_h2, sk, 0, 0);
}

/* Makes the state of a connection to dependency dep, when it speaks HTTP/2. */
static __always_inline struct hr_dep_h2 *dh2_new(struct sock *sk, __u32 dep) {
  const struct hr_dep *d = bpf_map_lookup_elem(&deps, &dep);
  if (!d || d->proto != HR_DEP_PROTO_HTTP2) return 0;
  struct hr_dep_h2 *c = bpf_sk_storage_get(&dep_h2, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
  if (!c) return 0;
  c->dep = dep;
  c->snd_end = write_seq(sk);
  c->rcv_seen = rcv_nxt(sk);
  return c;
}

/* ---- streams */

/* Frees stream s's calls slot; counts its end unless how < 0. */
static __always_inline void dh2_finish(struct hr_dep_h2_stream *s, __u64 sk, __u64 now, int how, __u32 answer) {
  __u32 idx = s->slot - 1;
  const __u32 sid = s->sid;
  s->sid = 0;
  s->slot = 0;
  struct hr_dep_call *e = bpf_map_lookup_elem(&calls, &idx);
  if (!e || e->sk != sk || e->rcv_start != sid || !(e->flags & HR_DEP_F_STREAM)) return;
  const __u64 start = e->start_ns;
  const __u32 dep = e->dep;
  e->start_ns = 0;
  barrier();
  e->sk = 0;
  if (how >= 0) count_end(dep, now > start ? now - start : 0, how, answer);
}

static __always_inline void dh2_open(struct dh2_walk *w, __u32 sid) {
  struct dh2_v *v = w->v;
  w->c->last_sid = sid;
  /* While the server's side is not synced its answers cannot be read: such
   * a stream would stay in flight for good; so would one whose answer was
   * walked already (dh2_frame). */
  if (!w->c->in.synced || sid <= w->c->ahead) return;
  struct hr_dep_h2_stream *s = &w->c->s[(sid >> 1) & (HR_DEP_H2_STREAMS - 1)];
  if (s->sid && !(s->sid & DH2_ANSWERED)) {
    DH2_STAT(w->st, dropped);
    return;
  }
  const __u32 h = (v->hash ^ sid) * 0x9E3779B1u;
  for (int i = 0; i < HR_DEP_SLOT_TRIES; i++) {
    __u32 idx = (h + i) & (HR_DEP_SLOTS - 1);
    struct hr_dep_call *e = bpf_map_lookup_elem(&calls, &idx);
    if (!e) break;
    if (e->sk != 0) continue;
    e->sk = v->sk;
    e->dep = w->c->dep;
    e->rcv_start = sid;
    e->flags = HR_DEP_F_STREAM;
    barrier();
    e->start_ns = v->now; /* last: user space skips a slot whose start_ns is 0 */
    s->sid = sid;
    s->slot = idx + 1;
    DH2_STAT(w->st, streams);
    return;
  }
  DH2_STAT(w->st, dropped);
}

static __always_inline void dh2_end(struct dh2_walk *w, __u32 sid, int how) {
  struct hr_dep_h2_stream *s = &w->c->s[(sid >> 1) & (HR_DEP_H2_STREAMS - 1)];
  if (sid && s->sid == sid) dh2_finish(s, w->v->sk, w->v->now, how, 0);
}

/* The server's HEADERS for stream sid: the answer's first frame ends the
 * stream; a block that says it failed is an error, also when it comes after
 * the answer began (trailers). An answered stream keeps its entry, marked,
 * until its trailers (END_STREAM): a stream reset or not measured gets no
 * error from them, as it counted none of the completed calls. */
static __always_inline void dh2_answer(struct dh2_walk *w, __u32 sid, __u8 flags, __u32 answer) {
  struct hr_dep_h2_stream *s = &w->c->s[(sid >> 1) & (HR_DEP_H2_STREAMS - 1)];
  if (!sid) return;
  if (s->sid == sid) {
    dh2_finish(s, w->v->sk, w->v->now, END_ANSWER, answer);
    if (!(flags & H2_F_END_STREAM)) s->sid = sid | DH2_ANSWERED;
    return;
  }
  if (s->sid != (sid | DH2_ANSWERED)) return;
  if (flags & H2_F_END_STREAM) s->sid = 0;
  if (!answer) return;
  __u32 dep = w->c->dep;
  const struct hr_dep *d = bpf_map_lookup_elem(&deps, &dep);
  struct hr_dep_stats *st = bpf_map_lookup_elem(&dep_stats, &dep);
  if (d && st && (answer & d->errors)) st->s.errors++;
}

struct dh2_release {
  struct hr_dep_h2 *c;
  __u64 sk;
  __u64 now;
  int how; /* END_RESET, or -1: uncounted */
  struct hr_dep_h2_stats *st;
};

static long dh2_release_one(__u32 i, void *ctx) {
  struct dh2_release *x = ctx;
  struct hr_dep_h2_stream *s = &x->c->s[i & (HR_DEP_H2_STREAMS - 1)];
  if (s->sid & DH2_ANSWERED) s->sid = 0; /* answered, waiting for its trailers */
  if (!s->sid) return 0;
  if (x->how < 0) DH2_STAT(x->st, lost);
  dh2_finish(s, x->sk, x->now, x->how, 0);
  return 0;
}

/* Ends every stream in flight on the connection. */
static __always_inline void dh2_release_all(struct hr_dep_h2 *c, __u64 sk, int how, struct hr_dep_h2_stats *st) {
  struct dh2_release x = {.c = c, .sk = sk, .now = bpf_ktime_get_ns(), .how = how, .st = st};
  bpf_loop(HR_DEP_H2_STREAMS, dh2_release_one, &x, 0);
}

/* The next iovec of a piece, not taken yet: 0, else none. */
static __always_inline long dh2_peek_iovec(const struct dh2_v *v, struct iovec *io) {
  if (!v->iov_left) return -1;
  return v->uiov ? bpf_probe_read_user(io, sizeof *io, (const void *)v->iov)
                 : bpf_probe_read_kernel(io, sizeof *io, (const void *)v->iov);
}

static __always_inline long dh2_read(const struct dh2_v *v, void *dst, __u32 n) {
  return v->kernel ? bpf_probe_read_kernel(dst, n, (const void *)v->base)
                   : bpf_probe_read_user(dst, n, (const void *)v->base);
}

/* ---- the server's header blocks */
#include "dependency_http2_hpack.bpf.h"

/* ---- the walk */

static __always_inline void dh2_lost(struct dh2_walk *w) {
  w->d->synced = 0;
  DH2_STAT(w->st, desyncs);
  if (w->v->out) return;
  w->v->drop = 1;
  w->c->blk_len = 0; /* a header block being gathered: its bytes are lost too */
}

static __always_inline void dh2_advance(struct dh2_v *v, __u32 n) {
  v->base += n;
  v->seg -= n;
  v->left -= n;
}

/* The next iovec of a piece. */
static __always_inline int dh2_next_segment(struct dh2_v *v) {
  struct iovec io = {};
  if (dh2_peek_iovec(v, &io)) return 0;
  v->iov += sizeof io;
  v->iov_left--;
  v->base = (__u64)io.iov_base;
  v->seg = io.iov_len < v->left ? (__u32)io.iov_len : v->left;
  return 1;
}

/* A whole frame header in d->hdr; its payload is skipped. */
static __always_inline void dh2_frame(struct dh2_walk *w) {
  const __u8 *h = w->d->hdr;
  const __u32 len = ((__u32)h[0] << 16) | ((__u32)h[1] << 8) | h[2];
  const __u8 type = h[3], flags = h[4];
  const __u32 sid = (((__u32)h[5] << 24) | ((__u32)h[6] << 16) | ((__u32)h[7] << 8) | h[8]) & 0x7fffffff;
  DH2_STAT(w->st, frames);
  if (!h2_plausible(len, type, sid, flags)) {
    dh2_lost(w);
    return;
  }
  w->d->skip = len;
  if (w->v->out) {
    /* A HEADERS frame on a stream the client opened before is its trailers. */
    if (type == H2_HEADERS && (sid & 1) && sid > w->c->last_sid) dh2_open(w, sid);
    else if (type == H2_RST_STREAM) dh2_end(w, sid, END_RESET);
    return;
  }
  /* The server on a stream the client's walk has not seen open: the syscall
   * set walks a write at its exit, and another thread may read the answer
   * before that; the stream is not timed (dh2_open). */
  if ((sid & 1) && sid > w->c->last_sid && sid > w->c->ahead) w->c->ahead = sid;
  if (type == H2_HEADERS) {
    dh2_headers(w, sid, flags, len);
  } else if (type == H2_DATA) {
    dh2_end(w, sid, END_ANSWER);
  } else if (type == H2_CONTINUATION) {
    dh2_hpack_lost(w);
  } else if (type == H2_RST_STREAM) {
    dh2_end(w, sid, END_RESET);
  }
}

static long dh2_step(__u32 i, void *ctx) {
  struct dh2_walk *w = ctx;
  struct dh2_v *v = w->v;
  struct hr_h2_dir *d = w->d;
  if (v->left == 0 || !d->synced) return 1;
  if (v->seg == 0) {
    if (!dh2_next_segment(v)) {
      dh2_lost(w); /* bytes the walk cannot reach */
      return 1;
    }
    return 0;
  }
  if (v->discard || d->skip) {
    const __u32 want = v->discard ? v->discard : d->skip;
    const __u32 n = want < v->seg ? want : v->seg;
    if (!v->discard && !v->out && w->c->blk_len) dh2_block_more(w, n);
    dh2_advance(v, n);
    if (v->discard) v->discard -= n;
    else d->skip -= n;
    return 0;
  }
  const __u32 have = d->have;
  if (have > 8) {
    dh2_lost(w);
    return 1;
  }
  __u64 n = 9 - have;
  if (n > v->seg) n = v->seg;
  barrier_var(n); /* the bound below on n itself, for the verifier */
  if (n > 9) n = 9;
  if (n == 0 || dh2_read(v, &d->hdr[have], (__u32)n)) {
    dh2_lost(w);
    return 1;
  }
  dh2_advance(v, (__u32)n);
  d->have = (__u8)(have + n);
  if (d->have < 9) return 0; /* the rest of the header comes with the next piece */
  d->have = 0;
  dh2_frame(w);
  return 0;
}

/* Whether an unsynced direction can start here: the client's preface
 * (skipped), or a plausible frame header of the default maximum size. */
static __always_inline int dh2_sync(struct dh2_walk *w) {
  struct dh2_v *v = w->v;
  char b[H2_PREFACE_LEN] = {};
  __u64 n = v->seg < H2_PREFACE_LEN ? v->seg : H2_PREFACE_LEN;
  barrier_var(n);
  if (n > H2_PREFACE_LEN) n = H2_PREFACE_LEN;
  if (v->discard || n < 9 || dh2_read(v, b, (__u32)n)) return 0;
  __u32 skip = 0;
  if (v->out && n == H2_PREFACE_LEN && b[0] == 'P' && b[1] == 'R' && b[2] == 'I' && b[3] == ' ' && b[4] == '*' &&
      b[18] == 'S' && b[19] == 'M') {
    skip = H2_PREFACE_LEN;
  } else {
    const __u32 len = ((__u32)(__u8)b[0] << 16) | ((__u32)(__u8)b[1] << 8) | (__u8)b[2];
    const __u32 sid =
        (((__u32)(__u8)b[5] << 24) | ((__u32)(__u8)b[6] << 16) | ((__u32)(__u8)b[7] << 8) | (__u8)b[8]) & 0x7fffffff;
    const __u8 type = b[3];
    /* An empty DATA or HEADERS frame is rare, and a gRPC message's own
     * prefix (a zero byte, then its length) reads like one. */
    if (len > 16384 || type > H2_CONTINUATION || !h2_plausible(len, type, sid, b[4]) ||
        (len == 0 && (type == H2_DATA || type == H2_HEADERS)))
      return 0;
  }
  w->d->synced = 1;
  w->d->skip = skip;
  w->d->have = 0;
  DH2_STAT(w->st, resyncs);
  return 1;
}

/* Walks the piece set up in w->v (a server's side lost before it, too, gives
 * up its streams). */
static __always_inline void dh2_walk(struct dh2_walk *w) {
  if (w->d->synced || dh2_sync(w)) {
    bpf_loop(DH2_STEPS, dh2_step, w, 0);
    if (w->v->left && w->d->synced) dh2_lost(w); /* out of steps */
  }
  if (w->v->drop) dh2_release_all(w->c, w->v->sk, -1, w->st);
}

/* Sets up a walk of connection sk (hash: its skc_hash) in direction out. */
static __always_inline struct dh2_v *dh2_begin(struct dh2_walk *w, __u64 sk, __u32 hash, struct hr_dep_h2 *c,
                                               __u32 out) {
  const __u32 zero = 0;
  w->c = c;
  w->d = out ? &c->out : &c->in;
  w->st = bpf_map_lookup_elem(&dep_h2_stats, &zero);
  struct dh2_v *v = bpf_map_lookup_elem(&dep_h2_walk, out ? &zero : &(__u32){1});
  w->v = v;
  if (!v) return 0;
  __builtin_memset(v, 0, __builtin_offsetof(struct dh2_v, b));
  v->sk = sk;
  v->now = bpf_ktime_get_ns();
  v->out = out;
  v->hash = hash;
  return v;
}

/* ---- the hooks dependency.bpf.c calls */

/* The client writes: returns 1 when the connection is an HTTP/2
 * dependency's (the HTTP/1 and generic code then leaves it alone). */
static __always_inline int dep_h2_write(struct sock *sk, const struct msghdr *msg) {
  const __u32 slot = dep_port_slot[sk->__sk_common.skc_dport];
  if (!(slot & HR_DEP_PORT_H2)) return 0;
  struct hr_dep_h2 *c = bpf_sk_storage_get(&dep_h2, sk, 0, 0);
  if (!c) { /* a connection older than the probe, or not decided at its connect */
    if (sk->__sk_common.skc_state != TCP_ESTABLISHED) return 0;
    struct hr_dep_sk *st = decided(sk, &dep_port_cfg[port_index(slot)]);
    if (!st || st->dep == HR_DEP_UNTRACED || st->dep == HR_DEP_UNDECIDED) return 0;
    c = dh2_new(sk, st->dep - 1);
    if (!c) return 0;
  }
  const __u32 ws = write_seq(sk);
  const __u64 count = msg->msg_iter.count;
  if (count == 0 || count > (1u << 30)) return 1;
  const __u32 left = (__u32)count;
  /* The tracepoint fires before each chunk the write queues: the first
   * firing walks all of it, the later ones find it walked. */
  const __s32 behind = (__s32)(c->snd_end - ws);
  if (behind >= (__s32)left) return 1;
  c->snd_end = ws + left;
  struct dh2_walk w;
  struct dh2_v *v = dh2_begin(&w, (__u64)sk, sk->__sk_common.skc_hash, c, 1);
  if (!v) return 1;
  if (behind < 0 && w.d->synced) dh2_lost(&w); /* bytes sent that the walk did not see */
  v->left = left;
  v->discard = behind > 0 ? (__u32)behind : 0;
  const __u8 type = msg->msg_iter.iter_type;
  /* the kernel's own values (CO-RE): the enum's order has changed before */
  if (type == bpf_core_enum_value(enum iter_type, ITER_UBUF)) {
    v->base = (__u64)msg->msg_iter.ubuf + msg->msg_iter.iov_offset;
    v->seg = left;
  } else if (type == bpf_core_enum_value(enum iter_type, ITER_IOVEC)) {
    v->iov = (__u64)msg->msg_iter.__iov;
    v->iov_left = (__u32)msg->msg_iter.nr_segs;
    if (!dh2_next_segment(v)) return 1;
    const __u64 off = msg->msg_iter.iov_offset;
    if (off > v->seg) return 1;
    v->base += off;
    v->seg -= (__u32)off;
  } else { /* pages handed over (splice, sendfile): a payload's bytes, or the walk is lost */
    struct hr_h2_dir *d = w.d;
    if (d->synced && !d->have && d->skip >= left - v->discard) d->skip -= left - v->discard;
    else if (d->synced) dh2_lost(&w);
    return 1;
  }
  dh2_walk(&w);
  return 1;
}

/* Bytes arrived from the server: returns 1 when the connection is an
 * HTTP/2 dependency's. */
static __always_inline int dep_h2_arrival(struct sock *sk) {
  struct hr_dep_h2 *c = dh2_of(sk);
  if (!c) return 0;
  const __u32 rcv = rcv_nxt(sk);
  __u32 n = rcv - c->rcv_seen;
  c->rcv_seen = rcv;
  if (n && !c->fin && (sk->sk_shutdown & 1)) { /* RCV_SHUTDOWN: the FIN's sequence number is no byte */
    c->fin = 1;
    n--;
  }
  if (n == 0) return 1;
  struct dh2_walk w;
  struct dh2_v *v = dh2_begin(&w, (__u64)sk, sk->__sk_common.skc_hash, c, 0);
  if (!v) return 1;
  const __u64 at = n < (1u << 24) ? arrived_bytes(sk, n) : 0;
  if (!at) { /* not readable: a payload's bytes, or the server's side is lost */
    struct hr_h2_dir *d = w.d;
    if (d->synced && !d->have && d->skip >= n) {
      d->skip -= n;
    } else if (d->synced) {
      dh2_lost(&w);
      dh2_release_all(c, v->sk, -1, w.st);
    }
    return 1;
  }
  v->kernel = 1;
  v->base = at;
  v->seg = n;
  v->left = n;
  dh2_walk(&w);
  return 1;
}

/* The connection's state changes: at its establishment (connected by a
 * traced process) both directions start at a frame boundary, the client's
 * after the preface; its close or reset ends the streams in flight. */
static __always_inline void dep_h2_state(struct sock *sk, int newstate) {
  const __u32 slot = dep_port_slot[sk->__sk_common.skc_dport];
  if (!(slot & HR_DEP_PORT_H2)) return;
  if (newstate == TCP_ESTABLISHED) {
    struct hr_dep_sk *st = bpf_sk_storage_get(&conns, sk, 0, 0);
    if (!st || st->dep == HR_DEP_UNTRACED || st->dep == HR_DEP_UNDECIDED) return;
    if (bpf_sk_storage_get(&dep_h2, sk, 0, 0)) return;
    struct hr_dep_h2 *c = dh2_new(sk, st->dep - 1);
    if (!c) return;
    c->out.synced = 1;
    c->out.skip = H2_PREFACE_LEN;
    c->in.synced = 1;
    return;
  }
  if (newstate != TCP_CLOSE && newstate != TCP_FIN_WAIT1 && newstate != TCP_LAST_ACK) return;
  struct hr_dep_h2 *c = bpf_sk_storage_get(&dep_h2, sk, 0, 0);
  if (!c) return;
  const __u32 zero = 0;
  dh2_release_all(c, (__u64)sk, END_RESET, bpf_map_lookup_elem(&dep_h2_stats, &zero));
}

#endif
