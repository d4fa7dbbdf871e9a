// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* HTTP/1 requests: has all of a request arrived? (docs/endpoints.md, "Slow
 * clients"). Included by endpoint.bpf.c; both program sets call h1_piece()
 * for each piece of a request they see: the syscall set at the server's
 * read (the bytes in its user buffer), the socket set at the arrival (the
 * bytes in the socket's receive queue).
 *
 * A request is whole once its header block has ended (CR LF CR LF, which may
 * be split between pieces: the last 4 bytes that arrived are kept in
 * hr_inflight.tail) and the body its Content-Length announces has arrived
 * (hr_inflight.need_seq: the receive sequence number where it ends). Until
 * then it is HR_F_PIECES: while the server has read all of it, the wait is
 * the client's. Once whole it is HR_F_WHOLE and ages as server time whatever
 * the server has read.
 *
 * The common case, a request whose first piece is all of it and carries no
 * body (GET, HEAD), costs one read of its bytes (under 64, else its first 10
 * and last 4): its request line and its tail. Everything else (a method that
 * may carry a body, a piece that does not end the header block) scans the
 * piece's first HR_SCAN_BYTES bytes for the end of the header block and for
 * Content-Length. A first piece that does not start like an HTTP/1 request
 * line (hr_http1_request_line, endpoint_abi.h) makes the request HR_F_OTHER: not looked at again,
 * the rule of pauses alone. */
#ifndef HEADROOM_PROBES_EBPF_HTTP1_BPF_H
#define HEADROOM_PROBES_EBPF_HTTP1_BPF_H

#define HR_SCAN_BYTES 512
#define H1_HEAD_END 0x0d0a0d0au /* "\r\n\r\n" as the last 4 bytes, first of them highest */

struct h1_scratch {
  char b[HR_SCAN_BYTES * 2]; /* room for any length masked to 2 * HR_SCAN_BYTES - 1 */
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct h1_scratch);
} h1_scratch SEC(".maps");

/* "\ncontent-length:" as the last 16 bytes (lower case), first byte highest */
#define H1_CLEN_HI 0x0a636f6e74656e74ull /* "\ncontent" */
#define H1_CLEN_LO 0x2d6c656e6774683aull /* "-length:" */

static __always_inline long h1_read(void *dst, __u32 n, __u64 src, const int user) {
  return user ? bpf_probe_read_user(dst, n, (const void *)src) : bpf_probe_read_kernel(dst, n, (const void *)src);
}

struct h1_found {
  __s32 head_end; /* offset in the piece just past CR LF CR LF, -1: not in the scanned bytes */
  __s32 clen;     /* Content-Length, -1: not seen */
};

struct h1_walk {
  const struct h1_scratch *s;
  __u32 n;        /* bytes in s */
  __u32 in_value; /* after "content-length:" */
  __u64 hi, lo;   /* the last 16 bytes in lower case, the latest lowest */
  __s64 v;        /* the value so far, -1: no digit yet */
  struct h1_found *out;
};

/* One byte of the scan (a bpf_loop step): 1 stops. Rolling windows rather
 * than a match position, so the verifier meets no state to tell apart. */
static long h1_step(__u32 i, struct h1_walk *k) {
  if (i >= k->n) return 1;
  const char c = k->s->b[i & (HR_SCAN_BYTES - 1)];
  const __u8 lc = (c >= 'A' && c <= 'Z') ? c + 32 : (__u8)c;
  k->hi = (k->hi << 8) | (k->lo >> 56);
  k->lo = (k->lo << 8) | lc;
  if ((__u32)k->lo == H1_HEAD_END) {
    k->out->head_end = (__s32)(i + 1);
    return 1;
  }
  if (k->in_value) { /* optional blanks, digits */
    if (c >= '0' && c <= '9') {
      const __s64 v = (k->v < 0 ? 0 : k->v) * 10 + (c - '0');
      k->v = v > 0x7fffffff ? 0x7fffffff : v;
      return 0;
    }
    if ((c == ' ' || c == '\t') && k->v < 0) return 0;
    if (k->v >= 0) k->out->clen = (__s32)k->v;
    k->in_value = 0;
    return 0;
  }
  if (k->lo == H1_CLEN_LO && k->hi == H1_CLEN_HI) {
    k->in_value = 1;
    k->v = -1;
  }
  return 0;
}

/* Scans the first bytes of a piece, after the 4 bytes that came before it
 * (tail), for the end of the header block and a Content-Length. */
static __noinline int h1_scan(__u64 addr, __u32 n, __u32 tail, int user, struct h1_found *out) {
  __u32 zero = 0;
  struct h1_scratch *s = bpf_map_lookup_elem(&h1_scratch, &zero);
  if (!s) return -1;
  if (n > HR_SCAN_BYTES) n = HR_SCAN_BYTES;
  if (n == 0) return -1;
  __u32 len = n;
  barrier_var(len);
  len &= HR_SCAN_BYTES * 2 - 1; /* for the verifier: the bound on the register it reads with */
  if (user ? bpf_probe_read_user(s->b, len, (const void *)addr) : bpf_probe_read_kernel(s->b, len, (const void *)addr))
    return -1;
  out->head_end = -1;
  out->clen = -1;
  struct h1_walk k = {.s = s, .n = n, .in_value = 0, .hi = 0, .lo = tail, .v = -1, .out = out};
  bpf_loop(HR_SCAN_BYTES, h1_step, &k, 0);
  if (k.in_value && k.v >= 0) out->clen = (__s32)k.v;
  return 0;
}

#define H1_USER 1  /* the bytes are in the server's user buffer, else in kernel memory */
#define H1_FIRST 2 /* the piece starts the request */

/* A piece of request r: n bytes at addr, the last of which is sequence
 * number end_seq - 1 (how: H1_*). A global function: the verifier checks it
 * once, on its own, not on every path of every caller into it. */
__noinline int h1_piece(struct hr_inflight *r, __u64 addr, __u32 n, __u32 end_seq, __u32 how) {
  if (!r) return 0;
  const int user = how & H1_USER, first = how & H1_FIRST;
  if (r->flags & (HR_F_WHOLE | HR_F_OTHER)) return 0;
  if (r->flags & HR_F_HEAD) { /* the body is coming */
    if ((__s32)(end_seq - r->need_seq) >= 0) r->flags |= HR_F_WHOLE;
    return 0;
  }
  if (n == 0) return 0;
  if (!addr) { /* bytes not seen: what comes after them cannot be placed */
    r->flags |= HR_F_OTHER;
    return 0;
  }
  __u8 b[64] = {};
  __u32 tail;
  if (n < 64) {
    __u32 len = n;
    barrier_var(len);
    len &= 63; /* for the verifier: the bound on the register it reads with */
    if (len == 0 || h1_read(b, len, addr, user)) return 0;
    if (n >= 4) {
      const __u32 k = (n - 4) & 63;
      tail = ((__u32)b[k] << 24) | ((__u32)b[(k + 1) & 63] << 16) | ((__u32)b[(k + 2) & 63] << 8) | b[(k + 3) & 63];
    } else {
      tail = r->tail;
      for (__u32 i = 0; i < 3; i++)
        if (i < n) tail = (tail << 8) | b[i];
    }
  } else {
    if (h1_read(b, 10, addr, user) || h1_read(b + 16, 4, addr + n - 4, user)) return 0;
    tail = ((__u32)b[16] << 24) | ((__u32)b[17] << 16) | ((__u32)b[18] << 8) | b[19];
  }
  const __u8 method = b[0];
  if (first && !hr_http1_request_line(b)) { /* another protocol: the pauses alone */
    r->flags |= HR_F_OTHER;
    return 0;
  }
  const __u32 before = r->tail;
  r->tail = tail;
  if (first && tail == H1_HEAD_END && (method == 'G' || method == 'H')) { /* GET, HEAD: no body */
    r->flags |= HR_F_WHOLE;
    return 0;
  }
  struct h1_found f = {};
  if (h1_scan(addr, n, first ? 0 : before, user, &f)) {
    r->flags |= HR_F_OTHER; /* unreadable: the rule of pauses alone */
    return 0;
  }
  if (f.clen >= 0) {
    r->clen = (__u32)f.clen;
    r->flags |= HR_F_CLEN;
  }
  __s32 head_end = f.head_end;
  if (head_end < 0 && tail == H1_HEAD_END) head_end = (__s32)n; /* past the scanned bytes */
  if (head_end < 0) {
    if (n > HR_SCAN_BYTES) r->flags |= HR_F_OTHER; /* a header block longer than is scanned */
    else r->flags |= HR_F_PIECES | HR_F_OPEN;       /* the header block goes on */
    return 0;
  }
  const __u32 need = end_seq - n + (__u32)head_end + ((r->flags & HR_F_CLEN) ? r->clen : 0);
  if ((__s32)(end_seq - need) >= 0) {
    r->flags |= HR_F_WHOLE;
    return 0;
  }
  r->need_seq = need;
  r->flags |= HR_F_HEAD | HR_F_PIECES | HR_F_OPEN;
  return 0;
}

#endif
