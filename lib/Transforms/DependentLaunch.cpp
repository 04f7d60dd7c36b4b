//===- DependentLaunch.cpp - where a dependent kernel waits ---------------===//
#include "DependentLaunch.h"
#include "Utils.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "mla-outline-gpu-kernels"

using namespace mlir;
using namespace mla;

namespace {

/// Whether `op` only reads the memref operand `v` (a view of it is judged
/// by its own uses).
bool onlyReads(Operation *op, Value v) {
  if (auto view = dyn_cast<ViewLikeOpInterface>(op))
    return view.getViewSource() == v;
  if (isa<memref::LoadOp, memref::DimOp, vector::LoadOp,
          vector::TransferReadOp>(op))
    return true;
  auto iface = dyn_cast<MemoryEffectOpInterface>(op);
  if (!iface)
    return false;
  SmallVector<MemoryEffects::EffectInstance> effects;
  iface.getEffectsOnValue(v, effects);
  return llvm::all_of(effects, [](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Read>(e.getEffect());
  });
}

/// The memrefs from outside `grid` that it may write.
llvm::DenseSet<Value> writtenOutside(GridOp grid) {
  llvm::DenseSet<Value> written;
  grid.getBody().walk([&](Operation *op) {
    for (Value v : op->getOperands()) {
      if (!isa<BaseMemRefType>(v.getType()))
        continue;
      Value root = memrefRoot(v);
      if (grid.getBody().isAncestor(root.getParentRegion()))
        continue; // the grid's own tile
      if (!onlyReads(op, v)) {
        LLVM_DEBUG(llvm::dbgs()
                   << "  may write " << root << ": " << *op << "\n");
        written.insert(root);
      }
    }
  });
  return written;
}
} // namespace

Operation *mla::dependencyWaitPoint(GridOp grid, GridOp previous) {
  llvm::DenseSet<Value> written = writtenOutside(previous);
  for (Operation &op : grid.getBody().front()) {
    if (op.getNumRegions() == 0 && isMemoryEffectFree(&op))
      continue;
    Value read;
    if (auto load = dyn_cast<memref::LoadOp>(op))
      read = load.getMemRef();
    else if (auto load = dyn_cast<vector::LoadOp>(op))
      read = load.getBase();
    if (read) {
      Value root = memrefRoot(read);
      if (!grid.getBody().isAncestor(root.getParentRegion()) &&
          !written.contains(root))
        continue;
    }
    LLVM_DEBUG(llvm::dbgs() << "dependent launch waits before " << op << "\n");
    return &op;
  }
  return nullptr;
}
