//===- HostObject.h - Host shared objects loaded from memory ----*- C++ -*-===//
//
// What the host backend and the AMD emulator (whose code objects are host
// shared objects too) share: loading an ELF shared object from memory, and
// the host entry ABI's argument array (memref descriptors and scalars).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_LIB_HOSTOBJECT_H
#define MLA_RUNTIME_LIB_HOSTOBJECT_H

#include "mla/runtime/Backend.h"

#include <memory>
#include <string>
#include <vector>

namespace mla::rt {

/// A 64-bit little-endian shared object for this host, loaded with dlopen
/// from an anonymous file. Unloaded by the destructor.
class HostObject {
public:
  static Expected<std::unique_ptr<HostObject>>
  load(const std::vector<uint8_t> &code);
  ~HostObject();
  HostObject(const HostObject &) = delete;
  HostObject &operator=(const HostObject &) = delete;

  /// The address of `symbol`, or nullptr.
  void *lookup(const std::string &symbol) const;

private:
  HostObject(int fd, void *handle) : fd(fd), handle(handle) {}
  /// Whether a library loaded from /proc/self/fd/FD is in the process.
  static bool isLoaded(int fd);

  int fd;
  void *handle;
};

/// The argument array of a host entry: argv[i] points to the memref
/// descriptor (held in `descriptors`) or the scalar of args[i].
struct HostArgs {
  std::vector<std::vector<int64_t>> descriptors;
  std::vector<void *> argv;
};
HostArgs buildHostArgs(const std::vector<const ArgValue *> &args);

/// The number of workgroups of `grid` (InvalidArgument when a dimension is
/// negative or the product overflows).
Expected<int64_t> workgroupCount(const Grid &grid);

} // namespace mla::rt

#endif // MLA_RUNTIME_LIB_HOSTOBJECT_H
