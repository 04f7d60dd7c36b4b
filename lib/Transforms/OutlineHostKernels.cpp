//===- OutlineHostKernels.cpp - mla-outline-host-kernels -------------------===//
//
// Turns each function that holds mla.grid ops into host kernels plus a launch
// plan:
//   * every mla.grid becomes `<f>_k<i>(captures..., x, y, z)` and an entry
//     `<f>_k<i>_entry(!llvm.ptr args, i64 x, i64 y, i64 z)` that reads
//     args[j] (a pointer to a memref descriptor or to a scalar) and calls it;
//   * top-level memref.alloc/dealloc pairs become runtime-provided workspace;
//   * the function itself is replaced by a module attribute
//     `mla.launch_plans`: one dictionary per function with its kernel info
//     and manifest lines (args, workspaces, launches with grid formulas).
//
//===----------------------------------------------------------------------===//
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/StringExtras.h"

#define DEBUG_TYPE "mla-outline-host-kernels"

namespace mla {
#define GEN_PASS_DEF_MLAOUTLINEHOSTKERNELS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
FailureOr<std::string> dtypeName(Operation *op, Type t) {
  if (t.isBF16())
    return std::string("bf16");
  if (t.isF16())
    return std::string("f16");
  if (t.isF32())
    return std::string("f32");
  if (t.isInteger(32))
    return std::string("i32");
  if (t.isInteger(64))
    return std::string("i64");
  return op->emitError() << "element type " << t
                         << " has no runtime representation";
}

/// The plan-level name of a value: "argI" for a function argument, the
/// workspace index otherwise.
struct PlanState {
  func::FuncOp func;
  DenseMap<Value, int64_t> index; // func args and workspaces -> plan index
  SmallVector<std::string> lines;
};

/// Renders an index value used as a size: an integer, or `argI.D` for
/// memref.dim of a function argument with a constant dim.
FailureOr<std::string> sizeExpr(PlanState &st, Value v, Operation *user) {
  if (std::optional<int64_t> c = getConstantIntValue(v))
    return std::to_string(*c);
  if (auto dim = v.getDefiningOp<memref::DimOp>()) {
    auto arg = dyn_cast<BlockArgument>(dim.getSource());
    std::optional<int64_t> d = dim.getConstantIndex();
    if (arg && arg.getOwner()->getParentOp() == st.func && d)
      return "arg" + std::to_string(arg.getArgNumber()) + "." +
             std::to_string(*d);
  }
  return user->emitError()
         << "size must be a constant or memref.dim of a function argument "
            "with a constant dim, so that the launcher can compute it";
}

FailureOr<std::string> dimsExpr(PlanState &st, MemRefType type,
                                ValueRange dynSizes, Operation *user) {
  SmallVector<std::string> dims;
  unsigned dyn = 0;
  for (int64_t d : type.getShape()) {
    if (!ShapedType::isDynamic(d)) {
      dims.push_back(std::to_string(d));
      continue;
    }
    if (dynSizes.empty()) {
      dims.push_back("?");
      continue;
    }
    FailureOr<std::string> e = sizeExpr(st, dynSizes[dyn++], user);
    if (failed(e))
      return failure();
    dims.push_back(*e);
  }
  return llvm::join(dims, ",");
}

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
  Value args = entry.getArgument(0);
  SmallVector<Value> callArgs;
  for (unsigned j = 0; j < numCaptures; ++j) {
    Type want = kernel.getArgumentTypes()[j];
    Value slot = LLVM::GEPOp::create(b, ptrType, ptrType, args,
                                     ArrayRef<LLVM::GEPArg>{(int32_t)j});
    Value ptr = LLVM::LoadOp::create(b, ptrType, slot);
    if (auto mt = dyn_cast<MemRefType>(want)) {
      // MLIR's strided memref descriptor: {ptr, ptr, i64, [r x i64], [r x i64]}.
      auto arr = LLVM::LLVMArrayType::get(i64, mt.getRank());
      auto desc = LLVM::LLVMStructType::getLiteral(
          ctx, {ptrType, ptrType, i64, arr, arr});
      Value d = LLVM::LoadOp::create(b, desc, ptr);
      callArgs.push_back(
          UnrealizedConversionCastOp::create(b, mt, d).getResult(0));
    } else {
      callArgs.push_back(LLVM::LoadOp::create(b, want, ptr));
    }
  }
  for (unsigned k = 1; k <= 3; ++k)
    callArgs.push_back(arith::IndexCastOp::create(b, b.getIndexType(),
                                                  entry.getArgument(k)));
  func::CallOp::create(b, kernel, callArgs);
  func::ReturnOp::create(b);
}

LogicalResult outlineFunction(func::FuncOp func, ModuleOp module,
                              SmallVectorImpl<Attribute> &plans) {
  PlanState st{func, {}, {}};
  OpBuilder mb(func);
  // Arguments.
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    st.index[arg] = i;
    auto role = func.getArgAttrOfType<StringAttr>(i, "mla.role");
    std::string name = role ? role.str() : "arg" + std::to_string(i);
    std::string line = "arg " + std::to_string(i) + " " + name + " ";
    if (auto mt = dyn_cast<MemRefType>(arg.getType())) {
      if (!mt.getLayout().isIdentity())
        return func.emitError() << "argument " << i
                                << " must have an identity layout";
      FailureOr<std::string> dt = dtypeName(func, mt.getElementType());
      FailureOr<std::string> dims = dimsExpr(st, mt, {}, func);
      if (failed(dt) || failed(dims))
        return failure();
      line += "memref " + *dt + " " + *dims;
    } else if (arg.getType().isF32()) {
      line += "scalar f32";
    } else {
      return func.emitError() << "argument " << i << " of type "
                              << arg.getType()
                              << " is not supported by the launcher";
    }
    st.lines.push_back(line);
  }
  // Workspaces: top-level allocs.
  int64_t next = func.getNumArguments();
  SmallVector<Operation *> toErase;
  for (Operation &op : func.getBody().front()) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      FailureOr<std::string> dt =
          dtypeName(alloc, alloc.getType().getElementType());
      FailureOr<std::string> dims =
          dimsExpr(st, alloc.getType(), alloc.getDynamicSizes(), alloc);
      if (failed(dt) || failed(dims))
        return failure();
      st.index[alloc.getResult()] = next;
      st.lines.push_back("workspace " + std::to_string(next++) + " " + *dt +
                         " " + *dims);
    }
  }
  // Grids, in program order.
  SmallVector<GridOp> grids;
  for (Operation &op : func.getBody().front())
    if (auto grid = dyn_cast<GridOp>(op))
      grids.push_back(grid);
  for (auto [gi, grid] : llvm::enumerate(grids)) {
    SmallVector<std::string> sizes;
    for (Value s : {grid.getGridX(), grid.getGridY(), grid.getGridZ()}) {
      FailureOr<std::string> e = sizeExpr(st, s, grid);
      if (failed(e))
        return failure();
      sizes.push_back(*e);
    }
    // Captured values: plan values become kernel arguments; constants and
    // memref.dim of plan values are cloned in.
    SetVector<Value> captured;
    getUsedValuesDefinedAbove(grid.getBody(), captured);
    SmallVector<Value> params;
    SmallVector<Operation *> clones;
    for (Value v : captured) {
      if (st.index.count(v)) {
        params.push_back(v);
        continue;
      }
      Operation *def = v.getDefiningOp();
      if (def && (isa<arith::ConstantOp>(def) ||
                  (isa<memref::DimOp>(def) &&
                   st.index.count(def->getOperand(0)) &&
                   getConstantIntValue(def->getOperand(1))))) {
        clones.push_back(def);
        if (isa<memref::DimOp>(def) &&
            !llvm::is_contained(params, def->getOperand(0)))
          params.push_back(def->getOperand(0));
        continue;
      }
      return grid.emitError() << "grid captures a value that is neither a "
                                 "function argument, a workspace nor a "
                                 "constant";
    }
    SmallVector<Type> types;
    for (Value p : params)
      types.push_back(p.getType());
    Type idx = IndexType::get(func.getContext());
    types.append(3, idx);
    std::string name = (func.getSymName() + "_k" + Twine(gi)).str();
    mb.setInsertionPoint(func);
    auto kernel = func::FuncOp::create(mb, grid.getLoc(), name,
                                       FunctionType::get(func.getContext(),
                                                         types, {}));
    kernel.setPrivate();
    Block *entry = kernel.addEntryBlock();
    IRMapping map;
    for (auto [p, a] : llvm::zip(params, entry->getArguments()))
      map.map(p, a);
    OpBuilder kb = OpBuilder::atBlockBegin(entry);
    for (Operation *def : clones)
      kb.clone(*def, map);
    Block &body = grid.getBody().front();
    for (unsigned k = 0; k < 3; ++k)
      map.map(body.getArgument(k), entry->getArgument(params.size() + k));
    for (Operation &op : body)
      kb.clone(op, map);
    func::ReturnOp::create(kb, grid.getLoc());
    buildEntry(mb, kernel, params.size());

    SmallVector<std::string> argIdx;
    for (Value p : params)
      argIdx.push_back(std::to_string(st.index[p]));
    st.lines.push_back("launch " + name + "_entry args " +
                       llvm::join(argIdx, ",") + " grid " +
                       llvm::join(sizes, ","));
  }

  SmallVector<Attribute> lineAttrs;
  for (const std::string &l : st.lines)
    lineAttrs.push_back(StringAttr::get(func.getContext(), l));
  NamedAttrList plan;
  plan.append("function", func.getSymNameAttr());
  if (auto info = func->getAttrOfType<DictionaryAttr>("mla.kernel_info"))
    plan.append("info", info);
  plan.append("lines", ArrayAttr::get(func.getContext(), lineAttrs));
  plans.push_back(plan.getDictionary(func.getContext()));
  func.erase();
  return success();
}

struct OutlineHostKernelsPass
    : public mla::impl::MLAOutlineHostKernelsBase<OutlineHostKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs;
    for (auto f : module.getOps<func::FuncOp>())
      if (!f.isExternal() && !f.getOps<GridOp>().empty())
        funcs.push_back(f);
    SmallVector<Attribute> plans;
    for (func::FuncOp f : funcs)
      if (failed(outlineFunction(f, module, plans)))
        return signalPassFailure();
    if (!plans.empty())
      module->setAttr("mla.launch_plans",
                      ArrayAttr::get(module.getContext(), plans));
  }
};
} // namespace
