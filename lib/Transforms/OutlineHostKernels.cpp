//===- OutlineHostKernels.cpp - mla-outline-host-kernels ------------------===//
//
// Turns each function that holds mla.grid ops into host kernels plus a launch
// plan:
//   * every mla.grid becomes `<f>_k<i>(captures..., x, y, z)` and an entry
//     `<f>_k<i>_entry(!llvm.ptr args, i64 x, i64 y, i64 z)` that reads
//     args[j] (a pointer to a memref descriptor or to a scalar) and calls it;
//   * top-level memref.alloc/dealloc pairs become runtime-provided workspace;
//   * the function itself is replaced by a module attribute
//     `mla.launch_plans`: one #mla.launch_plan per function with its kernel
//     info, arguments, workspaces and launches with grid formulas.
//
//===----------------------------------------------------------------------===//
#include "LaunchPlan.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#define DEBUG_TYPE "mla-outline-host-kernels"

namespace mla {
#define GEN_PASS_DEF_MLAOUTLINEHOSTKERNELS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
/// Builds `<name>_entry(ptr, i64, i64, i64)` that unpacks the argument array
/// and calls `kernel`.
void buildEntry(OpBuilder &mb, func::FuncOp kernel, unsigned numCaptures) {
  Location loc = kernel.getLoc();
  MLIRContext *ctx = mb.getContext();
  auto ptrType = LLVM::LLVMPointerType::get(ctx);
  Type i64 = IntegerType::get(ctx, 64);
  auto entry = func::FuncOp::create(
      mb, loc, (kernel.getSymName() + "_entry").str(),
      FunctionType::get(ctx, {ptrType, i64, i64, i64}, {}));
  ImplicitLocOpBuilder b =
      ImplicitLocOpBuilder::atBlockBegin(loc, entry.addEntryBlock());
  SmallVector<Value> callArgs =
      unpackEntryArgs(b, entry.getArgument(0),
                      kernel.getArgumentTypes().take_front(numCaptures));
  for (unsigned k = 1; k <= 3; ++k)
    callArgs.push_back(
        arith::IndexCastOp::create(b, b.getIndexType(), entry.getArgument(k)));
  func::CallOp::create(b, kernel, callArgs);
  func::ReturnOp::create(b);
}

LogicalResult outlineFunction(func::FuncOp func,
                              SmallVectorImpl<Attribute> &plans) {
  LaunchPlanBuilder plan(func);
  if (failed(plan.addArgsAndWorkspaces()))
    return failure();
  OpBuilder mb(func);
  SmallVector<GridOp> grids(func.getOps<GridOp>());
  for (auto [gi, grid] : llvm::enumerate(grids)) {
    FailureOr<SmallVector<rt::DimExpr, 3>> sizes = plan.gridSizes(grid);
    FailureOr<LaunchPlanBuilder::Captures> caps = plan.captures(grid);
    if (failed(sizes) || failed(caps))
      return failure();
    SmallVector<Type> types;
    for (Value p : caps->params)
      types.push_back(p.getType());
    types.append(3, IndexType::get(func.getContext()));
    std::string name = (func.getSymName() + "_k" + Twine(gi)).str();
    mb.setInsertionPoint(func);
    auto kernel =
        func::FuncOp::create(mb, grid.getLoc(), name,
                             FunctionType::get(func.getContext(), types, {}));
    kernel.setPrivate();
    Block *entry = kernel.addEntryBlock();
    OpBuilder kb = OpBuilder::atBlockBegin(entry);
    LaunchPlanBuilder::cloneBody(
        grid, *caps, entry->getArguments().take_front(caps->params.size()),
        entry->getArguments().take_back(3), kb);
    func::ReturnOp::create(kb, grid.getLoc());
    buildEntry(mb, kernel, caps->params.size());
    plan.addLaunch(name + "_entry", caps->params, *sizes);
  }
  FailureOr<LaunchPlanAttr> finished = plan.finish();
  if (failed(finished))
    return failure();
  plans.push_back(*finished);
  func.erase();
  return success();
}

struct OutlineHostKernelsPass
    : public mla::impl::MLAOutlineHostKernelsBase<OutlineHostKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Attribute> plans;
    for (func::FuncOp f : functionsWithGrids(module))
      if (failed(outlineFunction(f, plans)))
        return signalPassFailure();
    if (!plans.empty())
      module->setAttr(MLADialect::kLaunchPlansAttrName,
                      ArrayAttr::get(module.getContext(), plans));
  }
};
} // namespace
