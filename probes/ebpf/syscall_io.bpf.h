// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What the syscall programs of both probes share (endpoint.bpf.c, the
 * server's side; dependency_syscalls.bpf.h, the client's): which socket
 * syscalls move bytes and where their bytes are, the TCP socket behind a file
 * descriptor of the current task, and an HTTP/1 status line in a user
 * buffer. Included after vmlinux.h, arch.h and the BPF helpers, and after
 * the including file's AF_INET and AF_INET6. Each function comes as a plain
 * load version (BTF tracepoints: typed pointers) and a
 * bpf_probe_read_kernel version (raw tracepoints: untyped), picked by a
 * constant `btf` argument or by name. */
#ifndef HEADROOM_PROBES_EBPF_SYSCALL_IO_BPF_H
#define HEADROOM_PROBES_EBPF_SYSCALL_IO_BPF_H

#define S_IFMT 00170000
#define S_IFSOCK 0140000

#define DIR_IN 1
#define DIR_OUT 2
/* buffer kinds: where the first bytes are */
#define BUF_NONE 0
#define BUF_PLAIN 1 /* (fd, buf, len) */
#define BUF_IOV 2   /* (fd, iov, cnt) */
#define BUF_MSG 3   /* (fd, msghdr, flags) */

/* A typed, read-only view of a kernel object (kernel 6.2+; the verifier
 * turns it into nothing): a kernel object's fields by plain loads, not a
 * bpf_probe_read_kernel call each. Weak, so the object still loads where
 * the kernel lacks it: there only the raw tracepoint programs, which do not
 * use it, load. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/* The socket syscalls that move bytes, by number: 1 with their direction and
 * buffer kind, 0 for every other call. */
static __always_inline int syscall_io(long id, __u32 *dir, __u32 *kind) {
  switch (id) {
    case HR_NR_read: case HR_NR_recvfrom: *dir = DIR_IN; *kind = BUF_PLAIN; return 1;
    case HR_NR_readv: *dir = DIR_IN; *kind = BUF_IOV; return 1;
    case HR_NR_recvmsg: *dir = DIR_IN; *kind = BUF_MSG; return 1;
    case HR_NR_write: case HR_NR_sendto: *dir = DIR_OUT; *kind = BUF_PLAIN; return 1;
    case HR_NR_writev: *dir = DIR_OUT; *kind = BUF_IOV; return 1;
    case HR_NR_sendmsg: *dir = DIR_OUT; *kind = BUF_MSG; return 1;
    case HR_NR_sendfile: *dir = DIR_OUT; *kind = BUF_NONE; return 1;
    default: return 0;
  }
}

/* Where the bytes a syscall moved are, from its second and third arguments:
 * returns the first buffer (0: not known); for the vector calls *iov is the
 * iovec array and *n its length (capped at 1024), else both stay 0. */
static __always_inline __u64 io_buffers(__u32 kind, __u64 arg, __u64 count, __u64 *iov_out, __u32 *n_out) {
  if (kind == BUF_PLAIN) return arg;
  __u64 iov = 0, n = 0;
  if (kind == BUF_IOV) {
    iov = arg;
    n = count;
  } else if (kind == BUF_MSG) {
    struct user_msghdr msg = {};
    if (bpf_probe_read_user(&msg, sizeof msg, (void *)arg)) return 0;
    iov = (__u64)msg.msg_iov;
    n = msg.msg_iovlen;
  }
  if (!iov || n == 0) return 0;
  struct iovec v = {};
  if (bpf_probe_read_user(&v, sizeof v, (void *)iov)) return 0;
  *iov_out = iov;
  *n_out = n > 1024 ? 1024 : (__u32)n;
  return (__u64)v.iov_base;
}

/* Two fields of a kernel object, bytes [oa, oa + na) and [ob, ob + nb)
 * (sizes 1, 2, 4 or 8, naturally aligned), into *a and *b zero-extended: by
 * one bpf_probe_read_kernel where this kernel lays them out within 16 bytes
 * of each other (from the first's 8-byte boundary), else by one each. The
 * offsets are CO-RE relocations, constants to the verifier, which follows
 * one branch only. A failed read leaves 0. (Raw tracepoints: every read of
 * a kernel field is a helper call, the largest part of their cost.) */
static __always_inline __u64 span_value(const __u64 *w, __u32 off, __u32 n) {
  const char *b = (const char *)w + off;
  if (n == 8) return *(const __u64 *)b;
  if (n == 4) return *(const __u32 *)b;
  if (n == 2) return *(const __u16 *)b;
  return *(const __u8 *)b;
}

static __always_inline void read_two(const void *p, __u32 oa, __u32 na, __u64 *a, __u32 ob, __u32 nb, __u64 *b) {
  const __u32 lo = (oa < ob ? oa : ob) & ~7u;
  const __u32 hi = oa + na > ob + nb ? oa + na : ob + nb;
  __u64 w[2] = {0, 0};
  if (hi - lo <= sizeof w) {
    bpf_probe_read_kernel(w, hi - lo, (const char *)p + lo);
    *a = span_value(w, oa - lo, na);
    *b = span_value(w, ob - lo, nb);
    return;
  }
  bpf_probe_read_kernel(w, na, (const char *)p + oa);
  *a = span_value(w, 0, na);
  w[0] = 0;
  bpf_probe_read_kernel(w, nb, (const char *)p + ob);
  *b = span_value(w, 0, nb);
}

#define HR_READ_TWO(p, type, fa, a, fb, b)                                                                       \
  read_two((p), bpf_core_field_offset(type, fa), bpf_core_field_size(type, fa), (a), bpf_core_field_offset(type, fb), \
           bpf_core_field_size(type, fb), (b))

/* A socket's first fields, its struct sock_common's: what the syscall
 * programs decide on. */
struct sk_head {
  __u32 daddr; /* the peer's IPv4 address */
  __u32 hash;  /* skc_hash */
  __u16 dport; /* the peer's port, network byte order */
  __u16 num;   /* the local port */
  __u16 family;
  __u8 state;
};

/* By plain loads (a typed pointer). */
static __always_inline void sk_head_btf(const struct sock *sk, struct sk_head *h) {
  h->daddr = sk->__sk_common.skc_daddr;
  h->hash = sk->__sk_common.skc_hash;
  h->dport = sk->__sk_common.skc_dport;
  h->num = sk->__sk_common.skc_num;
  h->family = sk->__sk_common.skc_family;
  h->state = sk->__sk_common.skc_state;
}

#define HR_SK_AT(f) bpf_core_field_offset(struct sock, __sk_common.f)
#define HR_SK_HEAD_BYTES 24

/* By one bpf_probe_read_kernel of the socket's first 24 bytes, where the
 * kernels the raw programs serve (5.5+) lay these fields out (the offsets
 * are CO-RE relocations: a kernel that did otherwise would take the branch
 * of one read per field). 0 when the socket cannot be read. */
static __always_inline int sk_head_raw(const struct sock *sk, struct sk_head *h) {
  if (HR_SK_AT(skc_daddr) + 4 <= HR_SK_HEAD_BYTES && HR_SK_AT(skc_hash) + 4 <= HR_SK_HEAD_BYTES &&
      HR_SK_AT(skc_dport) + 2 <= HR_SK_HEAD_BYTES && HR_SK_AT(skc_num) + 2 <= HR_SK_HEAD_BYTES &&
      HR_SK_AT(skc_family) + 2 <= HR_SK_HEAD_BYTES && HR_SK_AT(skc_state) + 1 <= HR_SK_HEAD_BYTES) {
    __u64 w[HR_SK_HEAD_BYTES / 8] = {0, 0, 0};
    if (bpf_probe_read_kernel(w, sizeof w, sk)) return 0;
    h->daddr = (__u32)span_value(w, HR_SK_AT(skc_daddr), 4);
    h->hash = (__u32)span_value(w, HR_SK_AT(skc_hash), 4);
    h->dport = (__u16)span_value(w, HR_SK_AT(skc_dport), 2);
    h->num = (__u16)span_value(w, HR_SK_AT(skc_num), 2);
    h->family = (__u16)span_value(w, HR_SK_AT(skc_family), 2);
    h->state = (__u8)span_value(w, HR_SK_AT(skc_state), 1);
    return 1;
  }
  h->daddr = BPF_CORE_READ(sk, __sk_common.skc_daddr);
  h->hash = BPF_CORE_READ(sk, __sk_common.skc_hash);
  h->dport = BPF_CORE_READ(sk, __sk_common.skc_dport);
  h->num = BPF_CORE_READ(sk, __sk_common.skc_num);
  h->family = BPF_CORE_READ(sk, __sk_common.skc_family);
  h->state = BPF_CORE_READ(sk, __sk_common.skc_state);
  return 1;
}

/* The address of fd's entry in the current task's file table (0: none),
 * by plain loads from the typed task (bpf_get_current_task_btf, 5.11+). The
 * table's array is a struct file ** to the verifier: a number. */
static __always_inline __u64 fd_entry_btf(long fd) {
  if (fd < 0) return 0;
  struct task_struct *task = bpf_get_current_task_btf();
  struct fdtable *fdt = task->files->fdt;
  if (!fdt) return 0;
  if ((unsigned long)fd >= fdt->max_fds) return 0;
  const __u64 fds = (__u64)fdt->fd;
  if (!fds) return 0;
  return fds + (__u64)fd * sizeof(struct file *);
}

/* fd of the current task -> its struct sock, when it is a TCP/IP socket,
 * its first fields in *h. By plain loads from the typed task (BTF
 * tracepoints). */
static __always_inline struct sock *sock_of_fd_btf(long fd, struct sk_head *h) {
  const __u64 entry = fd_entry_btf(fd);
  if (!entry) return 0;
  /* fds[fd] by a plain load: the entry's address viewed as a kernel type
   * whose first field is a struct file * (no helper call). */
  const struct kiocb *slot = bpf_rdonly_cast((void *)entry, bpf_core_type_id_kernel(struct kiocb));
  const struct file *file = slot->ki_filp;
  if (!file) return 0;
  if ((file->f_inode->i_mode & S_IFMT) != S_IFSOCK) return 0;
  const struct socket *sock = bpf_rdonly_cast(file->private_data, bpf_core_type_id_kernel(struct socket));
  struct sock *sk = sock->sk;
  if (!sk) return 0;
  sk_head_btf(sk, h);
  if (h->family != AF_INET && h->family != AF_INET6) return 0;
  if (sk->sk_protocol != IPPROTO_TCP) return 0;
  return sk;
}

/* The socket behind a file table entry (its address), by
 * bpf_probe_read_kernel: the file, its inode's mode, its private data (the
 * struct socket), its struct sock and that one's head, the fields read
 * together where they lie together; an IPv4 or IPv6 socket, not yet known
 * to be TCP: the caller asks sock_is_tcp once the socket's port is one it
 * traces (one read fewer for every other descriptor). */
static __always_inline struct sock *sock_of_entry(__u64 entry, struct sk_head *h) {
  struct file *f = 0;
  if (bpf_probe_read_kernel(&f, sizeof f, (void *)entry) || !f) return 0;
  umode_t mode = BPF_CORE_READ(f, f_inode, i_mode);
  if ((mode & S_IFMT) != S_IFSOCK) return 0;
  struct socket *sock = BPF_CORE_READ(f, private_data);
  if (!sock) return 0;
  struct sock *sk = BPF_CORE_READ(sock, sk);
  if (!sk || !sk_head_raw(sk, h)) return 0;
  if (h->family != AF_INET && h->family != AF_INET6) return 0;
  return sk;
}

/* fd's socket as sock_of_entry says, the file table read by
 * bpf_probe_read_kernel too (raw tracepoints: untyped). */
static __always_inline struct sock *sock_of_fd(long fd, struct sk_head *h) {
  if (fd < 0) return 0;
  struct task_struct *task = (struct task_struct *)bpf_get_current_task();
  struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
  if (!fdt) return 0;
  __u64 max = 0, fds = 0;
  HR_READ_TWO(fdt, struct fdtable, max_fds, &max, fd, &fds);
  if ((unsigned long)fd >= max || !fds) return 0;
  return sock_of_entry(fds + (__u64)fd * sizeof(struct file *), h);
}

/* The same with the file table by plain loads (fd_entry_btf), for BTF
 * tracepoints on kernels without bpf_rdonly_cast (before 6.2), which
 * cannot type what lies past the table's array: from the entry on, the
 * reads are sock_of_entry's. */
static __always_inline struct sock *sock_of_fd_task(long fd, struct sk_head *h) {
  const __u64 entry = fd_entry_btf(fd);
  return entry ? sock_of_entry(entry, h) : 0;
}

/* Whether an IPv4 or IPv6 socket is TCP (not UDP, MPTCP or SCTP), by
 * bpf_probe_read_kernel (sk_protocol was a bitfield before 5.6). */
static __always_inline int sock_is_tcp(const struct sock *sk) {
  return BPF_CORE_READ_BITFIELD_PROBED(sk, sk_protocol) == IPPROTO_TCP;
}

/* A TCP socket's read position and receive end (btf: plain loads; else
 * one read where this kernel keeps them side by side, as before 6.8). */
static __always_inline void tcp_seqs(__u64 sk, const int btf, __u32 *copied, __u32 *rcv) {
  if (btf) {
    const struct tcp_sock *tp = bpf_rdonly_cast((const void *)sk, bpf_core_type_id_kernel(struct tcp_sock));
    *copied = tp->copied_seq;
    *rcv = tp->rcv_nxt;
  } else {
    __u64 c = 0, r = 0;
    HR_READ_TWO((const struct tcp_sock *)sk, struct tcp_sock, copied_seq, &c, rcv_nxt, &r);
    *copied = (__u32)c;
    *rcv = (__u32)r;
  }
}

/* The first digit of an answer's status ('5' for "HTTP/1.x 5xx"), from its
 * status line's first 12 bytes in a user buffer; 0 when it is none. */
static __always_inline char status_digit(__u64 buf) {
  char b[12] = {};
  if (!buf || bpf_probe_read_user(b, sizeof b, (void *)buf)) return 0;
  if (!(b[0] == 'H' && b[1] == 'T' && b[2] == 'T' && b[3] == 'P' && b[4] == '/' && b[8] == ' ')) return 0;
  return b[9];
}

/* "HTTP/1.x 5xx". */
static __always_inline int is_server_error(__u64 buf) { return status_digit(buf) == '5'; }

#endif
