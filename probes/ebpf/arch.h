// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The target architecture of the BPF programs, chosen at configure time
 * (cmake -DHEADROOM_BPF_ARCH=x86_64|arm64, which defines HR_BPF_ARCH_<name>).
 * Each arch/<name>.h is the one place for what differs by architecture: the
 * __TARGET_ARCH_* name libbpf's bpf_tracing.h reads (its PT_REGS_* macros),
 * the system call numbers the programs match, and where the number of the
 * system call that is returning sits in struct pt_regs. Everything else the
 * programs touch is found by name in the running kernel's BTF (CO-RE), so the
 * programs use no field of struct pt_regs by name: only PT_REGS_* and
 * HR_SYSCALL_NR*.
 *
 * Included after vmlinux.h and before <bpf/bpf_tracing.h>. */
#ifndef HEADROOM_PROBES_EBPF_ARCH_H
#define HEADROOM_PROBES_EBPF_ARCH_H

#if defined(HR_BPF_ARCH_x86_64)
#include "arch/x86_64.h"
#elif defined(HR_BPF_ARCH_arm64)
#include "arch/arm64.h"
#else
#error "no BPF target architecture: configure with cmake -DHEADROOM_BPF_ARCH=x86_64 or arm64"
#endif

#if !defined(HR_NR_read) || !defined(HR_NR_accept4) || !defined(HR_SYSCALL_NR) || !defined(HR_SYSCALL_NR_CORE) || \
    !defined(HR_SYSCALL_NR_FD_CORE)
#error "the architecture header must define HR_NR_* and HR_SYSCALL_NR, HR_SYSCALL_NR_CORE, HR_SYSCALL_NR_FD_CORE"
#endif

#endif
