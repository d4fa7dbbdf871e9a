// SPDX-License-Identifier: Apache-2.0
// HTTP/1.x response framing (agent/ctl/http_response.h).
#include "agent/ctl/http_response.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "headroom/orca/text.h"

namespace headroom::ctl::loadgen {
namespace {

constexpr std::size_t kMaxHead = 64 * 1024;  // status line + headers, or one chunk-size/trailer line

ResponseFrame malformed() {
  ResponseFrame p;
  p.consumed = -1;
  return p;
}

ResponseFrame incomplete(std::size_t need) {
  ResponseFrame p;
  p.need = need;
  return p;
}

// `a` equals the lower-case `b`, ignoring ASCII case.
// Calls fn(token) for each comma-separated, trimmed, non-empty token.
template <typename Fn>
void for_each_token(std::string_view list, Fn fn) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    const std::string_view token = trim(list.substr(0, comma));
    if (!token.empty()) fn(token);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

// The line starting at `pos`: its end (without "\r\n" or "\n") and where the
// next one starts; false when no '\n' has arrived yet.
bool next_line(const char* data, std::size_t size, std::size_t pos, std::string_view& line, std::size_t& next) {
  const void* nl = std::memchr(data + pos, '\n', size - pos);
  if (nl == nullptr) return false;
  std::size_t end = static_cast<std::size_t>(static_cast<const char*>(nl) - data);
  next = end + 1;
  if (end > pos && data[end - 1] == '\r') --end;
  line = std::string_view(data + pos, end - pos);
  return true;
}

// A chunked body from `pos` to its end (last chunk, trailers, blank line).
ResponseFrame parse_chunked(const char* data, std::size_t size, std::size_t pos, ResponseFrame head) {
  for (;;) {
    std::string_view line;
    std::size_t next = 0;
    if (!next_line(data, size, pos, line, next)) return size - pos > kMaxHead ? malformed() : incomplete(size + 1);
    std::size_t chunk = 0;
    std::size_t i = 0;
    for (; i < line.size(); ++i) {
      const char c = line[i];
      int digit;
      if (c >= '0' && c <= '9')
        digit = c - '0';
      else if (c >= 'a' && c <= 'f')
        digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        digit = c - 'A' + 10;
      else
        break;
      if (i >= 15) return malformed();  // more than 2^60 bytes: not a response we want
      chunk = chunk * 16 + static_cast<std::size_t>(digit);
    }
    if (i == 0) return malformed();
    const std::string_view rest = trim(line.substr(i));
    if (!rest.empty() && rest.front() != ';') return malformed();  // chunk extensions are allowed
    pos = next;
    if (chunk == 0) {
      // Trailer fields, then the blank line.
      for (;;) {
        if (!next_line(data, size, pos, line, next)) return size - pos > kMaxHead ? malformed() : incomplete(size + 1);
        pos = next;
        if (line.empty()) break;
      }
      head.consumed = static_cast<long>(pos);
      return head;
    }
    // The chunk's data and its CRLF.
    if (size < pos + chunk + 1) return incomplete(pos + chunk + 2);
    const char* after = data + pos + chunk;
    if (after[0] == '\n') {
      pos += chunk + 1;
    } else if (after[0] == '\r') {
      if (size < pos + chunk + 2) return incomplete(pos + chunk + 2);
      if (after[1] != '\n') return malformed();
      pos += chunk + 2;
    } else {
      return malformed();
    }
  }
}

// One message: status line, headers, body. `eof`: the connection has ended
// after `size` bytes (a body without a length ends there).
ResponseFrame parse_one(const char* data, std::size_t size, bool eof) {
  static constexpr std::string_view kPrefix = "HTTP/1.";
  if (std::memcmp(data, kPrefix.data(), std::min(size, kPrefix.size())) != 0) return malformed();

  // Status line: HTTP/1.x SP 3DIGIT [SP reason].
  std::string_view line;
  std::size_t pos = 0;
  if (!next_line(data, size, 0, line, pos)) return size > kMaxHead ? malformed() : incomplete(size + 1);
  if (line.size() < 12 || line[7] < '0' || line[7] > '9' || line[8] != ' ') return malformed();
  int status = 0;
  for (std::size_t i = 9; i < 12; ++i) {
    if (line[i] < '0' || line[i] > '9') return malformed();
    status = status * 10 + (line[i] - '0');
  }
  if (status < 100 || (line.size() > 12 && line[12] != ' ')) return malformed();
  const bool http10 = line[7] == '0';

  // Headers: the ones that delimit the body or the connection.
  bool connection_close = false;
  bool keep_alive = false;
  bool has_length = false;
  bool has_te = false;
  bool chunked = false;
  std::size_t length = 0;
  for (;;) {
    std::size_t next = 0;
    if (!next_line(data, size, pos, line, next)) return size > kMaxHead ? malformed() : incomplete(size + 1);
    pos = next;
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') continue;  // obsolete line folding: a value we ignore
    const auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return malformed();
    const std::string_view name = line.substr(0, colon);
    if (name.back() == ' ' || name.back() == '\t') return malformed();
    const std::string_view value = trim(line.substr(colon + 1));
    if (iequals(name, "content-length")) {
      if (value.empty()) return malformed();
      std::size_t n = 0;
      for (const char c : value) {
        if (c < '0' || c > '9' || n >= (std::size_t{1} << 50)) return malformed();
        n = n * 10 + static_cast<std::size_t>(c - '0');
      }
      if (has_length && n != length) return malformed();
      has_length = true;
      length = n;
    } else if (iequals(name, "transfer-encoding")) {
      has_te = true;
      for_each_token(value, [&](std::string_view token) { chunked = iequals(token, "chunked"); });
    } else if (iequals(name, "connection")) {
      for_each_token(value, [&](std::string_view token) {
        if (iequals(token, "close")) connection_close = true;
        if (iequals(token, "keep-alive")) keep_alive = true;
      });
    }
  }
  const std::size_t head_end = pos;

  ResponseFrame p;
  p.status = status;
  p.close = connection_close || (http10 && !keep_alive);
  if (status < 200) {
    if (status == 101) return malformed();  // we never ask to switch protocols
    p.interim = true;
    p.close = false;
    p.consumed = static_cast<long>(head_end);
    return p;
  }
  if (status == 204 || status == 304) {
    p.consumed = static_cast<long>(head_end);
    return p;
  }
  if (has_te) {
    if (has_length) return malformed();  // both: the smuggling pattern (RFC 9112 6.1)
    if (chunked) return parse_chunked(data, size, head_end, p);
    p.close = true;  // another coding last: the body runs to the end of the connection
  } else if (has_length) {
    if (size - head_end < length) return incomplete(head_end + length);
    p.consumed = static_cast<long>(head_end + length);
    return p;
  }
  // No length: the body is the rest of the connection.
  if (!eof) return incomplete(kNeedEof);
  p.close = true;
  p.consumed = static_cast<long>(size);
  return p;
}

}  // namespace

// A final response, after any 1xx interim responses.
ResponseFrame frame_response(const char* data, std::size_t size, bool eof) {
  if (size == 0) return incomplete(1);
  std::size_t offset = 0;
  for (;;) {
    ResponseFrame p = parse_one(data + offset, size - offset, eof);
    if (p.consumed < 0) return p;
    if (p.consumed == 0) {
      if (p.need != kNeedEof) p.need += offset;
      p.status = 0;
      p.close = false;
      return p;
    }
    if (!p.interim) {
      p.consumed += static_cast<long>(offset);
      return p;
    }
    offset += static_cast<std::size_t>(p.consumed);
    if (offset >= size) return incomplete(offset + 1);
  }
}

ParsedResponse parse_response(const char* data, std::size_t size) {
  const ResponseFrame p = frame_response(data, size, false);
  ParsedResponse r;
  r.consumed = p.consumed;
  if (p.consumed > 0) {
    r.status = p.status;
    r.close = p.close;
  }
  return r;
}

}  // namespace headroom::ctl::loadgen
