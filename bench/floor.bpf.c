// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The eBPF floor of bench_ebpf_floor: empty programs on the tracepoints the
 * endpoint probe (probes/ebpf/endpoint.bpf.c) attaches. What they cost is the
 * price of having a program on those tracepoints at all (the tracepoint's
 * dispatch, the BPF trampoline, the call and return), which no work in the
 * product's programs can go below; the benchmark reports the product's cost
 * as a ratio to it.
 *
 *   socket floor   sk_data_ready, sock_recv_length (>= 6.3),
 *                  tcp_sendmsg_locked (>= 6.11), inet_sock_set_state
 *   syscall floor  sys_enter, sys_exit, inet_sock_set_state, sk_data_ready
 *   raw floor      sys_exit, inet_sock_set_state as raw tracepoints (the
 *                  dependency probe's raw_tp syscall set, bench_dependency_floor)
 *
 * One program per tracepoint, each with its own name: the benchmark attaches
 * each floor's subset itself (bpf_program__attach) and loads only the
 * programs whose tracepoint the running kernel has. BTF tracepoints, as the
 * product's first choice, and two raw ones: no tracefs needed. */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("tp_btf/sk_data_ready")
int floor_sk_data_ready(void *ctx) {
  return 0;
}

SEC("tp_btf/sock_recv_length")
int floor_sock_recv_length(void *ctx) {
  return 0;
}

SEC("tp_btf/sock_send_length")
int floor_sock_send_length(void *ctx) {
  return 0;
}

SEC("tp_btf/tcp_sendmsg_locked")
int floor_tcp_sendmsg_locked(void *ctx) {
  return 0;
}

SEC("tp_btf/inet_sock_set_state")
int floor_inet_sock_set_state(void *ctx) {
  return 0;
}

SEC("tp_btf/sys_enter")
int floor_sys_enter(void *ctx) {
  return 0;
}

SEC("tp_btf/sys_exit")
int floor_sys_exit(void *ctx) {
  return 0;
}

SEC("raw_tp/sys_exit")
int floor_raw_sys_exit(void *ctx) {
  return 0;
}

SEC("raw_tp/inet_sock_set_state")
int floor_raw_inet_sock_set_state(void *ctx) {
  return 0;
}
