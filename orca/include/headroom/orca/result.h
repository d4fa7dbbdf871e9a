// SPDX-License-Identifier: Apache-2.0
// One error style for all of headroom: a Result is a value or an Error. An
// Error carries what the user needs to act: errno when a system call failed,
// the message (what failed and what to do), and where, when it is about a
// place in a file (file:line:column and the configuration key). No exceptions
// cross a function that returns a Result.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace headroom {

struct Error {
  int code = 0;         // errno value, or 0 when the error is not a system error
  std::string message;  // what failed, with the file or field it concerns, and what to do
  // Where, when the error is about a place in a file (a configuration key):
  std::string file{};   // the file; empty when none
  int line = 0;         // 1-based; 0 when not tied to a line
  int column = 0;
  std::string key{};    // dotted path, e.g. "agent.interval"; empty when none

  // "file:line:column: key: message", leaving out what is not known.
  std::string to_string() const {
    std::string out = file;
    if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
    if (!out.empty()) out += ": ";
    if (!key.empty()) out += key + ": ";
    out += message;
    return out;
  }
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

template <class T, class E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(E error) : v_(std::move(error)) {}          // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const E& error() const& { return std::get<1>(v_); }
  E&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, E> v_;
};

template <class E>
class [[nodiscard]] Result<void, E> {
 public:
  Result() = default;
  Result(E error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const E& error() const& { return error_; }
  E&& error() && { return std::move(error_); }

 private:
  E error_;
  bool ok_ = true;
};

}  // namespace headroom
