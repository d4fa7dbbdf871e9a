// SPDX-License-Identifier: Apache-2.0
// One error style for all of headroom: a value or an Error carrying errno and
// context. Exceptions are kept for start-up paths that must abort.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace headroom {

struct Error {
  int code = 0;         // errno value, or 0 when the error is not a system error
  std::string message;  // what failed, with the file or field it concerns
};

// Builds an Error from errno-style code: "<context>: <strerror(code)>".
// Inline, like the rest of this header: code that only reports errors
// (probes/) needs neither the library nor protobuf.
inline Error system_error(int code, std::string context) {
  context += ": ";
  context += std::strerror(code);
  return Error{code, std::move(context)};
}
// Builds an Error that is not about a system call.
inline Error logic_error(std::string message) { return Error{0, std::move(message)}; }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}      // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace headroom
