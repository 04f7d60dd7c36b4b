//===- AMD.h - AMD emitters of mla-distribute -------------------*- C++ -*-===//
//
// Library-private: what the mla-distribute driver (GPU/Distribute.cpp)
// and the matrix emitters (GPU/MatrixEmitter.h) ask of the AMD lowerings.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_AMD_AMD_H
#define MLA_LIB_TRANSFORMS_AMD_AMD_H

#include "../GPU/MatrixEmitter.h"

namespace mla::amd {

/// The MatrixEmitter of an MFMA instruction (bf16/f16, wave64, f32
/// accumulation; any shape of MatrixInstrs.def).
std::unique_ptr<MatrixEmitter> createMfmaEmitter(const MatrixInstr &instr,
                                                 const ThreadInfo &ti);

} // namespace mla::amd

#endif // MLA_LIB_TRANSFORMS_AMD_AMD_H
