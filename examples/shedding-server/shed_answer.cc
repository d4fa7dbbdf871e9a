// SPDX-License-Identifier: Apache-2.0
// The shedding server's shed answer (shed_answer.h).
#include "shed_answer.h"

#include <headroom/orca/retry.h>

namespace shedding_server {

std::string shed_answer_headers(const orca::RetryDials& dials) {
  std::string h = "x-headroom-shed: 1\r\nRetry-After: ";
  h += std::to_string(orca::retry_after_header_seconds(dials));
  h += "\r\n";
  h += orca::kRetryDialsHeader;
  h += ": ";
  h += orca::format_retry_dials(dials);
  h += "\r\n";
  return h;
}

}  // namespace shedding_server
