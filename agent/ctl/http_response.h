// SPDX-License-Identifier: Apache-2.0
// HTTP/1.x response framing for the load engine (agent/ctl/loadgen.h): where
// one complete response ends in the bytes a connection has received, and its
// status. Pure functions over a buffer, so the parser is table-tested
// (tests/unit/loadgen_parse_test.cc) without a socket.
#pragma once

#include <cstddef>
#include <limits>

namespace headroom::ctl::loadgen {

// One final response (after any 1xx interim responses) at the start of a
// buffer, as the engine needs it.
struct ResponseFrame {
  long consumed = 0;  // bytes it takes; 0: incomplete; -1: malformed
  int status = 0;
  bool close = false;    // "Connection: close" (or HTTP/1.0 without keep-alive)
  bool interim = false;  // a 1xx (only inside the parser: frame_response skips them)
  // When incomplete: the buffer cannot complete before it holds this many
  // bytes (kNeedEof: only the end of the connection completes it).
  std::size_t need = 0;
};

inline constexpr std::size_t kNeedEof = std::numeric_limits<std::size_t>::max();

// The first final response in `data`. `eof`: the connection has ended after
// `size` bytes (a body without a length ends there). Handles Content-Length,
// chunked bodies, 1xx interim responses (skipped) and responses without a
// body (204, 304).
ResponseFrame frame_response(const char* data, std::size_t size, bool eof);

// The same for a connection still open, for table tests and callers that
// need no `need`: how many bytes of `data` one complete response takes, with
// its status; 0 when incomplete; -1 when `data` is not an HTTP/1.x response.
struct ParsedResponse {
  long consumed = 0;  // 0: need more bytes; -1: malformed
  int status = 0;
  bool close = false;  // "Connection: close" (or HTTP/1.0 without keep-alive)
};
ParsedResponse parse_response(const char* data, std::size_t size);

}  // namespace headroom::ctl::loadgen
