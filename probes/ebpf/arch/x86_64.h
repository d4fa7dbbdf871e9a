// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* x86_64: libbpf's target name, the system call numbers
 * (arch/x86/entry/syscalls/syscall_64.tbl, <asm/unistd_64.h>) and where
 * sys_exit finds the number of the returning call. Checked against the
 * installed <asm/unistd_64.h> by the bpf.ArchHeaders test. Through arch.h only. */
#ifndef HEADROOM_PROBES_EBPF_ARCH_X86_64_H
#define HEADROOM_PROBES_EBPF_ARCH_X86_64_H

#define __TARGET_ARCH_x86 1
#define HR_BPF_ARCH_NAME "x86_64"

#define HR_NR_read 0
#define HR_NR_write 1
#define HR_NR_readv 19
#define HR_NR_writev 20
#define HR_NR_sendfile 40
#define HR_NR_accept 43
#define HR_NR_sendto 44
#define HR_NR_recvfrom 45
#define HR_NR_sendmsg 46
#define HR_NR_recvmsg 47
#define HR_NR_accept4 288

/* The call's number: pt_regs.orig_ax (ax holds the return value by then).
 * A CO-RE flavor of struct pt_regs with that field and the first argument's,
 * so this does not depend on which architecture's vmlinux.h is included.
 * HR_SYSCALL_NR: plain load (BTF tracepoints, a typed pointer); _CORE:
 * bpf_probe_read_kernel. */
struct pt_regs___hr_x86_64 {
  unsigned long di;
  unsigned long orig_ax;
} __attribute__((preserve_access_index));
#define HR_SYSCALL_NR(regs) ((long)((const struct pt_regs___hr_x86_64 *)(regs))->orig_ax)
#define HR_SYSCALL_NR_CORE(regs) ((long)BPF_CORE_READ((const struct pt_regs___hr_x86_64 *)(regs), orig_ax))
/* The number and the first argument (di, PT_REGS_PARM1_SYSCALL's) into two
 * __u64: one read, the two lie side by side (syscall_io.bpf.h's read_two). */
#define HR_SYSCALL_NR_FD_CORE(regs, nr, fd) HR_READ_TWO((regs), struct pt_regs___hr_x86_64, orig_ax, (nr), di, (fd))

#endif
