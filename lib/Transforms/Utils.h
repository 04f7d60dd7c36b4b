//===- Utils.h - helpers shared by mla passes -------------------*- C++ -*-===//
#ifndef MLA_TRANSFORMS_UTILS_H
#define MLA_TRANSFORMS_UTILS_H

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Value.h"

namespace mla {

/// Widest vector length in {16, 8, 4, 2, 1} that divides `n`.
int64_t vectorWidthFor(int64_t n);

/// `arith.constant` of index / f32 type.
mlir::Value indexConst(mlir::ImplicitLocOpBuilder &b, int64_t v);
mlir::Value f32Const(mlir::ImplicitLocOpBuilder &b, double v);

/// Converts a float scalar or vector value to `type`'s element type (extf /
/// truncf / no-op). `type` is the scalar element type wanted.
mlir::Value castFloat(mlir::ImplicitLocOpBuilder &b, mlir::Value v,
                      mlir::Type elemType);

/// Emits `scf.for iv = lb to ub step step { body(iv) }` with no iter args.
void forLoop(
    mlir::ImplicitLocOpBuilder &b, mlir::Value lb, mlir::Value ub,
    mlir::Value step,
    llvm::function_ref<void(mlir::ImplicitLocOpBuilder &, mlir::Value)> body);

/// Emits a loop with one f32 iter arg; returns the final value.
mlir::Value
reduceLoop(mlir::ImplicitLocOpBuilder &b, mlir::Value lb, mlir::Value ub,
           mlir::Value step, mlir::Value init,
           llvm::function_ref<mlir::Value(mlir::ImplicitLocOpBuilder &,
                                          mlir::Value iv, mlir::Value acc)>
               body);

/// Emits `scf.parallel (ivs) = (0, ...) to (ubs) step (1, ...)`: iterations
/// that may run in any order or concurrently (GPU lowerings spread them over
/// the threads of a workgroup; the host runs them as loops).
mlir::scf::ParallelOp parallelFor(
    mlir::ImplicitLocOpBuilder &b, mlir::ValueRange ubs,
    llvm::function_ref<void(mlir::ImplicitLocOpBuilder &, mlir::ValueRange)>
        body);

/// Fills `buffer` (a static-shaped memref of rank 1 or 2, f32 or other float
/// type, contiguous last dim) with `value` using vector stores, in an
/// scf.parallel over rows and vector chunks.
void fillBuffer(mlir::ImplicitLocOpBuilder &b, mlir::Value buffer,
                double value);

/// The buffer a memref value views (a function argument, an allocation),
/// through view-like ops (subviews, casts, reshapes).
mlir::Value memrefRoot(mlir::Value v);

/// Replaces the uses of memref `oldV` by `newV` (same shape, another memory
/// space), re-creating the memref.subview users whose result type depends on
/// the source type.
void replaceMemRefUses(mlir::Value oldV, mlir::Value newV);

/// Records which semantic operand a function argument is (`mla.role`
/// argument attribute), so that launchers bind tensors by role. Does
/// nothing when `v` is not an argument of its function's entry block.
void tagRole(mlir::Value v, llvm::StringRef role);

/// A builder at the start of the block of the mla.grid (or function) that
/// encloses `block`: where per-workgroup buffers (allocas) go.
mlir::ImplicitLocOpBuilder builderAtGridTop(mlir::Location loc,
                                            mlir::Block *block);

/// Clones the single block of `region` at the builder with `args` for its
/// block arguments and returns the values its terminator yields.
llvm::SmallVector<mlir::Value> inlineRegion(mlir::ImplicitLocOpBuilder &b,
                                            mlir::Region &region,
                                            mlir::ValueRange args);

/// Elements [first, first + n) of a 1-D vector, as a vector.shuffle (which
/// every target's LLVM conversion takes).
mlir::Value sliceVector(mlir::ImplicitLocOpBuilder &b, mlir::Value v,
                        int64_t first, int64_t n);

/// A type as the manifest writes it (bf16, f16, f32, ...).
std::string typeName(mlir::Type t);

} // namespace mla

#endif // MLA_TRANSFORMS_UTILS_H
