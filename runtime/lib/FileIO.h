//===- FileIO.h - Whole-file reads and atomic writes ------------*- C++ -*-===//

#ifndef MLA_RUNTIME_LIB_FILEIO_H
#define MLA_RUNTIME_LIB_FILEIO_H

#include "mla/runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mla::rt {

/// Reads a whole file; IOError messages start with the path.
Expected<std::vector<uint8_t>> readFile(const std::string &path);

/// Writes `data` to a temporary file in the same directory as `path`, then
/// renames it over `path`. On error no file is left behind.
Status writeFileAtomic(const std::string &path, const uint8_t *data,
                       size_t size);

} // namespace mla::rt

#endif // MLA_RUNTIME_LIB_FILEIO_H
