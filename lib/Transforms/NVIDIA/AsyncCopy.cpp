//===- AsyncCopy.cpp - cp.async copies and aligned global accesses --------===//
//
// NVIDIA parts of mla-distribute's copies: parallel masked copies into
// tiles become cp.async, pipelined key loops leave their copies in flight,
// and 16-byte aligned global vector accesses are marked.
//
//===----------------------------------------------------------------------===//
#include "../Utils.h"
#include "NVIDIA.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/CheckedArithmetic.h"

#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

#include <functional>
#include <numeric>

using namespace mlir;
using namespace mla;

namespace {
/// `store`'s vector as cp.async of 16 bytes each from `src` at `srcIdx`
/// (the innermost index stepping with the pieces), reading `srcElems`
/// elements of each (null: all of them); `store` is erased.
void asyncCopyPieces(ImplicitLocOpBuilder &b, vector::StoreOp store, Value src,
                     ValueRange srcIdx, Value srcElems) {
  VectorType vt = store.getVectorType();
  const int64_t perCopy = 16 * 8 / vt.getElementTypeBitWidth();
  for (int64_t piece = 0; piece < vt.getNumElements() / perCopy; ++piece) {
    SmallVector<Value> from(srcIdx);
    SmallVector<Value> dst(store.getIndices());
    Value off = indexConst(b, piece * perCopy);
    from.back() = arith::AddIOp::create(b, from.back(), off);
    dst.back() = arith::AddIOp::create(b, dst.back(), off);
    nvgpu::DeviceAsyncCopyOp::create(
        b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), store.getBase(),
        dst, src, from, b.getIndexAttr(perCopy), srcElems, b.getUnitAttr());
  }
  store.erase();
}

/// `tile[...] = global[...]` (a vector load of global memory stored to
/// workgroup memory, 16-byte multiples) as cp.async of 16 bytes each.
LogicalResult unmaskedAsyncCopy(vector::StoreOp store) {
  auto load = store.getValueToStore().getDefiningOp<vector::LoadOp>();
  VectorType vt = store.getVectorType();
  int64_t bytes = vt.getNumElements() * vt.getElementTypeBitWidth() / 8;
  if (!load || bytes % 16 != 0 ||
      cast<MemRefType>(load.getBase().getType()).getMemorySpace() ||
      !load->hasOneUse())
    return failure();
  ImplicitLocOpBuilder b(store.getLoc(), store);
  asyncCopyPieces(b, store, load.getBase(), load.getIndices(), Value());
  load.erase();
  return success();
}
/// `tile[...] = global[...]` of one 4-byte scalar (a page number staged
/// for the next key tile) as one cp.async of 4 bytes (through L1: `.cg`
/// copies only 16).
bool scalarAsyncCopy(Block *body) {
  auto store = dyn_cast<memref::StoreOp>(body->getTerminator()->getPrevNode());
  if (!store || !isWorkgroup(store.getMemRef()))
    return false;
  auto load = store.getValueToStore().getDefiningOp<memref::LoadOp>();
  if (!load || !load->hasOneUse() ||
      load.getType().getIntOrFloatBitWidth() != 32 ||
      cast<MemRefType>(load.getMemRef().getType()).getMemorySpace())
    return false;
  ImplicitLocOpBuilder b(store.getLoc(), store);
  nvgpu::DeviceAsyncCopyOp::create(
      b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), store.getMemRef(),
      store.getIndices(), load.getMemRef(), load.getIndices(),
      b.getIndexAttr(1), Value(), UnitAttr());
  store.erase();
  load.erase();
  return true;
}
/// The values `v` may take in `par`'s body, where it is a constant, one of
/// `par`'s induction variables of constant bounds, or a sum, product,
/// unsigned remainder or quotient of such (by constants); nullopt
/// otherwise.
std::optional<std::pair<int64_t, int64_t>> valueRange(Value v,
                                                      scf::ParallelOp par) {
  using Range = std::optional<std::pair<int64_t, int64_t>>;
  if (std::optional<int64_t> c = getConstantIntValue(v))
    return std::make_pair(*c, *c);
  auto ivs = par.getInductionVars();
  if (auto it = llvm::find(ivs, v); it != ivs.end()) {
    int64_t d = it - ivs.begin();
    std::optional<int64_t> l = getConstantIntValue(par.getLowerBound()[d]),
                           u = getConstantIntValue(par.getUpperBound()[d]);
    if (!l || !u || *u <= *l)
      return std::nullopt;
    return std::make_pair(*l, *u - 1);
  }
  Operation *def = v.getDefiningOp();
  if (!def || def->getNumOperands() != 2)
    return std::nullopt;
  if (auto rem = dyn_cast<arith::RemUIOp>(def))
    if (std::optional<int64_t> c = getConstantIntValue(rem.getRhs());
        c && *c > 0)
      return std::make_pair(int64_t(0), *c - 1);
  Range a = valueRange(def->getOperand(0), par),
        b = valueRange(def->getOperand(1), par);
  if (!a || !b || a->first < 0 || b->first < 0)
    return std::nullopt;
  // Bounds that overflow say nothing.
  auto pair = [](std::optional<int64_t> lo,
                 std::optional<int64_t> hi) -> Range {
    if (!lo || !hi)
      return std::nullopt;
    return std::make_pair(*lo, *hi);
  };
  if (isa<arith::AddIOp>(def))
    return pair(llvm::checkedAdd(a->first, b->first),
                llvm::checkedAdd(a->second, b->second));
  if (isa<arith::MulIOp>(def))
    return pair(llvm::checkedMul(a->first, b->first),
                llvm::checkedMul(a->second, b->second));
  if (isa<arith::DivUIOp>(def) && b->first == b->second && b->first > 0)
    return std::make_pair(a->first / b->first, a->second / b->first);
  return std::nullopt;
}

/// Whether `width` elements from `idx` stay within dim `dim` of `type` for
/// every iteration of `par` (`valueRange`).
bool inBounds(Value idx, MemRefType type, unsigned dim, int64_t width,
              scf::ParallelOp par) {
  if (type.isDynamicDim(dim))
    return false;
  auto r = valueRange(idx, par);
  return r && r->first >= 0 && r->second <= type.getDimSize(dim) - width;
}

/// Whether `load`'s index `dim` is within its memref for every iteration
/// of `par` (the whole vector, for the innermost dim).
bool indexInBounds(vector::LoadOp load, unsigned dim, scf::ParallelOp par) {
  MemRefType t = load.getMemRefType();
  int64_t width =
      dim + 1 == t.getRank() ? load.getVectorType().getNumElements() : 1;
  return inBounds(load.getIndices()[dim], t, dim, width, par);
}

/// Whether `op`, in `par`'s body, may run for a masked iteration too: free
/// of effects and speculatable, or a load of workgroup memory at indices
/// within the memref's static shape for every iteration (a tile's row of
/// page numbers).
bool speculatable(Operation *op, scf::ParallelOp par) {
  if (isPure(op))
    return true;
  auto load = dyn_cast<memref::LoadOp>(op);
  if (!load || !isWorkgroup(load.getMemRef()))
    return false;
  for (auto [dim, idx] : llvm::enumerate(load.getIndices()))
    if (!inBounds(idx, load.getMemRefType(), dim, 1, par))
      return false;
  return true;
}
} // namespace

namespace mla::nvidia {
/// NVIDIA: a parallel copy `tile[...] = cond ? global[...] : 0`, or
/// unmasked `tile[...] = global[...]`, of 16-byte multiples becomes
/// cp.async (global -> shared without registers, all of a thread's copies
/// in flight at once; a masked copy reads 0 bytes and zero-fills). The
/// source indices are computed under `cond` where that needs a read that
/// may not be safe out of range (a page lookup in the block table), else
/// for every iteration and selected; masked copies read from index 0. A phase
/// staging the next key tile's page numbers (mla.next_tile) becomes one
/// 4-byte cp.async per number: unsynchronized, it commits no group of its
/// own and lands with the key tile's copies after it, whose wait the next
/// iteration's copy is behind. Returns true when the loop was rewritten; the
/// caller then waits for the copies before the barrier, or for an
/// mla.unsynchronized phase leaves them to a later wait.
bool asyncCopies(scf::ParallelOp par) {
  Block *body = par.getBody();
  if (par->hasAttr(MLADialect::kNextTileAttrName))
    return scalarAsyncCopy(body);
  auto store = dyn_cast<vector::StoreOp>(body->getTerminator()->getPrevNode());
  if (!store || !isWorkgroup(store.getBase()))
    return false;
  if (succeeded(unmaskedAsyncCopy(store)))
    return true;
  auto ifOp = store.getValueToStore().getDefiningOp<scf::IfOp>();
  if (!ifOp || ifOp.getNumResults() != 1 || ifOp.getElseRegion().empty())
    return false;
  auto load = cast<scf::YieldOp>(ifOp.thenBlock()->getTerminator())
                  .getOperand(0)
                  .getDefiningOp<vector::LoadOp>();
  Value elseVal =
      cast<scf::YieldOp>(ifOp.elseBlock()->getTerminator()).getOperand(0);
  VectorType vt = store.getVectorType();
  int64_t bytes = vt.getNumElements() * vt.getElementTypeBitWidth() / 8;
  if (!load || !isZeroVector(elseVal) || bytes % 16 != 0 ||
      cast<MemRefType>(load.getBase().getType()).getMemorySpace())
    return false;
  ImplicitLocOpBuilder b(ifOp.getLoc(), ifOp);
  // The elements each piece reads: all of them, or none when masked.
  auto srcElems = [&] {
    Value full = indexConst(b, 16 * 8 / vt.getElementTypeBitWidth());
    return arith::SelectOp::create(b, ifOp.getCondition(), full,
                                   indexConst(b, 0))
        .getResult();
  };
  // The source indices computed for every iteration where that is safe
  // (no branch: the iterations of a row share them), else only in range;
  // masked copies read from index 0 in every dim that could be out of
  // bounds otherwise.
  auto before =
      llvm::make_range(ifOp.thenBlock()->begin(), Block::iterator(load));
  if (llvm::all_of(before,
                   [&](Operation &op) { return speculatable(&op, par); })) {
    for (Operation &op : llvm::make_early_inc_range(before))
      op.moveBefore(ifOp);
    SmallVector<Value> idx;
    for (auto [d, i] : llvm::enumerate(load.getIndices()))
      idx.push_back(indexInBounds(load, d, par)
                        ? i
                        : arith::SelectOp::create(b, ifOp.getCondition(), i,
                                                  indexConst(b, 0)));
    asyncCopyPieces(b, store, load.getBase(), idx, srcElems());
    ifOp.erase();
    return true;
  }
  SmallVector<Type> idxTypes(load.getIndices().size(), b.getIndexType());
  auto idxIf = scf::IfOp::create(b, idxTypes, ifOp.getCondition(),
                                 /*withElseRegion=*/true);
  {
    Block *thenBlock = idxIf.thenBlock();
    thenBlock->getOperations().splice(
        thenBlock->begin(), ifOp.thenBlock()->getOperations(),
        ifOp.thenBlock()->begin(), Block::iterator(load));
    ImplicitLocOpBuilder tb =
        ImplicitLocOpBuilder::atBlockEnd(load.getLoc(), thenBlock);
    scf::YieldOp::create(tb, load.getIndices());
    ImplicitLocOpBuilder eb =
        ImplicitLocOpBuilder::atBlockBegin(load.getLoc(), idxIf.elseBlock());
    SmallVector<Value> zeros(idxTypes.size(), indexConst(eb, 0));
    scf::YieldOp::create(eb, zeros);
  }
  asyncCopyPieces(b, store, load.getBase(), idxIf.getResults(), srcElems());
  ifOp.erase();
  return true;
}

/// NVIDIA: vector loads and stores of global memory are marked with the
/// alignment every one of their addresses has, up to 16 bytes (one wide
/// access instead of one per element; LLVM joins neighbouring 8-byte
/// accesses of which the first is 16-byte aligned). For identity-layout
/// memrefs with 16-byte aligned base pointers, which the runtime requires
/// of GPU float tensors, that is the largest power of two dividing both the
/// innermost extent's bytes and the last index's known multiple (a
/// constant, a product, a sum of such; e.g. `c * 16 + 4` gives 4) times the
/// element size: 16 for every chunked access mla-tile emits.
void markGlobalVectorAlignment(GridOp grid) {
  constexpr int64_t kMaxAlign = 16;
  std::function<int64_t(Value)> knownMultiple = [&](Value v) -> int64_t {
    if (std::optional<int64_t> c = getConstantIntValue(v))
      return *c == 0 ? kMaxAlign : std::abs(*c);
    Operation *def = v.getDefiningOp();
    if (auto mul = dyn_cast_or_null<arith::MulIOp>(def))
      return std::min<int64_t>(kMaxAlign, knownMultiple(mul.getLhs()) *
                                              knownMultiple(mul.getRhs()));
    if (auto add = dyn_cast_or_null<arith::AddIOp>(def))
      return std::gcd(knownMultiple(add.getLhs()), knownMultiple(add.getRhs()));
    return 1;
  };
  auto alignment = [&](Value base, VectorType vt, Value lastIndex) {
    auto type = cast<MemRefType>(base.getType());
    int64_t elemBytes = type.getElementTypeBitWidth() / 8;
    if (isWorkgroup(base) || !type.getLayout().isIdentity() ||
        type.getRank() == 0 || type.isDynamicDim(type.getRank() - 1) ||
        elemBytes == 0 || vt.getNumElements() < 2)
      return int64_t(0);
    int64_t bytes = std::gcd(type.getDimSize(type.getRank() - 1) * elemBytes,
                             knownMultiple(lastIndex) * elemBytes);
    int64_t align = 1;
    while (align < kMaxAlign && bytes % (align * 2) == 0)
      align *= 2;
    return align > elemBytes ? align : int64_t(0);
  };
  grid.walk([&](Operation *op) {
    if (auto load = dyn_cast<vector::LoadOp>(op)) {
      if (!load.getIndices().empty())
        if (int64_t a = alignment(load.getBase(), load.getVectorType(),
                                  load.getIndices().back()))
          load.setAlignment(a);
    } else if (auto store = dyn_cast<vector::StoreOp>(op)) {
      if (!store.getIndices().empty())
        if (int64_t a = alignment(store.getBase(), store.getVectorType(),
                                  store.getIndices().back()))
          store.setAlignment(a);
    }
  });
}

/// How many cp.async groups each asynchronous prefetch copy of a pipelined
/// key loop may leave in flight; `ahead` maps each prefetch copy to S - 1
/// (the stages of its loop's mla.attention_step, minus one). Iteration i
/// copies tile i + S - 1 in g groups (the loop's async prefetches, in order)
/// and then reads tile i, whose groups were committed S - 1 iterations
/// earlier: after committing its j-th group, (S - 2)·g + j + 1 newer groups
/// may still be pending. Copies that are not asynchronous complete at once
/// and commit no group.
DenseMap<Operation *, int64_t>
prefetchWaits(ArrayRef<scf::ParallelOp> pars,
              const DenseMap<Operation *, bool> &async,
              const DenseMap<Operation *, int64_t> &ahead) {
  DenseMap<Operation *, SmallVector<scf::ParallelOp>> byLoop;
  for (scf::ParallelOp p : pars)
    if (ahead.count(p) && async.lookup(p))
      byLoop[p->getParentOp()].push_back(p);
  DenseMap<Operation *, int64_t> waits;
  for (auto &[loop, copies] : byLoop) {
    const int64_t g = copies.size();
    for (auto [j, p] : llvm::enumerate(copies))
      waits[p] = (ahead.lookup(p) - 1) * g + static_cast<int64_t>(j) + 1;
  }
  return waits;
}
} // namespace mla::nvidia

void mla::nvidia::waitAllAsyncCopies(ImplicitLocOpBuilder &b) {
  Value group = nvgpu::DeviceAsyncCreateGroupOp::create(
      b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), ValueRange{});
  nvgpu::DeviceAsyncWaitOp::create(b, group, b.getI32IntegerAttr(0));
}
