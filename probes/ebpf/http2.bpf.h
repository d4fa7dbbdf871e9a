// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* HTTP/2 streams for the syscall program set (endpoint.bpf.c includes this
 * after its shared helpers). On a port whose endpoint speaks HTTP/2 a
 * connection carries many requests at once, one per stream:
 *
 *   client HEADERS, new odd stream id   a request starts (at the arrival of
 *                                       the bytes that carry it)
 *   client DATA / HEADERS, END_STREAM   the request is whole; until then the
 *                                       time between its pieces is the client's
 *   server HEADERS or DATA              the first answer ends it; a HEADERS
 *                                       block carrying grpc-status other than 0
 *                                       or :status 5xx counts an error (also in
 *                                       trailers, after the end)
 *   RST_STREAM (either side), close     aborts it
 *
 * The frames are walked in the user buffers of each read and write (all
 * iovecs), by one bounded bpf_loop of steps: skip a payload, copy a header
 * block, read a frame header. A frame header split between two system calls
 * is kept and finished by the next. The server's header blocks are walked
 * field by field without decoding HPACK's strings: a literal's name and value
 * are compared with "grpc-status", "0" and "5.." raw and Huffman-coded, and
 * the dynamic table is followed by counting insertions (struct hr_h2_conn). */

#define H2_STEPS 2048       /* steps per system call: skip, copy or header, ~3 per frame */
#define H2_FIELDS 48        /* header fields walked per block */
#define H2_BLOCK 512        /* header block bytes looked at (a longer one: hpack lost) */
#define H2_WINDOW 256       /* bytes read from a buffer at once: frame headers and small blocks in it need no other read */

#include "h2_frame.bpf.h" /* frame types, flags, h2_plausible */

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, HR_MAX_H2_CONNS);
  __type(key, __u64);
  __type(value, struct hr_h2_conn);
} h2conns SEC(".maps");

/* A zeroed connection to copy from (a value this size cannot be on the stack). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct hr_h2_conn);
} h2_zero SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct hr_h2_stats);
} h2_stats SEC(".maps");

/* One system call's walk, per CPU. Its numbers live here, in map memory,
 * not on the stack: the verifier then keeps no exact range for them from one
 * step of the loop to the next, and the steps' states converge. */
struct h2_state {
  __u64 iov;      /* the next iovec to load (user pointer), 0: none */
  __u64 base;     /* where the current segment's unwalked bytes start */
  __u64 now;
  __u64 arrival;  /* when the oldest bytes read came in (in), or now (out) */
  __u32 iov_left; /* iovecs not loaded yet */
  __u32 seg;      /* bytes left in the current segment */
  __u32 left;     /* bytes of the system call not walked yet */
  __u32 out;      /* 1: the server's write */
  /* a header block being copied: its frame, the bytes to copy, how many are */
  __u32 collecting;
  __u32 want;
  __u32 pos;
  __u32 frame_len;
  __u32 frame_sid;
  __u32 frame_type;
  __u32 frame_flags;
  /* the window: user bytes [win, win + win_n) copied at the scratch's start */
  __u64 win;
  __u32 win_n;
  __u32 pad1;
  /* walking the copied block: position, end, what it found */
  __u32 bp;
  __u32 bend;
  __u32 berror;
  __u32 bbroken;
  __u32 pad;
};

/* ... and the header block copied out of the user buffers: twice the block,
 * so that a masked position plus a bounded length stays inside. */
struct h2_scratch {
  struct h2_state v;
  __u8 b[2 * H2_BLOCK];
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct h2_scratch);
} h2_block SEC(".maps");

/* The walk's pointers (on the stack, where pointers may be kept). */
struct h2_walk {
  struct hr_h2_conn *c;
  struct hr_h2_dir *d;
  struct hr_h2_stats *st; /* may be 0 */
  struct h2_scratch *sc;
  struct h2_state *v;     /* &sc->v */
};

#define STAT(w, field) do { if ((w)->st) (w)->st->field++; } while (0)

static __always_inline struct hr_h2_stream *h2_slot(struct hr_h2_conn *c, __u32 sid) {
  return &c->s[(sid >> 1) & (HR_H2_SLOTS - 1)];
}

static __always_inline __u64 h2_server_time(const struct hr_h2_stream *s, __u64 now) {
  __u64 end = (s->sid & HR_H2_BODY) ? s->last_ns : now;
  __u64 spent = s->start_ns + (__u64)s->paused_us * 1000;
  return end > spent ? end - spent : 0;
}

static __always_inline void h2_free(struct hr_h2_stream *s) {
  s->sid = 0;
  s->start_ns = 0;
}

static __always_inline void count_error(__u32 ep, __u32 netns) {
  struct hr_inst *v = instance_of(ep, netns);
  if (v) v->stats.errors++;
}

/* The next segment of the system call's bytes: the next iovec. */
static __always_inline int h2_next_segment(struct h2_walk *w) {
  while (w->v->iov_left) { /* skips empty iovecs; bounded by the caller's steps */
    struct iovec v = {};
    if (bpf_probe_read_user(&v, sizeof v, (void *)w->v->iov)) return 0;
    w->v->iov += sizeof v;
    w->v->iov_left--;
    if (!v.iov_len) return 1; /* an empty one costs a step */
    w->v->base = (__u64)v.iov_base;
    w->v->seg = v.iov_len < w->v->left ? (__u32)v.iov_len : w->v->left;
    return 1;
  }
  return 0;
}

static __always_inline void h2_advance(struct h2_walk *w, __u32 n) {
  w->v->base += n;
  w->v->seg -= n;
  w->v->left -= n;
}

/* ---- HPACK: one header block, in the scratch buffer [p, end). Straight-line
 * code per field (the verifier walks every path of a loop's body): bytes are
 * read at masked positions, so reading past the block's end reads scratch,
 * and the position is checked against the end once per field. */


#define BLK(s, p) ((__u32)(s)->b[(p) & (H2_BLOCK - 1)])

/* An HPACK integer with a prefix of `mask` bits at p (RFC 7541, 5.1); up to
 * two continuation bytes (values up to 2^14 + mask), else ~0u. Returns
 * the position after it. */
static __always_inline __u32 hpack_int(const struct h2_scratch *s, __u32 p, __u32 mask, __u32 *v) {
  __u32 x = BLK(s, p) & mask;
  p++;
  if (x == mask) {
    __u32 c1 = BLK(s, p);
    __u32 c2 = BLK(s, p + 1);
    p++;
    x += c1 & 0x7f;
    if (c1 & 0x80) {
      p++;
      x = (c2 & 0x80) ? ~0u : x + ((c2 & 0x7f) << 7);
    }
  }
  *v = x;
  return p;
}

/* 8 bytes of the scratch at p, little-endian. */
static __always_inline __u64 blk_word(const struct h2_scratch *s, __u32 p) {
  __u64 w;
  __builtin_memcpy(&w, &s->b[p & (H2_BLOCK - 1)], sizeof w);
  return w;
}

/* "grpc-status": raw, as two overlapping words (bytes 0-7, 3-10), and
 * Huffman-coded (RFC 7541 appendix B: 9a ca c8 b2 12 34 da 8f). */
#define GRPC_STATUS_RAW0 0x6174732d63707267ull /* "grpc-sta" */
#define GRPC_STATUS_RAW3 0x7375746174732d63ull /* "c-status" */
#define GRPC_STATUS_HUFF 0x8fda3412b2c8ca9aull

static __always_inline void ring_set(__u64 *ring, __u32 k, __u64 on) {
  __u64 bit = 1ull << (k & 63);
  __u32 w = (k >> 6) & (HR_H2_RING / 64 - 1);
  ring[w] = (ring[w] & ~bit) | (on ? bit : 0);
}

static __always_inline __u32 ring_get(const __u64 *ring, __u32 k) {
  return (ring[(k >> 6) & (HR_H2_RING / 64 - 1)] >> (k & 63)) & 1;
}

/* Whether index idx (>= 62) names a dynamic entry whose ring bit is set. */
static __always_inline __u32 blk_dynamic(const struct hr_h2_conn *c, const __u64 *ring, __u32 idx) {
  __u32 back = idx - 62;
  if (idx < 62 || (c->flags & HR_H2_HPACK_LOST) || back >= c->inserts || back >= HR_H2_RING) return 0;
  return ring_get(ring, c->inserts - 1 - back);
}

static long blk_field(__u32 i, void *ctx) {
  struct h2_walk *w = ctx;
  struct h2_state *b = w->v;
  const struct h2_scratch *s = w->sc;
  struct hr_h2_conn *c = w->c;
  __u32 p = b->bp;
  if (p >= b->bend || b->bbroken) return 1;
  __u32 first = BLK(s, p);
  __u32 idx;
  if (first & 0x80) { /* indexed field: static :status 500, or an entry that meant an error */
    b->bp = hpack_int(s, p, 0x7f, &idx);
    if (idx == 14 || blk_dynamic(c, c->error_entry, idx)) b->berror = 1;
    return 0;
  }
  if ((first & 0xe0) == 0x20) { /* dynamic table size update: evictions only */
    b->bp = hpack_int(s, p, 0x1f, &idx);
    return 0;
  }
  __u32 insert = first & 0x40;
  p = hpack_int(s, p, insert ? 0x3f : 0x0f, &idx);
  __u32 grpc = 0, status = idx >= 8 && idx <= 14; /* static :status entries */
  if (idx == 0) { /* the name as a literal */
    __u32 huff = BLK(s, p) & 0x80, len;
    p = hpack_int(s, p, 0x7f, &len);
    if (huff) grpc = len == 8 && blk_word(s, p) == GRPC_STATUS_HUFF;
    else grpc = len == 11 && blk_word(s, p) == GRPC_STATUS_RAW0 && blk_word(s, p + 3) == GRPC_STATUS_RAW3;
    p += len & 0xffff;
  } else {
    grpc = blk_dynamic(c, c->grpc_status_name, idx);
  }
  __u32 vhuff = BLK(s, p) & 0x80, vlen;
  p = hpack_int(s, p, 0x7f, &vlen);
  __u32 v0 = BLK(s, p);
  p += vlen & 0xffff;
  if (p > b->bend || idx == ~0u || vlen == ~0u) {
    b->bbroken = 1;
    return 1;
  }
  b->bp = p;
  /* grpc-status other than "0" (Huffman "0" is the byte 0x07); :status 5xx
   * (a Huffman first digit 5 is the 6 bits 011011) */
  __u32 zero = vhuff ? 0x07 : '0';
  __u32 err = (grpc && vlen && !(vlen == 1 && v0 == zero)) ||
              (status && vlen && (vhuff ? (v0 >> 2) == 0x1b : v0 == '5'));
  if (err) b->berror = 1;
  if (insert) {
    __u32 k = c->inserts++;
    ring_set(c->grpc_status_name, k, grpc);
    ring_set(c->error_entry, k, err);
  }
  return 0;
}

/* Walks the block copied for the frame w was collecting: 1 when it carries
 * an error. A block the walk cannot follow loses the dynamic table. */
static __always_inline int h2_block_error(struct h2_walk *w, __u32 at, __u32 copied, int whole) {
  __u32 p = 0, end = copied;
  if (w->v->frame_flags & H2_F_PADDED) {
    __u32 pad = BLK(w->sc, at);
    p = 1;
    end = w->v->frame_len > pad ? w->v->frame_len - pad : 0;
    if (end > copied) end = copied;
  }
  p += at;
  end += at;
  if (w->v->frame_type == H2_PUSH_PROMISE) p += 4;
  else if (w->v->frame_flags & H2_F_PRIORITY) p += 5;
  struct h2_state *v = w->v;
  v->bp = p;
  v->bend = end;
  v->berror = 0;
  v->bbroken = p > end;
  bpf_loop(H2_FIELDS, blk_field, w, 0);
  if (!whole || v->bbroken || v->bp < v->bend || !(v->frame_flags & H2_F_END_HEADERS)) {
    if (!(w->c->flags & HR_H2_HPACK_LOST)) STAT(w, hpack_lost);
    w->c->flags |= HR_H2_HPACK_LOST;
  }
  return v->berror;
}

/* ---- frames */

static __always_inline void h2_abort(struct hr_h2_conn *c, struct hr_h2_stream *s, __u64 now) {
  __u64 t = h2_server_time(s, now);
  h2_free(s);
  if (c->ep < HR_MAX_ENDPOINTS) count_end(c->ep, c->netns, t, 0, 0);
}

/* A client's frame, its header read (the payload is skipped). */
static __always_inline void h2_client_frame(struct h2_walk *w, __u8 type, __u8 flags, __u32 sid) {
  if (!(sid & 1)) return; /* streams the client opens have odd ids */
  /* A read that takes a backlog (a server stopped or busy) times every
   * request in it from the oldest bytes' arrival: late rather than early. */
  const __u64 arrival = w->v->arrival;
  struct hr_h2_stream *s = h2_slot(w->c, sid);
  __u32 held = s->sid & ~HR_H2_BODY;
  if (type == H2_HEADERS) {
    if (held == sid) { /* trailers: the request is whole */
      if ((flags & H2_F_END_STREAM) && (s->sid & HR_H2_BODY)) {
        if (arrival > s->last_ns) s->paused_us += (__u32)((arrival - s->last_ns) / 1000);
        s->last_ns = arrival;
        s->sid = sid;
      }
      return;
    }
    if (held) { STAT(w, dropped); return; }
    s->start_ns = arrival;
    s->last_ns = arrival;
    s->paused_us = 0;
    s->sid = sid | ((flags & H2_F_END_STREAM) ? 0 : HR_H2_BODY);
    return;
  }
  if (held != sid) return;
  if (type == H2_DATA) {
    if (s->sid & HR_H2_BODY) { /* more of the request: the gap was the client's */
      if (arrival > s->last_ns) s->paused_us += (__u32)((arrival - s->last_ns) / 1000);
      s->last_ns = arrival;
      if (flags & H2_F_END_STREAM) s->sid = sid;
    }
  } else if (type == H2_RST_STREAM) {
    h2_abort(w->c, s, w->v->now);
  }
}

/* A server's frame. For HEADERS the block has been walked: error. */
static __always_inline void h2_server_frame(struct h2_walk *w, __u8 type, __u32 sid, int error) {
  if (type != H2_HEADERS && type != H2_DATA && type != H2_RST_STREAM) return;
  struct hr_h2_stream *s = h2_slot(w->c, sid);
  __u32 ep = w->c->ep;
  if ((s->sid & ~HR_H2_BODY) != sid || sid == 0) { /* answered before: trailers may still say it failed */
    if (error && ep < HR_MAX_ENDPOINTS) count_error(ep, w->c->netns);
    return;
  }
  if (type == H2_RST_STREAM) {
    h2_abort(w->c, s, w->v->now);
    return;
  }
  __u64 spent = s->start_ns + (__u64)s->paused_us * 1000;
  __u64 latency = w->v->now > spent ? w->v->now - spent : 0;
  h2_free(s);
  if (ep < HR_MAX_ENDPOINTS) count_end(ep, w->c->netns, latency, 1, error);
}

/* A whole frame header in d->hdr. */
static __always_inline void h2_frame_header(struct h2_walk *w) {
  struct hr_h2_dir *d = w->d;
  __u32 len = ((__u32)d->hdr[0] << 16) | ((__u32)d->hdr[1] << 8) | d->hdr[2];
  __u8 type = d->hdr[3];
  __u8 flags = d->hdr[4];
  __u32 sid = (((__u32)d->hdr[5] << 24) | ((__u32)d->hdr[6] << 16) | ((__u32)d->hdr[7] << 8) | d->hdr[8]) & 0x7fffffff;
  STAT(w, frames);
  if (!h2_plausible(len, type, sid, flags)) {
    d->synced = 0;
    STAT(w, desyncs);
    return;
  }
  if (w->v->out && (type == H2_HEADERS || type == H2_PUSH_PROMISE)) {
    if (len == 0) {
      h2_server_frame(w, type, sid, 0);
      return;
    }
    struct h2_state *v = w->v;
    v->frame_len = len;
    v->frame_sid = sid;
    v->frame_type = type;
    v->frame_flags = flags;
    if (v->win_n && v->base >= v->win && v->base + len <= v->win + v->win_n && len <= v->seg) {
      /* the whole block is in the window: walked where it is */
      int err = h2_block_error(w, (__u32)(v->base - v->win), len, 1);
      if (type == H2_HEADERS) h2_server_frame(w, H2_HEADERS, sid, err);
      d->skip = len;
      return;
    }
    v->win_n = 0; /* the copy below overwrites the window */
    w->v->collecting = 1;
    w->v->want = len < H2_BLOCK ? len : H2_BLOCK;
    w->v->pos = 0;
    w->v->frame_len = len;
    w->v->frame_sid = sid;
    w->v->frame_type = type;
    w->v->frame_flags = flags;
    return;
  }
  if (w->v->out) h2_server_frame(w, type, sid, 0);
  else h2_client_frame(w, type, flags, sid);
  d->skip = len;
}

/* The block w was collecting is copied (or the system call ended first). */
static __always_inline void h2_block_done(struct h2_walk *w, int whole) {
  int err = h2_block_error(w, 0, w->v->pos, whole && w->v->frame_len <= H2_BLOCK);
  if (w->v->frame_type == H2_HEADERS) h2_server_frame(w, H2_HEADERS, w->v->frame_sid, err);
  w->v->collecting = 0;
  w->d->skip = w->v->frame_len - w->v->pos; /* what was not copied, here or in the next calls */
}

static long h2_step(__u32 i, void *ctx) {
  struct h2_walk *w = ctx;
  struct hr_h2_dir *d = w->d;
  if (w->v->left == 0 || !d->synced) return 1;
  if (w->v->seg == 0 && !h2_next_segment(w)) {
    d->synced = 0; /* bytes the walk cannot reach */
    STAT(w, desyncs);
    return 1;
  }
  if (w->v->seg == 0) return 0;
  if (w->v->collecting) {
    __u64 n = w->v->want - w->v->pos; /* 64-bit: a bound checked on the register the call gets */
    if (n > w->v->seg) n = w->v->seg;
    barrier_var(n); /* the bound below on n itself, for the verifier */
    if (n > H2_BLOCK) n = H2_BLOCK;
    __u32 at = w->v->pos & (H2_BLOCK - 1);
    if (n && bpf_probe_read_user(&w->sc->b[at], n, (void *)w->v->base)) { d->synced = 0; STAT(w, desyncs); return 1; }
    h2_advance(w, (__u32)n);
    w->v->pos += (__u32)n;
    if (w->v->pos >= w->v->want) h2_block_done(w, 1);
    return 0;
  }
  if (d->skip) {
    __u32 n = d->skip < w->v->seg ? d->skip : w->v->seg;
    h2_advance(w, n);
    d->skip -= n;
    return 0;
  }
  __u32 have = d->have;
  struct h2_state *v = w->v;
  if (have == 0 && v->seg >= 9) {
    /* A whole frame header: from the window, read once for the frames (and
     * the small header blocks) that follow in the same buffer. */
    if (!(v->win_n && v->base >= v->win && v->base + 9 <= v->win + v->win_n)) {
      __u64 n = v->seg < H2_WINDOW ? v->seg : H2_WINDOW;
      barrier_var(n);
      if (n > H2_WINDOW) n = H2_WINDOW;
      if (bpf_probe_read_user(w->sc->b, n, (void *)v->base)) { d->synced = 0; STAT(w, desyncs); return 1; }
      v->win = v->base;
      v->win_n = (__u32)n;
    }
    __u32 off = (__u32)(v->base - v->win);
    for (int k = 0; k < 9; k++) d->hdr[k] = (__u8)BLK(w->sc, off + k);
    h2_advance(w, 9);
    h2_frame_header(w);
    return 0;
  }
  if (have > 8) { d->synced = 0; return 1; }
  __u64 n = 9 - have;
  if (n > w->v->seg) n = w->v->seg;
  barrier_var(n);
  if (n > 9) n = 9;
  if (bpf_probe_read_user(&d->hdr[have], n, (void *)w->v->base)) { d->synced = 0; STAT(w, desyncs); return 1; }
  h2_advance(w, (__u32)n);
  d->have = (__u8)(have + n);
  if (d->have < 9) {
    if (w->v->left == 0) STAT(w, split_headers);
    return 0;
  }
  d->have = 0;
  h2_frame_header(w);
  return 0;
}

/* Whether the walk starts at a frame boundary: the preface (client), or a
 * plausible frame header. Consumes the preface. */
static __always_inline int h2_sync(struct h2_walk *w) {
  char b[H2_PREFACE_LEN] = {};
  __u64 n = w->v->seg < H2_PREFACE_LEN ? w->v->seg : H2_PREFACE_LEN;
  barrier_var(n);
  if (n > H2_PREFACE_LEN) n = H2_PREFACE_LEN;
  if (n < 9 || bpf_probe_read_user(b, n, (void *)w->v->base)) return 0;
  if (!w->v->out && n == H2_PREFACE_LEN && b[0] == 'P' && b[1] == 'R' && b[2] == 'I' && b[3] == ' ' && b[4] == '*' &&
      b[14] == '\r' && b[18] == 'S' && b[19] == 'M' && b[23] == '\n') {
    h2_advance(w, H2_PREFACE_LEN);
    return 1;
  }
  __u32 len = ((__u32)(__u8)b[0] << 16) | ((__u32)(__u8)b[1] << 8) | (__u8)b[2];
  __u32 sid = (((__u32)(__u8)b[5] << 24) | ((__u32)(__u8)b[6] << 16) | ((__u32)(__u8)b[7] << 8) | (__u8)b[8]) &
              0x7fffffff;
  __u8 type = b[3];
  /* stricter than within a walk: the default frame size, the core types */
  if (len > 16384 || type > H2_CONTINUATION || !h2_plausible(len, type, sid, b[4])) return 0;
  STAT(w, resyncs);
  return 1;
}

/* The connection's entry, made on its first sight (a zeroed value copied in:
 * one this size cannot be on the stack). 0 when the table is full. */
static __always_inline struct hr_h2_conn *h2_conn_of(__u64 sk, const struct hr_port *pe, __u32 port,
                                                     struct hr_h2_stats *st) {
  struct hr_h2_conn *conn = bpf_map_lookup_elem(&h2conns, &sk);
  if (conn) return conn;
  __u32 zero = 0;
  struct hr_h2_conn *fresh = bpf_map_lookup_elem(&h2_zero, &zero);
  if (!fresh || bpf_map_update_elem(&h2conns, &sk, fresh, BPF_NOEXIST)) {
    if (st) st->dropped++;
    return 0;
  }
  conn = bpf_map_lookup_elem(&h2conns, &sk);
  if (!conn) return 0;
  conn->ep = pe->generic_ep;
  conn->port = (__u16)port;
  conn->netns = netns_of((const struct sock *)sk, 0);
  __u8 one = 1;
  bpf_map_update_elem(&known, &sk, &one, BPF_NOEXIST);
  return conn;
}

/* Bytes from the client reached a known HTTP/2 connection: the oldest unread
 * ones' arrival is kept in the connection's entry (no entry made or removed
 * per arrival), for the read that takes them and, while the server does not
 * read, for headroomd: a stopped server's connection ages as pending. */
static __always_inline void h2_data_ready(__u64 sk, const struct hr_port *pe, __u32 port) {
  struct hr_h2_conn *conn = bpf_map_lookup_elem(&h2conns, &sk);
  if (!conn) {
    if (!bpf_map_lookup_elem(&known, &sk)) return; /* not a traced server's connection */
    __u32 zero = 0;
    conn = h2_conn_of(sk, pe, port, bpf_map_lookup_elem(&h2_stats, &zero));
    if (!conn) return;
  }
  __u64 now = bpf_ktime_get_ns();
  if (!conn->unread_since) conn->unread_since = now;
  conn->unread_last = now;
}

/* One read or write of ret bytes on an HTTP/2 connection. */
static __always_inline void h2_syscall(struct call *c, const struct hr_port *pe, long ret, const int btf) {
  if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_loop)) return; /* kernel < 5.17 */
  __u64 sk = c->sk;
  __u32 zero = 0;
  struct hr_h2_stats *st = bpf_map_lookup_elem(&h2_stats, &zero);
  struct hr_h2_conn *conn = h2_conn_of(sk, pe, c->port, st);
  if (!conn) return;
  struct h2_scratch *sc = bpf_map_lookup_elem(&h2_block, &zero);
  if (!sc) return;
  struct h2_walk w = {.c = conn, .st = st, .sc = sc, .v = &sc->v};
  __builtin_memset(&sc->v, 0, sizeof sc->v);
  w.v->left = (__u32)ret;
  w.v->out = c->dir == DIR_OUT;
  w.v->now = bpf_ktime_get_ns();
  w.v->arrival = w.v->now;
  w.d = w.v->out ? &conn->out : &conn->in;
  if (!w.v->out && conn->unread_since) {
    /* The bytes came in when sk_data_ready saw them: the oldest unread. */
    if (conn->unread_since < w.v->now) w.v->arrival = conn->unread_since;
    __u32 copied, rcv;
    tcp_seqs(sk, btf, &copied, &rcv);
    /* what is left came in by the latest piece */
    conn->unread_since = copied == rcv ? 0 : conn->unread_last;
  }
  if (c->buf == 0 && c->iov == 0) { /* sendfile: a payload's bytes, or the walk is lost */
    struct hr_h2_dir *d = w.d;
    if (d->synced && !d->have && d->skip >= (__u32)ret) d->skip -= (__u32)ret;
    else d->synced = 0;
    return;
  }
  if (c->iov) {
    w.v->iov = c->iov;
    w.v->iov_left = c->iovcnt;
    if (!h2_next_segment(&w)) return;
  } else {
    w.v->base = c->buf;
    w.v->seg = (__u32)ret;
  }
  if (!w.d->synced) {
    if (!h2_sync(&w)) return;
    w.d->synced = 1;
    w.d->skip = 0;
    w.d->have = 0;
  }
  bpf_loop(H2_STEPS, h2_step, &w, 0);
  if (w.v->collecting) h2_block_done(&w, 0); /* the block goes on in the next write */
  if (w.v->left && w.d->synced) { /* out of steps */
    w.d->synced = 0;
    STAT(&w, desyncs);
  }
}

struct h2_closing {
  struct hr_h2_conn *c;
  __u64 now;
};

static long h2_close_slot(__u32 i, void *ctx) {
  struct h2_closing *x = ctx;
  struct hr_h2_stream *s = &x->c->s[i & (HR_H2_SLOTS - 1)];
  if (s->sid) h2_abort(x->c, s, x->now);
  return 0;
}

/* The connection ends: its streams in flight are aborted. */
static __always_inline void h2_close(__u64 sk) {
  if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_loop)) return;
  struct hr_h2_conn *conn = bpf_map_lookup_elem(&h2conns, &sk);
  if (!conn) return;
  struct h2_closing x = {.c = conn, .now = bpf_ktime_get_ns()};
  bpf_loop(HR_H2_SLOTS, h2_close_slot, &x, 0);
  bpf_map_delete_elem(&h2conns, &sk);
}
