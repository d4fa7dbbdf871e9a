// SPDX-License-Identifier: Apache-2.0
/*
 * The priority and gRPC functions of headroom_orca.h from strict C11
 * (-std=c11 -Wpedantic -Wconversion -Werror): the declarations compile as C,
 * and the calls work. c_api_priority_test calls this; 0 means every step
 * passed, else the number of the first that failed.
 */
#include <errno.h>
#include <string.h>

#include <headroom/orca/headroom_orca.h>

int headroom_c11_priority_calls(void);

int headroom_c11_priority_calls(void) {
  const char header[] = " Best_Effort ";
  int named = 0;
  int level = headroom_priority_parse(header, sizeof header - 1, &named);
  if (level != 75 || named != 1) return 1;
  if (headroom_priority_or_default(headroom_priority_parse(NULL, 0, NULL), 40) != 40) return 2;
  char buf[8];
  if (headroom_priority_format(level, buf, sizeof buf) != 2 || strcmp(buf, "75") != 0) return 3;
  uint64_t refused = headroom_priority_upgrades_refused();
  int token = headroom_priority_scope_begin(level);
  if (token <= 0 || headroom_priority_current(0) != 75) return 4;
  if (headroom_priority_outgoing(HEADROOM_PRIORITY_NO_REQUEST) != 75) return 5;
  if (headroom_priority_outgoing(90) != 90) return 6;
  if (headroom_priority_outgoing(20) != 75 || headroom_priority_upgrades_refused() != refused + 1) return 7;
  if (headroom_priority_scope_end(token) != 0 || headroom_priority_scope_end(token) != -EINVAL) return 8;
  if (headroom_priority_current(0) != 0) return 9;

  headroom_retry_dials dials;
  if (headroom_retry_dials_for(30, 0.5, &dials) != 0) return 10;
  headroom_grpc_trailer trailers[HEADROOM_GRPC_SHED_TRAILER_COUNT];
  if (headroom_retry_grpc_trailers(&dials, trailers) != HEADROOM_GRPC_SHED_TRAILER_COUNT) return 11;
  if (strcmp(trailers[0].key, HEADROOM_GRPC_PUSHBACK_TRAILER) != 0 || strcmp(trailers[0].value, "2500") != 0)
    return 12;
  if (strcmp(trailers[1].key, HEADROOM_RETRY_DIALS_HEADER) != 0 ||
      strcmp(trailers[1].value, "{\"maxRetries\":1,\"retryAfterSeconds\":2.5}") != 0)
    return 13;
  if (headroom_retry_grpc_pushback_ms(&dials) != 2500 || HEADROOM_GRPC_SHED_STATUS != 8) return 14;
  return 0;
}
