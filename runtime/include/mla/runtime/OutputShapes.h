//===- OutputShapes.h - The shapes of a kernel's outputs --------*- C++ -*-===//
//
// How a caller sizes the outputs of a launch from its inputs: each output
// role of a kind (Kinds.def) takes its manifest dims, a dynamic one from a
// named dim of an input (decode's o is [q dim 0, q dim 1, q dim 2,
// latent_dim]). mla-run allocates its outputs with it, the C API exposes it
// as mla_kernel_output_shape.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_OUTPUTSHAPES_H
#define MLA_RUNTIME_OUTPUTSHAPES_H

#include "mla/runtime/Kinds.h"
#include "mla/runtime/Manifest.h"
#include "mla/runtime/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mla::rt {

/// Whether the runtime knows how to size every output role of `kind`.
bool canSizeOutputs(KernelKind kind);

/// The shape of output `role` of a kernel with manifest `manifest`, for
/// inputs of `inputShapes` (by role; only the ones the role's dims come from
/// are read): the manifest's dims, each dynamic dim taken from the input
/// dim the kind's table names. Errors: Unsupported for a kind or role the
/// table cannot size ("cannot size output 'o': ..."), InvalidArgument when
/// `role` is not an output of the kind or an input it needs is missing or
/// has too few dims (the message names it).
Expected<std::vector<int64_t>>
outputShape(const Manifest &manifest, std::string_view role,
            const std::map<std::string, std::vector<int64_t>> &inputShapes);

} // namespace mla::rt

#endif // MLA_RUNTIME_OUTPUTSHAPES_H
