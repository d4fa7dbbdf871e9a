// SPDX-License-Identifier: Apache-2.0
#include "probes/kernel_features.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace headroom::probes {
namespace {

bool has_tracepoint(const btf* vmlinux, std::string_view name) {
  const std::string type = "btf_trace_" + std::string(name);
  return btf__find_by_name_kind(vmlinux, type.c_str(), BTF_KIND_TYPEDEF) > 0;
}

bool has_kfunc(const btf* vmlinux, const char* name) {
  return btf__find_by_name_kind(vmlinux, name, BTF_KIND_FUNC) > 0;
}

// Whether the kernel's enum bpf_func_id names the helper (BPF_FUNC_<name>).
bool has_helper(const btf* vmlinux, std::string_view name) {
  const __s32 id = btf__find_by_name_kind(vmlinux, "bpf_func_id", BTF_KIND_ENUM);
  if (id <= 0) return false;
  const btf_type* t = btf__type_by_id(vmlinux, static_cast<__u32>(id));
  const std::string wanted = "BPF_FUNC_" + std::string(name);
  const struct btf_enum* e = btf_enum(t);
  for (__u16 i = 0; i < btf_vlen(t); ++i)
    if (const char* n = btf__name_by_offset(vmlinux, e[i].name_off); n != nullptr && wanted == n) return true;
  return false;
}

}  // namespace

KernelFeatures kernel_features_of(const btf* vmlinux) {
  KernelFeatures k;
  k.sk_data_ready = has_tracepoint(vmlinux, "sk_data_ready");
  k.tcp_sendmsg_locked = has_tracepoint(vmlinux, "tcp_sendmsg_locked");
  k.sock_send_length = has_tracepoint(vmlinux, "sock_send_length");
  k.rdonly_cast = has_kfunc(vmlinux, "bpf_rdonly_cast");
  k.current_task_btf = has_helper(vmlinux, "get_current_task_btf");
  return k;
}

Result<KernelFeatures> running_kernel_features() {
  static std::mutex mutex;
  static std::optional<KernelFeatures> known;
  const std::lock_guard lock(mutex);
  if (known) return *known;
  btf* vmlinux = btf__load_vmlinux_btf();
  if (vmlinux == nullptr) {
    const int err = errno != 0 ? errno : ENOENT;
    return Error{err, std::string("cannot read the kernel's BTF (/sys/kernel/btf/vmlinux): ") + std::strerror(err)};
  }
  known = kernel_features_of(vmlinux);
  btf__free(vmlinux);
  return *known;
}

}  // namespace headroom::probes
