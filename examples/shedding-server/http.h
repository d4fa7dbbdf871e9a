// SPDX-License-Identifier: Apache-2.0
// The shedding server's HTTP/1.1 (server.cc): parsing one request from a
// connection's buffer, and the reason phrases of the statuses it sends. Just
// enough HTTP for the example: no chunked request bodies, no TLS.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace shedding_server {

constexpr std::size_t kMaxHead = 16 * 1024;     // request line + headers
constexpr std::size_t kMaxBody = 1024 * 1024;   // Content-Length above: 413

struct Request {
  std::string method, path;
  bool keep_alive = true;
  std::optional<std::string> priority;  // the priority header's value
  bool expect_continue = false;
  std::size_t length = 0;  // head + body: the bytes this request takes in the buffer
};
enum class Parse { incomplete, ok, bad, too_large, unsupported };

// Parses the first request in `buf`: request line, headers, and a body of
// Content-Length bytes. `incomplete` until all of it is there (then
// r.expect_continue tells whether the client waits for "100 Continue").
Parse parse_request(std::string_view buf, std::string_view priority_header, Request& r);

// "OK", "Service Unavailable", ...; "Shed" for a status it has no phrase for.
std::string_view reason_phrase(int status);

}  // namespace shedding_server
