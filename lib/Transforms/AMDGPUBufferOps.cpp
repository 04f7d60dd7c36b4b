//===- AMDGPUBufferOps.cpp - mla-amdgpu-buffer-ops ------------------------===//
//
// The buffer-op pass. In every AMD kernel:
//   * each global memref argument (the KV pool, Q, the block table, lengths,
//     O, LSE, workspaces) is wrapped once, at kernel entry, in
//     amdgpu.fat_raw_buffer_cast (bounds-checked, offset reset): its base is
//     a kernel argument, so the buffer descriptor is wave-uniform (SGPRs) and
//     every load/store through it becomes a buffer_load/buffer_store with a
//     32-bit per-lane offset;
//   * masked reads `scf.if %in { v = vector.load %buf[i, ...] } else { 0 }`
//     become unconditional loads whose first index is sent one past the end
//     when %in is false: the hardware bounds check returns zeros, with no
//     branch (the page lookup feeding the index is hoisted too: it is a
//     bounds-checked buffer load itself);
//   * masked writes `scf.if %in { ...; vector.store %v, %buf[i, ...] }`
//     become unconditional stores sent one past the end the same way: the
//     hardware drops out-of-bounds buffer stores (KV append's slot check);
//   * because offsets are 32-bit, each buffer argument gets a byte limit in
//     the launch plan (#mla.plan_max_bytes; `max-bytes INDEX BYTES` in the
//     manifest) that the runtime enforces:
//     2^32 - 1 minus the largest overshoot: one page of the pool for a
//     masked read, S rows of q for a prefill's query tile of S rows read in
//     place (ArchInfo::readsQueriesInPlace).
//
//===----------------------------------------------------------------------===//
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"

#define DEBUG_TYPE "mla-amdgpu-buffer-ops"

namespace mla {
#define GEN_PASS_DEF_MLAAMDGPUBUFFEROPS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
bool isFatBuffer(Value v) {
  return v.getDefiningOp<amdgpu::FatRawBufferCastOp>() != nullptr;
}

/// Global memory: no memory space, or #gpu.address_space<global>.
bool isGlobal(MemRefType t) {
  if (!t.getMemorySpace())
    return true;
  auto space = dyn_cast<gpu::AddressSpaceAttr>(t.getMemorySpace());
  return space && space.getValue() == gpu::AddressSpace::Global;
}

bool isWorkgroup(MemRefType t) {
  auto space = dyn_cast_or_null<gpu::AddressSpaceAttr>(t.getMemorySpace());
  return space && space.getValue() == gpu::AddressSpace::Workgroup;
}

/// True for ops that may run unconditionally: pure ops, reads through
/// bounds-checked buffers, and reads of the workgroup's own tiles (their
/// indices are the tile's rows).
bool isSpeculatable(Operation &op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return isFatBuffer(load.getMemRef()) || isWorkgroup(load.getMemRefType());
  if (auto load = dyn_cast<vector::LoadOp>(op))
    return isFatBuffer(load.getBase());
  return isPure(&op);
}

bool isZeroConstant(Value v) {
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return false;
  if (auto dense = dyn_cast<DenseElementsAttr>(attr))
    return dense.isSplat() && cast<FloatAttr>(dense.getSplatValue<Attribute>())
                                  .getValue()
                                  .isZero();
  return false;
}

/// scf.if %c -> (vector) { ...; vector.load %buf[...]; yield } else { yield 0 }
/// => hoisted loads, first index = select(%c, i0, dim0).
LogicalResult maskByBounds(scf::IfOp ifOp) {
  if (ifOp.getNumResults() != 1 || ifOp.getElseRegion().empty())
    return failure();
  auto elseYield = cast<scf::YieldOp>(ifOp.elseBlock()->getTerminator());
  auto thenYield = cast<scf::YieldOp>(ifOp.thenBlock()->getTerminator());
  auto load = thenYield.getOperand(0).getDefiningOp<vector::LoadOp>();
  if (!load || !isFatBuffer(load.getBase()) ||
      !isZeroConstant(elseYield.getOperand(0)) ||
      !llvm::all_of(ifOp.thenBlock()->without_terminator(), isSpeculatable))
    return failure();
  Block *thenBlock = ifOp.thenBlock();
  for (Operation &op :
       llvm::make_early_inc_range(thenBlock->without_terminator()))
    op.moveBefore(ifOp);
  ImplicitLocOpBuilder b(load.getLoc(), load);
  Value end = memref::DimOp::create(b, load.getBase(), 0);
  Value first = arith::SelectOp::create(b, ifOp.getCondition(),
                                        load.getIndices()[0], end);
  load.getIndicesMutable()[0].set(first);
  ifOp.getResult(0).replaceAllUsesWith(load.getResult());
  ifOp.erase();
  return success();
}

/// scf.if %c { ...; vector.store %v, %buf[i, ...] } (no results, no else)
/// => hoisted ops and store, first index = select(%c, i, dim0): a masked
/// buffer store is dropped by the hardware bounds check.
LogicalResult maskStoreByBounds(scf::IfOp ifOp) {
  if (ifOp.getNumResults() != 0 ||
      (!ifOp.getElseRegion().empty() &&
       !llvm::hasSingleElement(ifOp.elseBlock()->getOperations())))
    return failure();
  Block *thenBlock = ifOp.thenBlock();
  Operation *terminator = thenBlock->getTerminator();
  auto store = dyn_cast_or_null<vector::StoreOp>(terminator->getPrevNode());
  if (!store || !isFatBuffer(store.getBase()) ||
      !llvm::all_of(
          llvm::make_range(thenBlock->begin(), Block::iterator(store)),
          isSpeculatable))
    return failure();
  for (Operation &op : llvm::make_early_inc_range(
           llvm::make_range(thenBlock->begin(), Block::iterator(terminator))))
    op.moveBefore(ifOp);
  ImplicitLocOpBuilder b(store.getLoc(), store);
  Value end = memref::DimOp::create(b, store.getBase(), 0);
  Value first = arith::SelectOp::create(b, ifOp.getCondition(),
                                        store.getIndices()[0], end);
  store.getIndicesMutable()[0].set(first);
  ifOp.erase();
  return success();
}

/// Views of a buffer (memref.transpose, subview, casts...) were typed for
/// global memory: their results take the buffer's memory space, and so on
/// down the chain of views.
void propagateBufferSpace(Value v) {
  Attribute space = cast<MemRefType>(v.getType()).getMemorySpace();
  for (Operation *user : v.getUsers()) {
    auto view = dyn_cast<ViewLikeOpInterface>(user);
    bool isView = view ? view.getViewSource() == v
                       : isa<memref::TransposeOp>(user); // not ViewLike
    if (!isView || user->getNumResults() != 1)
      continue;
    auto mt = dyn_cast<MemRefType>(user->getResult(0).getType());
    if (!mt || mt.getMemorySpace() == space)
      continue;
    user->getResult(0).setType(MemRefType::get(
        mt.getShape(), mt.getElementType(), mt.getLayout(), space));
    propagateBufferSpace(user->getResult(0));
  }
}

/// The most slices of dim 0 a read of kernel argument `arg` may reach past
/// its end: one (a masked read's index one past the end), or S for a
/// subview of S slices at an offset inside it.
int64_t viewSlices(BlockArgument arg) {
  int64_t slices = 1;
  for (Operation *user : arg.getUsers()) {
    auto buffer = dyn_cast<amdgpu::FatRawBufferCastOp>(user);
    if (!buffer)
      continue;
    for (Operation *viewer : buffer->getUsers())
      if (auto view = dyn_cast<memref::SubViewOp>(viewer))
        if (view.getSource() == buffer.getResult() &&
            !ShapedType::isDynamic(view.getStaticSizes()[0]))
          slices = std::max(slices, view.getStaticSizes()[0]);
  }
  return slices;
}

struct AMDGPUBufferOpsPass
    : public mla::impl::MLAAMDGPUBufferOpsBase<AMDGPUBufferOpsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto plans =
        module->getAttrOfType<ArrayAttr>(MLADialect::kLaunchPlansAttrName);
    SmallVector<Attribute> newPlans;
    module.walk([&](gpu::GPUFuncOp kernel) {
      if (!kernel.isKernel())
        return;
      ImplicitLocOpBuilder b = ImplicitLocOpBuilder::atBlockBegin(
          kernel.getLoc(), &kernel.getBody().front());
      for (BlockArgument arg : kernel.getArguments()) {
        auto mt = dyn_cast<MemRefType>(arg.getType());
        if (!mt || !isGlobal(mt))
          continue;
        auto cast = amdgpu::FatRawBufferCastOp::create(
            b, arg, Value(), Value(), b.getBoolAttr(true), b.getUnitAttr());
        arg.replaceAllUsesExcept(cast.getResult(), cast);
        propagateBufferSpace(cast.getResult());
      }
      SmallVector<scf::IfOp> ifs;
      kernel.walk([&](scf::IfOp op) { ifs.push_back(op); });
      for (scf::IfOp op : ifs)
        if (failed(maskByBounds(op)))
          (void)maskStoreByBounds(op);
    });
    if (!plans)
      return;
    // Byte limits for every buffer argument of every kernel.
    for (Attribute p : plans) {
      auto plan = cast<LaunchPlanAttr>(p);
      SmallVector<PlanMaxBytesAttr> bounds(plan.getMaxBytes());
      llvm::SmallDenseSet<int64_t> done;
      module.walk([&](gpu::GPUFuncOp kernel) {
        PlanLaunchAttr launch = plan.findLaunch(kernel.getName());
        if (!launch)
          return;
        for (auto [arg, planIndex] :
             llvm::zip(kernel.getArguments(), launch.getArgs())) {
          auto mt = dyn_cast<MemRefType>(arg.getType());
          if (!mt || !isGlobal(mt) || !done.insert(planIndex).second)
            continue;
          // A masked read overshoots the end by less than one slice of
          // dim 0 (one page of the pool), a view of S slices read in place
          // by up to S (a prefill's query tile, rows past q's end
          // included): keep end + overshoot below 2^32.
          int64_t slice = mt.getElementTypeBitWidth() / 8 * viewSlices(arg);
          ArrayRef<int64_t> inner = mt.getRank() > 0
                                        ? mt.getShape().drop_front()
                                        : ArrayRef<int64_t>{};
          for (int64_t d : inner)
            slice = ShapedType::isDynamic(d) || slice < 0 ? -1 : slice * d;
          int64_t limit =
              slice < 0 ? (int64_t(1) << 31) : (int64_t(1) << 32) - 1 - slice;
          bounds.push_back(
              PlanMaxBytesAttr::get(module.getContext(), planIndex, limit));
        }
      });
      newPlans.push_back(plan.withMaxBytes(bounds));
    }
    module->setAttr(MLADialect::kLaunchPlansAttrName,
                    ArrayAttr::get(module.getContext(), newPlans));
  }
};
} // namespace
