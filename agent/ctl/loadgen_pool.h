// SPDX-License-Identifier: Apache-2.0
// The load engine's keep-alive connections (agent/ctl/loadgen.h): slots that
// stay where they are while the pool grows, a free list, and per instance of
// the target the idle connections, so that a request only ever takes an idle
// connection to its own instance. The engine does the I/O; the pool keeps
// the books and owns the descriptors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

namespace headroom::ctl::loadgen {

enum class ConnState : uint8_t { free, connecting, busy, idle };

struct Conn {
  int fd = -1;
  uint32_t gen = 0;  // bumped at close: events for an earlier descriptor in the same slot are stale
  ConnState state = ConnState::free;
  uint8_t instance = 0;    // the target's instance it is connected to
  bool want_out = false;   // EPOLLOUT in the interest set
  bool got_bytes = false;  // some of the current response has arrived
  uint32_t served = 0;     // responses read on this connection
  uint32_t write_off = 0;  // bytes of the current request sent
  uint32_t idle_pos = 0;   // index in its instance's idle list
  std::size_t seq = 0;     // the request in flight (connecting, busy)
  // The current response so far, when it did not arrive in one read.
  std::unique_ptr<char[]> buf;
  std::size_t cap = 0;
  std::size_t len = 0;
  std::size_t need = 0;

  // Appends to the response buffer, growing it.
  void append(const char* data, std::size_t n);
};

class ConnPool {
 public:
  explicit ConnPool(std::size_t instances) : idle_(instances) {}
  ~ConnPool();  // closes every descriptor still open
  ConnPool(const ConnPool&) = delete;
  ConnPool& operator=(const ConnPool&) = delete;

  Conn& operator[](uint32_t slot) { return conns_[slot]; }
  uint32_t slots() const { return static_cast<uint32_t>(conns_.size()); }
  int open() const { return open_; }  // connections open (connecting, busy or idle)

  // A slot for a new connection on `fd` to `instance`, its state reset and
  // counted as open; the caller sets its request and state.
  uint32_t add(int fd, uint8_t instance);
  // An idle connection to `instance`, taken off the idle list (the caller
  // makes it busy); none when it has none.
  std::optional<uint32_t> take_idle(uint8_t instance);
  // A busy connection whose answer is complete waits for the next request.
  void park(uint32_t slot);
  // Closes the connection (its descriptor leaves any epoll set) and frees
  // the slot; its request, if any, is the caller's business.
  void close(uint32_t slot);
  // Makes room under the connection cap for `instance`: closes an idle
  // connection to another instance. False when there is none.
  bool close_idle_elsewhere(uint8_t instance);

 private:
  std::deque<Conn> conns_;  // a deque: references stay valid while it grows
  std::vector<uint32_t> free_;
  std::vector<std::vector<uint32_t>> idle_;  // per instance
  int open_ = 0;
};

}  // namespace headroom::ctl::loadgen
