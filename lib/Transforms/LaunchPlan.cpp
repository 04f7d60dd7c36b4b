//===- LaunchPlan.cpp - grids -> kernels + a launch plan ------------------===//
#include "LaunchPlan.h"
#include "mla/runtime/Manifest.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace mla {
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

/// Sets `out` to `v` as a constant where it is one, or integer arithmetic
/// (+, -, *, ceildiv) of constants: mla-tile builds sizes from the
/// arguments' shapes without folding, so a static batch of 2 gives
/// `2 + 128`. False (out untouched) otherwise or on overflow. (A bool and
/// an out-parameter rather than std::optional: GCC's merged test of an
/// optional's flag and payload reads the payload of an empty one, which
/// memcheck reports.)
bool foldConstant(Value v, int64_t &out, int depth = 0) {
  if (std::optional<int64_t> c = getConstantIntValue(v)) {
    out = *c;
    return true;
  }
  Operation *def = v.getDefiningOp();
  if (!def || depth > 8 ||
      !isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::CeilDivSIOp>(
          def))
    return false;
  int64_t l = 0, r = 0, result = 0;
  if (!foldConstant(def->getOperand(0), l, depth + 1) ||
      !foldConstant(def->getOperand(1), r, depth + 1))
    return false;
  if (isa<arith::AddIOp>(def)) {
    if (__builtin_add_overflow(l, r, &result))
      return false;
  } else if (isa<arith::SubIOp>(def)) {
    if (__builtin_sub_overflow(l, r, &result))
      return false;
  } else if (isa<arith::MulIOp>(def)) {
    if (__builtin_mul_overflow(l, r, &result))
      return false;
  } else if (r > 0 && l >= 0) {
    result = llvm::divideCeil(l, r);
  } else {
    return false;
  }
  out = result;
  return true;
}
} // namespace

FailureOr<rt::DimExpr> LaunchPlanBuilder::sizeExpr(Value v, Operation *user) {
  if (int64_t c = -1; foldConstant(v, c) && c >= 0)
    return constantSize(c);
  // ceildiv(dim (+|-) C, K).
  rt::DimExpr e;
  if (auto div = v.getDefiningOp<arith::CeilDivSIOp>()) {
    std::optional<int64_t> k = getConstantIntValue(div.getRhs());
    if (k && *k > 0) {
      e.divisor = *k;
      v = div.getLhs();
    }
  }
  if (isa_and_nonnull<arith::AddIOp, arith::SubIOp>(v.getDefiningOp())) {
    Operation *def = v.getDefiningOp();
    std::optional<int64_t> c = getConstantIntValue(def->getOperand(1));
    if (c && *c >= 0) {
      e.addend = isa<arith::AddIOp>(def) ? *c : -*c;
      v = def->getOperand(0);
    }
  }
  if (auto dim = v.getDefiningOp<memref::DimOp>()) {
    auto arg = dyn_cast<BlockArgument>(dim.getSource());
    std::optional<int64_t> d = dim.getConstantIndex();
    if (arg && arg.getOwner()->getParentOp() == func && d) {
      const int64_t rank = cast<MemRefType>(arg.getType()).getRank();
      if (*d < 0 || *d >= rank)
        return dim.emitError()
               << "dim " << *d << " of argument " << arg.getArgNumber()
               << ", which has " << rank << " dims (a size of the launch plan)";
      e.argIndex = arg.getArgNumber();
      e.dim = *d;
      return e;
    }
  }
  InFlightDiagnostic d = user->emitError();
  d << "size must be a constant >= 0 or memref.dim of a function "
       "argument with a constant dim (optionally plus or minus a "
       "constant, then ceil-divided by a constant), so that the "
       "launcher can compute it";
  if (user->getNumResults() == 1)
    d << " (a size of the " << user->getName() << " of "
      << user->getResult(0).getType() << ")";
  return d;
}

FailureOr<SmallVector<rt::DimExpr>>
LaunchPlanBuilder::dimsExpr(MemRefType type, ValueRange dynSizes,
                            Operation *user) {
  SmallVector<rt::DimExpr> dims;
  unsigned dyn = 0;
  for (int64_t d : type.getShape()) {
    if (!ShapedType::isDynamic(d)) {
      dims.push_back(constantSize(d));
      continue;
    }
    FailureOr<rt::DimExpr> e = sizeExpr(dynSizes[dyn++], user);
    if (failed(e))
      return failure();
    dims.push_back(*e);
  }
  return dims;
}

LogicalResult LaunchPlanBuilder::addArgsAndWorkspaces() {
  llvm::StringMap<unsigned> roles;
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    index[arg] = i;
    // A kernel tiled from a semantic op (it has mla.kernel_info) is bound
    // by role (the runtime, mla-run's ROLE.npy): mla-tile tags the op's
    // operands, a variant's own inputs must carry theirs. Hand-written grid
    // functions name an unnamed argument by its position, argI.
    auto role = func.getArgAttrOfType<StringAttr>(i, MLADialect::kRoleAttrName);
    bool semantic = func->hasAttr(MLADialect::kKernelInfoAttrName);
    if (!role && !semantic)
      role = StringAttr::get(func.getContext(), "arg" + std::to_string(i));
    if (!role || role.getValue().empty())
      return emitError(arg.getLoc())
             << "argument " << i << " of '" << func.getSymName()
             << "' is not an operand of the kernel's mla op and has no '"
             << MLADialect::kRoleAttrName
             << "': the runtime and mla-run bind arguments by role; name "
                "this input, e.g. {"
             << MLADialect::kRoleAttrName << " = \"sinks\"}";
    auto [first, isNew] = roles.try_emplace(role.getValue(), i);
    if (!isNew)
      return emitError(arg.getLoc())
             << "argument " << i << " of '" << func.getSymName()
             << "' has the role '" << role.getValue() << "' of argument "
             << first->second << "; each argument needs a role of its own";
    std::string name = role.str();
    MLIRContext *ctx = func.getContext();
    if (auto mt = dyn_cast<MemRefType>(arg.getType())) {
      if (!mt.getLayout().isIdentity())
        return func.emitError()
               << "argument " << i << " must have an identity layout";
      FailureOr<std::string> dt = dtypeName(func, mt.getElementType());
      if (failed(dt))
        return failure();
      // Dynamic dims are read from the tensor at launch.
      SmallVector<int64_t> dims =
          llvm::to_vector(llvm::map_range(mt.getShape(), [](int64_t d) {
            return ShapedType::isDynamic(d) ? rt::kDynamicDim : d;
          }));
      args.push_back(PlanArgAttr::get(ctx, i, name, "memref", *dt, dims));
    } else if (arg.getType().isF32()) {
      args.push_back(PlanArgAttr::get(ctx, i, name, "scalar", "f32", {}));
    } else {
      return func.emitError()
             << "argument " << i << " of type " << arg.getType()
             << " is not supported by the launcher";
    }
  }
  int64_t next = func.getNumArguments();
  for (Operation &op : func.getBody().front()) {
    auto alloc = dyn_cast<memref::AllocOp>(op);
    if (!alloc)
      continue;
    FailureOr<std::string> dt =
        dtypeName(alloc, alloc.getType().getElementType());
    FailureOr<SmallVector<rt::DimExpr>> dims =
        dimsExpr(alloc.getType(), alloc.getDynamicSizes(), alloc);
    if (failed(dt) || failed(dims))
      return failure();
    index[alloc.getResult()] = next;
    workspaces.push_back(
        PlanWorkspaceAttr::get(func.getContext(), next++, *dt, *dims));
  }
  return success();
}

FailureOr<LaunchPlanBuilder::Captures>
LaunchPlanBuilder::captures(GridOp grid) {
  SetVector<Value> captured;
  getUsedValuesDefinedAbove(grid.getBody(), captured);
  Captures caps;
  for (Value v : captured) {
    if (index.count(v)) {
      if (!llvm::is_contained(caps.params, v))
        caps.params.push_back(v);
      continue;
    }
    Operation *def = v.getDefiningOp();
    bool isDimOfPlanValue = def && isa<memref::DimOp>(def) &&
                            index.count(def->getOperand(0)) &&
                            getConstantIntValue(def->getOperand(1));
    // A transposed view of an argument (e.g. merge's [H, T] LSE seen as
    // [T, H]) is rebuilt inside the kernel.
    bool isViewOfPlanValue =
        def && isa<memref::TransposeOp>(def) && index.count(def->getOperand(0));
    isDimOfPlanValue |= isViewOfPlanValue;
    if (def && (isa<arith::ConstantOp>(def) || isDimOfPlanValue)) {
      caps.clones.push_back(def);
      if (isDimOfPlanValue &&
          !llvm::is_contained(caps.params, def->getOperand(0)))
        caps.params.push_back(def->getOperand(0));
      continue;
    }
    return grid.emitError() << "grid captures a value that is neither a "
                               "function argument, a workspace nor a "
                               "constant";
  }
  return caps;
}

FailureOr<SmallVector<rt::DimExpr, 3>>
LaunchPlanBuilder::gridSizes(GridOp grid) {
  SmallVector<rt::DimExpr, 3> sizes;
  for (Value s : {grid.getGridX(), grid.getGridY(), grid.getGridZ()}) {
    FailureOr<rt::DimExpr> e = sizeExpr(s, grid);
    if (failed(e))
      return failure();
    sizes.push_back(*e);
  }
  return sizes;
}

void LaunchPlanBuilder::addLaunch(StringRef entry, ArrayRef<Value> params,
                                  ArrayRef<rt::DimExpr> grid,
                                  ArrayRef<int64_t> block, int64_t sharedBytes,
                                  bool dependent) {
  SmallVector<int64_t> argIdx;
  for (Value p : params)
    argIdx.push_back(index.lookup(p));
  launches.push_back(PlanLaunchAttr::get(func.getContext(), entry, argIdx, grid,
                                         block, sharedBytes, dependent));
}

FailureOr<LaunchPlanAttr> LaunchPlanBuilder::finish() {
  auto emitError = [&] {
    return func.emitError() << "function '" << func.getSymName()
                            << "' cannot be described by a launch plan: ";
  };
  LaunchPlanAttr plan = LaunchPlanAttr::getChecked(
      emitError, func.getContext(), func.getSymName(),
      func->getAttrOfType<DictionaryAttr>(MLADialect::kKernelInfoAttrName),
      args, workspaces, launches, {});
  if (!plan)
    return failure();
  return plan;
}

void LaunchPlanBuilder::cloneBody(GridOp grid, const Captures &caps,
                                  ValueRange paramValues, ValueRange coords,
                                  OpBuilder &builder) {
  IRMapping map;
  for (auto [p, a] : llvm::zip(caps.params, paramValues))
    map.map(p, a);
  for (Operation *def : caps.clones)
    builder.clone(*def, map);
  Block &body = grid.getBody().front();
  for (unsigned k = 0; k < 3; ++k)
    map.map(body.getArgument(k), coords[k]);
  for (Operation &op : body)
    builder.clone(op, map);
}

SmallVector<func::FuncOp> functionsWithGrids(ModuleOp module) {
  SmallVector<func::FuncOp> funcs;
  for (auto f : module.getOps<func::FuncOp>())
    if (!f.isExternal() && !f.getOps<GridOp>().empty())
      funcs.push_back(f);
  return funcs;
}

} // namespace mla

SmallVector<Value> mla::unpackEntryArgs(ImplicitLocOpBuilder &b, Value args,
                                        TypeRange types) {
  MLIRContext *ctx = b.getContext();
  auto ptrType = LLVM::LLVMPointerType::get(ctx);
  Type i64 = IntegerType::get(ctx, 64);
  SmallVector<Value> out;
  for (auto [j, want] : llvm::enumerate(types)) {
    Value slot = LLVM::GEPOp::create(b, ptrType, ptrType, args,
                                     ArrayRef<LLVM::GEPArg>{(int32_t)j});
    Value ptr = LLVM::LoadOp::create(b, ptrType, slot);
    if (auto mt = dyn_cast<MemRefType>(want)) {
      // MLIR's strided memref descriptor: {ptr, ptr, i64, [r x i64], [r x i64]},
      // and {ptr, ptr, i64} for rank 0 (no size or stride arrays).
      Type space = ptrType;
      if (auto as = dyn_cast_or_null<IntegerAttr>(mt.getMemorySpace()))
        space = LLVM::LLVMPointerType::get(ctx, as.getInt());
      SmallVector<Type, 5> fields = {space, space, i64};
      if (mt.getRank() > 0)
        fields.append(2, LLVM::LLVMArrayType::get(i64, mt.getRank()));
      auto desc = LLVM::LLVMStructType::getLiteral(ctx, fields);
      Value d = LLVM::LoadOp::create(b, desc, ptr);
      out.push_back(UnrealizedConversionCastOp::create(b, mt, d).getResult(0));
    } else {
      out.push_back(LLVM::LoadOp::create(b, want, ptr));
    }
  }
  return out;
}
