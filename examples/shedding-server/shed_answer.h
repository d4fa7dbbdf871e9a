// SPDX-License-Identifier: Apache-2.0
// What the shedding server's shed answer says besides its status (server.cc):
// the retry dials for the request's priority and the probability it was shed
// with (orca::shed_verdict, headroom/orca/retry.h), so that a client backs
// off as the server asks.
#pragma once

#include <string>

#include <headroom/orca/retry.h>

#include "options.h"  // orca's namespace alias

namespace shedding_server {

// The shed answer's headers, each ending in CRLF:
//   x-headroom-shed: 1
//   Retry-After: <whole seconds>
//   x-headroom-retry: {"maxRetries":N,"retryAfterSeconds":S}
// The dials header is sent when maxRetries is 0 too: "do not retry" is advice.
std::string shed_answer_headers(const orca::RetryDials& dials);

}  // namespace shedding_server
