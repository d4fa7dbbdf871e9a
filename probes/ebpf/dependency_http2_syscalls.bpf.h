// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* HTTP/2 dependencies in the syscall set (dependency_syscalls.bpf.h, which
 * includes this): the frame walk of dependency_http2.bpf.h, fed from the
 * system calls' user buffers. For either kind of pointer (a constant
 * `btf`): in the BTF tracepoint programs, and in raw tracepoint programs of
 * their own, as the walk needs bpf_loop (5.17) and the raw set's programs
 * without HTTP/2 keep loading from 5.5.
 *
 *   write-type syscall exit  the client's frames, the ret bytes written (one
 *                            buffer, or the user's iovec array): a new odd
 *                            stream id HEADERS starts a call, at the exit
 *   read-type syscall exit   the server's frames, the ret bytes read: the
 *                            answer's first frame ends the call (the time of
 *                            the read, not of the arrival)
 *   inet_sock_set_state      established by a traced caller: both directions
 *                            start synced; a close or reset aborts the
 *                            streams in flight, and CLOSE frees the state
 *
 * The server's side is walked at the reads only, also where sk_data_ready
 * is attached (6.6+): that program finds no socket storage for these
 * connections and leaves stream slots alone (dep_arrival). Reads end a
 * stream the way its start was taken, at a syscall's exit; and a walk at the
 * arrival could find the answer before the write's exit opened its stream.
 *
 * The sockets come from file descriptors as read-only views (BTF) or
 * plain numbers (raw), which the socket storage does not take: the state is
 * in a hash keyed by the socket's address (as dep_connects). Each walk
 * checks that it follows the previous one on the connection (write_seq,
 * copied_seq): bytes moved another way (sendfile's pages, splice, a process
 * not traced) lose that direction until it resyncs. */
#ifndef HEADROOM_PROBES_EBPF_DEPENDENCY_HTTP2_SYSCALLS_BPF_H
#define HEADROOM_PROBES_EBPF_DEPENDENCY_HTTP2_SYSCALLS_BPF_H

#define HR_DEP_SYS_H2_CONNS 4096 /* HTTP/2 connections followed at once */
#define DSYS_RCV_SHUTDOWN 1

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, HR_DEP_SYS_H2_CONNS);
  __type(key, __u64);
  __type(value, struct hr_dep_h2);
} dep_sys_h2 SEC(".maps");

/* A new connection's state, copied in (it is larger than the stack). Never
 * written. */
struct hr_dep_h2 dep_sys_h2_blank = {};

/* Whether the socket's port has an HTTP/2 dependency (HR_DEP_PORT_H2). */
static __always_inline int dsys_h2_port(const struct sk_head *h) {
  return (dep_port_slot[h->dport] & HR_DEP_PORT_H2) != 0;
}

static __always_inline __u32 dsys_write_seq(const struct sock *sk, const int btf) {
  return btf ? write_seq(sk) : BPF_CORE_READ((const struct tcp_sock *)sk, write_seq);
}

/* Makes the state of sk, a connection to dependency dep when it speaks
 * HTTP/2; synced: established by a traced caller, so both directions start
 * at their beginning (the client's after the preface). */
static __always_inline struct hr_dep_h2 *dsys_h2_new(struct sock *sk, __u32 dep, int synced, const int btf) {
  const struct hr_dep *d = bpf_map_lookup_elem(&deps, &dep);
  if (!d || d->proto != HR_DEP_PROTO_HTTP2) return 0;
  const __u64 key = (__u64)sk;
  if (bpf_map_update_elem(&dep_sys_h2, &key, &dep_sys_h2_blank, BPF_ANY)) return 0;
  struct hr_dep_h2 *c = bpf_map_lookup_elem(&dep_sys_h2, &key);
  if (!c) return 0;
  __u32 copied, rcv;
  tcp_seqs(key, btf, &copied, &rcv);
  c->dep = dep;
  c->snd_end = dsys_write_seq(sk, btf);
  c->rcv_seen = copied;
  if (synced) {
    c->out.synced = 1;
    c->out.skip = H2_PREFACE_LEN;
    c->in.synced = 1;
  }
  return c;
}

/* Walks the ret bytes the syscall moved (set up by dsys_h2_write or
 * dsys_h2_read in w). */
static __always_inline void dsys_h2_piece(struct dh2_walk *w, struct pt_regs *regs, __u32 kind, long ret,
                                          const int btf) {
  struct dh2_v *v = w->v;
  if (ret > (1 << 30)) {
    if (w->d->synced) dh2_lost(w);
    dh2_walk(w);
    return;
  }
  v->left = (__u32)ret;
  const __u64 arg = btf ? PT_REGS_PARM2_SYSCALL(regs) : PT_REGS_PARM2_CORE_SYSCALL(regs);
  if (kind == BUF_PLAIN) {
    v->base = arg;
    v->seg = v->left;
  } else if (kind == BUF_IOV || kind == BUF_MSG) {
    __u64 iov = 0;
    __u32 n = 0;
    io_buffers(kind, arg, btf ? PT_REGS_PARM3_SYSCALL(regs) : PT_REGS_PARM3_CORE_SYSCALL(regs), &iov, &n);
    v->uiov = 1;
    v->iov = iov;
    v->iov_left = n;
    if (!dh2_next_segment(v)) {
      if (w->d->synced) dh2_lost(w); /* bytes the walk cannot reach */
      v->left = 0;
    }
  } else { /* sendfile: a payload's bytes, or the client's side is lost */
    struct hr_h2_dir *d = w->d;
    if (d->synced && !d->have && d->skip >= v->left) d->skip -= v->left;
    else if (d->synced) dh2_lost(w);
    return;
  }
  dh2_walk(w);
}

/* The client wrote ret bytes on sk (kind: where they are). */
static __always_inline void dsys_h2_write(struct sock *sk, const struct sk_head *h, struct hr_dep_h2 *c,
                                          struct pt_regs *regs, __u32 kind, long ret, const int btf) {
  const __u32 ws = dsys_write_seq(sk, btf);
  const __u32 moved = ws - c->snd_end;
  c->snd_end = ws;
  struct dh2_walk w;
  if (!dh2_begin(&w, (__u64)sk, h->hash, c, 1)) return;
  if (moved != (__u32)ret && w.d->synced) dh2_lost(&w); /* sent bytes the walk did not see */
  dsys_h2_piece(&w, regs, kind, ret, btf);
}

/* The client read ret bytes of the server's on sk. */
static __always_inline void dsys_h2_read(struct sock *sk, const struct sk_head *h, struct hr_dep_h2 *c,
                                         struct pt_regs *regs, __u32 kind, long ret, const int btf) {
  __u32 copied, rcv;
  tcp_seqs((__u64)sk, btf, &copied, &rcv);
  __u32 moved = copied - c->rcv_seen;
  c->rcv_seen = copied;
  /* A read that reaches the FIN moves copied_seq past it: a sequence number,
   * no byte. (sk_shutdown was a bitfield before 6.5.) */
  if (moved == (__u32)ret + 1 && !c->fin && (BPF_CORE_READ_BITFIELD_PROBED(sk, sk_shutdown) & DSYS_RCV_SHUTDOWN)) {
    c->fin = 1;
    moved--;
  }
  struct dh2_walk w;
  if (!dh2_begin(&w, (__u64)sk, h->hash, c, 0)) return;
  if (moved != (__u32)ret && w.d->synced) dh2_lost(&w); /* bytes read that the walk did not see */
  dsys_h2_piece(&w, regs, kind, ret, btf);
}

/* A syscall's exit that moved ret bytes on sk, on port pc: returns 1 when
 * the connection is an HTTP/2 dependency's (the HTTP/1 and generic code
 * then leaves it alone). */
static __always_inline int dsys_h2(struct sock *sk, const struct sk_head *h, const struct hr_dep_port *pc,
                                   struct pt_regs *regs, __u32 dir, __u32 kind, long ret, __u32 tgid, const int btf) {
  if (!dsys_h2_port(h)) return 0;
  const __u64 key = (__u64)sk;
  struct hr_dep_h2 *c = bpf_map_lookup_elem(&dep_sys_h2, &key);
  if (!c) { /* a connection older than the probe, or not established by a caller */
    if (dir != DIR_OUT || h->state != TCP_ESTABLISHED) return 0;
    const struct hr_dep *d;
    const __u32 dep = dsys_dep(sk, h, pc, btf, &d);
    if (dep == HR_NO_DEP || d->proto != HR_DEP_PROTO_HTTP2) return 0;
    if (!dsys_caller(d, dep, tgid)) return 1;
    c = dsys_h2_new(sk, dep, 0, btf);
    if (!c) return 1;
  }
  if (dir == DIR_OUT) dsys_h2_write(sk, h, c, regs, kind, ret, btf);
  else dsys_h2_read(sk, h, c, regs, kind, ret, btf);
  return 1;
}

/* The connection's state changes: established from a traced caller's
 * connect (dep_connects), its state is made synced; a close or reset aborts
 * the streams in flight, and CLOSE frees the state. */
static __always_inline void dsys_h2_state(struct sock *sk, const struct sk_head *h, int newstate, const int btf) {
  if (!dsys_h2_port(h)) return;
  const __u64 key = (__u64)sk;
  if (newstate == TCP_ESTABLISHED) {
    const struct hr_dep_sk *st = bpf_map_lookup_elem(&dep_connects, &key);
    if (st && st->dep) dsys_h2_new(sk, st->dep - 1, 1, btf);
    return;
  }
  if (newstate != TCP_CLOSE && newstate != TCP_FIN_WAIT1 && newstate != TCP_LAST_ACK) return;
  struct hr_dep_h2 *c = bpf_map_lookup_elem(&dep_sys_h2, &key);
  if (!c) return;
  const __u32 zero = 0;
  dh2_release_all(c, key, END_RESET, bpf_map_lookup_elem(&dep_h2_stats, &zero));
  if (newstate == TCP_CLOSE) bpf_map_delete_elem(&dep_sys_h2, &key);
}

#endif
