//===- CApiInternal.h - What the C API's files share ------------*- C++ -*-===//
//
// The handles behind mla_runtime.h's opaque types and the error plumbing of
// CApi.cpp, CApiKinds.cpp, CApiLaunch.cpp and CApiPagePool.cpp: every entry
// point runs inside `guarded`, which turns a Status into an mla_status plus the
// thread-local message and catches any C++ exception (out of host memory)
// at the C boundary.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_LIB_CAPIINTERNAL_H
#define MLA_RUNTIME_LIB_CAPIINTERNAL_H

#include "mla/runtime/mla_runtime.h"

#include "mla/runtime/DType.h"
#include "mla/runtime/Device.h"
#include "mla/runtime/Kernel.h"
#include "mla/runtime/Package.h"
#include "mla/runtime/PagePool.h"
#include "mla/runtime/Status.h"

#include <exception>
#include <new>
#include <string>

struct mla_device {
  mla::rt::Device device;
  std::string name;
};

struct mla_package {
  mla::rt::Package package;
};

struct mla_kernel {
  mla::rt::Kernel kernel;
};

struct mla_page_pool {
  mla::rt::PagePool pool;
};

namespace mla::rt::capi {

inline Status invalid(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument, message);
}

/// The mla_status of an ErrorCode.
mla_status toCStatus(ErrorCode code);

/// Sets the thread-local message mla_last_error returns; returns `code`.
mla_status record(mla_status code, std::string message);

/// Runs `body` (returning a Status) and records its outcome.
template <typename Body> mla_status guarded(const char *function, Body &&body) {
  try {
    Status status = body();
    if (status.ok())
      return record(MLA_OK, std::string());
    return record(toCStatus(status.code()), status.message());
  } catch (const std::bad_alloc &) {
    return record(MLA_ERROR_INTERNAL,
                  std::string(function) + ": out of host memory");
  } catch (const std::exception &e) {
    return record(MLA_ERROR_INTERNAL,
                  std::string(function) + ": internal error: " + e.what());
  } catch (...) {
    return record(MLA_ERROR_INTERNAL,
                  std::string(function) + ": internal error");
  }
}

/// A null pointer argument named `what` of `function`.
inline Status nullArg(const char *function, const char *what) {
  return invalid(std::string(function) + ": " + what + " is null");
}

#define MLA_REQUIRE(function, pointer)                                         \
  do {                                                                         \
    if (!(pointer))                                                            \
      return nullArg(function, #pointer);                                      \
  } while (0)

inline bool validDType(int dtype) {
  return dtype >= MLA_DTYPE_BF16 && dtype <= MLA_DTYPE_I64;
}

/// The runtime dtype of a valid mla_dtype, and back.
DType toDType(mla_dtype dtype);
mla_dtype fromDType(DType dtype);

} // namespace mla::rt::capi

#endif // MLA_RUNTIME_LIB_CAPIINTERNAL_H
