//===- AMD.h - AMD emitters of mla-distribute -------------------*- C++ -*-===//
//
// Library-private: what the mla-distribute driver (GPU/Distribute.cpp)
// asks of the AMD lowerings.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_AMD_AMD_H
#define MLA_LIB_TRANSFORMS_AMD_AMD_H

#include "../GPU/GPUCommon.h"

namespace mla::amd {

/// mla.matmul on bf16/f16 tiles as MFMA 16x16x16 (wave64, f32
/// accumulation).
void lowerMatmulMfma(MatmulOp op, const ThreadInfo &ti);

} // namespace mla::amd

#endif // MLA_LIB_TRANSFORMS_AMD_AMD_H
