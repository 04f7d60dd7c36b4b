//===- TileAppendKV.h - mla-tile for mla.append_kv --------------*- C++ -*-===//
//
// The KV-append part of mla-tile, kept in its own file (TileAppendKV.cpp);
// TilePass::runOnOperation calls it for every mla.append_kv.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_TRANSFORMS_TILEAPPENDKV_H
#define MLA_TRANSFORMS_TILEAPPENDKV_H

#include "mla/Dialect/MLA/IR/MLA.h"

namespace mla {

/// Rewrites `op` into an `mla.grid` over its tokens (one workgroup per
/// token) whose body checks the token's slot and copies the row with 16-byte
/// vector loads and stores in an `scf.parallel` over the row. Tags the
/// enclosing function's arguments with their roles (`kv_new`,
/// `slot_mapping`, `kv`) and records its `mla.kernel_info` (kernel
/// "append_kv"). Fails, located at `op`, when the function already describes
/// another kernel.
mlir::LogicalResult tileAppendKV(AppendKVOp op);

} // namespace mla

#endif // MLA_TRANSFORMS_TILEAPPENDKV_H
