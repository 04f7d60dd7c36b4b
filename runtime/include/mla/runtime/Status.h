//===- Status.h - Error values for the mla runtime --------------*- C++ -*-===//
//
// The runtime's public API never throws: every fallible call returns a Status
// or an Expected<T>. Messages name the offending argument, file or line.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_STATUS_H
#define MLA_RUNTIME_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace mla::rt {

enum class ErrorCode {
  Ok = 0,
  /// An API or launch argument is wrong; the message names it.
  InvalidArgument,
  /// A .mlapkg container is malformed, truncated or corrupted.
  InvalidPackage,
  /// A manifest is malformed; the message carries the line number.
  InvalidManifest,
  /// A well-formed request this runtime or build cannot serve.
  Unsupported,
  /// A file system operation failed.
  IOError,
  /// The device backend failed (loading code, allocating, launching).
  BackendError,
};

/// Returns a short lower-case name such as "invalid argument".
const char *errorCodeName(ErrorCode code);

/// Success, or an error code with a human-readable message.
class [[nodiscard]] Status {
public:
  /// Constructs a success value.
  Status() = default;

  static Status success() { return Status(); }
  static Status error(ErrorCode code, std::string message) {
    assert(code != ErrorCode::Ok && "an error needs an error code");
    return Status(code, std::move(message));
  }

  bool ok() const { return errorCode == ErrorCode::Ok; }
  ErrorCode code() const { return errorCode; }
  const std::string &message() const { return errorMessage; }

  /// Returns a copy whose message is "PREFIX: MESSAGE"; success stays success.
  Status withContext(const std::string &prefix) const;

  /// "ok", or "<code name>: <message>".
  std::string toString() const;

private:
  Status(ErrorCode code, std::string message)
      : errorCode(code), errorMessage(std::move(message)) {}

  ErrorCode errorCode = ErrorCode::Ok;
  std::string errorMessage;
};

/// Either a value of type T or an error Status.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value(std::move(value)) {}
  Expected(Status status) : error(std::move(status)) {
    assert(!error.ok() && "Expected<T> built from a success Status");
  }

  bool ok() const { return value.has_value(); }
  /// The error; success when ok().
  const Status &status() const { return error; }

  T &get() {
    assert(ok() && "accessing the value of a failed Expected<T>");
    return *value;
  }
  const T &get() const {
    assert(ok() && "accessing the value of a failed Expected<T>");
    return *value;
  }
  T &operator*() { return get(); }
  const T &operator*() const { return get(); }
  T *operator->() { return &get(); }
  const T *operator->() const { return &get(); }

  /// Moves the value out.
  T take() { return std::move(get()); }

private:
  std::optional<T> value;
  Status error;
};

} // namespace mla::rt

#endif // MLA_RUNTIME_STATUS_H
