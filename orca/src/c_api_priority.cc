// SPDX-License-Identifier: Apache-2.0
// The C interface over priority.h, and gRPC's trailers of retry.h. Nothing
// here allocates but the trailers' formatting, which catches everything: an
// exception crossing into C is undefined behaviour.
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "headroom/orca/headroom_orca.h"
#include "headroom/orca/priority.h"
#include "headroom/orca/retry.h"

namespace orca = headroom::orca;

// The C names are the C++ ones.
static_assert(std::string_view(HEADROOM_PRIORITY_HEADER) == orca::kPriorityHeader);
static_assert(std::string_view(HEADROOM_RETRY_DIALS_HEADER) == orca::kRetryDialsHeader);
static_assert(std::string_view(HEADROOM_GRPC_PUSHBACK_TRAILER) == orca::kGrpcPushbackTrailer);
static_assert(HEADROOM_GRPC_SHED_STATUS == orca::kShedGrpcStatus);
static_assert(HEADROOM_GRPC_SHED_TRAILER_COUNT == std::tuple_size_v<decltype(orca::grpc_shed_trailers({}))>);

namespace {

// The C scopes open on this thread, innermost last: the priority each one
// replaced (0: none). A token says whose it is, the thread's tag (1..65535,
// handed out in turn), and which, the scope's depth (1..64) and the priority
// it replaced, so that end can tell the innermost scope's token from any
// other (but one of a thread 65535 threads later, which the tags repeat).
constexpr int kMaxScopes = 64;
constexpr int kPreviousBits = 7;  // 0..100
constexpr int kDepthBits = 7;     // 1..64
constexpr uint32_t kTags = 65535;
std::atomic<uint32_t> g_next_tag{0};
thread_local int t_tag = 0;
thread_local int t_depth = 0;
thread_local std::array<uint8_t, kMaxScopes> t_previous{};

int token_of(int depth, int previous) {
  return (t_tag << (kDepthBits + kPreviousBits)) | (depth << kPreviousBits) | previous;
}

// Copies text into buf like snprintf; its length.
int copy_out(std::string_view text, char* buf, std::size_t buflen) {
  if (buflen > 0) {
    const std::size_t n = std::min(text.size(), buflen - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return static_cast<int>(text.size());
}

orca::RetryDials from_c(const headroom_retry_dials& c) {
  return orca::RetryDials{c.max_retries, c.retry_after_seconds};
}

}  // namespace

extern "C" {

int headroom_priority_parse(const char* text, size_t len, int* bucket_name) {
  if (text == nullptr) return len == 0 ? -ENODATA : -EINVAL;
  const auto value = orca::parse_priority_value(std::string_view(text, len));
  if (!value) return -EBADMSG;
  if (bucket_name != nullptr) *bucket_name = value->bucket_name ? 1 : 0;
  return value->priority;
}

int headroom_priority_or_default(int parsed, int default_priority) {
  return orca::priority_or_default(parsed < 0 ? std::nullopt : std::optional<int>(parsed), default_priority);
}

int headroom_priority_format(int priority, char* buf, size_t buflen) {
  if (buf == nullptr && buflen > 0) return -EINVAL;
  // At most "100": no allocation.
  char digits[8];
  const int n = std::snprintf(digits, sizeof digits, "%d", orca::clamp_priority(priority));
  return copy_out(std::string_view(digits, static_cast<std::size_t>(n)), buf, buflen);
}

int headroom_priority_scope_begin(int priority) {
  if (t_depth >= kMaxScopes) return -EOVERFLOW;
  if (t_tag == 0) t_tag = static_cast<int>(g_next_tag.fetch_add(1, std::memory_order_relaxed) % kTags + 1);
  const int previous = orca::exchange_current_priority(orca::clamp_priority(priority));
  t_previous[static_cast<std::size_t>(t_depth)] = static_cast<uint8_t>(previous);
  ++t_depth;
  return token_of(t_depth, previous);
}

int headroom_priority_scope_end(int token) {
  if (t_depth == 0 || token != token_of(t_depth, t_previous[static_cast<std::size_t>(t_depth - 1)])) return -EINVAL;
  --t_depth;
  orca::exchange_current_priority(t_previous[static_cast<std::size_t>(t_depth)]);
  return 0;
}

int headroom_priority_current(int fallback) { return orca::current_priority(fallback); }

int headroom_priority_outgoing(int requested) {
  return requested <= 0 ? orca::outgoing_priority() : orca::outgoing_priority(requested);
}

uint64_t headroom_priority_upgrades_refused(void) { return orca::priority_upgrades_refused(); }

int headroom_retry_grpc_pushback_ms(const headroom_retry_dials* dials) {
  if (dials == nullptr) return -EINVAL;
  return orca::grpc_retry_pushback_ms(from_c(*dials));
}

int headroom_retry_grpc_trailers(const headroom_retry_dials* dials,
                                 headroom_grpc_trailer out[HEADROOM_GRPC_SHED_TRAILER_COUNT]) {
  if (dials == nullptr || out == nullptr) return -EINVAL;
  try {
    const auto trailers = orca::grpc_shed_trailers(from_c(*dials));
    for (std::size_t i = 0; i < trailers.size(); ++i) {
      // The keys are string literals (retry.h), so NUL-terminated.
      out[i].key = trailers[i].key.data();
      // The longest value, the dials with a 17-digit wait and an exponent, is 62 bytes.
      if (copy_out(trailers[i].value, out[i].value, sizeof out[i].value) >= static_cast<int>(sizeof out[i].value))
        return -ENOBUFS;
    }
    return static_cast<int>(trailers.size());
  } catch (...) {
    return -ENOMEM;
  }
}

}  // extern "C"
