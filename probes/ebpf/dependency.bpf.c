// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Outbound calls to the dependencies (docs/dependencies.md), measured on the
 * calling side's sockets by one of three program sets, which the loader
 * picks (program_set.cc, dependency_set_rows): the socket set below, on the
 * socket tracepoints only (kernel 6.11+), its send-length variant (6.6+),
 * and the syscall set (dependency_syscalls.bpf.h, included at the end) for
 * older kernels and HTTP/2 before 6.11. All share the calls slots, the
 * decision of a peer and the counting. The socket set:
 *   inet_sock_set_state  CLOSE -> SYN_SENT, in the connecting task: whether
 *                        the connection is traced (its peer is a
 *                        dependency's, its process a caller), kept in the
 *                        socket's storage; the connect is a call in flight
 *                        until it is established, and a connect failure if
 *                        it closes first; a close or reset with a call in
 *                        flight ends it as a reset
 *   tcp_sendmsg_locked   the client writes: a call starts when none is in
 *                        flight (a connection older than the probe is
 *                        decided here, in the writer's task)
 *   sk_data_ready        answer bytes arrive: the call in flight ends (the
 *                        syscall set loads this program too, where the
 *                        kernel has the tracepoint: 6.6+)
 * The send-length set (kernels 6.6 to 6.10) is the socket set with
 * sock:sock_send_length in tcp_sendmsg_locked's place: a call starts as the
 * send returns (dep_sent). It sees no bytes, so HTTP/2 dependencies take the
 * syscall set there.
 * Every hook first loads the port's entry of a global array indexed by the
 * remote port: that load is all an untraced connection pays. Calls in flight
 * sit in slots of an array user space maps and reads in place, so a call
 * that never ends (a stopped or black-holed dependency) is seen aging. */
#include "vmlinux.h"

#include "arch.h" /* before bpf_tracing.h: the target architecture */

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "dependency_abi.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define AF_INET 2
#define AF_INET6 10

/* Filled by the loader between load and attach: no program runs on a
 * half-configured probe. */
__u16 dep_port_slot[65536] = {};

/* bpf_rdonly_cast (a typed, read-only view of a kernel object, 6.2+: plain
 * loads) and arrived_bytes (where the bytes that just came are). Included
 * here for its globals' place: the compiler lays them out in the order they
 * are defined, so dmap_base, which an HTTP/1 answer reads, shares a page
 * with the first entries of dep_port_cfg, which every traced event reads
 * (the globals are one map, whose pages are not the kernel's large ones). */
#include "arrived.bpf.h"

struct hr_dep_port dep_port_cfg[HR_DEP_MAX_PORTS] = {};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, HR_MAX_DEPS);
  __type(key, __u32);
  __type(value, struct hr_dep);
} deps SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, HR_MAX_DEPS);
  __type(key, __u32);
  __type(value, struct hr_dep_stats);
} dep_stats SEC(".maps");

/* Renewed by user space from /proc at each read (caller_process,
 * caller_cgroup); looked up once per connection, at its decision. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, HR_DEP_MAX_CALLERS);
  __type(key, struct hr_dep_caller);
  __type(value, __u8);
} callers SEC(".maps");

/* Socket-local storage: freed with the socket, and cheaper per event than
 * a hash keyed by the socket pointer. */
struct {
  __uint(type, BPF_MAP_TYPE_SK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct hr_dep_sk);
} conns SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, HR_DEP_SLOTS);
  __type(key, __u32);
  __type(value, struct hr_dep_call);
} calls SEC(".maps");

static __always_inline const struct tcp_sock *tcp_of(const struct sock *sk) {
  return bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
}

static __always_inline __u32 rcv_nxt(const struct sock *sk) { return tcp_of(sk)->rcv_nxt; }

/* The dep_port_cfg index of a non-zero dep_port_slot entry. */
static __always_inline __u32 port_index(__u32 slot) { return ((slot & HR_DEP_PORT_INDEX) - 1) & (HR_DEP_MAX_PORTS - 1); }

/* The port's dependencies, or 0. dport: skc_dport, network byte order. */
static __always_inline const struct hr_dep_port *port_config(__u16 dport) {
  __u32 slot = dep_port_slot[dport];
  if (!slot) return 0;
  return &dep_port_cfg[port_index(slot)];
}

/* Which dependency a peer (its IPv6 address, IPv4 as ::ffff:a.b.c.d,
 * network byte order) on the port is: an (address, port) entry, else the
 * port's any-host one. */
static __always_inline __u32 dep_of_peer(const struct hr_dep_port *pc, __u32 a0, __u32 a1, __u32 a2, __u32 a3) {
  const __u32 n = pc->n_addrs;
  for (__u32 i = 0; i < HR_DEP_ADDRS_PER_PORT; i++) {
    if (i >= n) break;
    const __u32 *x = pc->addrs[i];
    if (x[0] == a0 && x[1] == a1 && x[2] == a2 && x[3] == a3) return pc->deps[i];
  }
  return pc->any_dep;
}

/* Which dependency the socket's peer is. */
static __always_inline __u32 dep_of(const struct sock *sk, const struct hr_dep_port *pc) {
  if (pc->n_addrs == 0) return pc->any_dep;
  if (sk->__sk_common.skc_family == AF_INET)
    return dep_of_peer(pc, 0, 0, bpf_htonl(0xffff), sk->__sk_common.skc_daddr);
  const __u32 *a = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32;
  return dep_of_peer(pc, a[0], a[1], a[2], a[3]);
}

/* Takes the decision for a connection that has none yet, in the task that
 * connects or writes: traced when its peer is a dependency's and, for a
 * dependency with callers, the task's process is one of them (a process
 * that is not leaves it undecided). */
static __always_inline struct hr_dep_sk *decided(struct sock *sk, const struct hr_dep_port *pc) {
  struct hr_dep_sk *st = bpf_sk_storage_get(&conns, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
  if (!st || st->dep != HR_DEP_UNDECIDED) return st;
  __u32 dep = dep_of(sk, pc);
  st->dep = HR_DEP_UNTRACED;
  const struct hr_dep *d = bpf_map_lookup_elem(&deps, &dep);
  if (!d) return st;
  if (d->callers) {
    /* Not a caller (yet): undecided, so that each write asks again and a
     * process user space learns of later counts from then on. */
    struct hr_dep_caller k = {.dep = dep, .tgid = bpf_get_current_pid_tgid() >> 32};
    if (!bpf_map_lookup_elem(&callers, &k)) {
      st->dep = HR_DEP_UNDECIDED;
      return st;
    }
  }
  st->dep = dep + 1;
  return st;
}

/* The slot at position h (any number: taken modulo the array's size). */
static __always_inline struct hr_dep_call *slot_at(__u32 h) {
  __u32 idx = h & (HR_DEP_SLOTS - 1);
  return bpf_map_lookup_elem(&calls, &idx);
}

/* A free slot: the home position h itself, else one of the few after it
 * (flagged away from home, which counts it: dependency_abi.h), claimed by
 * plain stores (two CPUs claiming one slot at the same instant would share
 * it: the earlier call's end finds the slot not its own and goes
 * uncounted). Returns 1 + its index, 0 when all are taken (the call is not
 * counted). The slot's time is written last: user space skips a slot whose
 * start_ns is 0. */
static __always_inline __u32 take_slot(const struct sock *sk, __u32 h, __u32 dep, __u64 now, __u32 rcv,
                                       __u32 flags) {
  struct hr_dep_call *home = slot_at(h);
  if (!home) return 0;
  for (int i = 0; i < HR_DEP_SLOT_TRIES; i++) {
    struct hr_dep_call *e = i == 0 ? home : slot_at(h + i);
    if (!e) break;
    if (e->sk != 0) continue;
    if (i) {
      /* Counted before the slot is claimed: a search that misses the count
       * finds no call here either. */
      __sync_fetch_and_add(&home->away, 1);
      flags |= HR_DEP_F_AWAY | ((h & (HR_DEP_SLOTS - 1)) << HR_DEP_F_HOME_SHIFT);
    }
    e->sk = (__u64)sk;
    e->dep = dep;
    e->rcv_start = rcv;
    e->flags = flags;
    barrier();
    e->start_ns = now;
    return ((h + i) & (HR_DEP_SLOTS - 1)) + 1;
  }
  return 0;
}

/* Where a connection's calls go: a call (not a connect) from the socket's
 * own hash (skc_hash, set once it is connected: a plain load), so the
 * answer's arrival finds it again without the socket's storage; a connect
 * (no hash yet) from a random position, kept in the socket's storage. The
 * verifier allows no arithmetic on the socket pointer itself. */
static __always_inline __u32 hash_position(__u32 skc_hash) { return skc_hash * 0x9E3779B1u; }

static __always_inline __u32 call_position(const struct sock *sk) {
  return hash_position(sk->__sk_common.skc_hash);
}

/* The call in flight of a connected socket (key: its address) whose home
 * is h, looked for in every slot it may sit in. */
static __always_inline struct hr_dep_call *find_call_from(__u64 key, __u32 h) {
  for (int i = 0; i < HR_DEP_SLOT_TRIES; i++) {
    struct hr_dep_call *e = slot_at(h + i);
    if (!e) break;
    if (e->sk == key) return e;
  }
  return 0;
}

/* The same, in the home slot alone when none of its calls is away (the
 * common case: one slot where the search reads HR_DEP_SLOT_TRIES). For the
 * socket programs, which run under the socket's lock: a call ends once, so
 * the home's count is exact. The syscall programs search every slot: a read
 * and the arrival of its answer on two CPUs may both end one call, and the
 * count then reads low (the arrival may miss a call away from home; the
 * read ends it) or wraps (every search reads on). */
static __always_inline struct hr_dep_call *find_call(const struct sock *sk) {
  const __u64 key = (__u64)sk;
  const __u32 h = call_position(sk);
  struct hr_dep_call *home = slot_at(h);
  if (!home) return 0;
  if (home->sk == key) return home;
  if (!home->away) return 0;
  return find_call_from(key, h);
}

/* The connection's call in flight, or 0 (and the storage's slot cleared
 * when the slot is no longer its own: the answer freed it). */
static __always_inline struct hr_dep_call *call_of(const struct sock *sk, struct hr_dep_sk *st) {
  __u32 idx = st->slot - 1;
  struct hr_dep_call *e = bpf_map_lookup_elem(&calls, &idx);
  if (!e || e->sk != (__u64)sk) {
    st->slot = 0;
    return 0;
  }
  return e;
}

static __always_inline void free_call(struct hr_dep_call *e, struct hr_dep_sk *st) {
  const __u32 flags = e->flags;
  e->start_ns = 0;
  barrier();
  e->sk = 0;
  if (st) st->slot = 0;
  if (flags & HR_DEP_F_AWAY) {
    struct hr_dep_call *home = slot_at(flags >> HR_DEP_F_HOME_SHIFT);
    if (home) __sync_fetch_and_add(&home->away, -1);
  }
}

#define END_ANSWER 0  /* answer bytes arrived */
#define END_CONNECT 1 /* the connect failed */
#define END_RESET 2   /* reset or closed with the call in flight */

/* A call's end. answer: for END_ANSWER, what the answer said
 * (HR_DEP_ERR_5XX, HR_DEP_ERR_4XX or 0); the error rule (hr_dep.errors)
 * says which ends count as errors. */
static __always_inline void count_end(__u32 dep, __u64 latency, int how, __u32 answer) {
  const struct hr_dep *d = bpf_map_lookup_elem(&deps, &dep);
  struct hr_dep_stats *s = bpf_map_lookup_elem(&dep_stats, &dep);
  if (!d || !s) return;
  if (how == END_ANSWER) {
    s->s.completed++;
    if (answer & d->errors) s->s.errors++;
    __u32 b = hr_hist_bucket(latency);
    barrier_var(b); /* keep the bound check on b itself for the verifier */
    if (b < HR_HIST_BUCKETS) s->hist.counts[b]++;
  } else {
    s->s.aborted++;
    if (how == END_CONNECT) {
      s->connect_failures++;
      if (d->errors & HR_DEP_ERR_CONNECT) s->s.errors++;
    } else {
      s->resets++;
      if (d->errors & HR_DEP_ERR_RESET) s->s.errors++;
    }
  }
  s->s.busy_ns += latency;
  if (latency > d->target_ns) s->s.over_target++;
  if (latency > d->max_ns) s->s.over_max++;
}

/* When a call began. The clock read costs ~50 ns in a program here; a call
 * written at once on a connection with nothing unacknowledged does without
 * it. Such a call takes its start, once it ends, from TCP's own stamp:
 * sending on an idle connection (nothing unacknowledged) stamps
 * tp->first_tx_mstamp (microseconds, the monotonic clock) with the time its
 * first segment left, and an acknowledgement with the send time of the
 * newest segment it covers; the answer acknowledges the request, so at its
 * arrival the stamp is the request's last segment's. While it is in flight
 * it is aged from the clock of its tick (tick_time: under a tick early). A
 * request sent in one piece has one time; one written in several takes the
 * stamp at its second write (more_of_the_call), and one larger than
 * HR_DEP_ONE_SEND_BYTES, which TCP may send over several round trips, or one
 * behind unacknowledged data, reads the clock. A stamp older than the tick's
 * time is an earlier flight's (the request was not sent at once): the tick's
 * time then. */
#define HR_DEP_ONE_SEND_BYTES 4096

static __always_inline __u64 call_began(const struct hr_dep_call *e, __u64 sent) {
  const __u64 start = e->start_ns;
  if (!(e->flags & HR_DEP_F_TXSTART)) return start;
  return sent >= start ? sent : start;
}

/* The socket's send stamp (first_tx_mstamp) in ns, for call_began. */
static __always_inline __u64 sent_stamp(const struct sock *sk) { return tcp_of(sk)->first_tx_mstamp * 1000; }

/* The clock, read once per tick and CPU: the first call of a jiffy
 * (bpf_jiffies64, inlined: a load) on a CPU reads it, the others of that
 * jiffy take its reading. The time is stored before the jiffy: a program
 * that interrupts the store (an arrival during a write) reads the clock
 * itself. */
struct hr_dep_tick {
  __u64 jiffy;
  __u64 ns;
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct hr_dep_tick);
} dep_tick SEC(".maps");

static __always_inline __u64 tick_time(void) {
  const __u32 zero = 0;
  struct hr_dep_tick *t = bpf_map_lookup_elem(&dep_tick, &zero);
  const __u64 jiffy = bpf_jiffies64();
  if (t && t->jiffy == jiffy) return t->ns;
  const __u64 now = bpf_ktime_get_ns();
  if (t) {
    t->ns = now;
    barrier();
    t->jiffy = jiffy;
  }
  return now;
}

/* The start of a call whose first bytes (bytes of them) are being written on
 * sk (call_began). */
static __always_inline __u64 write_time(const struct sock *sk, __u64 bytes, __u32 *flags) {
  if (tcp_of(sk)->packets_out != 0 || bytes > HR_DEP_ONE_SEND_BYTES) return bpf_ktime_get_ns();
  *flags |= HR_DEP_F_TXSTART;
  return tick_time();
}

/* A call starts on sk with this write (its slot's 1 + index, or 0). */
static __always_inline __u32 start_call(const struct sock *sk, __u32 dep, const struct msghdr *msg) {
  __u32 flags = 0;
  const __u64 now = write_time(sk, msg->msg_iter.count, &flags);
  return take_slot(sk, call_position(sk), dep, now, rcv_nxt(sk), flags);
}

/* More of a call's request is written: its segments will restamp
 * first_tx_mstamp once acknowledged; the call's start is taken now, from
 * the stamp its first piece left. */
static __always_inline void more_of_the_call(const struct sock *sk, struct hr_dep_call *e) {
  if (!(e->flags & HR_DEP_F_TXSTART)) return;
  e->start_ns = call_began(e, sent_stamp(sk));
  e->flags &= ~HR_DEP_F_TXSTART;
}

/* Ends call e (its slot's storage entry st, or 0) at now. sent: the
 * socket's send stamp (sent_stamp), for a call that takes its start from it. */
static __always_inline void end_call_at(struct hr_dep_call *e, struct hr_dep_sk *st, int how, __u32 answer, __u64 now,
                                        __u64 sent) {
  const __u64 start = call_began(e, sent);
  const __u32 dep = e->dep;
  free_call(e, st);
  count_end(dep, now > start ? now - start : 0, how, answer);
}

static __always_inline void end_call(struct hr_dep_call *e, struct hr_dep_sk *st, int how, __u32 answer, __u64 sent) {
  end_call_at(e, st, how, answer, bpf_ktime_get_ns(), sent);
}

/* When the segment that sk_data_ready announces began to be processed: TCP
 * refreshes its clock cache (tcp_clock_ns(), CLOCK_MONOTONIC like
 * bpf_ktime_get_ns()) as an established socket's segment comes in, about a
 * microsecond before the announcement here. A plain load, where the clock
 * read costs ~45 ns on a virtual machine. */
static __always_inline __u64 segment_time(const struct sock *sk) { return tcp_of(sk)->tcp_clock_cache; }

/* What an HTTP status's first digit makes of the answer for the error rule. */
static __always_inline __u32 status_kind(char digit) {
  return digit == '5' ? HR_DEP_ERR_5XX : digit == '4' ? HR_DEP_ERR_4XX : 0;
}

/* HTTP/1: does the answer that began to arrive (its n bytes so far, the
 * last n that reached sk) start with a 5xx or 4xx status line
 * (HR_DEP_ERR_5XX, HR_DEP_ERR_4XX, else 0)? Read only when the bytes sit in
 * one piece of the socket's last buffer (arrived.bpf.h); otherwise it is not
 * known, and not counted an error. */
static __always_inline __u32 answer_status(const struct sock *sk, __u32 n) {
  if (n < 12) return 0;
  const __u64 at = arrived_bytes(sk, n);
  if (!at) return 0;
  /* The bytes through a typed read-only view of 16 bytes (plain loads that
   * read 0 on a fault): no helper call, no copy. */
  const struct in6_addr *v = bpf_rdonly_cast((const void *)at, bpf_core_type_id_kernel(struct in6_addr));
  /* "HTTP" in one word, then '/', the space and the status's first digit. */
  if (v->in6_u.u6_addr32[0] != bpf_htonl(0x48545450)) return 0;
  const __u8 *b = v->in6_u.u6_addr8;
  if (b[4] != '/' || b[8] != ' ') return 0;
  return status_kind(b[9]);
}

/* What a connection's state change does to its call in flight e (st: where
 * its slot is kept, or 0). rcv: the socket's rcv_nxt, read for CLOSE_WAIT
 * only; sent: its send stamp (sent_stamp), 0 where the programs cannot read
 * it (their calls do not take their start from it). */
static __always_inline void state_ends(struct hr_dep_call *e, struct hr_dep_sk *st, int newstate, __u32 rcv,
                                       __u64 sent) {
  if (e->flags & HR_DEP_F_CONNECT) {
    if (newstate == TCP_ESTABLISHED) free_call(e, st); /* connected: calls start at writes */
    else if (newstate == TCP_CLOSE) end_call(e, st, END_CONNECT, 0, 0);
    return;
  }
  if (newstate == TCP_CLOSE_WAIT) {
    /* The peer closed. The state changes before the data that came with the
     * FIN is announced: answer bytes beside the FIN (which takes one
     * sequence number) were the answer. */
    end_call(e, st, rcv - e->rcv_start > 1 ? END_ANSWER : END_RESET, 0, sent);
  } else if (newstate == TCP_CLOSE || newstate == TCP_FIN_WAIT1) {
    end_call(e, st, END_RESET, 0, sent); /* reset, or the client gave up on it */
  }
}

static __always_inline void dep_state(struct sock *sk, int oldstate, int newstate) {
  const struct hr_dep_port *pc = port_config(sk->__sk_common.skc_dport);
  if (!pc) return; /* what other connections pay */
  if (sk->sk_protocol != IPPROTO_TCP) return;
  if (newstate == TCP_SYN_SENT) {
    struct hr_dep_sk *st = decided(sk, pc);
    if (!st || st->dep == HR_DEP_UNTRACED || st->dep == HR_DEP_UNDECIDED || st->slot) return;
    st->slot = take_slot(sk, bpf_get_prandom_u32(), st->dep - 1, bpf_ktime_get_ns(), 0, HR_DEP_F_CONNECT);
    return;
  }
  /* A connect's slot is in the socket's storage; a call's, when the write
   * that began it kept none there, is found from the socket's hash. */
  struct hr_dep_sk *st = bpf_sk_storage_get(&conns, sk, 0, 0);
  struct hr_dep_call *e = st && st->slot ? call_of(sk, st) : 0;
  if (!e) e = find_call(sk);
  if (!e || (e->flags & HR_DEP_F_STREAM)) return; /* a stream's slot near the hash position: dep_h2_state's */
  state_ends(e, st, newstate, newstate == TCP_CLOSE_WAIT ? rcv_nxt(sk) : 0, sent_stamp(sk));
}

static __always_inline void dep_write(struct sock *sk, const struct msghdr *msg) {
  const struct hr_dep_port *pc = port_config(sk->__sk_common.skc_dport);
  if (!pc) return;
  /* A dependency without callers is decided by the peer alone, and its call
   * in flight is found from the socket's hash: no storage look-up. */
  const __u32 dep = dep_of(sk, pc);
  const struct hr_dep *d = bpf_map_lookup_elem(&deps, &dep);
  if (!d) return; /* no dependency's peer */
  if (!d->callers) {
    if (sk->__sk_common.skc_state != TCP_ESTABLISHED) return; /* a connect */
    struct hr_dep_call *e = find_call(sk);
    if (e) {
      more_of_the_call(sk, e);
      return;
    }
    start_call(sk, dep, msg);
    return;
  }
  struct hr_dep_sk *st = decided(sk, pc); /* a connection older than the probe: decided now */
  if (!st || st->dep == HR_DEP_UNTRACED || st->dep == HR_DEP_UNDECIDED) return;
  if (st->slot) {
    struct hr_dep_call *e = call_of(sk, st);
    if (e) {
      more_of_the_call(sk, e);
      return;
    }
  }
  if (sk->__sk_common.skc_state != TCP_ESTABLISHED) return;
  st->slot = start_call(sk, st->dep - 1, msg);
}

static __always_inline void dep_arrival(struct sock *sk) {
  const struct hr_dep_port *pc = port_config(sk->__sk_common.skc_dport);
  if (!pc) return;
  if (sk->sk_protocol != IPPROTO_TCP || sk->__sk_common.skc_state != TCP_ESTABLISHED) return;
  struct hr_dep_call *e = find_call(sk); /* the storage's slot goes stale: the next write sees it */
  if (!e) return;
  const __u32 rcv = rcv_nxt(sk);
  /* a connect's slot; an HTTP/2 stream's of the syscall set, which ends it at the reads */
  if ((e->flags & (HR_DEP_F_CONNECT | HR_DEP_F_STREAM)) || rcv == e->rcv_start) return;
  const __u32 dep = e->dep;
  const struct hr_dep *d = bpf_map_lookup_elem(&deps, &dep);
  const __u32 answer = d && d->proto == HR_DEP_PROTO_HTTP1 ? answer_status(sk, rcv - e->rcv_start) : 0;
  end_call_at(e, 0, END_ANSWER, answer, segment_time(sk), sent_stamp(sk));
}

/* The send-length set (kernels 6.6 to 6.10: sock:sock_send_length, 6.3+,
 * and sk_data_ready, without tcp_sendmsg_locked): a call starts as the
 * client's send returns, bytes long. The socket's lock is released by then,
 * so the answer can come first (loopback: the server answers before the
 * send returns) or at the same time, on another CPU. The call's rcv_start
 * is therefore the read position (copied_seq): the client has read the last
 * answer before it sends, and any byte past that position is this call's
 * answer. When one is there once the slot is taken, the answer came during
 * the send, and the call ends here, at the time TCP processed it
 * (segment_time), unless the arrival found the slot and ended it first
 * (both end it only when the arrival runs in the instant between this
 * program's load of rcv_nxt and its end of the call: counted twice then). */
static __always_inline void dep_sent(struct sock *sk, __u32 bytes) {
  const struct hr_dep_port *pc = port_config(sk->__sk_common.skc_dport);
  if (!pc) return; /* what other sends pay, of every kind of socket */
  const __u16 family = sk->__sk_common.skc_family;
  if ((family != AF_INET && family != AF_INET6) || sk->sk_protocol != IPPROTO_TCP ||
      sk->__sk_common.skc_state != TCP_ESTABLISHED)
    return;
  const __u32 dep = dep_of(sk, pc);
  const struct hr_dep *d = bpf_map_lookup_elem(&deps, &dep);
  if (!d) return; /* no dependency's peer */
  struct hr_dep_sk *st = 0;
  if (d->callers) {
    st = decided(sk, pc);
    if (!st || st->dep == HR_DEP_UNTRACED || st->dep == HR_DEP_UNDECIDED) return;
  }
  struct hr_dep_call *e = find_call(sk);
  if (e) {
    /* More of the call: its start stays as its first send took it. The
     * stamp is no guide now: this piece, sent on an idle connection (the
     * first one acknowledged), stamped its own time. */
    e->flags &= ~HR_DEP_F_TXSTART;
    return;
  }
  const struct tcp_sock *tp = tcp_of(sk);
  const __u32 copied = tp->copied_seq;
  __u32 flags = 0;
  __u64 now;
  if (bytes > HR_DEP_ONE_SEND_BYTES) {
    now = bpf_ktime_get_ns();
  } else {
    /* TCP's send stamp: this send's first segment's time when it went out
     * on an idle connection, else older (the tick's time then, under a tick
     * early, refined from the stamp the answer leaves: call_began). */
    flags = HR_DEP_F_TXSTART;
    const __u64 tick = tick_time(), sent = sent_stamp(sk);
    now = sent > tick ? sent : tick;
  }
  const __u32 slot = take_slot(sk, call_position(sk), dep, now, copied, flags);
  if (st) st->slot = slot;
  if (!slot) return;
  barrier();
  const __u32 rcv = tp->rcv_nxt;
  if (rcv == copied) return; /* the answer is to come: sk_data_ready ends the call */
  e = slot_at(slot - 1);
  if (!e || e->sk != (__u64)sk) return; /* the arrival ended it */
  const __u32 answer = d->proto == HR_DEP_PROTO_HTTP1 ? answer_status(sk, rcv - copied) : 0;
  end_call_at(e, st, END_ANSWER, answer, segment_time(sk), sent_stamp(sk));
}

/* HTTP/2 dependencies: streams (dep_h2_write, dep_h2_arrival, dep_h2_state). */
#include "dependency_http2.bpf.h"

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(hr_dep_set_state, struct sock *sk, int oldstate, int newstate) {
  dep_state(sk, oldstate, newstate);
  dep_h2_state(sk, newstate);
  return 0;
}

SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(hr_dep_write, struct sock *sk, const struct msghdr *msg, const struct sk_buff *skb, int size_goal) {
  if (dep_h2_write(sk, msg)) return 0;
  dep_write(sk, msg);
  return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(hr_dep_sent, struct sock *sk, int ret, int flags) {
  if (ret > 0) dep_sent(sk, (__u32)ret);
  return 0;
}

SEC("tp_btf/sk_data_ready")
int BPF_PROG(hr_dep_arrival, struct sock *sk) {
  if (dep_h2_arrival(sk)) return 0;
  dep_arrival(sk);
  return 0;
}

/* The syscall program set, for kernels without tcp:tcp_sendmsg_locked. */
#include "dependency_syscalls.bpf.h"
