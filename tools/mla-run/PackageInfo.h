//===- PackageInfo.h - What mla-run --info prints about a package -*- C++ -*-//
//
// `mla-run --info PKG` describes a package from its manifest without
// loading or running any code: kind, function, compiler, header, arguments
// (index, role, use, kind, dtype, shape), and per target its section,
// config, workspaces, launches (arguments, grid, block, shared memory) and
// max-bytes limits. docs/FileContract.md shows an example.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLA_RUN_PACKAGEINFO_H
#define MLA_TOOLS_MLA_RUN_PACKAGEINFO_H

#include "mla/runtime/Package.h"

#include <string>

namespace mla::rt {

/// The text of `mla-run --info` for `package`, read from `path`.
std::string describePackage(const std::string &path, const Package &package);

} // namespace mla::rt

#endif // MLA_TOOLS_MLA_RUN_PACKAGEINFO_H
