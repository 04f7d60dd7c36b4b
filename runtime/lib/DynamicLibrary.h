//===- DynamicLibrary.h - dlopen and symbol tables for GPU APIs -*- C++ -*-===//
//
// What the CUDA driver and the HIP runtime loaders share: opening a library
// with dlopen, filling a table of entry points from it, and keeping one
// loaded API (or the error that loading it gave) per path for the life of
// the process.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_LIB_DYNAMICLIBRARY_H
#define MLA_RUNTIME_LIB_DYNAMICLIBRARY_H

#include "mla/runtime/Status.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace mla::rt::dylib {

/// POSIX guarantees that function pointers and void * convert (dlsym).
template <typename Fn> void **slotOf(Fn &fn) {
  return reinterpret_cast<void **>(&fn);
}

/// One entry point: its symbol (then an older fallback symbol of the same
/// signature, if any) and whether the backend cannot work without it.
struct Symbol {
  void **slot;
  const char *name;
  const char *fallback;
  bool required;
};

/// Fills the slots of `table` from `handle`, in order; a missing optional
/// symbol leaves its slot null. Returns the name of the first required
/// symbol that is missing (the slots before it are filled), or nullptr.
const char *resolveSymbols(void *handle, const Symbol *table, size_t size);

template <size_t N>
const char *resolveSymbols(void *handle, const Symbol (&table)[N]) {
  return resolveSymbols(handle, table, N);
}

/// dlopen(path, RTLD_NOW | RTLD_LOCAL), or nullptr with `why` set to
/// dlerror's reason.
void *openLibrary(const std::string &path, std::string &why);

/// Whether dlopen's reason says that the library does not exist. With
/// `orCannotOpen`, "cannot open shared object" counts too.
bool isNotFound(const std::string &why, bool orCannotOpen);

/// Unloads a library whose symbols were not all there.
void closeLibrary(void *handle);

/// Replaces line breaks with spaces, so that a message stays one line.
void flattenLines(std::string &text);

/// The API `open(path)` gives, opened once per path; the result (or error)
/// is kept for the life of the process.
template <typename Api>
Expected<const Api *>
loadOnce(const std::string &path,
         Expected<std::unique_ptr<Api>> (*open)(const std::string &)) {
  struct Loaded {
    std::unique_ptr<Api> api;
    Status error;
  };
  static std::mutex mutex;
  static auto *loaded = new std::map<std::string, Loaded>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded->find(path);
  if (it == loaded->end()) {
    Expected<std::unique_ptr<Api>> api = open(path);
    Loaded entry;
    if (api.ok())
      entry.api = api.take();
    else
      entry.error = api.status();
    it = loaded->emplace(path, std::move(entry)).first;
  }
  if (!it->second.api)
    return it->second.error;
  return static_cast<const Api *>(it->second.api.get());
}

} // namespace mla::rt::dylib

#endif // MLA_RUNTIME_LIB_DYNAMICLIBRARY_H
