//===- HostObject.cpp - Host shared objects loaded from memory -----------===//

#include "HostObject.h"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace mla::rt;

namespace {

#if defined(__x86_64__)
constexpr const char *kHostTarget = "host-x86_64";
constexpr uint16_t kElfMachine = 62; // EM_X86_64
#elif defined(__aarch64__)
constexpr const char *kHostTarget = "host-aarch64";
constexpr uint16_t kElfMachine = 183; // EM_AARCH64
#else
#error "the host backend supports x86-64 and AArch64 hosts"
#endif

Status backendError(const std::string &message) {
  return Status::error(ErrorCode::BackendError, message);
}

/// Checks the ELF header: a 64-bit little-endian shared object for this
/// host's machine.
Status checkElf(const std::vector<uint8_t> &code) {
  static const uint8_t kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
  if (code.size() < 64 || std::memcmp(code.data(), kElfMagic, 4) != 0)
    return backendError("host code object is not an ELF file");
  uint16_t type = code[16] | (code[17] << 8);
  uint16_t machine = code[18] | (code[19] << 8);
  if (code[4] != 2 || code[5] != 1 || type != 3 || machine != kElfMachine)
    return backendError(std::string("host code object is not a 64-bit "
                                    "little-endian shared object for ") +
                        kHostTarget);
  return Status::success();
}

} // namespace

std::string_view mla::rt::hostTargetName() { return kHostTarget; }

bool HostObject::isLoaded(int fd) {
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  void *loaded = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (loaded)
    dlclose(loaded);
  return loaded != nullptr;
}

HostObject::~HostObject() {
  dlclose(handle);
  // Closed only after dlclose: while the library is loaded its
  // /proc/self/fd/N name must not be reused by another code object, or
  // dlopen would hand back this one. dlclose may leave it loaded (objects
  // with STB_GNU_UNIQUE symbols or DF_1_NODELETE): then the descriptor,
  // and so the name, is kept for the life of the process.
  if (!isLoaded(fd))
    close(fd);
}

void *HostObject::lookup(const std::string &symbol) const {
  return dlsym(handle, symbol.c_str());
}

Expected<std::unique_ptr<HostObject>>
HostObject::load(const std::vector<uint8_t> &code) {
  if (Status status = checkElf(code); !status.ok())
    return status;
  int fd = memfd_create("mla-code-object", MFD_CLOEXEC);
  if (fd < 0)
    return backendError(std::string("memfd_create failed: ") +
                        std::strerror(errno));
  size_t done = 0;
  while (done < code.size()) {
    ssize_t wrote = write(fd, code.data() + done, code.size() - done);
    if (wrote < 0 && errno == EINTR)
      continue;
    if (wrote < 0) {
      int err = errno;
      close(fd);
      return backendError(std::string("cannot write the code object: ") +
                          std::strerror(err));
    }
    done += static_cast<size_t>(wrote);
  }
  // A name still held by a library that stayed loaded (not one of ours,
  // see ~HostModule) would make dlopen hand that one back: move to another
  // descriptor number.
  std::vector<int> stale;
  while (isLoaded(fd)) {
    int other = dup(fd);
    if (other < 0) {
      int err = errno;
      for (int f : stale)
        close(f);
      close(fd);
      return backendError(std::string("dup failed: ") + std::strerror(err));
    }
    stale.push_back(fd);
    fd = other;
  }
  for (int f : stale)
    close(f);
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    close(fd);
    return backendError(std::string("cannot load the host code object: ") +
                        (reason ? reason : "unknown dlopen error"));
  }
  return std::unique_ptr<HostObject>(new HostObject(fd, handle));
}

HostArgs mla::rt::buildHostArgs(const std::vector<const ArgValue *> &args) {
  // Memref descriptors: {allocated, aligned, offset, sizes[r], strides[r]}
  // with row-major element strides; every field is 8 bytes.
  HostArgs out;
  out.descriptors.resize(args.size());
  out.argv.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgValue &arg = *args[i];
    if (arg.isScalar()) {
      out.argv[i] = const_cast<void *>(arg.scalar().data());
      continue;
    }
    const TensorView &t = arg.tensor();
    size_t rank = t.shape.size();
    std::vector<int64_t> &desc = out.descriptors[i];
    desc.resize(3 + 2 * rank);
    desc[0] = desc[1] = reinterpret_cast<intptr_t>(t.data);
    desc[2] = 0;
    int64_t stride = 1;
    for (size_t d = rank; d-- > 0;) {
      desc[3 + d] = t.shape[d];
      desc[3 + rank + d] = stride;
      stride *= t.shape[d];
    }
    out.argv[i] = desc.data();
  }
  return out;
}

Expected<int64_t> mla::rt::workgroupCount(const Grid &grid) {
  int64_t total = 1;
  for (int64_t dim : grid)
    if (dim < 0 || __builtin_mul_overflow(total, dim, &total))
      return Status::error(ErrorCode::InvalidArgument,
                           "invalid grid " +
                               shapeToString({grid[0], grid[1], grid[2]}));
  return total;
}
