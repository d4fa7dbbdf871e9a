// SPDX-License-Identifier: Apache-2.0
// State that outlives a configuration: the Prometheus counters and listening
// sockets, the out-of-band streams and their listeners. The running
// pipeline's publishers and a reload's new ones share the one object of the
// process while either holds it; it is made when none is alive.
#pragma once

#include <memory>
#include <mutex>

namespace headroom::publishers {

template <class T>
std::shared_ptr<T> process_shared() {
  static std::mutex mutex;
  static std::weak_ptr<T> current;
  std::lock_guard lock(mutex);
  auto shared = current.lock();
  if (!shared) {
    shared = std::make_shared<T>();
    current = shared;
  }
  return shared;
}

}  // namespace headroom::publishers
