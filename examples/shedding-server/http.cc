// SPDX-License-Identifier: Apache-2.0
// The shedding server's HTTP/1.1 (http.h).
#include "http.h"

#include <cctype>
#include <charconv>
#include <system_error>

#include <headroom/orca/text.h>

namespace shedding_server {

using headroom::iequals;

Parse parse_request(std::string_view buf, std::string_view priority_header, Request& r) {
  const std::size_t end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos) return buf.size() > kMaxHead ? Parse::too_large : Parse::incomplete;
  if (end + 4 > kMaxHead) return Parse::too_large;
  std::string_view head = buf.substr(0, end + 2);  // every line ends in CRLF
  auto next_line = [&head] {
    const std::size_t eol = head.find("\r\n");
    const std::string_view line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    return line;
  };
  // Request line: METHOD SP TARGET SP HTTP/1.x
  const std::string_view line = next_line();
  const std::size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == 0 || sp1 == std::string_view::npos || sp2 == sp1) return Parse::bad;
  const std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return Parse::bad;
  r.method = std::string(line.substr(0, sp1));
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (target.empty() || target.find(' ') != std::string_view::npos) return Parse::bad;
  r.path = std::string(target.substr(0, target.find('?')));
  r.keep_alive = version == "HTTP/1.1";
  std::optional<std::size_t> content_length;
  while (!head.empty()) {
    const std::string_view h = next_line();
    const std::size_t colon = h.find(':');
    if (colon == 0 || colon == std::string_view::npos || h.front() == ' ' || h.front() == '\t') return Parse::bad;
    const std::string_view name = h.substr(0, colon), value = headroom::trim(h.substr(colon + 1));
    if (iequals(name, "content-length")) {
      std::size_t n = 0;
      const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (value.empty() || ec != std::errc{} || p != value.data() + value.size()) return Parse::bad;
      if (content_length && *content_length != n) return Parse::bad;  // conflicting lengths
      content_length = n;
    } else if (iequals(name, "transfer-encoding")) {
      return Parse::unsupported;  // chunked bodies are beyond this example
    } else if (iequals(name, "connection")) {
      if (iequals(value, "close")) r.keep_alive = false;
      if (iequals(value, "keep-alive")) r.keep_alive = true;
    } else if (iequals(name, "expect")) {
      r.expect_continue = iequals(value, "100-continue");
    } else if (iequals(name, priority_header)) {
      r.priority = std::string(value);
    }
  }
  const std::size_t body = content_length.value_or(0);
  if (body > kMaxBody) return Parse::too_large;
  r.length = end + 4 + body;
  return buf.size() < r.length ? Parse::incomplete : Parse::ok;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Shed";
  }
}

}  // namespace shedding_server
