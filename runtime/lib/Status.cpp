//===- Status.cpp ---------------------------------------------------------===//

#include "mla/runtime/Status.h"

using namespace mla::rt;

const char *mla::rt::errorCodeName(ErrorCode code) {
  switch (code) {
  case ErrorCode::Ok:
    return "ok";
  case ErrorCode::InvalidArgument:
    return "invalid argument";
  case ErrorCode::InvalidPackage:
    return "invalid package";
  case ErrorCode::InvalidManifest:
    return "invalid manifest";
  case ErrorCode::Unsupported:
    return "unsupported";
  case ErrorCode::IOError:
    return "I/O error";
  case ErrorCode::BackendError:
    return "backend error";
  }
  return "unknown error";
}

Status Status::withContext(const std::string &prefix) const {
  if (ok())
    return *this;
  return Status(errorCode, prefix + ": " + errorMessage);
}

std::string Status::toString() const {
  if (ok())
    return "ok";
  return std::string(errorCodeName(errorCode)) + ": " + errorMessage;
}
