// SPDX-License-Identifier: Apache-2.0
// The load engine's keep-alive connections (agent/ctl/loadgen_pool.h).
#include "agent/ctl/loadgen_pool.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace headroom::ctl::loadgen {

void Conn::append(const char* data, std::size_t n) {
  if (len + n > cap) {
    std::size_t grown_cap = std::max<std::size_t>(cap * 2, 4096);
    while (grown_cap < len + n) grown_cap *= 2;
    auto grown = std::make_unique<char[]>(grown_cap);
    if (len > 0) std::memcpy(grown.get(), buf.get(), len);
    buf = std::move(grown);
    cap = grown_cap;
  }
  std::memcpy(buf.get() + len, data, n);
  len += n;
}

ConnPool::~ConnPool() {
  for (auto& c : conns_)
    if (c.fd >= 0) ::close(c.fd);
}

uint32_t ConnPool::add(int fd, uint8_t instance) {
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    conns_.emplace_back();
    slot = static_cast<uint32_t>(conns_.size() - 1);
  }
  Conn& c = conns_[slot];
  c.fd = fd;
  c.instance = instance;
  c.served = 0;
  c.write_off = 0;
  c.got_bytes = false;
  c.len = 0;
  c.want_out = false;
  ++open_;
  return slot;
}

std::optional<uint32_t> ConnPool::take_idle(uint8_t instance) {
  auto& idle = idle_[instance];
  if (idle.empty()) return std::nullopt;
  const uint32_t slot = idle.back();
  idle.pop_back();
  return slot;
}

void ConnPool::park(uint32_t slot) {
  Conn& c = conns_[slot];
  auto& idle = idle_[c.instance];
  c.state = ConnState::idle;
  c.idle_pos = static_cast<uint32_t>(idle.size());
  idle.push_back(slot);
}

void ConnPool::close(uint32_t slot) {
  Conn& c = conns_[slot];
  if (c.state == ConnState::free) return;
  if (c.state == ConnState::idle) {
    auto& idle = idle_[c.instance];
    const uint32_t last = idle.back();
    idle[c.idle_pos] = last;
    conns_[last].idle_pos = c.idle_pos;
    idle.pop_back();
  }
  ::close(c.fd);  // also leaves the epoll set
  c.fd = -1;
  c.state = ConnState::free;
  ++c.gen;
  c.len = 0;
  if (c.cap > 64 * 1024) {  // a large response: give the memory back
    c.buf.reset();
    c.cap = 0;
  }
  --open_;
  free_.push_back(slot);
}

bool ConnPool::close_idle_elsewhere(uint8_t instance) {
  for (std::size_t i = 0; i < idle_.size(); ++i) {
    if (i == instance || idle_[i].empty()) continue;
    close(idle_[i].back());
    return true;
  }
  return false;
}

}  // namespace headroom::ctl::loadgen
