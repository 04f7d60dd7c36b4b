//===- Wgmma.h - warpgroup MMA (sm_90a) -------------------------*- C++ -*-===//
//
// Library-private: 128-byte-swizzled operand tiles, their descriptors and
// wgmma.mma_async as inline PTX, and the warpgroup-MMA MatrixEmitter, used
// by the fused attention step.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_NVIDIA_WGMMA_H
#define MLA_LIB_TRANSFORMS_NVIDIA_WGMMA_H

#include "../AttentionLayout.h"
#include "../GPU/MatrixEmitter.h"

#include "llvm/ADT/DenseMap.h"

namespace mla::nvidia {

/// wgmma reads its shared-memory operands through descriptors, in one of a
/// few canonical layouts. The fused attention step uses the 128-byte
/// swizzle (CUTLASS's `Swizzle<3,4,3>`) for the query, key and value tiles:
/// a tile of R rows and C columns of 16-bit elements (C a multiple of 64)
/// is stored as C/64 column blocks of R rows of 128 bytes, and the 16-byte
/// chunk j of row r sits at chunk j ^ (r % 8) of its row. The same bytes
/// serve a K-major operand (Q or K: rows are M or N, 64 K-columns per
/// block) and an MN-major one (V: rows are K, 64 N-columns per block), and
/// both ldmatrix-free reads and the 16-byte copies into it are free of bank
/// conflicts. Buffers are 1024-byte aligned (the swizzle repeats every 8
/// rows of 128 bytes and the hardware applies it to address bits).
inline constexpr int64_t kSwizzleAlign = kSwizzledTileAlign;

/// A view of a grid tile: its root buffer and the static column offset of
/// the view; `rowsAligned` when every row offset on the way is a multiple
/// of 8 (a constant, or a product with such a constant).
struct ViewInfo {
  mlir::memref::AllocaOp root;
  int64_t col0 = 0;
  bool rowsAligned = true;
};

ViewInfo analyzeView(mlir::Value v);

/// The row offset of a view in its root buffer, built at `b`.
mlir::Value viewRow(mlir::ImplicitLocOpBuilder &b, mlir::Value v);

/// Columns of a (padded) tile buffer that the swizzled layout keeps: the
/// largest multiple of 64 (mla-tile pads rows by 16 bytes).
int64_t swizzledCols(mlir::memref::AllocaOp root);

/// Whether `root` can move to the swizzled layout: 16-bit elements, rows a
/// multiple of 8, every view within the kept columns, and no users but
/// views, the ops in `fused` and 16-byte-multiple vector stores (the
/// copies mla-tile emits, at columns that are multiples of their width).
bool canSwizzle(mlir::memref::AllocaOp root,
                llvm::ArrayRef<mlir::Operation *> fused);

/// The swizzled position (column block, row, column in the block) of
/// element (r, c) of a tile in the 128-byte-swizzled layout.
llvm::SmallVector<mlir::Value> swizzledIndex(mlir::ImplicitLocOpBuilder &b,
                                             mlir::Value r, mlir::Value c);

/// Whether the query, key and value tiles of `op` can move to the swizzled
/// layout (whole 64-column blocks at 8-row aligned offsets); their root
/// buffers are added to `roots`.
bool canUseSwizzledOperands(
    AttentionStepOp op, llvm::SmallVectorImpl<mlir::memref::AllocaOp> &roots);

/// Gives each of `roots` a swizzled replacement at the top of the grid
/// holding `loop` (marked for applySwizzle): the map from root to it.
llvm::DenseMap<mlir::Operation *, mlir::Value>
swizzleOperands(mlir::scf::ForOp loop,
                llvm::ArrayRef<mlir::memref::AllocaOp> roots);

/// Bytes from one 64-column block of a swizzled tile of `rows` rows to the
/// next (rows of 128 bytes).
inline int64_t swizzledBlockBytes(int64_t rows) { return rows * 128; }

/// Bytes (i64) from the start of a swizzled operand to row `extraRows` of
/// `view` (rows of 128 bytes).
mlir::Value swizzledRowBytes(mlir::ImplicitLocOpBuilder &b, mlir::Value view,
                             mlir::Value extraRows);

/// The shared byte address (i64) of element (row 0, column `col`) of the
/// swizzled operand view `info` plus `rowBytes`, in `swizzledRoot`, the
/// replacement of `info.root`.
mlir::Value swizzledAddress(mlir::ImplicitLocOpBuilder &b,
                            mlir::Value swizzledRoot, ViewInfo info,
                            mlir::Value rowBytes, int64_t col);

/// A wgmma shared-memory matrix descriptor for an operand whose first
/// element is at shared byte address `addr` (i64), 128-byte swizzle.
mlir::Value wgmmaDescriptor(mlir::ImplicitLocOpBuilder &b, mlir::Value addr,
                            int64_t lbo, int64_t sbo);

/// The shared-memory byte address of a buffer, as i64.
mlir::Value sharedAddress(mlir::ImplicitLocOpBuilder &b, mlir::Value mem);

/// An i32 register holding two 16-bit floats (the mma.sync operand form).
mlir::Value asI32(mlir::ImplicitLocOpBuilder &b, mlir::Value reg);

/// Values through an empty side-effecting inline asm that claims to
/// rewrite them (CUTLASS's warpgroup_fence_operand).
llvm::SmallVector<mlir::Value> registerFence(mlir::ImplicitLocOpBuilder &b,
                                             llvm::ArrayRef<mlir::Value> vals);

/// One `wgmma.mma_async.sync.aligned.m64n<N>k16.f32.<t>.<t>` as inline PTX
/// (Wgmma.cpp says which operand comes from where; `transA`: A from its
/// descriptor MN-major).
llvm::SmallVector<mlir::Value>
wgmma(mlir::ImplicitLocOpBuilder &b, mlir::Type elem, int64_t n,
      llvm::ArrayRef<mlir::Value> acc, mlir::Value aDesc,
      llvm::ArrayRef<mlir::Value> aRegs, mlir::Value bDesc, bool transB,
      bool transA = false);

/// The MatrixEmitter of warpgroup MMA (bf16 or f16): asynchronous products
/// from shared-memory descriptors (and A from registers), for the fused
/// attention step.
std::unique_ptr<MatrixEmitter> createWgmmaEmitter(const MatrixInstr &instr,
                                                  const ThreadInfo &ti);

} // namespace mla::nvidia

#endif // MLA_LIB_TRANSFORMS_NVIDIA_WGMMA_H
