// SPDX-License-Identifier: Apache-2.0
// A listening TCP socket of the publishers' own ([prometheus] listen, the
// [oob] listen TCP addresses), bound here so that a failure names its cause.
#pragma once

#include <string>

#include "headroom/orca/result.h"

namespace headroom::publishers {

// "127.0.0.1:9446" / "[::1]:9446" (checked by the configuration): a bound,
// listening, close-on-exec socket with a backlog of SOMAXCONN (a burst of
// connections waits for accept() rather than being dropped); `port` is the
// bound port (the one port 0 got). IPv6 addresses listen on IPv6 only:
// "[::]:9446" does not also take IPv4. No SO_REUSEPORT: two processes do not
// share a port without knowing it.
Result<int> listen_on(const std::string& address, int& port);

// The listeners' threads run this much nicer than the process, so that on a
// busy machine a connection flood's work waits for the sampling loop, not
// the loop for it. Lowering one's own priority needs no privilege.
inline constexpr int kListenerNiceness = 10;
// Makes the calling thread kListenerNiceness nicer, once per thread (a
// thread it starts inherits it).
void lower_listener_thread_priority();

}  // namespace headroom::publishers
