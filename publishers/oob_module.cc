// SPDX-License-Identifier: Apache-2.0
#include "publishers/oob_module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <filesystem>

namespace headroom::publishers {

std::string oob_module_path() {
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return std::string("/usr/sbin/") + HEADROOM_OOB_MODULE;  // no /proc: the package's place
  exe[n] = '\0';
  const auto dir = std::filesystem::path(exe).parent_path();
  if (dir == HEADROOM_BUILD_AGENT_DIR) return HEADROOM_BUILD_OOB_MODULE;
  return (dir / HEADROOM_OOB_MODULE).lexically_normal().string();
}

Result<Publishers> build_oob_publishers(const OobOptions& options) {
  if (options.oob.listen.empty() && options.oob.instance_listen.empty()) return Publishers{};
  using Build = void (*)(const OobOptions*, Result<Publishers>*);
  // Loaded once and never unloaded: the streams and listeners it keeps
  // outlive a reload (OobHub).
  static Build build = nullptr;
  if (build == nullptr) {
    const std::string path = oob_module_path();
    void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (module == nullptr) {
      const char* e = ::dlerror();
      return Error{ELIBACC, "oob.listen: cannot load the [oob] module " + path + ": " + (e ? e : "unknown error") +
                                "; it is part of the headroom package (reinstall it), or empty [oob] listen and instance_listen"};
    }
    build = reinterpret_cast<Build>(::dlsym(module, "headroom_oob_build"));
    if (build == nullptr)
      return Error{ELIBBAD, "oob.listen: " + path + " is not headroom's [oob] module (no headroom_oob_build)"};
  }
  Result<Publishers> out = Publishers{};
  build(&options, &out);
  return out;
}

}  // namespace headroom::publishers
