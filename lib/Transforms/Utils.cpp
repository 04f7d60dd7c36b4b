//===- Utils.cpp - helpers shared by mla passes ---------------------------===//
#include "Utils.h"
#include "mla/Dialect/MLA/IR/MLA.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

namespace mla {

int64_t vectorWidthFor(int64_t n) {
  for (int64_t w : {16, 8, 4, 2})
    if (n % w == 0)
      return w;
  return 1;
}

Value indexConst(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIndexOp::create(b, v);
}

Value f32Const(ImplicitLocOpBuilder &b, double v) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
}

Value castFloat(ImplicitLocOpBuilder &b, Value v, Type elemType) {
  Type from = getElementTypeOrSelf(v.getType());
  if (from == elemType)
    return v;
  Type to = elemType;
  if (auto vt = dyn_cast<VectorType>(v.getType()))
    to = VectorType::get(vt.getShape(), elemType);
  if (from.getIntOrFloatBitWidth() < elemType.getIntOrFloatBitWidth())
    return arith::ExtFOp::create(b, to, v);
  return arith::TruncFOp::create(b, to, v);
}

void forLoop(ImplicitLocOpBuilder &b, Value lb, Value ub, Value step,
             function_ref<void(ImplicitLocOpBuilder &, Value)> body) {
  scf::ForOp::create(b, lb, ub, step, ValueRange{},
                     [&](OpBuilder &nb, Location loc, Value iv, ValueRange) {
                       ImplicitLocOpBuilder ib(loc, nb);
                       body(ib, iv);
                       scf::YieldOp::create(ib);
                     });
}

Value reduceLoop(
    ImplicitLocOpBuilder &b, Value lb, Value ub, Value step, Value init,
    function_ref<Value(ImplicitLocOpBuilder &, Value, Value)> body) {
  auto loop = scf::ForOp::create(
      b, lb, ub, step, ValueRange{init},
      [&](OpBuilder &nb, Location loc, Value iv, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nb);
        scf::YieldOp::create(ib, body(ib, iv, args[0]));
      });
  return loop.getResult(0);
}

scf::ParallelOp
parallelFor(ImplicitLocOpBuilder &b, ValueRange ubs,
            function_ref<void(ImplicitLocOpBuilder &, ValueRange)> body) {
  SmallVector<Value> lbs(ubs.size(), indexConst(b, 0));
  SmallVector<Value> steps(ubs.size(), indexConst(b, 1));
  return scf::ParallelOp::create(
      b, lbs, ubs, steps, [&](OpBuilder &nb, Location loc, ValueRange ivs) {
        ImplicitLocOpBuilder ib(loc, nb);
        body(ib, ivs);
      });
}

void fillBuffer(ImplicitLocOpBuilder &b, Value buffer, double value) {
  auto type = cast<MemRefType>(buffer.getType());
  Type elem = type.getElementType();
  int64_t cols = type.getShape().back();
  int64_t vw = vectorWidthFor(cols);
  auto vecType = VectorType::get({vw}, elem);
  Value splat = arith::ConstantOp::create(
      b, vecType, DenseElementsAttr::get(vecType, b.getFloatAttr(elem, value)));
  Value chunks = indexConst(b, cols / vw), cVw = indexConst(b, vw);
  if (type.getRank() == 1) {
    parallelFor(b, {chunks}, [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
      Value c = arith::MulIOp::create(ib, iv[0], cVw);
      vector::StoreOp::create(ib, splat, buffer, ValueRange{c});
    });
    return;
  }
  parallelFor(b, {indexConst(b, type.getDimSize(0)), chunks},
              [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
                Value c = arith::MulIOp::create(ib, iv[1], cVw);
                vector::StoreOp::create(ib, splat, buffer,
                                        ValueRange{iv[0], c});
              });
}

Value memrefRoot(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      break;
    v = view.getViewSource();
  }
  return v;
}

void replaceMemRefUses(Value oldV, Value newV) {
  for (OpOperand &use : llvm::make_early_inc_range(oldV.getUses())) {
    auto sub = dyn_cast<memref::SubViewOp>(use.getOwner());
    if (!sub) {
      use.set(newV);
      continue;
    }
    OpBuilder b(sub);
    auto newSub =
        memref::SubViewOp::create(b, sub.getLoc(), newV, sub.getMixedOffsets(),
                                  sub.getMixedSizes(), sub.getMixedStrides());
    replaceMemRefUses(sub.getResult(), newSub.getResult());
    sub.erase();
  }
}

void tagRole(Value v, StringRef role) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!func || arg.getOwner() != &func.getBody().front())
    return;
  func.setArgAttr(arg.getArgNumber(), MLADialect::kRoleAttrName,
                  StringAttr::get(func.getContext(), role));
}

ImplicitLocOpBuilder builderAtGridTop(Location loc, Block *block) {
  while (!isa<GridOp, func::FuncOp>(block->getParentOp()))
    block = block->getParentOp()->getBlock();
  return ImplicitLocOpBuilder::atBlockBegin(loc, block);
}

SmallVector<Value> inlineRegion(ImplicitLocOpBuilder &b, Region &region,
                                ValueRange args) {
  Block &block = region.front();
  IRMapping map;
  map.map(block.getArguments(), args);
  for (Operation &op : block.without_terminator())
    b.clone(op, map);
  SmallVector<Value> results;
  for (Value v : block.getTerminator()->getOperands())
    results.push_back(map.lookupOrDefault(v));
  return results;
}

Value sliceVector(ImplicitLocOpBuilder &b, Value v, int64_t first, int64_t n) {
  SmallVector<int64_t> mask;
  for (int64_t i = 0; i < n; ++i)
    mask.push_back(first + i);
  return vector::ShuffleOp::create(b, v, v, mask);
}

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

} // namespace mla
