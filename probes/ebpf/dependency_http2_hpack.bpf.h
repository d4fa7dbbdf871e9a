// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The server's header blocks of an HTTP/2 dependency (RFC 7541), for
 * dependency_http2.bpf.h, which includes this inside its frame walk: what a
 * HEADERS block says of a call (grpc-status, :status), and the server's
 * dynamic table followed by counting its insertions. A block that runs past
 * the piece being walked (an arrival, a read) is gathered in the
 * connection's state as the walk skips its bytes, and read once whole. */
#ifndef HEADROOM_PROBES_EBPF_DEPENDENCY_HTTP2_HPACK_BPF_H
#define HEADROOM_PROBES_EBPF_DEPENDENCY_HTTP2_HPACK_BPF_H

/* The server's header blocks walked field by field without decoding
 * strings: a literal's name and value are compared with
 * "grpc-status", "0" and "5.." raw and Huffman-coded, and the server's
 * dynamic table is followed by counting its insertions. Bytes are read at
 * masked positions (past the block's end they read scratch), and the
 * position is checked against the end once per field. */

#define DBLK(v, p) ((__u32)(v)->b[(p) & (DH2_BLOCK - 1)])

/* An HPACK integer with a prefix of `mask` bits at p (RFC 7541, 5.1), with
 * up to two continuation bytes, else ~0u; returns the position after it. */
static __always_inline __u32 dh2_int(const struct dh2_v *v, __u32 p, __u32 mask, __u32 *out) {
  __u32 x = DBLK(v, p) & mask;
  p++;
  if (x == mask) {
    const __u32 c1 = DBLK(v, p), c2 = DBLK(v, p + 1);
    p++;
    x += c1 & 0x7f;
    if (c1 & 0x80) {
      p++;
      x = (c2 & 0x80) ? ~0u : x + ((c2 & 0x7f) << 7);
    }
  }
  *out = x;
  return p;
}

static __always_inline __u64 dh2_word(const struct dh2_v *v, __u32 p) {
  __u64 x;
  __builtin_memcpy(&x, &v->b[p & (DH2_BLOCK - 1)], sizeof x);
  return x;
}

/* "grpc-status" raw (bytes 0-7 and 3-10, little-endian words) and
 * Huffman-coded (RFC 7541 appendix B). */
#define DH2_GRPC_STATUS_RAW0 0x6174732d63707267ull
#define DH2_GRPC_STATUS_RAW3 0x7375746174732d63ull
#define DH2_GRPC_STATUS_HUFF 0x8fda3412b2c8ca9aull

static __always_inline void dh2_ring_set(__u64 *ring, __u32 k, __u32 on) {
  const __u64 bit = 1ull << (k & 63);
  const __u32 i = (k >> 6) & (HR_H2_RING / 64 - 1);
  ring[i] = (ring[i] & ~bit) | (on ? bit : 0);
}

/* Whether index idx (>= 62: the dynamic table) names an entry whose bit is
 * set in ring; 0 when the table is not known. */
static __always_inline __u32 dh2_dynamic(const struct hr_dep_h2 *c, const __u64 *ring, __u32 idx) {
  const __u32 back = idx - 62;
  if (idx < 62 || c->hpack_lost || back >= c->inserts || back >= HR_H2_RING) return 0;
  const __u32 k = c->inserts - 1 - back;
  return (ring[(k >> 6) & (HR_H2_RING / 64 - 1)] >> (k & 63)) & 1;
}

static long dh2_field(__u32 i, void *ctx) {
  struct dh2_walk *w = ctx;
  struct dh2_v *v = w->v;
  struct hr_dep_h2 *c = w->c;
  __u32 p = v->bp, idx;
  if (p >= v->bend || v->bbroken) return 1;
  const __u32 first = DBLK(v, p);
  if (first & 0x80) { /* indexed: static ":status 500" (400, 404), or an entry that meant an error */
    v->bp = dh2_int(v, p, 0x7f, &idx);
    if (idx == 14 || dh2_dynamic(c, c->error_entry, idx)) v->berror |= HR_DEP_ERR_5XX;
    else if (idx == 12 || idx == 13 || dh2_dynamic(c, c->client_error_entry, idx)) v->berror |= HR_DEP_ERR_4XX;
    return 0;
  }
  if ((first & 0xe0) == 0x20) { /* a table size update: evictions only */
    v->bp = dh2_int(v, p, 0x1f, &idx);
    return 0;
  }
  const __u32 insert = first & 0x40;
  p = dh2_int(v, p, insert ? 0x3f : 0x0f, &idx);
  __u32 grpc = 0, status = idx >= 8 && idx <= 14; /* the static :status entries */
  if (idx == 0) { /* a literal name */
    const __u32 huff = DBLK(v, p) & 0x80;
    __u32 len;
    p = dh2_int(v, p, 0x7f, &len);
    if (huff) grpc = len == 8 && dh2_word(v, p) == DH2_GRPC_STATUS_HUFF;
    else grpc = len == 11 && dh2_word(v, p) == DH2_GRPC_STATUS_RAW0 && dh2_word(v, p + 3) == DH2_GRPC_STATUS_RAW3;
    p += len & 0xffff;
  } else {
    grpc = dh2_dynamic(c, c->grpc_status_name, idx);
  }
  const __u32 vhuff = DBLK(v, p) & 0x80;
  __u32 vlen;
  p = dh2_int(v, p, 0x7f, &vlen);
  const __u32 v0 = DBLK(v, p);
  p += vlen & 0xffff;
  if (p > v->bend || idx == ~0u || vlen == ~0u) {
    v->bbroken = 1;
    return 1;
  }
  v->bp = p;
  /* grpc-status other than "0" (Huffman "0": the byte 0x07); :status 5xx and
   * 4xx (a Huffman '5' is the 6 bits 011011, a '4' 011010) */
  const __u32 zero = vhuff ? 0x07 : '0';
  const __u32 err = (grpc && vlen && !(vlen == 1 && v0 == zero)) ||
                    (status && vlen && (vhuff ? (v0 >> 2) == 0x1b : v0 == '5'));
  const __u32 err4 = status && vlen && (vhuff ? (v0 >> 2) == 0x1a : v0 == '4');
  if (err) v->berror |= HR_DEP_ERR_5XX;
  if (err4) v->berror |= HR_DEP_ERR_4XX;
  if (insert) {
    const __u32 k = c->inserts++;
    dh2_ring_set(c->grpc_status_name, k, grpc);
    dh2_ring_set(c->error_entry, k, err);
    dh2_ring_set(c->client_error_entry, k, err4);
  }
  return 0;
}

static __always_inline void dh2_hpack_lost(struct dh2_walk *w) {
  if (!w->c->hpack_lost) DH2_STAT(w->st, hpack_lost);
  w->c->hpack_lost = 1;
}

/* Copies the block of len bytes (1 to DH2_BLOCK, in this piece) at the
 * walk's position into v->b: 0, else it cannot be read. A reader's buffers
 * end anywhere: the block may run on into the next iovec. */
static __always_inline long dh2_block_copy(struct dh2_v *v, __u32 len) {
  __u64 n = len < v->seg ? len : v->seg;
  barrier_var(n);
  if (n > DH2_BLOCK) n = DH2_BLOCK;
  if (n && dh2_read(v, v->b, (__u32)n)) return -1;
  if (n >= len) return 0;
  struct iovec io = {};
  if (dh2_peek_iovec(v, &io)) return -1;
  __u64 m = len - n;
  if (m > io.iov_len) return -1;
  barrier_var(m);
  if (m == 0 || m > DH2_BLOCK) return -1;
  void *dst = &v->b[n & (DH2_BLOCK - 1)];
  return v->kernel ? bpf_probe_read_kernel(dst, (__u32)m, io.iov_base)
                   : bpf_probe_read_user(dst, (__u32)m, io.iov_base);
}

/* What a server HEADERS block of len bytes (1 to DH2_BLOCK), copied into
 * v->b, says of the call: HR_DEP_ERR_5XX, HR_DEP_ERR_4XX or 0. */
static __always_inline __u32 dh2_block_fields(struct dh2_walk *w, __u32 len, __u8 flags) {
  struct dh2_v *v = w->v;
  __u32 p = 0, end = len;
  if (flags & H2_F_PADDED) {
    const __u32 pad = DBLK(v, 0);
    p = 1;
    end = len > pad ? len - pad : 0;
  }
  if (flags & H2_F_PRIORITY) p += 5;
  v->bp = p;
  v->bend = end;
  v->berror = 0;
  v->bbroken = p > end;
  bpf_loop(DH2_FIELDS, dh2_field, w, 0);
  if (v->bbroken || v->bp < v->bend) dh2_hpack_lost(w);
  return v->berror;
}

/* The server's HEADERS frame on stream sid, its block of len bytes at the
 * walk's position: the answer (dh2_answer) with what the block says, now
 * when it lies in this piece; one that runs past it (a frame header at the
 * end of a read) is gathered as the walk skips its bytes (dh2_block_more). */
static __always_inline void dh2_headers(struct dh2_walk *w, __u32 sid, __u8 flags, __u32 len) {
  struct dh2_v *v = w->v;
  struct hr_dep_h2 *c = w->c;
  __u32 error = 0;
  if (len && (!(flags & H2_F_END_HEADERS) || len > DH2_BLOCK)) {
    dh2_hpack_lost(w); /* continued, or too long */
  } else if (len > v->left) {
    if (c->blk_len) dh2_hpack_lost(w); /* one that was never whole */
    c->blk_sid = sid;
    c->blk_flags = flags;
    c->blk_len = len;
    c->blk_have = 0;
    return;
  } else if (len) {
    if (dh2_block_copy(v, len)) dh2_hpack_lost(w);
    else error = dh2_block_fields(w, len, flags);
  }
  dh2_answer(w, sid, flags, error);
}

/* n bytes at the walk's position that it is about to skip, of the server's
 * side: the next of a block being gathered, when they are (the bytes left
 * to skip are the block's). Once whole, the block is read. */
static __always_inline void dh2_block_more(struct dh2_walk *w, __u32 n) {
  struct dh2_v *v = w->v;
  struct hr_dep_h2 *c = w->c;
  const __u32 have = c->blk_have, len = c->blk_len;
  __u64 m = n;
  barrier_var(m);
  if (have + w->d->skip != len || m == 0 || m > DH2_BLOCK ||
      dh2_read(v, &c->blk[have & (DH2_BLOCK - 1)], (__u32)m)) {
    c->blk_len = 0;
    dh2_hpack_lost(w);
    return;
  }
  c->blk_have = have + (__u32)m;
  if (c->blk_have < len) return;
  c->blk_len = 0;
  __u64 k = len;
  barrier_var(k);
  if (k == 0 || k > DH2_BLOCK || bpf_probe_read_kernel(v->b, (__u32)k, c->blk)) {
    dh2_hpack_lost(w);
    return;
  }
  dh2_answer(w, c->blk_sid, (__u8)c->blk_flags, dh2_block_fields(w, len, (__u8)c->blk_flags));
}

#endif
