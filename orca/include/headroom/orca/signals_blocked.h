// SPDX-License-Identifier: Apache-2.0
// Threads started while an AllSignalsBlocked lives block every signal, so
// that SIGTERM and SIGHUP reach the daemon's signalfd and never a server
// thread (gRPC's, libmicrohttpd's, the stream sender's). Header-only.
#pragma once

#include <pthread.h>
#include <signal.h>

namespace headroom {

class AllSignalsBlocked {
 public:
  AllSignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &saved_);
  }
  ~AllSignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  AllSignalsBlocked(const AllSignalsBlocked&) = delete;
  AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

 private:
  sigset_t saved_;
};

}  // namespace headroom
