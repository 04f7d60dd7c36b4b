//===- Builders.cpp - semantic kernels built from typed specs -------------===//
//
// Each builder checks its spec, then writes the listing of its kernel: line
// 1 the signature `func.func @kernel(%q: T, ...)`, then one op per line, each
// located at its place in that listing (the text mla-compile formatted and
// parsed before these builders existed, so diagnostics keep their lines).
//
//===----------------------------------------------------------------------===//
#include "mla/Kernels/Builders.h"
#include "mla/Dialect/MLA/IR/MLA.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace mla {
namespace {

/// Where a module is built: its listing's locations and the wording of spec
/// errors.
class Listing {
public:
  Listing(MLIRContext &context, StringRef kernel, const BuildOptions &options)
      : context(context), options(options),
        file(options.sourceName.empty() ? ("<" + kernel + ">").str()
                                        : options.sourceName),
        builder(&context) {
    context.getOrLoadDialect<func::FuncDialect>();
    context.getOrLoadDialect<memref::MemRefDialect>();
    context.getOrLoadDialect<MLADialect>();
  }

  /// Line `line`, column `col` of the listing; line 0 is the module.
  Location at(unsigned line, unsigned col) {
    return FileLineColLoc::get(&context, file, line, col);
  }

  /// `field` (snake_case) as the errors spell it.
  std::string name(StringRef field) const {
    return options.fieldName ? options.fieldName(field) : field.str();
  }

  LogicalResult fail(const Twine &message) {
    return emitError(at(0, 0)) << message;
  }

  // The checks the specs share, each with its one wording.
  LogicalResult atLeastOne(StringRef field, int64_t value) {
    if (value >= 1)
      return success();
    return fail(name(field) + " must be >= 1 (got " + Twine(value) + ")");
  }
  LogicalResult positiveMultipleOf16(StringRef field, int64_t value) {
    if (value >= 16 && value % 16 == 0)
      return success();
    return fail(name(field) + " must be a positive multiple of 16 (got " +
                Twine(value) + ")");
  }
  LogicalResult nonNegativeMultipleOf16(StringRef field, int64_t value) {
    if (value >= 0 && value % 16 == 0)
      return success();
    return fail(name(field) + " must be a non-negative multiple of 16 (got " +
                Twine(value) + ")");
  }
  LogicalResult pageSize(int64_t value) {
    if (value >= 0)
      return success();
    return fail(name("page_size") +
                " must be >= 1, or 0 for a run-time page size (got " +
                Twine(value) + ")");
  }
  /// `a` + `b` (`a` * `b`) into `result`, unless it overflows int64.
  LogicalResult sum(StringRef fieldA, int64_t a, StringRef fieldB, int64_t b,
                    int64_t &result) {
    if (!llvm::AddOverflow(a, b, result))
      return success();
    return fail(name(fieldA) + " + " + name(fieldB) + " is too large");
  }
  LogicalResult product(StringRef fieldA, int64_t a, StringRef fieldB,
                        int64_t b, int64_t &result) {
    if (!llvm::MulOverflow(a, b, result))
      return success();
    return fail(name(fieldA) + " * " + name(fieldB) + " is too large");
  }
  /// bf16, f16 or f32 into `type`.
  LogicalResult elementType(StringRef field, StringRef value, Type &type) {
    Builder b(&context);
    type = value == "bf16"  ? Type(b.getBF16Type())
           : value == "f16" ? Type(b.getF16Type())
           : value == "f32" ? Type(b.getF32Type())
                            : Type();
    if (type)
      return success();
    return fail(name(field) + " must be bf16, f16 or f32 (got '" + value +
                "')");
  }

  /// The module holding `func.func @kernel(%names[i]: types[i], ...)`, the
  /// builder at the start of its body (line 2).
  func::FuncOp begin(StringRef kernel, ArrayRef<StringRef> names,
                     ArrayRef<Type> types) {
    module = ModuleOp::create(at(0, 0));
    builder.setInsertionPointToEnd(module->getBody());
    auto func = func::FuncOp::create(builder, at(1, 1), kernel,
                                     builder.getFunctionType(types, {}));
    std::string signature = ("func.func @" + kernel + "(").str();
    SmallVector<Location> locs;
    for (auto [i, argName, type] : llvm::enumerate(names, types)) {
      if (i)
        signature += ", ";
      locs.push_back(at(1, signature.size() + 1));
      llvm::raw_string_ostream(signature) << "%" << argName << ": " << type;
    }
    builder.createBlock(&func.getBody(), {}, types, locs);
    return func;
  }

  /// The location of the next op of the body: its name, after `%result = `
  /// when it has one.
  Location next(StringRef result = "") {
    return at(++line, result.empty() ? 3 : 3 + result.size() + 4);
  }

  /// Ends the body with a return and verifies the module.
  FailureOr<OwningOpRef<ModuleOp>> end() {
    func::ReturnOp::create(builder, next());
    if (failed(verify(*module)))
      return failure();
    return std::move(module);
  }

  OpBuilder &b() { return builder; }

private:
  MLIRContext &context;
  const BuildOptions &options;
  std::string file;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
  unsigned line = 1;
};

/// memref<shape x element> with a dynamic dim for each ShapedType::kDynamic.
MemRefType memrefOf(ArrayRef<int64_t> shape, Type element,
                    MemRefLayoutAttrInterface layout = {}) {
  return MemRefType::get(shape, element, layout);
}

constexpr int64_t kDyn = ShapedType::kDynamic;

} // namespace

FailureOr<OwningOpRef<ModuleOp>>
buildDecodeModule(MLIRContext &context, const DecodeSpec &spec,
                  const BuildOptions &options) {
  Listing l(context, "decode", options);
  Type t;
  int64_t d;
  if (failed(l.atLeastOne("heads", spec.heads)) ||
      failed(l.atLeastOne("q_len", spec.qLen)) ||
      failed(l.positiveMultipleOf16("latent_dim", spec.latentDim)) ||
      failed(l.nonNegativeMultipleOf16("rope_dim", spec.ropeDim)) ||
      failed(l.pageSize(spec.pageSize)) ||
      failed(l.elementType("dtype", spec.dtype, t)) ||
      failed(l.sum("latent_dim", spec.latentDim, "rope_dim", spec.ropeDim, d)))
    return failure();
  Builder &b = l.b();
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  int64_t p = spec.pageSize == 0 ? kDyn : spec.pageSize;
  SmallVector<Type> types = {
      memrefOf({kDyn, spec.qLen, spec.heads, d}, t),
      memrefOf({kDyn, p, d}, t),
      memrefOf({kDyn, kDyn}, i32),
      memrefOf({kDyn}, i32),
      f32,
      memrefOf({kDyn, spec.qLen, spec.heads, spec.latentDim}, t),
      memrefOf({kDyn, spec.qLen, spec.heads}, f32)};
  func::FuncOp func = l.begin(
      "decode", {"q", "kv", "block_table", "seq_lens", "scale", "o", "lse"},
      types);
  auto a = func.getArguments();
  DecodeOp::create(l.b(), l.next(), a[0], a[1], a[2], a[3], a[4], a[5], a[6],
                   /*config=*/nullptr);
  return l.end();
}

FailureOr<OwningOpRef<ModuleOp>>
buildPrefillModule(MLIRContext &context, const PrefillSpec &spec,
                   const BuildOptions &options) {
  Listing l(context, "prefill", options);
  Type t, oT;
  if (failed(l.atLeastOne("heads", spec.heads)) ||
      failed(l.positiveMultipleOf16("qk_dim", spec.qkDim)) ||
      failed(l.positiveMultipleOf16("v_dim", spec.vDim)))
    return failure();
  if (spec.vDim > spec.qkDim)
    return l.fail(l.name("v_dim") + " (" + Twine(spec.vDim) +
                  ") must not exceed " + l.name("qk_dim") + " (" +
                  Twine(spec.qkDim) + ")");
  if (failed(l.elementType("dtype", spec.dtype, t)))
    return failure();
  StringRef outName = spec.oDtype.empty() ? spec.dtype : spec.oDtype;
  if (outName != spec.dtype && outName != "f32")
    return l.fail(l.name("o_dtype") + " must be the " + l.name("dtype") + " (" +
                  spec.dtype + ") or f32 (got '" + outName + "')");
  if (failed(l.elementType("o_dtype", outName, oT)))
    return failure();
  Builder &b = l.b();
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  Type qT = memrefOf({kDyn, spec.heads, spec.qkDim}, t);
  SmallVector<Type> types = {qT,
                             qT,
                             memrefOf({kDyn, spec.heads, spec.vDim}, t),
                             memrefOf({kDyn}, i32),
                             memrefOf({kDyn}, i32),
                             f32,
                             memrefOf({kDyn, spec.heads, spec.vDim}, oT),
                             memrefOf({spec.heads, kDyn}, f32)};
  func::FuncOp func = l.begin(
      "prefill",
      {"q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "scale", "o", "lse"},
      types);
  auto a = func.getArguments();
  PrefillOp::create(l.b(), l.next(), a[0], a[1], a[2], a[3], a[4], a[5], a[6],
                    a[7], spec.causal ? b.getUnitAttr() : UnitAttr(),
                    /*config=*/nullptr);
  return l.end();
}

FailureOr<OwningOpRef<ModuleOp>> buildMergeModule(MLIRContext &context,
                                                  const MergeSpec &spec,
                                                  const BuildOptions &options) {
  Listing l(context, "merge", options);
  Type t;
  int64_t hdv;
  if (failed(l.atLeastOne("heads", spec.heads)) ||
      failed(l.positiveMultipleOf16("v_dim", spec.vDim)) ||
      failed(l.atLeastOne("parts", spec.parts)) ||
      failed(l.elementType("dtype", spec.dtype, t)) ||
      failed(l.product("heads", spec.heads, "v_dim", spec.vDim, hdv)))
    return failure();
  MLIRContext *ctx = &context;
  Type f32 = l.b().getF32Type();
  int64_t n = spec.parts, h = spec.heads, dv = spec.vDim;
  SmallVector<Type> types = {
      memrefOf({n, kDyn, h, dv}, f32), memrefOf({n, h, kDyn}, f32),
      memrefOf({kDyn, h, dv}, t), memrefOf({h, kDyn}, f32)};
  func::FuncOp func =
      l.begin("merge", {"o_parts", "lse_parts", "o", "lse"}, types);
  auto a = func.getArguments();
  // Views in mla.merge's layout: (n, t, h, d) -> (t, h, n, d), (n, h, t) ->
  // (t, h, n) and (h, t) -> (t, h).
  auto view = [&](StringRef result, Value from, ArrayRef<unsigned> permutation,
                  ArrayRef<int64_t> shape, ArrayRef<int64_t> strides) {
    auto type = memrefOf(shape, f32, StridedLayoutAttr::get(ctx, 0, strides));
    AffineMap map = AffineMap::getPermutationMap(permutation, ctx);
    return memref::TransposeOp::create(l.b(), l.next(result), type, from,
                                       AffineMapAttr::get(map))
        .getResult();
  };
  Value op =
      view("op", a[0], {1, 2, 0, 3}, {kDyn, h, n, dv}, {hdv, dv, kDyn, 1});
  Value lp = view("lp", a[1], {2, 1, 0}, {kDyn, h, n}, {1, kDyn, kDyn});
  Value lse = view("l", a[3], {1, 0}, {kDyn, h}, {1, kDyn});
  MergeOp::create(l.b(), l.next(), op, lp, a[2], lse);
  return l.end();
}

FailureOr<OwningOpRef<ModuleOp>>
buildAppendKVModule(MLIRContext &context, const AppendKVSpec &spec,
                    const BuildOptions &options) {
  Listing l(context, "append_kv", options);
  Type t;
  int64_t d;
  if (failed(l.positiveMultipleOf16("latent_dim", spec.latentDim)) ||
      failed(l.nonNegativeMultipleOf16("rope_dim", spec.ropeDim)) ||
      failed(l.pageSize(spec.pageSize)) ||
      failed(l.elementType("dtype", spec.dtype, t)) ||
      failed(l.sum("latent_dim", spec.latentDim, "rope_dim", spec.ropeDim, d)))
    return failure();
  Builder &b = l.b();
  int64_t p = spec.pageSize == 0 ? kDyn : spec.pageSize;
  SmallVector<Type> types = {memrefOf({kDyn, d}, t),
                             memrefOf({kDyn}, b.getI32Type()),
                             memrefOf({kDyn, p, d}, t)};
  func::FuncOp func =
      l.begin("append_kv", {"kv_new", "slot_mapping", "kv"}, types);
  auto a = func.getArguments();
  AppendKVOp::create(l.b(), l.next(), a[0], a[1], a[2],
                     b.getI64IntegerAttr(spec.latentDim));
  return l.end();
}

} // namespace mla
