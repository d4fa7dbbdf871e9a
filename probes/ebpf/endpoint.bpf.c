// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Per-endpoint request latency and concurrency, measured in the kernel and
 * aggregated there, by two program sets: the syscall set (first, the socket
 * syscalls of server processes; endpoints with a path or HTTP/2 need it) and
 * the socket set (below, socket tracepoints only, kernels 6.11+). Each port
 * is measured by one of them (hr_port.set); both may be attached at once.
 *
 * The syscall set's attach points (no kprobes, no fentry, no tracefs needed):
 *   raw_syscalls sys_exit            read, readv, recvfrom, recvmsg (data in);
 *                                    write, writev, sendto, sendmsg, sendfile
 *                                    (data out); accept, accept4 (new server
 *                                    processes). Only the exit: the call's
 *                                    arguments are still in the task's saved
 *                                    registers there, and what it moved is
 *                                    known, so a call that moved nothing
 *                                    (EAGAIN) costs no more than the lookup
 *                                    of its process
 *   sock inet_sock_set_state         connection end (a request still in flight
 *                                    is aborted); LISTEN (new server processes)
 *   sock sk_data_ready (>= 6.6)      a request's first bytes reach a known
 *                                    server socket: its start, and a request the
 *                                    server does not read (stopped, stuck) is
 *                                    seen waiting
 * Each comes as a BTF tracepoint (tp_btf; these need bpf_rdonly_cast, kernel
 * >= 6.2) and as a raw tracepoint (raw_tp: the tracepoints since 4.17, the
 * object's global data since 5.2 and its memory-mapped array since 5.5); the
 * loader picks the first that loads.
 *
 * Per connection: idle, or one request in flight (struct hr_inflight). Data
 * in on an idle connection starts a request (HTTP/1.x: the method token and
 * path pick the endpoint; otherwise the port's endpoint without a path). The
 * first data out ends it: latency = its server time (hr_server_time: the age
 * less the pauses in which the server waited for more of the request).
 * Everything else on the connection until the next data in after that is part
 * of the same exchange. Nothing is sent to user space per request: counters
 * and a histogram per endpoint, per CPU; user space lists the requests in
 * flight each tick. */
#include "vmlinux.h"

#include "arch.h" /* before bpf_tracing.h: the target architecture, HR_NR_* */

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "endpoint_abi.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define AF_INET 2
#define AF_INET6 10

/* Written by the loader between open and load: a constant for the verifier,
 * no lookup per event. */
const volatile __u32 self_tgid = 0; /* headroomd: never traced */

/* Filled by the loader between load and attach (endpoint_abi.h). The
 * programs are attached only once every map is filled, so no program runs on
 * a half-configured probe. */
__u16 port_slot[65536] = {};
struct hr_port port_cfg[HR_MAX_PORTS] = {};

/* The endpoint configuration of a local port, or 0: one load for every
 * socket event, the only cost other sockets pay. */
static __always_inline const struct hr_port *port_config(__u32 port) {
  __u32 slot = port_slot[port & 0xffff];
  if (!slot) return 0;
  return &port_cfg[(slot - 1) & (HR_MAX_PORTS - 1)];
}

/* The same, for the ports the syscall set measures (sys_port) and for those
 * the socket set measures (sock_port): 0 for the other set's ports. */
static __always_inline const struct hr_port *sys_port(__u32 port) {
  const struct hr_port *pe = port_config(port);
  return pe && pe->set == HR_SET_SYSCALLS ? pe : 0;
}

static __always_inline const struct hr_port *sock_port(__u32 port) {
  const struct hr_port *pe = port_config(port);
  return pe && pe->set == HR_SET_SOCKETS ? pe : 0;
}

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, HR_MAX_ENDPOINTS);
  __type(key, __u32);
  __type(value, struct hr_endpoint);
} endpoints SEC(".maps");

/* Each instance's counters (endpoint_abi.h); max_entries set by the loader. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, HR_MAX_ENDPOINTS);
  __type(key, struct hr_inst_key);
  __type(value, struct hr_inst);
} instances SEC(".maps");

/* A zeroed instance to copy into a new entry (too big for the stack). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct hr_inst);
} inst_zero SEC(".maps");

const volatile __u32 instance_bound = HR_DEFAULT_INSTANCES; /* per endpoint */
__u32 instances_used[HR_MAX_ENDPOINTS] = {};                /* entries of each endpoint in instances */
__u64 instances_lost = 0;                                   /* request ends with no entry to count in */

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, HR_MAX_LISTENERS);
  __type(key, struct hr_listen_key);
  __type(value, struct hr_listener);
} listeners SEC(".maps");

/* The syscall set's requests in flight, by struct sock *. A plain hash: an
 * update costs less than in an LRU one, and an entry only ever leaves with
 * its request (answer or connection end); when full, a new request is not
 * counted rather than an old one forgotten. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, HR_MAX_INFLIGHT);
  __type(key, __u64);
  __type(value, struct hr_inflight);
} inflight SEC(".maps");

/* Server processes: only their socket syscalls are looked at. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, HR_MAX_PROCS);
  __type(key, __u32);
  __type(value, __u8);
} procs SEC(".maps");

struct call {
  __u64 sk;
  __u64 buf;    /* the first buffer */
  __u64 iov;    /* readv/writev/recvmsg/sendmsg: the iovec array (HTTP/2 walks them all) */
  __u32 iovcnt;
  __u32 dir;
  __u32 port;
  __u32 pad;
};

/* Server-side connections of traced processes (accepted or used by them). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, HR_MAX_CONNS);
  __type(key, __u64);
  __type(value, __u8);
} known SEC(".maps");

/* bpf_rdonly_cast, the socket of a file descriptor, where a syscall's bytes
 * are (shared with the dependency probe's syscall programs). */
#include "syscall_io.bpf.h"

static __always_inline const struct tcp_sock *tcp_of(const struct sock *sk) {
  return bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
}

static __always_inline __u32 local_port(const struct sock *sk) { return BPF_CORE_READ(sk, __sk_common.skc_num); }

static __always_inline void mark_process(void) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (tgid == self_tgid) return;
  __u8 one = 1;
  bpf_map_update_elem(&procs, &tgid, &one, BPF_ANY);
}

/* The traced system call that just returned (id, having moved bytes): its
 * connection and buffers into c, from the arguments in the task's saved
 * registers (they are not changed by the call), when it is a server
 * process's call on an endpoint's port. btf: the program is a BTF tracepoint
 * (typed arguments, plain loads). */
static __always_inline int traced_call(struct pt_regs *regs, long id, const int btf, struct call *c) {
  __u32 dir, kind;
  if (!syscall_io(id, &dir, &kind)) return 0;
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (!bpf_map_lookup_elem(&procs, &tgid)) return 0;  /* the one lookup untraced processes pay */
  long fd = btf ? (long)PT_REGS_PARM1_SYSCALL(regs) : (long)PT_REGS_PARM1_CORE_SYSCALL(regs);
  __u64 arg = btf ? PT_REGS_PARM2_SYSCALL(regs) : PT_REGS_PARM2_CORE_SYSCALL(regs);
  if (id == HR_NR_sendfile) { arg = 0; }  /* sendfile(out_fd, in_fd, ...): the first is out_fd */
  struct sk_head h;
  struct sock *sk = btf ? sock_of_fd_btf(fd, &h) : sock_of_fd(fd, &h);
  if (!sk) return 0;
  __u32 port = h.num;
  if (!sys_port(port)) return 0;
  if (!btf && !sock_is_tcp(sk)) return 0; /* (sock_of_fd_btf asked already) */
  c->sk = (__u64)sk;
  c->dir = dir;
  c->port = port;
  c->buf = io_buffers(kind, arg, btf ? PT_REGS_PARM3_SYSCALL(regs) : PT_REGS_PARM3_CORE_SYSCALL(regs), &c->iov,
                      &c->iovcnt);
  return 1;
}

/* Bytes [0, n) of the user buffer into out (zero-padded). */
static __always_inline long peek(char out[HR_PEEK_BYTES], __u64 buf, long ret) {
  if (!buf || ret <= 0) return 0;
  __u32 n = ret > HR_PEEK_BYTES ? HR_PEEK_BYTES : (__u32)ret;
  if (n == 0 || n > HR_PEEK_BYTES) return 0;
  if (bpf_probe_read_user(out, n, (void *)buf)) return 0;
  return n;
}

/* Which endpoint a request on this port belongs to. b holds the first n
 * bytes of the request, read from the user buffer at buf. */
static __always_inline __u32 classify(const struct hr_port *pe, const char *b, long n, __u64 buf) {
  __u32 best = pe->generic_ep;
  if (pe->n_paths == 0) return best;
  /* HTTP/1.x request line: METHOD SP request-target */
  int sp = -1;
  for (int i = 0; i < 8; i++) {
    char c = b[i];
    if (c == ' ') { sp = i; break; }
    if (c < 'A' || c > 'Z') break;
  }
  if (sp < 3) return best;
  /* The request target, word-aligned, zero beyond what was read. */
  __u64 words[HR_PATH_WORDS] = {};
  long avail = n - (sp + 1);
  if (avail <= 0) return best;
  __u32 len = avail > HR_PATH_BYTES ? HR_PATH_BYTES : (__u32)avail;
  if (len == 0 || len > HR_PATH_BYTES) return best;
  if (bpf_probe_read_user(words, len, (void *)(buf + sp + 1))) return best;
  __u32 best_len = 0;
  for (__u32 j = 0; j < HR_MAX_PATHS_PER_PORT; j++) {
    if (j >= pe->n_paths) break;
    __u32 ep = pe->path_eps[j];
    struct hr_endpoint *e = bpf_map_lookup_elem(&endpoints, &ep);
    if (!e) continue;
    if (e->path_len == 0 || e->path_len > len || e->path_len <= best_len) continue;
    __u64 diff = 0;
    for (int w = 0; w < HR_PATH_WORDS; w++) diff |= (words[w] ^ e->path_words[w]) & e->path_mask[w];
    if (diff == 0) { best = ep; best_len = e->path_len; }
  }
  return best;
}

/* The first request end of an instance: its entry, made while the endpoint
 * is under its bound (a check that two CPUs may pass at once: the bound can
 * be exceeded by a few), else the endpoint's overflow entry. */
static __noinline struct hr_inst *new_instance(__u32 ep, __u32 netns) {
  struct hr_inst_key k = {.ep = ep, .netns = netns};
  __u32 i = ep & (HR_MAX_ENDPOINTS - 1);
  if (instances_used[i] >= instance_bound) {
    k.netns = HR_INSTANCE_OVERFLOW;
  } else {
    __u32 zero = 0;
    struct hr_inst *z = bpf_map_lookup_elem(&inst_zero, &zero);
    if (z && bpf_map_update_elem(&instances, &k, z, BPF_NOEXIST) == 0) __sync_fetch_and_add(&instances_used[i], 1);
  }
  struct hr_inst *v = bpf_map_lookup_elem(&instances, &k);
  if (!v && k.netns != HR_INSTANCE_OVERFLOW) { /* the map is full */
    k.netns = HR_INSTANCE_OVERFLOW;
    v = bpf_map_lookup_elem(&instances, &k);
  }
  if (!v) __sync_fetch_and_add(&instances_lost, 1);
  return v;
}

static __always_inline struct hr_inst *instance_of(__u32 ep, __u32 netns) {
  struct hr_inst_key k = {.ep = ep, .netns = netns};
  struct hr_inst *v = bpf_map_lookup_elem(&instances, &k);
  return v ? v : new_instance(ep, netns);
}

static __always_inline void count_end(__u32 ep, __u32 netns, __u64 latency, int completed, int error) {
  struct hr_endpoint *e = bpf_map_lookup_elem(&endpoints, &ep);
  if (!e) return;
  struct hr_inst *v = instance_of(ep, netns);
  if (!v) return;
  struct hr_stats *s = &v->stats;
  if (completed) s->completed++; else s->aborted++;
  if (error) s->errors++;
  s->busy_ns += latency;
  if (latency > e->target_ns) s->over_target++;
  if (latency > e->max_ns) s->over_max++;
  if (completed) {
    __u32 b = hr_hist_bucket(latency);
    barrier_var(b); /* keep the bound check on b itself for the verifier */
    if (b < HR_HIST_BUCKETS) v->hist.counts[b]++;
  }
}

/* The network namespace of a socket: which instance it serves. btf: sk is a
 * typed pointer (plain loads). */
static __always_inline __u32 netns_of(const struct sock *sk, const int btf) {
  if (btf) return sk->__sk_common.skc_net.net->ns.inum;
  return BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
}

/* A socket of an endpoint's port started or stopped listening (the TCP
 * state change, in the listening process's context when it starts). */
static __always_inline void note_listener(const struct sock *sk, __u32 port, int oldstate, int newstate,
                                          const int btf) {
  if (newstate != TCP_LISTEN && !(oldstate == TCP_LISTEN && newstate == TCP_CLOSE)) return;
  struct hr_listen_key k = {.netns = netns_of(sk, btf), .port = port};
  struct hr_listener *l = bpf_map_lookup_elem(&listeners, &k);
  if (newstate == TCP_LISTEN) {
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    if (l) {
      __sync_fetch_and_add(&l->listeners, 1);
      l->tgid = tgid;
      return;
    }
    struct hr_listener fresh = {.listeners = 1, .tgid = tgid};
    if (bpf_map_update_elem(&listeners, &k, &fresh, BPF_NOEXIST) != 0) {
      l = bpf_map_lookup_elem(&listeners, &k);
      if (l) __sync_fetch_and_add(&l->listeners, 1);
    }
  } else if (l && newstate == TCP_CLOSE) {
    /* A listener closed. (A connection's socket starts as a copy of its
     * listener's: LISTEN to SYN_RECV is a new connection, not a listener.) */
    __sync_fetch_and_add(&l->listeners, -1);
  }
}

/* The time from a request's arrival to its answer, less the client's pauses. */
static __always_inline __u64 response_time(const struct hr_inflight *r, __u64 now) {
  __u64 spent = r->start_ns + r->paused_ns;
  return now > spent ? now - spent : 0;
}

/* Another piece of a request in flight arrived (copied: the socket's
 * copied_seq, rcv: its rcv_nxt with the piece). If the server had read every
 * byte before it, or the request was known unfinished, it was waiting for the
 * client since the previous piece. */
static __always_inline void more_of_the_request(struct hr_inflight *r, __u64 now, __u32 copied, __u32 rcv) {
  /* An HTTP/1 request known unfinished was waiting for this piece whether
   * the server had read the previous one or not. */
  if ((__s32)(copied - r->seq_last) >= 0 || (r->flags & (HR_F_OPEN | HR_F_WHOLE)) == HR_F_OPEN) {
    r->paused_ns += now - r->last_ns;
    r->flags |= HR_F_PIECES;
  }
  r->last_ns = now;
  r->seq_last = rcv;
  r->flags &= ~HR_F_DRAINED;
  /* HTTP/1: the body announced has all arrived (http1.bpf.h) */
  if ((r->flags & HR_F_HEAD) && (__s32)(rcv - r->need_seq) >= 0) r->flags |= HR_F_WHOLE;
}

#include "http1.bpf.h"

/* ---- The syscall program set: the request's bytes in the server's user
 * buffers, the connection from the file descriptor. */

/* The bytes a read of request r moved, for http1.bpf.h: those of the first
 * buffer (a read that filled more than one iovec is not looked at). A
 * global function: the verifier checks it on its own. at: the socket's read
 * position after the read (high 32 bits) and the bytes read (low 32); how:
 * H1_FIRST. */
__noinline int h1_sys_read(struct hr_inflight *r, __u64 buf, __u64 iov, __u64 at, __u32 how) {
  const __u32 ret = (__u32)at, copied = (__u32)(at >> 32);
  if (!r || ret == 0 || (r->flags & (HR_F_WHOLE | HR_F_OTHER))) return 0;
  if (iov) { /* readv, recvmsg: the first buffer's length (a plain read returns at most its one) */
    struct iovec v = {};
    if (bpf_probe_read_user(&v, sizeof v, (void *)iov) || (__u64)ret > v.iov_len) {
      r->flags |= HR_F_OTHER;
      return 0;
    }
  }
  h1_piece(r, buf, ret, copied, H1_USER | (how & H1_FIRST));
  return 0;
}

/* After a read of a request in flight: what its bytes say (HTTP/1), and
 * whether the server has read all that came. */
static __always_inline void note_read_of(struct hr_inflight *r, struct call *c, long ret, const int btf, __u32 how) {
  __u32 copied, rcv;
  tcp_seqs(c->sk, btf, &copied, &rcv);
  if (!(r->flags & (HR_F_WHOLE | HR_F_OTHER)) && ret > 0 && ret < 0x7fffffff)
    h1_sys_read(r, c->buf, c->iov, ((__u64)copied << 32) | (__u32)ret, how);
  r->flags &= ~HR_F_WAITING;
  if (copied == rcv) r->flags |= HR_F_DRAINED;
  else r->flags &= ~HR_F_DRAINED;
}

static __always_inline void on_data_in(struct call *c, long ret, const int btf) {
  __u64 sk = c->sk;
  struct hr_inflight *cur = bpf_map_lookup_elem(&inflight, &sk);
  if (cur && cur->ep != HR_PENDING) { /* more of the same request */
    note_read_of(cur, c, ret, btf, 0);
    return;
  }
  const struct hr_port *pe = sys_port(c->port);
  if (!pe) return;
  __u32 ep = pe->generic_ep;
  if (pe->n_paths) { /* the request line picks among the port's paths */
    char b[HR_PEEK_BYTES] = {};
    long n = peek(b, c->buf, ret);
    ep = classify(pe, b, n, c->buf);
  }
  if (cur) { /* it arrived before: now its endpoint is known */
    cur->ep = ep;
    note_read_of(cur, c, ret, btf, H1_FIRST);
    return;
  }
  /* No arrival seen (a kernel without sock:sk_data_ready, or data that came
   * before the programs were attached): a request from now. */
  __u8 one = 1;
  bpf_map_update_elem(&known, &sk, &one, BPF_NOEXIST);
  __u64 now = bpf_ktime_get_ns();
  __u32 copied, rcv;
  tcp_seqs(sk, btf, &copied, &rcv);
  struct hr_inflight r = {.start_ns = now, .last_ns = now, .seq_last = rcv, .ep = ep, .port = (__u16)c->port,
                          .netns = netns_of((const struct sock *)sk, 0)};
  note_read_of(&r, c, ret, btf, H1_FIRST);
  bpf_map_update_elem(&inflight, &sk, &r, BPF_ANY);
}

static __always_inline void on_data_out(struct call *c, long ret) {
  __u64 sk = c->sk;
  struct hr_inflight *r = bpf_map_lookup_elem(&inflight, &sk);
  if (!r) return; /* the rest of a response, or the server speaking first */
  __u64 latency = response_time(r, bpf_ktime_get_ns());
  __u32 ep = r->ep;
  if (ep == HR_PENDING) {
    /* Answered without a read this program saw (splice(2)), or the next
     * request arrived before the last write of an answer. Either way the
     * entry ends here, so it cannot stay "waiting" for ever: it counts for the
     * port's endpoint without a path, if there is one. */
    const struct hr_port *pe = sys_port(r->port);
    ep = pe ? pe->generic_ep : HR_NO_ENDPOINT;
  }
  const __u32 netns = r->netns;
  bpf_map_delete_elem(&inflight, &sk);
  if (ep >= HR_MAX_ENDPOINTS) return;
  count_end(ep, netns, latency, 1, ret >= 12 && is_server_error(c->buf));
}

#include "http2.bpf.h"

static __always_inline void on_exit(struct pt_regs *regs, long ret, const int btf) {
  long id = btf ? HR_SYSCALL_NR(regs) : HR_SYSCALL_NR_CORE(regs);
  switch (id) {
    case HR_NR_accept: case HR_NR_accept4: {
      if (ret < 0) return;
      struct sk_head h;
      struct sock *sk = sock_of_fd(ret, &h);
      if (!sk) return;
      if (sys_port(h.num) && sock_is_tcp(sk)) {
        mark_process();
        __u64 key = (__u64)sk;
        __u8 one = 1;
        bpf_map_update_elem(&known, &key, &one, BPF_ANY);
      }
      return;
    }
    default:
      break;
  }
  if (ret <= 0) return;
  struct call c = {};
  if (!traced_call(regs, id, btf, &c)) return;
  const struct hr_port *pe = sys_port(c.port);
  if (pe && pe->proto == HR_PROTO_HTTP2) {
    h2_syscall(&c, pe, ret, btf);
    return;
  }
  if (c.dir == DIR_IN) on_data_in(&c, ret, btf);
  else on_data_out(&c, ret);
}

static __always_inline void on_state(const struct sock *sk, int oldstate, int newstate) {
  if (newstate == TCP_LISTEN || (oldstate == TCP_LISTEN && newstate == TCP_CLOSE)) {
    __u32 port = local_port(sk);
    if (!sys_port(port)) return;
    if (newstate == TCP_LISTEN) mark_process();
    note_listener(sk, port, oldstate, newstate, 0);
    return;
  }
  if (newstate != TCP_CLOSE && newstate != TCP_FIN_WAIT1 && newstate != TCP_LAST_ACK) return;
  const struct hr_port *pe = sys_port(local_port(sk));
  if (!pe) return; /* only an endpoint's sockets are in the maps */
  __u64 key = (__u64)sk;
  if (newstate == TCP_CLOSE) bpf_map_delete_elem(&known, &key);
  if (pe->proto == HR_PROTO_HTTP2) h2_close(key);
  struct hr_inflight *r = bpf_map_lookup_elem(&inflight, &key);
  if (!r) return;
  /* Aborted: a request the server had read all of, after pieces, ends in the
   * client's pause (it gave up, or the server timed it out). */
  __u64 age = hr_server_time(r, bpf_ktime_get_ns());
  __u32 ep = r->ep;
  const __u32 netns = r->netns;
  bpf_map_delete_elem(&inflight, &key);
  if (ep < HR_MAX_ENDPOINTS) count_end(ep, netns, age, 0, 0);
}

static __always_inline void on_data_ready(const struct sock *sk, const int btf) {
  __u32 port = btf ? sk->__sk_common.skc_num : local_port(sk);
  const struct hr_port *pe = sys_port(port);
  if (!pe) return; /* what other sockets pay */
  if ((btf ? sk->__sk_common.skc_state : BPF_CORE_READ(sk, __sk_common.skc_state)) != TCP_ESTABLISHED) return;
  __u64 key = (__u64)sk;
  if (pe->proto == HR_PROTO_HTTP2) {
    h2_data_ready(key, pe, port);
    return;
  }
  if (!bpf_map_lookup_elem(&known, &key)) return;
  __u32 copied, rcv;
  tcp_seqs(key, btf, &copied, &rcv);
  __u64 now = bpf_ktime_get_ns();
  struct hr_inflight *cur = bpf_map_lookup_elem(&inflight, &key);
  if (cur) {
    more_of_the_request(cur, now, copied, rcv);
    return;
  }
  struct hr_inflight r = {.start_ns = now, .last_ns = now, .seq_start = copied, .seq_last = rcv,
                          .ep = HR_PENDING, .port = (__u16)port, .flags = HR_F_WAITING,
                          .netns = netns_of(sk, btf)};
  bpf_map_update_elem(&inflight, &key, &r, BPF_NOEXIST);
}

/* BTF tracepoints (kernel >= 5.5) */
SEC("tp_btf/sys_exit")
int BPF_PROG(hr_btf_sys_exit, struct pt_regs *regs, long ret) {
  on_exit(regs, ret, 1);
  return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(hr_btf_set_state, const struct sock *sk, int oldstate, int newstate) {
  on_state(sk, oldstate, newstate);
  return 0;
}

SEC("tp_btf/sk_data_ready")
int BPF_PROG(hr_btf_data_ready, const struct sock *sk) {
  on_data_ready(sk, 1);
  return 0;
}

/* Raw tracepoints (kernel >= 5.5 for this object): the same, arguments by position. */
SEC("raw_tp/sys_exit")
int hr_raw_sys_exit(struct bpf_raw_tracepoint_args *ctx) {
  on_exit((struct pt_regs *)ctx->args[0], (long)ctx->args[1], 0);
  return 0;
}

SEC("raw_tp/inet_sock_set_state")
int hr_raw_set_state(struct bpf_raw_tracepoint_args *ctx) {
  on_state((const struct sock *)ctx->args[0], (int)ctx->args[1], (int)ctx->args[2]);
  return 0;
}

SEC("raw_tp/sk_data_ready")
int hr_raw_data_ready(struct bpf_raw_tracepoint_args *ctx) {
  on_data_ready((const struct sock *)ctx->args[0], 0);
  return 0;
}

/* ---- The socket program set (kernels with sock:sk_data_ready and
 * tcp:tcp_sendmsg_locked, 6.11+): no syscall tracepoints at all, so
 * processes that are not servers pay nothing on their system calls, only a
 * port load on their socket events. Every socket whose local port is an
 * endpoint's is a server socket: no process tracking. Two events per request
 * on the server's socket, and two on the client's when it is local:
 *   sk_data_ready       a request (or a piece of one) arrives: its start
 *   tcp_sendmsg_locked  the server's first write: the end, and the status line
 *   inet_sock_set_state the connection ends with a request in flight: abort
 * The request lives in a slot of the requests array, which user space maps
 * and reads in place; whether the server has read it is the socket's
 * copied_seq, looked at only before user space reads the slots
 * (hr_sock_refresh), so no program runs on the server's reads. Endpoints with a path or
 * HTTP/2 need the request's bytes, which the syscall set reads whole in the
 * server's buffers (here they sit in page fragments; arrived_bytes reads only
 * what tells an HTTP/1 request's end): their ports go to the syscall set,
 * attached beside this one (hr_port.set). The programs use plain loads from
 * the kernel's objects (tp_btf arguments are typed), and per request four
 * helper calls: the clock twice, the read of the request's bytes
 * (http1.bpf.h) and the read of the status line. */

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, HR_MAX_INFLIGHT);
  __type(key, __u32);
  __type(value, struct hr_slot);
} requests SEC(".maps");

/* A connection's slot: among HR_SLOT_TRIES slots from a position given by the
 * connection's own hash (skc_hash, of its addresses and ports: a plain load).
 * Finding it costs a few array loads and no helper call, where a lookup in
 * the socket's storage or in a hash by socket costs one. */
#define HR_SLOT_TRIES 8

/* The slot of sk's request in flight, or 0; *free (when asked): a free slot
 * where a new one can go, or 0 when all are taken. */
static __always_inline struct hr_slot *find_slot(const struct sock *sk, struct hr_slot **free) {
  __u64 key = (__u64)sk;
  __u32 h = (__u32)(((__u64)sk->__sk_common.skc_hash * 0x9E3779B97F4A7C15ull) >> 32);
  __u32 open = HR_MAX_INFLIGHT; /* none */
  for (int i = 0; i < HR_SLOT_TRIES; i++) {
    __u32 idx = (h + i) & (HR_MAX_INFLIGHT - 1);
    struct hr_slot *e = bpf_map_lookup_elem(&requests, &idx);
    if (!e) break;
    __u64 at = e->sk;
    if (at == key) return e;
    if (at == 0 && open == HR_MAX_INFLIGHT) open = idx;
  }
  if (free) *free = open < HR_MAX_INFLIGHT ? bpf_map_lookup_elem(&requests, &open) : 0;
  return 0;
}

static __always_inline void free_slot(struct hr_slot *e) {
  e->r.start_ns = 0;
  e->sk = 0;
}

#include "arrived.bpf.h"

static __always_inline void sock_arrival(struct sock *sk) {
  __u32 port = sk->__sk_common.skc_num;
  const struct hr_port *pe = sock_port(port);
  if (!pe) return; /* what other sockets pay */
  if (sk->__sk_common.skc_state != TCP_ESTABLISHED) return;
  const struct tcp_sock *tp = tcp_of(sk);
  struct hr_slot *free;
  struct hr_slot *e = find_slot(sk, &free);
  __u64 now = bpf_ktime_get_ns();
  __u32 copied = tp->copied_seq;
  __u32 rcv = tp->rcv_nxt;
  if (e) {
    const __u32 n = rcv - e->r.seq_last;
    more_of_the_request(&e->r, now, copied, rcv);
    if (!(e->r.flags & (HR_F_WHOLE | HR_F_OTHER))) h1_piece(&e->r, arrived_bytes(sk, n), n, rcv, 0);
    return;
  }
  if (!free) return; /* all taken around here: the request is not counted */
  /* Claimed by a plain store: two CPUs taking the same free slot at the same
   * instant would share it (one of the two requests goes uncounted). */
  free->sk = (__u64)sk;
  free->hash = sk->__sk_common.skc_hash;
  free->seen = 0;
  free->r.start_ns = now;
  free->r.paused_ns = 0;
  free->r.last_ns = now;
  free->r.seq_start = copied;
  free->r.seq_last = rcv;
  free->r.ep = pe->generic_ep;
  free->r.port = (__u16)port;
  free->r.flags = 0;
  free->r.netns = netns_of(sk, 1);
  free->r.tail = 0;
  const __u32 n = rcv - copied;
  h1_piece(&free->r, arrived_bytes(sk, n), n, rcv, H1_FIRST);
}

static __always_inline void sock_write(struct sock *sk, const struct msghdr *msg) {
  if (!sock_port(sk->__sk_common.skc_num)) return;
  struct hr_slot *e = find_slot(sk, 0);
  if (!e) return; /* the rest of an answer */
  __u64 latency = response_time(&e->r, bpf_ktime_get_ns());
  __u32 ep = e->r.ep;
  const __u32 netns = e->r.netns;
  free_slot(e);
  if (ep >= HR_MAX_ENDPOINTS) return;
  /* The status line, from the user's buffer (write/send: one buffer; writev/
   * sendmsg: the first iovec). */
  __u64 base = 0;
  __u8 type = msg->msg_iter.iter_type;
  if (type == ITER_UBUF) {
    base = (__u64)msg->msg_iter.ubuf + msg->msg_iter.iov_offset;
  } else if (type == ITER_IOVEC) {
    const struct iovec *iov = msg->msg_iter.__iov;
    if (iov) base = (__u64)iov->iov_base + msg->msg_iter.iov_offset;
  }
  count_end(ep, netns, latency, 1, is_server_error(base));
}

static __always_inline void sock_state(struct sock *sk, int oldstate, int newstate) {
  if (newstate == TCP_LISTEN || (oldstate == TCP_LISTEN && newstate == TCP_CLOSE)) {
    __u32 port = sk->__sk_common.skc_num;
    if (sock_port(port)) note_listener(sk, port, oldstate, newstate, 1);
    return;
  }
  if (newstate != TCP_CLOSE && newstate != TCP_FIN_WAIT1 && newstate != TCP_LAST_ACK) return;
  if (!sock_port(sk->__sk_common.skc_num)) return;
  struct hr_slot *e = find_slot(sk, 0);
  if (!e) return;
  struct hr_inflight r = e->r;
  free_slot(e);
  if ((__s32)(tcp_of(sk)->copied_seq - r.seq_last) >= 0) r.flags |= HR_F_DRAINED;
  if (r.ep < HR_MAX_ENDPOINTS) count_end(r.ep, r.netns, hr_server_time(&r, bpf_ktime_get_ns()), 0, 0);
}

SEC("tp_btf/sk_data_ready")
int BPF_PROG(hr_sock_arrival, struct sock *sk) {
  sock_arrival(sk);
  return 0;
}

SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(hr_sock_write, struct sock *sk, const struct msghdr *msg, const struct sk_buff *skb, int size_goal) {
  sock_write(sk, msg);
  return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(hr_sock_set_state, struct sock *sk, int oldstate, int newstate) {
  sock_state(sk, oldstate, newstate);
  return 0;
}

/* Run by user space (BPF_PROG_TEST_RUN) before it reads the slots, never
 * attached: whether the server has read each request in flight, from its
 * socket as it is now, and slots whose socket is gone freed (a connection
 * that closed while the programs were detached). */
static long refresh_slot(__u32 i, void *unused) {
  struct hr_slot *e = bpf_map_lookup_elem(&requests, &i);
  if (!e) return 1;
  __u64 key = e->sk;
  if (!key) return 0;
  const struct sock *sk = (const struct sock *)key;
  const struct tcp_sock *tp = (const struct tcp_sock *)key;
  if (BPF_CORE_READ(sk, __sk_common.skc_hash) != e->hash || BPF_CORE_READ(sk, __sk_common.skc_state) == TCP_CLOSE) {
    e->r.start_ns = 0;
    e->sk = 0;
    return 0;
  }
  __u32 copied = BPF_CORE_READ(tp, copied_seq);
  __u16 seen = 0;
  if (copied == e->r.seq_start) seen |= HR_F_WAITING;
  if ((__s32)(copied - e->r.seq_last) >= 0) seen |= HR_F_DRAINED;
  e->seen = seen;
  return 0;
}

SEC("raw_tp")
int hr_sock_refresh(void *ctx) {
  bpf_loop(HR_MAX_INFLIGHT, refresh_slot, 0, 0);
  return 0;
}
