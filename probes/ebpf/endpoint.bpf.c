// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Per-endpoint request latency and concurrency, measured at the socket
 * syscalls of server processes, aggregated in the kernel.
 *
 * Attach points (no kprobes, no fentry, no tracefs needed):
 *   raw_syscalls sys_enter/sys_exit  read, readv, recvfrom, recvmsg (data in);
 *                                    write, writev, sendto, sendmsg, sendfile
 *                                    (data out); accept, accept4 (new server
 *                                    processes)
 *   sock inet_sock_set_state         connection end (a request still in flight
 *                                    is aborted); LISTEN (new server processes)
 *   sock sk_data_ready (>= 6.6)      a request's first bytes reach a known
 *                                    server socket: its start, and a request the
 *                                    server does not read (stopped, stuck) is
 *                                    seen waiting
 * Each comes as a BTF tracepoint (tp_btf, kernel >= 5.5) and as a raw
 * tracepoint (raw_tp, >= 4.17); the loader picks the first that loads.
 *
 * Per connection (keyed by its struct sock *): no entry = idle. Data in on an
 * idle connection starts a request (HTTP/1.x: the method token and path pick
 * the endpoint; otherwise the port's endpoint without a path). The first data
 * out ends it: latency = now - start. Everything else on the connection until
 * the next data in after that is part of the same exchange. Nothing is sent to
 * user space per request: counters and a histogram per endpoint, per CPU. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "endpoint_abi.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* x86_64 syscall numbers */
#define NR_read 0
#define NR_write 1
#define NR_readv 19
#define NR_writev 20
#define NR_sendfile 40
#define NR_accept 43
#define NR_sendto 44
#define NR_recvfrom 45
#define NR_sendmsg 46
#define NR_recvmsg 47
#define NR_accept4 288

#define AF_INET 2
#define AF_INET6 10
#define S_IFMT 00170000
#define S_IFSOCK 0140000

#define DIR_IN 1
#define DIR_OUT 2
/* buffer kinds: where the first bytes are */
#define BUF_NONE 0
#define BUF_PLAIN 1 /* (fd, buf, len) */
#define BUF_IOV 2   /* (fd, iov, cnt) */
#define BUF_MSG 3   /* (fd, msghdr, flags) */

/* Settings, written by the loader between open and load: constants for the
 * verifier, which drops the branches they turn off, and no lookup per event.
 * The programs are attached only once every map is filled, so no program runs
 * on a half-configured probe. */
const volatile __u32 self_tgid = 0; /* headroomd: never traced */
/* The syscall set looks only at server processes (the procs map); the
 * socket set needs no process at all. */
const volatile __u8 track_processes = 1;

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, HR_MAX_PORTS);
  __type(key, __u32);
  __type(value, struct hr_port);
} ports SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, HR_MAX_ENDPOINTS);
  __type(key, __u32);
  __type(value, struct hr_endpoint);
} endpoints SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, HR_MAX_ENDPOINTS);
  __type(key, __u32);
  __type(value, struct hr_stats);
} stats SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, HR_MAX_ENDPOINTS);
  __type(key, __u32);
  __type(value, struct hr_hist);
} hist SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
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
  __u64 buf;
  __u32 dir;
  __u32 port;
};

/* Server-side connections of traced processes (accepted or used by them). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, HR_MAX_CONNS);
  __type(key, __u64);
  __type(value, __u8);
} known SEC(".maps");

/* A traced syscall between its entry and exit, per thread. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, HR_MAX_THREADS);
  __type(key, __u64);
  __type(value, struct call);
} calls SEC(".maps");

/* fd of the current task -> its struct sock, when it is a TCP/IP socket. */
static __always_inline struct sock *sock_of_fd(long fd) {
  if (fd < 0) return 0;
  struct task_struct *task = (struct task_struct *)bpf_get_current_task();
  struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
  if (!fdt) return 0;
  unsigned int max = BPF_CORE_READ(fdt, max_fds);
  if ((unsigned long)fd >= max) return 0;
  struct file **fds = BPF_CORE_READ(fdt, fd);
  struct file *f = 0;
  if (bpf_probe_read_kernel(&f, sizeof f, &fds[fd]) || !f) return 0;
  umode_t mode = BPF_CORE_READ(f, f_inode, i_mode);
  if ((mode & S_IFMT) != S_IFSOCK) return 0;
  struct socket *sock = BPF_CORE_READ(f, private_data);
  if (!sock) return 0;
  struct sock *sk = BPF_CORE_READ(sock, sk);
  if (!sk) return 0;
  __u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
  if (family != AF_INET && family != AF_INET6) return 0;
  if (BPF_CORE_READ_BITFIELD_PROBED(sk, sk_protocol) != IPPROTO_TCP) return 0;
  return sk;
}

static __always_inline __u32 local_port(const struct sock *sk) { return BPF_CORE_READ(sk, __sk_common.skc_num); }

static __always_inline void mark_process(void) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (tgid == self_tgid) return;
  __u8 one = 1;
  bpf_map_update_elem(&procs, &tgid, &one, BPF_ANY);
}

/* The user address of the first bytes the syscall moved. */
static __always_inline __u64 first_buffer(__u32 kind, __u64 arg) {
  if (kind == BUF_PLAIN) return arg;
  if (kind == BUF_IOV) {
    struct iovec iov = {};
    if (bpf_probe_read_user(&iov, sizeof iov, (void *)arg)) return 0;
    return (__u64)iov.iov_base;
  }
  if (kind == BUF_MSG) {
    struct user_msghdr msg = {};
    struct iovec iov = {};
    if (bpf_probe_read_user(&msg, sizeof msg, (void *)arg)) return 0;
    if (!msg.msg_iov || msg.msg_iovlen == 0) return 0;
    if (bpf_probe_read_user(&iov, sizeof iov, msg.msg_iov)) return 0;
    return (__u64)iov.iov_base;
  }
  return 0;
}

static __always_inline void on_enter(struct pt_regs *regs, long id) {
  __u32 dir, kind;
  switch (id) {
    case NR_read: case NR_recvfrom: dir = DIR_IN; kind = BUF_PLAIN; break;
    case NR_readv: dir = DIR_IN; kind = BUF_IOV; break;
    case NR_recvmsg: dir = DIR_IN; kind = BUF_MSG; break;
    case NR_write: case NR_sendto: dir = DIR_OUT; kind = BUF_PLAIN; break;
    case NR_writev: dir = DIR_OUT; kind = BUF_IOV; break;
    case NR_sendmsg: dir = DIR_OUT; kind = BUF_MSG; break;
    case NR_sendfile: dir = DIR_OUT; kind = BUF_NONE; break;
    default: return;
  }
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  __u32 tgid = pid_tgid >> 32;
  if (!bpf_map_lookup_elem(&procs, &tgid)) return;  /* the one lookup untraced processes pay */
  long fd = (long)BPF_CORE_READ(regs, di);
  __u64 arg = BPF_CORE_READ(regs, si);
  if (id == NR_sendfile) { arg = 0; }  /* sendfile(out_fd, in_fd, ...): out_fd is di */
  struct sock *sk = sock_of_fd(fd);
  if (!sk) return;
  __u32 port = local_port(sk);
  if (!bpf_map_lookup_elem(&ports, &port)) return;
  struct call c = {.sk = (__u64)sk, .buf = first_buffer(kind, arg), .dir = dir, .port = port};
  bpf_map_update_elem(&calls, &pid_tgid, &c, BPF_ANY);
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
static __always_inline __u32 classify(const struct hr_port *pe, const char *b, long n, __u64 buf, int kernel) {
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
  long err = kernel ? bpf_probe_read_kernel(words, len, (void *)(buf + sp + 1))
                    : bpf_probe_read_user(words, len, (void *)(buf + sp + 1));
  if (err) return best;
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

static __always_inline void count_start(__u32 ep) {
  if (ep >= HR_MAX_ENDPOINTS) return;
  struct hr_stats *s = bpf_map_lookup_elem(&stats, &ep);
  if (s) s->started++;
}

static __always_inline void count_end(__u32 ep, __u64 latency, int completed, int error) {
  struct hr_endpoint *e = bpf_map_lookup_elem(&endpoints, &ep);
  struct hr_stats *s = bpf_map_lookup_elem(&stats, &ep);
  if (!e || !s) return;
  if (completed) s->completed++; else s->aborted++;
  if (error) s->errors++;
  s->busy_ns += latency;
  if (latency > e->target_ns) s->over_target++;
  if (latency > e->max_ns) s->over_max++;
  if (completed) {
    struct hr_hist *h = bpf_map_lookup_elem(&hist, &ep);
    if (h) {
      __u32 b = hr_hist_bucket(latency);
      barrier_var(b); /* keep the bound check on b itself for the verifier */
      if (b < HR_HIST_BUCKETS) h->counts[b]++;
    }
  }
}

static __always_inline void on_data_in(struct call *c, long ret) {
  __u64 sk = c->sk;
  __u64 start = 0;
  struct hr_inflight *cur = bpf_map_lookup_elem(&inflight, &sk);
  if (cur) {
    if (cur->ep != HR_PENDING) return; /* more of the same request */
    start = cur->start_ns;             /* it arrived then */
  } else {
    __u8 one = 1;
    bpf_map_update_elem(&known, &sk, &one, BPF_NOEXIST);
    start = bpf_ktime_get_ns();
  }
  struct hr_port *pe = bpf_map_lookup_elem(&ports, &c->port);
  if (!pe) return;
  char b[HR_PEEK_BYTES] = {};
  long n = peek(b, c->buf, ret);
  struct hr_inflight r = {.start_ns = start, .ep = classify(pe, b, n, c->buf, 0), .port = (__u16)c->port};
  bpf_map_update_elem(&inflight, &sk, &r, BPF_ANY);
  count_start(r.ep);
}

static __always_inline void on_data_out(struct call *c, long ret) {
  __u64 sk = c->sk;
  struct hr_inflight *r = bpf_map_lookup_elem(&inflight, &sk);
  if (!r) return; /* the rest of a response, or the server speaking first */
  __u64 latency = bpf_ktime_get_ns() - r->start_ns;
  __u32 ep = r->ep;
  if (ep == HR_PENDING) {
    /* Answered without a read this program saw (splice(2)), or the next
     * request arrived before the last write of an answer. Either way the
     * entry ends here, so it cannot stay "waiting" for ever: it counts for the
     * port's endpoint without a path, if there is one. */
    __u32 port = r->port;
    struct hr_port *pe = bpf_map_lookup_elem(&ports, &port);
    ep = pe ? pe->generic_ep : HR_NO_ENDPOINT;
    count_start(ep);
  }
  bpf_map_delete_elem(&inflight, &sk);
  if (ep >= HR_MAX_ENDPOINTS) return;
  char b[12] = {};
  int error = 0;
  if (c->buf && ret >= 12 && !bpf_probe_read_user(b, sizeof b, (void *)c->buf))
    error = b[0] == 'H' && b[1] == 'T' && b[2] == 'T' && b[3] == 'P' && b[4] == '/' && b[8] == ' ' && b[9] == '5';
  count_end(ep, latency, 1, error);
}

static __always_inline void on_exit(struct pt_regs *regs, long ret) {
  long id = (long)BPF_CORE_READ(regs, orig_ax);
  switch (id) {
    case NR_accept: case NR_accept4: {
      if (ret < 0) return;
      struct sock *sk = sock_of_fd(ret);
      if (!sk) return;
      __u32 port = local_port(sk);
      if (bpf_map_lookup_elem(&ports, &port)) {
        mark_process();
        __u64 key = (__u64)sk;
        __u8 one = 1;
        bpf_map_update_elem(&known, &key, &one, BPF_ANY);
      }
      return;
    }
    case NR_read: case NR_recvfrom: case NR_readv: case NR_recvmsg:
    case NR_write: case NR_sendto: case NR_writev: case NR_sendmsg: case NR_sendfile:
      break;
    default:
      return;
  }
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  struct call *cp = bpf_map_lookup_elem(&calls, &pid_tgid);
  if (!cp) return;
  struct call c = *cp;
  bpf_map_delete_elem(&calls, &pid_tgid);
  if (ret <= 0) return;
  if (c.dir == DIR_IN) on_data_in(&c, ret);
  else on_data_out(&c, ret);
}

static __always_inline void on_state(const struct sock *sk, int oldstate, int newstate) {
  if (newstate == TCP_LISTEN) {
    if (!track_processes) return;
    __u32 port = local_port(sk);
    if (bpf_map_lookup_elem(&ports, &port)) mark_process();
    return;
  }
  if (newstate != TCP_CLOSE && newstate != TCP_FIN_WAIT1 && newstate != TCP_LAST_ACK) return;
  __u64 key = (__u64)sk;
  if (track_processes && newstate == TCP_CLOSE) bpf_map_delete_elem(&known, &key);
  struct hr_inflight *r = bpf_map_lookup_elem(&inflight, &key);
  if (!r) return;
  __u64 age = bpf_ktime_get_ns() - r->start_ns;
  __u32 ep = r->ep;
  bpf_map_delete_elem(&inflight, &key);
  if (ep < HR_MAX_ENDPOINTS) count_end(ep, age, 0, 0);
}

static __always_inline void on_data_ready(const struct sock *sk) {
  if (BPF_CORE_READ(sk, __sk_common.skc_state) != TCP_ESTABLISHED) return;
  __u32 port = local_port(sk);
  if (!bpf_map_lookup_elem(&ports, &port)) return; /* what other sockets pay */
  __u64 key = (__u64)sk;
  if (!bpf_map_lookup_elem(&known, &key)) return;
  if (bpf_map_lookup_elem(&inflight, &key)) return;
  struct hr_inflight r = {.start_ns = bpf_ktime_get_ns(), .ep = HR_PENDING, .port = (__u16)port};
  bpf_map_update_elem(&inflight, &key, &r, BPF_NOEXIST);
}

/* BTF tracepoints (kernel >= 5.5) */
SEC("tp_btf/sys_enter")
int BPF_PROG(hr_btf_sys_enter, struct pt_regs *regs, long id) {
  on_enter(regs, id);
  return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(hr_btf_sys_exit, struct pt_regs *regs, long ret) {
  on_exit(regs, ret);
  return 0;
}

/* Both program sets attach this one: a connection's end is the same event. */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(hr_btf_set_state, const struct sock *sk, int oldstate, int newstate) {
  on_state(sk, oldstate, newstate);
  return 0;
}

SEC("tp_btf/sk_data_ready")
int BPF_PROG(hr_btf_data_ready, const struct sock *sk) {
  on_data_ready(sk);
  return 0;
}

/* Raw tracepoints (kernel >= 4.17): the same, arguments by position. */
SEC("raw_tp/sys_enter")
int hr_raw_sys_enter(struct bpf_raw_tracepoint_args *ctx) {
  on_enter((struct pt_regs *)ctx->args[0], (long)ctx->args[1]);
  return 0;
}

SEC("raw_tp/sys_exit")
int hr_raw_sys_exit(struct bpf_raw_tracepoint_args *ctx) {
  on_exit((struct pt_regs *)ctx->args[0], (long)ctx->args[1]);
  return 0;
}

SEC("raw_tp/inet_sock_set_state")
int hr_raw_set_state(struct bpf_raw_tracepoint_args *ctx) {
  on_state((const struct sock *)ctx->args[0], (int)ctx->args[1], (int)ctx->args[2]);
  return 0;
}

SEC("raw_tp/sk_data_ready")
int hr_raw_data_ready(struct bpf_raw_tracepoint_args *ctx) {
  on_data_ready((const struct sock *)ctx->args[0]);
  return 0;
}

/* ---- The socket program set (kernels with sock:sk_data_ready,
 * sock:sock_recv_length and tcp:tcp_sendmsg_locked, 6.11+): no syscall
 * tracepoints at all, so processes that are not servers pay nothing on their
 * system calls, only a port lookup on their socket events. Every socket whose
 * local port is an endpoint's is a server socket: no process tracking.
 *   sk_data_ready      a request arrives on an idle connection: its start
 * Endpoints with a path need the request's bytes, which only the syscall set
 * can read: the loader picks this set only when no endpoint has a path.
 *   sock_recv_length   the server reads it (it is no longer waiting)
 *   tcp_sendmsg_locked the server's first write: the end, and the status line
 *   inet_sock_set_state the connection ends (abort): hr_btf_set_state above */

static __always_inline const struct hr_port *server_port(const struct sock *sk, __u32 *port) {
  *port = local_port(sk);
  return bpf_map_lookup_elem(&ports, port);
}

static __always_inline void sock_arrival(const struct sock *sk) {
  __u32 port;
  const struct hr_port *pe = server_port(sk, &port);
  if (!pe) return; /* what other sockets pay */
  if (BPF_CORE_READ(sk, __sk_common.skc_state) != TCP_ESTABLISHED) return;
  __u64 key = (__u64)sk;
  if (bpf_map_lookup_elem(&inflight, &key)) return;
  /* The loader uses this set only when no endpoint has a path: the request's
   * bytes sit in page fragments here (always on loopback), which a tracing
   * program cannot address. */
  __u32 ep = pe->generic_ep;
  struct hr_inflight r = {.start_ns = bpf_ktime_get_ns(), .ep = ep, .port = (__u16)port, .flags = HR_F_WAITING};
  bpf_map_update_elem(&inflight, &key, &r, BPF_NOEXIST);
  count_start(ep);
}

static __always_inline void sock_read(const struct sock *sk, int ret, int flags) {
  if (ret <= 0 || (flags & 2 /* MSG_PEEK */)) return;
  __u32 port;
  const struct hr_port *pe = server_port(sk, &port);
  if (!pe) return;
  __u64 key = (__u64)sk;
  struct hr_inflight *r = bpf_map_lookup_elem(&inflight, &key);
  if (r) {
    if (r->flags & HR_F_WAITING) {
      r->flags = 0;
      /* its first bytes were not visible at arrival: the port's endpoint */
      if (r->ep == HR_PENDING) {
        r->ep = pe->generic_ep;
        count_start(r->ep);
      }
    }
    return;
  }
  /* Data read with no arrival seen (it came before the probe was attached,
   * or behind unread data): a request from now, for the port's endpoint. */
  struct hr_inflight n = {.start_ns = bpf_ktime_get_ns(), .ep = pe->generic_ep, .port = (__u16)port};
  bpf_map_update_elem(&inflight, &key, &n, BPF_ANY);
  count_start(n.ep);
}

static __always_inline void sock_write(const struct sock *sk, const struct msghdr *msg) {
  __u32 port;
  if (!server_port(sk, &port)) return;
  __u64 key = (__u64)sk;
  struct hr_inflight *r = bpf_map_lookup_elem(&inflight, &key);
  if (!r) return;                        /* the rest of an answer */
  /* A request still "waiting" (read with splice(2), or arrived before the
   * last write of the previous answer) ends here too, so none waits for ever. */
  __u64 latency = bpf_ktime_get_ns() - r->start_ns;
  __u32 ep = r->ep;
  bpf_map_delete_elem(&inflight, &key);
  if (ep >= HR_MAX_ENDPOINTS) return;
  /* The status line, from the user's buffer (write/send: one buffer; writev/
   * sendmsg: the first iovec). */
  int error = 0;
  __u8 type = BPF_CORE_READ(msg, msg_iter.iter_type);
  __u64 off = BPF_CORE_READ(msg, msg_iter.iov_offset);
  __u64 base = 0;
  if (type == ITER_UBUF) {
    base = (__u64)BPF_CORE_READ(msg, msg_iter.ubuf) + off;
  } else if (type == ITER_IOVEC) {
    const struct iovec *iov = BPF_CORE_READ(msg, msg_iter.__iov);
    struct iovec first = {};
    if (iov && !bpf_probe_read_kernel(&first, sizeof first, iov)) base = (__u64)first.iov_base + off;
  }
  char b[12] = {};
  if (base && !bpf_probe_read_user(b, sizeof b, (void *)base))
    error = b[0] == 'H' && b[1] == 'T' && b[2] == 'T' && b[3] == 'P' && b[4] == '/' && b[8] == ' ' && b[9] == '5';
  count_end(ep, latency, 1, error);
}

SEC("tp_btf/sk_data_ready")
int BPF_PROG(hr_sock_arrival, const struct sock *sk) {
  sock_arrival(sk);
  return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(hr_sock_read, struct sock *sk, int ret, int flags) {
  sock_read(sk, ret, flags);
  return 0;
}

SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(hr_sock_write, const struct sock *sk, const struct msghdr *msg, const struct sk_buff *skb, int size_goal) {
  sock_write(sk, msg);
  return 0;
}

