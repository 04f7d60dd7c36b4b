//===- GPUCommon.cpp - what every GPU lowering of mla-distribute uses -----===//
#include "GPUCommon.h"
#include "../Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using namespace mla;

namespace mla {
scf::IfOp stepTileSkip(AttentionStepOp op) {
  auto skip = dyn_cast<scf::IfOp>(op->getParentOp());
  if (!skip || skip.getNumResults() != 0 || !skip.getElseRegion().empty() ||
      !isa<scf::ForOp>(skip->getParentOp()))
    return nullptr;
  // The if ends its loop's body.
  if (skip->getNextNode() != skip->getBlock()->getTerminator())
    return nullptr;
  return skip;
}

scf::ForOp stepKeyLoop(AttentionStepOp op, bool tileSkip) {
  if (auto loop = dyn_cast<scf::ForOp>(op->getParentOp()))
    return loop;
  if (scf::IfOp skip = tileSkip ? stepTileSkip(op) : nullptr)
    return cast<scf::ForOp>(skip->getParentOp());
  return nullptr;
}

LogicalResult checkStepLoop(AttentionStepOp op,
                            SmallVectorImpl<Operation *> &pure,
                            std::string &why, bool tileSkip) {
  auto fail = [&](const char *reason) {
    why = reason;
    return failure();
  };
  scf::ForOp loop = stepKeyLoop(op, tileSkip);
  if (!loop)
    return fail(tileSkip ? "the step is neither directly in an scf.for key "
                           "loop nor in a tile-skipping scf.if ending one"
                         : "the step is not directly in an scf.for key loop");
  Block *body = op->getBlock();
  for (Operation *next = op->getNextNode(); next != body->getTerminator();
       next = next->getNextNode()) {
    if (!isPure(next) || next->getNumRegions() != 0)
      return fail("ops with effects follow the step in its loop");
    pure.push_back(next);
  }
  for (Value tile : {op.getK(), op.getV(), op.getAcc(), op.getM(), op.getL()})
    if (!gridTile(tile))
      return fail("an operand is not a tile of the grid");
  // The queries are read before the loop: a tile, or a view made outside
  // the loop (decodeQueriesInPlace).
  if (!gridTile(op.getQ()) && !loop.isDefinedOutsideOfLoop(op.getQ()))
    return fail("the queries are neither a tile of the grid nor defined "
                "outside the key loop");
  SmallVector<memref::AllocaOp> roots = {
      gridTile(op.getAcc()), gridTile(op.getM()), gridTile(op.getL())};
  bool otherUse = false;
  loop.walk([&](Operation *user) {
    if (user == op.getOperation() || isa<memref::SubViewOp>(user))
      return;
    for (Value operand : user->getOperands())
      if (isa<MemRefType>(operand.getType()))
        if (memref::AllocaOp r = gridTile(operand))
          if (llvm::is_contained(roots, r))
            otherUse = true;
  });
  if (otherUse)
    return fail("another op of the loop touches the step's state");
  return success();
}

LogicalResult
carryStepState(AttentionStepOp op, ArrayRef<Value> init,
               function_ref<SmallVector<Value>(ImplicitLocOpBuilder &,
                                               ArrayRef<BlockArgument>)>
                   step,
               function_ref<void(ImplicitLocOpBuilder &, ValueRange)> after) {
  scf::IfOp skip = stepTileSkip(op);
  auto loop = skip ? cast<scf::ForOp>(skip->getParentOp())
                   : cast<scf::ForOp>(op->getParentOp());
  IRRewriter rewriter(loop.getContext());
  FailureOr<LoopLikeOpInterface> newLoop = loop.replaceWithAdditionalYields(
      rewriter, init, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &, Location loc, ArrayRef<BlockArgument> args) {
        if (!skip) {
          ImplicitLocOpBuilder ib(loc, op);
          return step(ib, args);
        }
        // The skip yields the next state, or the current one.
        ImplicitLocOpBuilder sb(skip.getLoc(), skip);
        SmallVector<Type> types;
        for (BlockArgument a : args)
          types.push_back(a.getType());
        auto carried = scf::IfOp::create(sb, types, skip.getCondition(),
                                         /*withElseRegion=*/true);
        Block *then = carried.thenBlock();
        then->getOperations().splice(
            then->end(), skip.thenBlock()->getOperations(),
            skip.thenBlock()->begin(), std::prev(skip.thenBlock()->end()));
        ImplicitLocOpBuilder ib(loc, op);
        SmallVector<Value> next = step(ib, args);
        ImplicitLocOpBuilder tb = ImplicitLocOpBuilder::atBlockEnd(loc, then);
        scf::YieldOp::create(tb, next);
        ImplicitLocOpBuilder eb =
            ImplicitLocOpBuilder::atBlockEnd(loc, carried.elseBlock());
        SmallVector<Value> same(args.begin(), args.end());
        scf::YieldOp::create(eb, same);
        skip.erase();
        return SmallVector<Value>(carried.getResults());
      });
  if (failed(newLoop))
    return failure();
  // `after` may still read the step's operands (acc, m, l): the step is
  // erased only once it has run.
  ImplicitLocOpBuilder ab((*newLoop)->getLoc(), (*newLoop)->getContext());
  ab.setInsertionPointAfter(*newLoop);
  after(ab, (*newLoop)->getResults().take_back(init.size()));
  op.erase();
  return success();
}

bool isWorkgroup(Value memref) {
  auto space = dyn_cast_or_null<gpu::AddressSpaceAttr>(
      cast<MemRefType>(memref.getType()).getMemorySpace());
  return space && space.getValue() == gpu::AddressSpace::Workgroup;
}

bool isZeroVector(Value v) {
  DenseElementsAttr attr;
  return matchPattern(v, m_Constant(&attr)) && attr.isSplat() &&
         cast<FloatAttr>(attr.getSplatValue<Attribute>()).getValue().isZero();
}

/// Loads `width` consecutive elements at (row, col) of a 2-D memref, or zeros
/// when `inBounds` is false.
Value loadPair(ImplicitLocOpBuilder &b, Value mem, Value row, Value col,
               Value inBounds, int64_t width) {
  auto type = cast<MemRefType>(mem.getType());
  auto vecType = VectorType::get({width}, type.getElementType());
  if (matchPattern(inBounds, m_One()))
    return vector::LoadOp::create(b, vecType, mem, ValueRange{row, col});
  auto ifOp = scf::IfOp::create(
      b, inBounds,
      [&](OpBuilder &nb, Location loc) {
        ImplicitLocOpBuilder ib(loc, nb);
        scf::YieldOp::create(ib, ValueRange{vector::LoadOp::create(
                                     ib, vecType, mem, ValueRange{row, col})});
      },
      [&](OpBuilder &nb, Location loc) {
        ImplicitLocOpBuilder ib(loc, nb);
        Value z = arith::ConstantOp::create(
            ib, vecType,
            DenseElementsAttr::get(
                vecType, ib.getFloatAttr(type.getElementType(), 0.0)));
        scf::YieldOp::create(ib, z);
      });
  return ifOp.getResult(0);
}

/// Runs `body` under `cond`, or unconditionally when `cond` is constant true.
void guarded(ImplicitLocOpBuilder &b, Value cond,
             function_ref<void(ImplicitLocOpBuilder &)> body) {
  if (matchPattern(cond, m_One())) {
    body(b);
    return;
  }
  scf::IfOp::create(b, cond, [&](OpBuilder &nb, Location loc) {
    ImplicitLocOpBuilder ib(loc, nb);
    body(ib);
    scf::YieldOp::create(ib);
  });
}

/// `value()` under `cond`, else `fallback` (no branch when `cond` is
/// constant true).
Value guardedValue(ImplicitLocOpBuilder &b, Value cond, Value fallback,
                   function_ref<Value(ImplicitLocOpBuilder &)> value) {
  if (matchPattern(cond, m_One()))
    return value(b);
  auto ifOp = scf::IfOp::create(
      b, cond,
      [&](OpBuilder &nb, Location loc) {
        ImplicitLocOpBuilder ib(loc, nb);
        scf::YieldOp::create(ib, value(ib));
      },
      [&](OpBuilder &nb, Location loc) {
        ImplicitLocOpBuilder ib(loc, nb);
        scf::YieldOp::create(ib, fallback);
      });
  return ifOp.getResult(0);
}

/// The root buffer of a tile view: a memref.alloca at the top of the grid
/// (looking through subviews), or null.
memref::AllocaOp gridTile(Value v) {
  while (auto sub = v.getDefiningOp<memref::SubViewOp>())
    v = sub.getSource();
  auto alloca = v.getDefiningOp<memref::AllocaOp>();
  if (!alloca || !isa<GridOp>(alloca->getParentOp()))
    return nullptr;
  return alloca;
}

namespace {
/// Whether `op` reads or writes (a view of) `root`.
bool touches(Operation *op, memref::AllocaOp root) {
  bool hit = false;
  op->walk([&](Operation *inner) {
    for (Value v : inner->getOperands())
      if (isa<MemRefType>(v.getType()) && gridTile(v) == root)
        hit = true;
  });
  return hit;
}

} // namespace

/// The scf.parallel before `loop` in its block that fills `root` with
/// zeros (a fillBuffer), when nothing between it and the loop touches
/// `root`; null otherwise.
scf::ParallelOp zeroFillBefore(scf::ForOp loop, memref::AllocaOp root) {
  for (Operation *op = loop->getPrevNode(); op; op = op->getPrevNode()) {
    if (!touches(op, root))
      continue;
    auto par = dyn_cast<scf::ParallelOp>(op);
    if (!par)
      return nullptr;
    int64_t stores = 0;
    bool other = false;
    par.getBody()->walk([&](Operation *inner) {
      if (auto st = dyn_cast<vector::StoreOp>(inner)) {
        if (gridTile(st.getBase()) == root &&
            isZeroVector(st.getValueToStore()))
          ++stores;
        else
          other = true;
      } else if (!isPure(inner) && !isa<scf::ReduceOp, scf::YieldOp>(inner)) {
        other = true;
      }
    });
    return stores == 1 && !other ? par : nullptr;
  }
  return nullptr;
}

/// The memref.subview ops on `root` (transitively, outermost first) and
/// the other ops that use it or one of them.
void collectViews(Value root, SmallVectorImpl<Operation *> &views,
                  SmallVectorImpl<Operation *> &users) {
  for (Operation *user : root.getUsers()) {
    if (auto sub = dyn_cast<memref::SubViewOp>(user)) {
      views.push_back(sub);
      collectViews(sub.getResult(), views, users);
    } else {
      users.push_back(user);
    }
  }
}

} // namespace mla
