// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The dependency probe's syscall program set, for kernels without the
 * socket set's tcp:tcp_sendmsg_locked (before 6.11). Included at the end of
 * dependency.bpf.c: the calls slots, the decision of a peer (dep_of) and the
 * counting are the socket set's. Each program comes as a BTF tracepoint
 * (tp_btf, needs bpf_rdonly_cast: 6.2+) and as a raw tracepoint (raw_tp,
 * 4.17+; the object's mmapped array and global data need 5.5), one
 * always-inline source with a constant `btf`; sys_exit also as a BTF
 * tracepoint that reads the sockets as the raw one does (`task`: 5.11 to
 * 6.1, the raw programs on the other hooks):
 *   inet_sock_set_state  SYN_SENT, in the connecting task: its process is
 *                        marked in dep_procs, and the connect is a call in
 *                        flight (its slot kept in dep_connects) until it is
 *                        established, a connect failure if it closes first;
 *                        a close or reset with a call in flight ends it
 *   raw_syscalls sys_exit  for the processes in dep_procs only (every other
 *                        process pays one load, dsys_traced): write, writev,
 *                        sendto, sendmsg, sendfile that moved bytes on a
 *                        connection to a dependency start a call when none is
 *                        in flight; read, readv, recvfrom, recvmsg that
 *                        return bytes of the answer end it (the time of the
 *                        read, not of the arrival), and an HTTP/1 status line
 *                        is read from the reader's buffer
 *   sched_process_fork   a traced process's child is traced too: it may
 *                        write on the connections it inherited (a pool
 *                        opened before the fork)
 *   sock sk_data_ready   (6.6+, tp_btf only) the socket set's program: the
 *                        answer's arrival ends the call, as there
 * The call's start is the write's exit, and its rcv_start the socket's read
 * position (copied_seq) there, not rcv_nxt: on loopback the answer can reach
 * the socket before the write returns, announced when no call was in flight;
 * the read of those bytes then ends the call, so none is left in flight and
 * none counted twice. HTTP/2 dependencies: their streams are walked from the
 * syscalls' buffers, the server's side at the reads
 * (dependency_http2_syscalls.bpf.h; raw tracepoints: programs of their own,
 * 5.17+). */
#ifndef HEADROOM_PROBES_EBPF_DEPENDENCY_SYSCALLS_BPF_H
#define HEADROOM_PROBES_EBPF_DEPENDENCY_SYSCALLS_BPF_H

#include "syscall_io.bpf.h"

/* Processes that connected to a dependency's port, and those user space
 * found holding such a connection when the probe was opened (connections
 * older than it): only their system calls are looked at. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, HR_DEP_MAX_PROCS);
  __type(key, __u32);
  __type(value, __u8);
} dep_procs SEC(".maps");

/* A filter in front of dep_procs: the byte at tgid % HR_DEP_PROC_MARKS is
 * set when a process goes into dep_procs (here or by the loader) and never
 * cleared, so a process whose byte is 0 is not there and pays one load
 * instead of the hash look-up. A process that shares its byte with a traced
 * one, or reuses a traced one's pid, pays the look-up as before. Bytes, not
 * bits: CPUs that mark at once lose no mark. */
__u8 dep_proc_marks[HR_DEP_PROC_MARKS] = {};

/* The process's system calls are looked at from now: its mark, then its
 * entry (a call that sees the mark before the entry just looks it up). */
static __always_inline void dsys_trace(__u32 tgid) {
  const __u8 one = 1;
  dep_proc_marks[tgid & (HR_DEP_PROC_MARKS - 1)] = 1;
  bpf_map_update_elem(&dep_procs, &tgid, &one, BPF_ANY);
}

/* The last process each CPU found in dep_procs: its next system calls on
 * that CPU skip the hash look-up. A process that has left the map since (or
 * one that reuses its pid) is looked at a while longer: dep_procs only
 * saves work (whose calls count is dsys_caller's and the peer's). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} dep_last_proc SEC(".maps");

/* Whether the process's system calls are looked at. */
static __always_inline int dsys_traced(__u32 tgid) {
  if (!dep_proc_marks[tgid & (HR_DEP_PROC_MARKS - 1)]) return 0;
  const __u32 zero = 0;
  __u32 *last = bpf_map_lookup_elem(&dep_last_proc, &zero);
  if (last && *last == tgid) return 1;
  if (!bpf_map_lookup_elem(&dep_procs, &tgid)) return 0;
  if (last) *last = tgid;
  return 1;
}

/* Connects in progress, by socket address: where their slot is. An entry
 * lives from SYN_SENT to ESTABLISHED or CLOSE (raw tracepoints have no
 * socket storage). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, HR_DEP_SLOTS);
  __type(key, __u64);
  __type(value, struct hr_dep_sk);
} dep_connects SEC(".maps");

/* The socket's first fields (syscall_io.bpf.h): plain loads from a typed
 * pointer (btf), else one bpf_probe_read_kernel (raw tracepoints: the
 * pointer is a number). 0 when it cannot be read. */
static __always_inline int dsys_head(const struct sock *sk, const int btf, struct sk_head *h) {
  if (!btf) return sk_head_raw(sk, h);
  sk_head_btf(sk, h);
  return 1;
}

/* Which dependency the socket's peer is (dep_of, for either kind of
 * pointer; h: its head), with its entry in *d; HR_NO_DEP when none. */
static __always_inline __u32 dsys_dep(const struct sock *sk, const struct sk_head *h, const struct hr_dep_port *pc,
                                      const int btf, const struct hr_dep **d) {
  __u32 dep = pc->any_dep;
  if (btf) {
    dep = dep_of(sk, pc);
  } else if (pc->n_addrs) {
    __u32 a[4] = {0, 0, bpf_htonl(0xffff), h->daddr};
    if (h->family != AF_INET) BPF_CORE_READ_INTO(&a, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32);
    dep = dep_of_peer(pc, a[0], a[1], a[2], a[3]);
  }
  *d = bpf_map_lookup_elem(&deps, &dep);
  if (!*d) return HR_NO_DEP;
  return dep;
}

/* Whether the current process's calls to dependency dep count: every
 * process's, or for a dependency with callers those in the callers map. */
static __always_inline int dsys_caller(const struct hr_dep *d, __u32 dep, __u32 tgid) {
  struct hr_dep_caller k = {.dep = dep, .tgid = tgid};
  return !d->callers || bpf_map_lookup_elem(&callers, &k) != 0;
}

static __always_inline __u32 dsys_position(const struct sk_head *h) { return hash_position(h->hash); }

/* A write that moved bytes on a connection to a dependency: a call starts
 * unless one is in flight (the rest of the request). */
static __always_inline void dsys_write(struct sock *sk, const struct sk_head *h, const struct hr_dep_port *pc,
                                       __u32 tgid, const int btf) {
  if (h->state != TCP_ESTABLISHED) return;
  const struct hr_dep *d;
  const __u32 dep = dsys_dep(sk, h, pc, btf, &d);
  if (dep == HR_NO_DEP || !dsys_caller(d, dep, tgid)) return;
  const __u32 at = dsys_position(h);
  if (find_call_from((__u64)sk, at)) return;
  __u32 copied, rcv;
  tcp_seqs((__u64)sk, btf, &copied, &rcv);
  take_slot(sk, at, dep, bpf_ktime_get_ns(), copied, 0);
}

/* A read that returned bytes: the first read of the answer ends the call in
 * flight (bytes the connection had before the call do not). HTTP/1: its
 * status line, when the read began at the answer's first byte. */
static __always_inline void dsys_read(struct sock *sk, const struct sk_head *h, struct pt_regs *regs, __u32 kind,
                                      long ret, const int btf) {
  struct hr_dep_call *e = find_call_from((__u64)sk, dsys_position(h));
  /* a connect's slot, or an HTTP/2 stream's, can sit near the hash position */
  if (!e || (e->flags & (HR_DEP_F_CONNECT | HR_DEP_F_STREAM))) return;
  __u32 copied, rcv;
  tcp_seqs((__u64)sk, btf, &copied, &rcv);
  const __u32 start = e->rcv_start;
  if ((__s32)(copied - start) <= 0) return;
  const __u32 dep = e->dep;
  const struct hr_dep *d = bpf_map_lookup_elem(&deps, &dep);
  __u32 answer = 0;
  if (d && d->proto == HR_DEP_PROTO_HTTP1 && ret >= 12 && copied - (__u32)ret == start) {
    __u64 iov = 0;
    __u32 n = 0;
    const __u64 arg = btf ? PT_REGS_PARM2_SYSCALL(regs) : PT_REGS_PARM2_CORE_SYSCALL(regs);
    const __u64 count = btf ? PT_REGS_PARM3_SYSCALL(regs) : PT_REGS_PARM3_CORE_SYSCALL(regs);
    answer = status_kind(status_digit(io_buffers(kind, arg, count, &iov, &n)));
  }
  end_call(e, 0, END_ANSWER, answer, 0); /* the write's time: no send stamp (call_began) */
}

/* HTTP/2 dependencies: streams (dsys_h2, dsys_h2_state), in the programs
 * with a constant h2 (the loader picks the raw ones without it unless a
 * dependency speaks HTTP/2). */
#include "dependency_http2_syscalls.bpf.h"

/* Every process's system calls come here: with typed arguments (btf, or
 * task: a BTF tracepoint whose sockets are read as in the raw programs) the
 * call's number is a plain load and decides first; raw, where each read is
 * a helper call, the process does (a load), then the number and the
 * descriptor come in one read. */
static __always_inline void dep_sys_exit(struct pt_regs *regs, long ret, const int btf, const int task,
                                         const int h2) {
  if (ret <= 0) return;
  __u32 dir, kind, tgid;
  long fd;
  if (btf || task) {
    if (!syscall_io(HR_SYSCALL_NR(regs), &dir, &kind)) return;
    tgid = bpf_get_current_pid_tgid() >> 32;
    if (!dsys_traced(tgid)) return; /* what other processes pay */
    fd = (long)PT_REGS_PARM1_SYSCALL(regs);
  } else {
    tgid = bpf_get_current_pid_tgid() >> 32;
    if (!dsys_traced(tgid)) return; /* what other processes pay */
    __u64 nr = 0, arg = 0;
    HR_SYSCALL_NR_FD_CORE(regs, &nr, &arg);
    if (!syscall_io((long)nr, &dir, &kind)) return;
    fd = (long)arg;
  }
  struct sk_head h;
  struct sock *sk = btf ? sock_of_fd_btf(fd, &h) : task ? sock_of_fd_task(fd, &h) : sock_of_fd(fd, &h);
  if (!sk) return;
  const struct hr_dep_port *pc = port_config(h.dport);
  if (!pc) return;
  if (!btf && !sock_is_tcp(sk)) return; /* (sock_of_fd_btf asked already) */
  if (h2 && dsys_h2(sk, &h, pc, regs, dir, kind, ret, tgid, btf)) return;
  if (dir == DIR_OUT) dsys_write(sk, &h, pc, tgid, btf);
  else dsys_read(sk, &h, regs, kind, ret, btf);
}

/* A connect to a dependency's port: its process is traced from now (a
 * process that is not a caller yet too: user space may learn it is one),
 * and the connect is a call in flight. */
static __always_inline void dsys_connect(struct sock *sk, const struct sk_head *h, const struct hr_dep_port *pc,
                                         const int btf) {
  const struct hr_dep *d;
  const __u32 dep = dsys_dep(sk, h, pc, btf, &d);
  if (dep == HR_NO_DEP) return;
  const __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  dsys_trace(tgid);
  if (!dsys_caller(d, dep, tgid)) return;
  struct hr_dep_sk st = {.dep = dep + 1};
  st.slot = take_slot(sk, bpf_get_prandom_u32(), dep, bpf_ktime_get_ns(), 0, HR_DEP_F_CONNECT);
  const __u64 key = (__u64)sk;
  if (st.slot) bpf_map_update_elem(&dep_connects, &key, &st, BPF_ANY);
}

static __always_inline void dep_sys_state(struct sock *sk, int newstate, const int btf, const int h2) {
  struct sk_head h;
  if (!dsys_head(sk, btf, &h)) return;
  const struct hr_dep_port *pc = port_config(h.dport);
  if (!pc) return; /* what other connections pay */
  if (btf ? sk->sk_protocol != IPPROTO_TCP : !sock_is_tcp(sk)) return;
  if (newstate == TCP_SYN_SENT) {
    dsys_connect(sk, &h, pc, btf);
    return;
  }
  if (h2) dsys_h2_state(sk, &h, newstate, btf); /* before the connect's entry goes */
  if (newstate != TCP_ESTABLISHED && newstate != TCP_CLOSE && newstate != TCP_CLOSE_WAIT &&
      newstate != TCP_FIN_WAIT1)
    return;
  const __u64 key = (__u64)sk;
  struct hr_dep_sk *st = bpf_map_lookup_elem(&dep_connects, &key);
  struct hr_dep_call *e = st && st->slot ? call_of(sk, st) : 0;
  if (!e) e = find_call_from(key, dsys_position(&h));
  if (e && !(e->flags & HR_DEP_F_STREAM)) { /* a stream's slot near the hash position: dsys_h2_state's */
    __u32 copied = 0, rcv = 0;
    if (newstate == TCP_CLOSE_WAIT) tcp_seqs(key, btf, &copied, &rcv);
    state_ends(e, st, newstate, rcv, 0);
  }
  if (st && (newstate == TCP_ESTABLISHED || newstate == TCP_CLOSE)) bpf_map_delete_elem(&dep_connects, &key);
}

/* A new process (not a thread: same tgid) of a traced one. */
static __always_inline void dep_sys_fork(__u32 parent, __u32 child) {
  if (parent == child || !dsys_traced(parent)) return;
  dsys_trace(child);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(hr_dep_btf_sys_exit, struct pt_regs *regs, long ret) {
  dep_sys_exit(regs, ret, 1, 1, 1);
  return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(hr_dep_btf_sys_state, struct sock *sk, int oldstate, int newstate) {
  dep_sys_state(sk, newstate, 1, 1);
  return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(hr_dep_btf_sys_fork, struct task_struct *parent, struct task_struct *child) {
  dep_sys_fork(parent->tgid, child->tgid);
  return 0;
}

/* Kernels 5.11 to 6.1 (bpf_get_current_task_btf, no bpf_rdonly_cast):
 * sys_exit as a BTF tracepoint, its arguments and the task's file table by
 * plain loads, the rest as in the raw program; with the raw programs on the
 * other hooks. Twice, as those: without the HTTP/2 walk and with it. */
SEC("tp_btf/sys_exit")
int BPF_PROG(hr_dep_task_sys_exit, struct pt_regs *regs, long ret) {
  dep_sys_exit(regs, ret, 0, 1, 0);
  return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(hr_dep_task_h2_sys_exit, struct pt_regs *regs, long ret) {
  dep_sys_exit(regs, ret, 0, 1, 1);
  return 0;
}

SEC("raw_tp/sys_exit")
int hr_dep_raw_sys_exit(struct bpf_raw_tracepoint_args *ctx) {
  dep_sys_exit((struct pt_regs *)ctx->args[0], (long)ctx->args[1], 0, 0, 0);
  return 0;
}

SEC("raw_tp/inet_sock_set_state")
int hr_dep_raw_sys_state(struct bpf_raw_tracepoint_args *ctx) {
  dep_sys_state((struct sock *)ctx->args[0], (int)ctx->args[2], 0, 0);
  return 0;
}

/* The same with HTTP/2 (bpf_loop: 5.17+), loaded instead of those two when a
 * dependency speaks it. */
SEC("raw_tp/sys_exit")
int hr_dep_raw_h2_sys_exit(struct bpf_raw_tracepoint_args *ctx) {
  dep_sys_exit((struct pt_regs *)ctx->args[0], (long)ctx->args[1], 0, 0, 1);
  return 0;
}

SEC("raw_tp/inet_sock_set_state")
int hr_dep_raw_h2_sys_state(struct bpf_raw_tracepoint_args *ctx) {
  dep_sys_state((struct sock *)ctx->args[0], (int)ctx->args[2], 0, 1);
  return 0;
}

SEC("raw_tp/sched_process_fork")
int hr_dep_raw_sys_fork(struct bpf_raw_tracepoint_args *ctx) {
  dep_sys_fork(BPF_CORE_READ((struct task_struct *)ctx->args[0], tgid),
               BPF_CORE_READ((struct task_struct *)ctx->args[1], tgid));
  return 0;
}

#endif
