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
/// renames it over `path` (over a symbolic link's target, so that the link
/// stays). On error no file is left behind. A path that names something
/// other than a regular file or a link to one (/dev/null, /dev/stdout, a
/// FIFO) is opened and written in place, never replaced; a directory, or a
/// path ending in '/', is an error.
Status writeFileAtomic(const std::string &path, const uint8_t *data,
                       size_t size);

} // namespace mla::rt

#endif // MLA_RUNTIME_LIB_FILEIO_H
