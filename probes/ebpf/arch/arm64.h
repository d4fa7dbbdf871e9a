// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* arm64 (AArch64): libbpf's target name, the system call numbers (the
 * generic table, include/uapi/asm-generic/unistd.h with 64-bit longs:
 * sendfile is __NR3264_sendfile) and where sys_exit finds the number of the
 * returning call. Checked against the installed <asm-generic/unistd.h> by
 * the bpf.ArchHeaders test. Through arch.h only.
 *
 * The checked-in vmlinux.h is x86_64's (docs/endpoints.md, "Other
 * architectures"). The programs touch kernel types by name only (struct
 * sock, tcp_sock, file, socket, fdtable, task_struct: the loader relocates
 * every field against the running kernel's BTF), the user ABI structs
 * iovec and user_msghdr (the same layout on both: LP64), and struct
 * pt_regs, whose layout is the architecture's. For that one the x86 file
 * does not serve; what libbpf's arm64 PT_REGS_* macros cast to and the
 * syscall number's field are declared here. */
#ifndef HEADROOM_PROBES_EBPF_ARCH_ARM64_H
#define HEADROOM_PROBES_EBPF_ARCH_ARM64_H

#define __TARGET_ARCH_arm64 1
#define HR_BPF_ARCH_NAME "arm64"

#define HR_NR_read 63
#define HR_NR_write 64
#define HR_NR_readv 65
#define HR_NR_writev 66
#define HR_NR_sendfile 71
#define HR_NR_accept 202
#define HR_NR_sendto 206
#define HR_NR_recvfrom 207
#define HR_NR_sendmsg 211
#define HR_NR_recvmsg 212
#define HR_NR_accept4 242

/* libbpf's PT_REGS_PARMn (n >= 2) read struct user_pt_regs (uapi
 * <asm/ptrace.h>: the kernel's struct pt_regs begins with it), which an
 * x86 vmlinux.h lacks: its uapi layout, relocated by name. PARM1_SYSCALL
 * reads pt_regs.orig_x0 through libbpf's own flavor (x0 holds the return
 * value by sys_exit). With an arm64 vmlinux.h, define HR_VMLINUX_ARM64
 * and this declaration goes. */
#ifndef HR_VMLINUX_ARM64
struct user_pt_regs {
  unsigned long long regs[31];
  unsigned long long sp;
  unsigned long long pc;
  unsigned long long pstate;
} __attribute__((preserve_access_index));
#endif

/* The call's number: pt_regs.syscallno (s32), a CO-RE flavor with that one
 * field. HR_SYSCALL_NR: plain load (BTF tracepoints); _CORE: by
 * bpf_probe_read_kernel. */
struct pt_regs___hr_arm64 {
  int syscallno;
} __attribute__((preserve_access_index));
#define HR_SYSCALL_NR(regs) ((long)((const struct pt_regs___hr_arm64 *)(regs))->syscallno)
#define HR_SYSCALL_NR_CORE(regs) ((long)BPF_CORE_READ((const struct pt_regs___hr_arm64 *)(regs), syscallno))
/* The number and the first argument (orig_x0, PT_REGS_PARM1_SYSCALL's)
 * into two __u64, by one read each. */
#define HR_SYSCALL_NR_FD_CORE(regs, nr, fd) \
  (*(nr) = (__u64)HR_SYSCALL_NR_CORE(regs), *(fd) = (__u64)PT_REGS_PARM1_CORE_SYSCALL(regs))

#endif
