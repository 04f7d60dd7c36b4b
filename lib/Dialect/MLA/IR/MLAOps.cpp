//===- MLAOps.cpp - mla op verifiers --------------------------------------===//
#include "mla/Dialect/MLA/IR/MLA.h"
#include "mla/runtime/Kinds.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mla;

namespace {
/// Two extents agree when equal or when either is dynamic.
bool compatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

std::string dimStr(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
}

/// Checks that `type` has an identity layout and that the listed dims are
/// static.
LogicalResult checkMemRef(Operation *op, StringRef name, MemRefType type,
                          ArrayRef<unsigned> staticDims) {
  if (!type.getLayout().isIdentity())
    return op->emitOpError() << "operand '" << name
                             << "' must have an identity (row-major) layout";
  for (unsigned d : staticDims)
    if (type.isDynamicDim(d))
      return op->emitOpError()
             << "operand '" << name << "' dim " << d << " must be static";
  return success();
}

/// Checks `got` against `want` for each listed (dim of got, expected extent,
/// description) triple.
LogicalResult checkDim(Operation *op, StringRef name, MemRefType type,
                       unsigned dim, int64_t want, StringRef what) {
  int64_t got = type.getDimSize(dim);
  if (!compatible(got, want))
    return op->emitOpError()
           << "operand '" << name << "' dim " << dim << " (" << what << ") is "
           << dimStr(got) << ", expected " << dimStr(want);
  return success();
}
/// Checks that the paged pool `kv`'s page size (dim 1), where static, is at
/// least 1: every tiling divides by it.
LogicalResult checkPageSize(Operation *op, MemRefType kv) {
  if (!kv.isDynamicDim(1) && kv.getDimSize(1) < 1)
    return op->emitOpError()
           << "page size (kv dim 1) must be >= 1, got " << kv.getDimSize(1);
  return success();
}

/// The block of region `name` takes `argTypes` (`argsText` in words).
LogicalResult verifyRegionArgs(Operation *op, Block &block, StringRef name,
                               ArrayRef<Type> argTypes, StringRef argsText) {
  if (block.getNumArguments() != argTypes.size())
    return op->emitOpError()
           << "'" << name << "' region must take (" << argsText << "), got "
           << block.getNumArguments() << " arguments";
  for (auto [i, arg, want] : llvm::enumerate(block.getArguments(), argTypes))
    if (arg.getType() != want)
      return op->emitOpError()
             << "'" << name << "' region argument " << i << " has type "
             << arg.getType() << ", expected " << want << " (the region takes "
             << argsText << ")";
  return success();
}

/// Checks one optional variant region: one block with the given argument
/// types, ops that every target lowers, an `mla.yield` of `result`.
LogicalResult verifyVariantRegion(Operation *op, Region &region, StringRef name,
                                  ArrayRef<Type> argTypes,
                                  ArrayRef<Type> results, StringRef argsText) {
  if (region.empty())
    return success();
  if (!region.hasOneBlock())
    return op->emitOpError() << "'" << name << "' region must have one block";
  Block &block = region.front();
  if (failed(verifyRegionArgs(op, block, name, argTypes, argsText)))
    return failure();
  for (Operation &inner : block) {
    if (isa<YieldOp>(inner))
      continue;
    bool supported =
        isa<arith::ArithDialect>(inner.getDialect()) ||
        isa<math::ExpOp, math::Exp2Op, math::LogOp, math::Log2Op, math::TanhOp,
            math::AbsFOp, math::FmaOp, memref::LoadOp>(inner);
    if (!supported)
      return inner.emitError()
             << "'" << inner.getName() << "' is not supported in the '" << name
             << "' region of " << op->getName()
             << " (supported: arith ops, math.exp, math.exp2, math.log, "
                "math.log2, math.tanh, math.absf, math.fma, memref.load)";
    if (inner.getNumRegions())
      return inner.emitError() << "ops with regions are not supported in a "
                                  "variant region";
    for (Type t : inner.getResultTypes())
      if (isa<ShapedType>(t))
        return inner.emitError() << "variant regions compute scalars; "
                                    "this op yields "
                                 << t;
  }
  // An empty block has no terminator to ask for (the parser accepts one in
  // a region whose op has no SingleBlockImplicitTerminator).
  auto yield = block.empty() ? YieldOp() : dyn_cast<YieldOp>(block.back());
  if (!yield)
    return op->emitOpError() << "'" << name << "' region must end in mla.yield";
  if (yield.getValues().getTypes() != TypeRange(results)) {
    InFlightDiagnostic d = yield.emitError()
                           << "the '" << name << "' region must yield (";
    llvm::interleaveComma(results, d);
    return d << "), got (" << yield.getValues().getTypes() << ")";
  }
  return success();
}

LogicalResult verifyVariants(Operation *op, Region &score, Region &mask,
                             Region &sink) {
  Builder b(op->getContext());
  Type idx = b.getIndexType(), f32 = b.getF32Type();
  if (failed(verifyVariantRegion(
          op, score, "score", {f32, idx, idx, idx, idx}, {f32},
          "score: f32, request, head, query position, key position: index")) ||
      failed(verifyVariantRegion(
          op, mask, "mask", {idx, idx, idx, idx}, {b.getI1Type()},
          "request, head, query position, key position: index")) ||
      failed(verifyVariantRegion(op, sink, "sink", {idx, idx, idx}, {f32},
                                 "request, head, query position: index")))
    return failure();
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// DecodeOp
//===----------------------------------------------------------------------===//

LogicalResult DecodeOp::verify() {
  Operation *op = getOperation();
  MemRefType q = getQ().getType(), kv = getKv().getType(),
             bt = getBlockTable().getType(), lens = getSeqLens().getType(),
             o = getO().getType(), lse = getLse().getType();
  if (failed(checkMemRef(op, rt::roles::kQ, q, {1, 2, 3})) ||
      failed(checkMemRef(op, rt::roles::kKv, kv, {2})) ||
      failed(checkMemRef(op, rt::roles::kBlockTable, bt, {})) ||
      failed(checkMemRef(op, rt::roles::kSeqLens, lens, {})) ||
      failed(checkMemRef(op, rt::roles::kO, o, {1, 2, 3})) ||
      failed(checkMemRef(op, rt::roles::kLse, lse, {1, 2})))
    return failure();

  int64_t sq = q.getDimSize(1), heads = q.getDimSize(2),
          headDim = q.getDimSize(3), latent = o.getDimSize(3);
  if (sq < 1)
    return emitOpError() << "query length (q dim 1) must be >= 1, got " << sq;
  if (heads < 1)
    return emitOpError() << "head count (q dim 2) must be >= 1, got " << heads;
  if (latent < 16 || latent % 16 != 0)
    return emitOpError() << "latent dim (o dim 3) must be a positive multiple "
                            "of 16, got "
                         << latent;
  int64_t rope = headDim - latent;
  if (rope < 0 || rope % 16 != 0)
    return emitOpError() << "rope dim (q dim 3 - o dim 3 = " << headDim << " - "
                         << latent << ") must be a non-negative multiple of 16";
  if (kv.getElementType() != q.getElementType())
    return emitOpError() << "kv element type " << kv.getElementType()
                         << " differs from q element type "
                         << q.getElementType();
  // The runtime's decode kind takes o in the kernel's dtype only
  // (runtime/lib/DecodeKind.cpp), unlike prefill's (q's or f32).
  if (o.getElementType() != q.getElementType())
    return emitOpError() << "operand 'o' element type must be the q element "
                            "type ("
                         << q.getElementType() << "), got "
                         << o.getElementType();
  if (failed(checkPageSize(op, kv)) ||
      failed(checkDim(op, rt::roles::kKv, kv, 2, headDim, "row width")) ||
      failed(checkDim(op, rt::roles::kO, o, 1, sq, "query length")) ||
      failed(checkDim(op, rt::roles::kO, o, 2, heads, "heads")) ||
      failed(checkDim(op, rt::roles::kLse, lse, 1, sq, "query length")) ||
      failed(checkDim(op, rt::roles::kLse, lse, 2, heads, "heads")))
    return failure();

  // The batch extent must agree wherever it is static.
  int64_t batch = ShapedType::kDynamic;
  std::pair<StringRef, int64_t> batchDims[] = {
      {rt::roles::kQ, q.getDimSize(0)},
      {rt::roles::kBlockTable, bt.getDimSize(0)},
      {rt::roles::kSeqLens, lens.getDimSize(0)},
      {rt::roles::kO, o.getDimSize(0)},
      {rt::roles::kLse, lse.getDimSize(0)}};
  for (auto [name, extent] : batchDims) {
    if (!compatible(batch, extent))
      return emitOpError() << "operand '" << name << "' dim 0 (batch) is "
                           << extent << ", expected " << batch;
    if (!ShapedType::isDynamic(extent))
      batch = extent;
  }

  if (failed(verifyVariants(op, getScore(), getMask(), getSink())))
    return failure();
  if (ConfigAttr cfg = getConfigAttr()) {
    if (cfg.getTileQ() != 0)
      return emitOpError() << "config tile_q applies to prefill only, got "
                           << cfg.getTileQ();
    if (heads % cfg.getHeadGroup() != 0)
      return emitOpError() << "config head_group " << cfg.getHeadGroup()
                           << " does not divide the head count " << heads;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// PrefillOp
//===----------------------------------------------------------------------===//

LogicalResult PrefillOp::verify() {
  Operation *op = getOperation();
  MemRefType q = getQ().getType(), k = getK().getType(), v = getV().getType(),
             cuq = getCuSeqlensQ().getType(), cuk = getCuSeqlensK().getType(),
             o = getO().getType(), lse = getLse().getType();
  if (failed(checkMemRef(op, rt::roles::kQ, q, {1, 2})) ||
      failed(checkMemRef(op, rt::roles::kK, k, {1, 2})) ||
      failed(checkMemRef(op, rt::roles::kV, v, {1, 2})) ||
      failed(checkMemRef(op, rt::roles::kCuSeqlensQ, cuq, {})) ||
      failed(checkMemRef(op, rt::roles::kCuSeqlensK, cuk, {})) ||
      failed(checkMemRef(op, rt::roles::kO, o, {1, 2})) ||
      failed(checkMemRef(op, rt::roles::kLse, lse, {0})))
    return failure();
  int64_t heads = q.getDimSize(1), dqk = q.getDimSize(2), dv = v.getDimSize(2);
  if (heads < 1)
    return emitOpError() << "head count (q dim 1) must be >= 1, got " << heads;
  if (dqk < 16 || dqk % 16 != 0)
    return emitOpError() << "qk head dim (q dim 2) must be a positive "
                            "multiple of 16, got "
                         << dqk;
  if (dv < 16 || dv % 16 != 0)
    return emitOpError() << "value head dim (v dim 2) must be a positive "
                            "multiple of 16, got "
                         << dv;
  if (dv > dqk)
    return emitOpError() << "value head dim (v dim 2 = " << dv
                         << ") must not exceed the qk head dim (q dim 2 = "
                         << dqk << ")";
  for (auto [name, type] :
       {std::pair<StringRef, MemRefType>{rt::roles::kK, k}, {rt::roles::kV, v}})
    if (type.getElementType() != q.getElementType())
      return emitOpError() << name << " element type " << type.getElementType()
                           << " differs from q element type "
                           << q.getElementType();
  if (o.getElementType() != q.getElementType() && !o.getElementType().isF32())
    return emitOpError() << "o element type must be the q element type ("
                         << q.getElementType() << ") or f32, got "
                         << o.getElementType();
  if (failed(checkDim(op, rt::roles::kK, k, 1, heads, "heads")) ||
      failed(checkDim(op, rt::roles::kK, k, 2, dqk, "qk head dim")) ||
      failed(checkDim(op, rt::roles::kV, v, 1, heads, "heads")) ||
      failed(
          checkDim(op, rt::roles::kV, v, 0, k.getDimSize(0), "key tokens")) ||
      failed(
          checkDim(op, rt::roles::kO, o, 0, q.getDimSize(0), "query tokens")) ||
      failed(checkDim(op, rt::roles::kO, o, 1, heads, "heads")) ||
      failed(checkDim(op, rt::roles::kO, o, 2, dv, "value head dim")) ||
      failed(checkDim(op, rt::roles::kLse, lse, 0, heads, "heads")) ||
      failed(checkDim(op, rt::roles::kLse, lse, 1, q.getDimSize(0),
                      "query tokens")) ||
      failed(checkDim(op, rt::roles::kCuSeqlensK, cuk, 0, cuq.getDimSize(0),
                      "batch + 1")))
    return failure();
  if (!cuq.isDynamicDim(0) && cuq.getDimSize(0) < 2)
    return emitOpError() << "operand 'cu_seqlens_q' dim 0 (batch + 1) must be "
                            ">= 2, got "
                         << cuq.getDimSize(0);
  if (failed(verifyVariants(op, getScore(), getMask(), getSink())))
    return failure();
  if (ConfigAttr cfg = getConfigAttr()) {
    if (cfg.getKvSplits() != 1 || cfg.getHeadGroup() != 1)
      return emitOpError() << "config kv_splits and head_group must be 1 for "
                              "prefill, got "
                           << cfg.getKvSplits() << " and "
                           << cfg.getHeadGroup();
    if (cfg.getTileQ() == 0)
      return emitOpError() << "config tile_q must be set for prefill";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// MergeOp
//===----------------------------------------------------------------------===//

LogicalResult MergeOp::verify() {
  Operation *op = getOperation();
  MemRefType oParts = getOParts().getType(), lseParts = getLseParts().getType(),
             o = getO().getType(), lse = getLse().getType();
  int64_t lead = lse.getRank();
  if (lead < 1 || lead > 3)
    return emitOpError() << "expected 1 to 3 leading dims (the rank of 'lse'),"
                            " got "
                         << lead;
  if (lseParts.getRank() != lead + 1 || o.getRank() != lead + 1 ||
      oParts.getRank() != lead + 2)
    return emitOpError() << "expected ranks o_parts = " << lead + 2
                         << ", lse_parts = " << lead + 1 << ", o = " << lead + 1
                         << " for " << lead << " leading dims, got "
                         << oParts.getRank() << ", " << lseParts.getRank()
                         << ", " << o.getRank();
  // Strided views are allowed (e.g. a transposed [H, T] LSE of chunked
  // prefill); the value dim must be contiguous.
  for (auto [name, type] :
       {std::pair<StringRef, MemRefType>{rt::roles::kOParts, oParts},
        {rt::roles::kLseParts, lseParts},
        {rt::roles::kO, o},
        {rt::roles::kLse, lse}}) {
    if (!type.isStrided())
      return emitOpError() << "operand '" << name
                           << "' must have a strided layout";
    if ((name == rt::roles::kOParts || name == rt::roles::kO) &&
        !type.isLastDimUnitStride())
      return emitOpError() << "operand '" << name
                           << "' must be contiguous in its last (value) dim";
  }
  for (int64_t d = 0; d < lead; ++d) {
    if (failed(checkDim(op, rt::roles::kLseParts, lseParts, d,
                        lse.getDimSize(d), "leading")) ||
        failed(checkDim(op, rt::roles::kOParts, oParts, d, lse.getDimSize(d),
                        "leading")) ||
        failed(checkDim(op, rt::roles::kO, o, d, lse.getDimSize(d), "leading")))
      return failure();
  }
  if (lseParts.isDynamicDim(lead) || oParts.isDynamicDim(lead))
    return emitOpError() << "the part count (dim " << lead
                         << " of lse_parts and o_parts) must be static";
  if (lseParts.getDimSize(lead) < 1)
    return emitOpError() << "expected at least one part";
  if (failed(checkDim(op, rt::roles::kOParts, oParts, lead,
                      lseParts.getDimSize(lead), "parts")))
    return failure();
  if (o.isDynamicDim(lead) || oParts.isDynamicDim(lead + 1))
    return emitOpError() << "the value dim (last dim of o and o_parts) must "
                            "be static";
  if (failed(checkDim(op, rt::roles::kOParts, oParts, lead + 1,
                      o.getDimSize(lead), "value dim")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// GridOp
//===----------------------------------------------------------------------===//

LogicalResult GridOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != 3 ||
      !llvm::all_of(body.getArgumentTypes(),
                    [](Type t) { return t.isIndex(); }))
    return emitOpError() << "body must take three 'index' arguments (the "
                            "workgroup coordinates)";
  return success();
}

//===----------------------------------------------------------------------===//
// LoadKVTileOp
//===----------------------------------------------------------------------===//

LogicalResult LoadKVTileOp::verify() {
  MemRefType kv = getKv().getType(), tile = getTile().getType();
  if (!tile.hasStaticShape())
    return emitOpError() << "tile must have a static shape";
  if (tile.getElementType() != kv.getElementType())
    return emitOpError() << "tile element type " << tile.getElementType()
                         << " differs from kv element type "
                         << kv.getElementType();
  if (kv.isDynamicDim(2) || kv.getDimSize(2) != tile.getDimSize(1))
    return emitOpError() << "tile row width " << tile.getDimSize(1)
                         << " differs from kv row width "
                         << dimStr(kv.getDimSize(2));
  return checkPageSize(*this, kv);
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  MemRefType a = getA().getType(), b = getB().getType(), c = getC().getType();
  if (!a.hasStaticShape() || !b.hasStaticShape() || !c.hasStaticShape())
    return emitOpError() << "operands must have static shapes";
  if (a.getElementType() != b.getElementType() && !a.getElementType().isF32())
    return emitOpError() << "A (" << a.getElementType() << ") and B ("
                         << b.getElementType()
                         << ") element types differ; only an f32 A may be "
                            "combined with another B type";
  int64_t m = a.getDimSize(0), k = a.getDimSize(1);
  int64_t bk = getTransposeB() ? b.getDimSize(1) : b.getDimSize(0);
  int64_t n = getTransposeB() ? b.getDimSize(0) : b.getDimSize(1);
  if (bk != k)
    return emitOpError() << "reduction extents differ: A has " << k
                         << ", B has " << bk;
  if (c.getDimSize(0) != m || c.getDimSize(1) != n)
    return emitOpError() << "C is " << c.getDimSize(0) << "x" << c.getDimSize(1)
                         << ", expected " << m << "x" << n;
  if (Value scale = getCScale()) {
    if (!getAccumulate())
      return emitOpError() << "c_scale needs 'accumulate'";
    auto st = cast<MemRefType>(scale.getType());
    if (!st.hasStaticShape() || st.getDimSize(0) != m)
      return emitOpError() << "c_scale must have " << m
                           << " elements (the rows of C)";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// OnlineSoftmaxOp
//===----------------------------------------------------------------------===//

LogicalResult OnlineSoftmaxOp::verify() {
  MemRefType s = getS().getType(), p = getP().getType();
  if (!s.hasStaticShape() || !p.hasStaticShape())
    return emitOpError() << "scores and probabilities must have static shapes";
  if (s.getShape() != p.getShape())
    return emitOpError() << "probabilities (" << p.getDimSize(0) << "x"
                         << p.getDimSize(1) << ") must have the shape of the "
                         << "scores (" << s.getDimSize(0) << "x"
                         << s.getDimSize(1) << ")";
  for (auto [name, v] : {std::pair<StringRef, Value>{"m", getM()},
                         {"l", getL()},
                         {"corr", getCorr()}}) {
    auto t = cast<MemRefType>(v.getType());
    if (!t.hasStaticShape() || t.getDimSize(0) != s.getDimSize(0))
      return emitOpError() << "'" << name << "' must have " << s.getDimSize(0)
                           << " elements (one per score row)";
  }
  Builder b(getContext());
  Type idx = b.getIndexType(), f32 = b.getF32Type();
  if (getBody().empty())
    return emitOpError() << "needs an element region";
  return verifyVariantRegion(*this, getBody(), "body", {idx, idx, f32},
                             {f32, b.getI1Type()},
                             "row, column: index, score: f32");
}

//===----------------------------------------------------------------------===//
// AttentionStepOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionStepOp::verify() {
  for (auto [name, v] : {std::pair<StringRef, Value>{rt::roles::kQ, getQ()},
                         {rt::roles::kK, getK()},
                         {rt::roles::kV, getV()},
                         {"acc", getAcc()},
                         {"m", getM()},
                         {"l", getL()}})
    if (!cast<MemRefType>(v.getType()).hasStaticShape())
      return emitOpError() << "operand '" << name
                           << "' must have a static shape";
  MemRefType q = getQ().getType(), k = getK().getType(), v = getV().getType(),
             acc = getAcc().getType();
  Type elem = q.getElementType();
  if (k.getElementType() != elem || v.getElementType() != elem)
    return emitOpError() << "queries (" << elem << "), keys ("
                         << k.getElementType() << ") and values ("
                         << v.getElementType()
                         << ") must have one element type";
  const int64_t rows = getRows(), keys = getTileKeys();
  if (k.getDimSize(1) != getHeadDim())
    return emitOpError() << "keys are " << k.getDimSize(1) << " wide, queries "
                         << getHeadDim() << ": Q·Kᵀ needs one width";
  if (v.getDimSize(0) != keys)
    return emitOpError() << "values have " << v.getDimSize(0)
                         << " rows, the key tile " << keys;
  if (acc.getDimSize(1) != getValueDim())
    return emitOpError() << "accumulator is " << acc.getDimSize(1)
                         << " wide, values " << getValueDim()
                         << ": acc is query rows x value width";
  if (std::optional<ArrayRef<int64_t>> groups = getQueryGroups()) {
    if (groups->size() != 2 || (*groups)[0] < 1 ||
        (*groups)[1] < (*groups)[0] || rows % (*groups)[0] != 0)
      return emitOpError()
             << "query_groups must be [G, stride] with 1 <= G <= stride and "
                "G dividing the "
             << rows << " query rows";
    int64_t g = (*groups)[0], stride = (*groups)[1];
    int64_t need = (rows / g - 1) * stride + g;
    if (q.getDimSize(0) < need)
      return emitOpError() << "queries have " << q.getDimSize(0)
                           << " rows; query_groups [" << g << ", " << stride
                           << "] over " << rows << " rows reads " << need;
  } else if (q.getDimSize(0) != rows) {
    return emitOpError() << "queries have " << q.getDimSize(0)
                         << " rows, the accumulator " << rows
                         << " (one per query row)";
  }
  for (auto [name, val] :
       {std::pair<StringRef, Value>{"m", getM()}, {"l", getL()}})
    if (cast<MemRefType>(val.getType()).getDimSize(0) != rows)
      return emitOpError() << "'" << name << "' must have " << rows
                           << " elements (one per query row)";
  if (getOverlap() && getStages() < 2)
    return emitOpError() << "overlap needs a pipelined key loop (stages >= "
                            "2), got stages "
                         << getStages();
  if (getBody().empty())
    return emitOpError() << "needs an element region";
  Builder b(getContext());
  Type idx = b.getIndexType(), f32 = b.getF32Type();
  return verifyVariantRegion(*this, getBody(), "body", {idx, idx, f32},
                             {f32, b.getI1Type()},
                             "row, column: index, score: f32");
}

//===----------------------------------------------------------------------===//
// AttentionFinishOp
//===----------------------------------------------------------------------===//

namespace {
/// One block taking `argTypes` and ending in an operand-less mla.yield.
LogicalResult verifyResultRegion(Operation *op, Region &region, StringRef name,
                                 ArrayRef<Type> argTypes, StringRef argsText) {
  Block &block = region.front();
  if (failed(verifyRegionArgs(op, block, name, argTypes, argsText)))
    return failure();
  auto yield = block.empty() ? YieldOp() : dyn_cast<YieldOp>(block.back());
  if (!yield || yield->getNumOperands() != 0)
    return op->emitOpError() << "'" << name
                             << "' region must end in mla.yield with no "
                                "operands";
  return success();
}
} // namespace

LogicalResult AttentionFinishOp::verify() {
  SmallVector<std::pair<StringRef, Value>> operands = {
      {"acc", getAcc()}, {"m", getM()}, {"l", getL()}};
  if (getScale())
    operands.push_back({"scale", getScale()});
  for (auto [name, v] : operands)
    if (!cast<MemRefType>(v.getType()).hasStaticShape())
      return emitOpError() << "operand '" << name
                           << "' must have a static shape";
  const int64_t rows = getRows(), width = getWidth();
  for (auto [name, v] : ArrayRef(operands).drop_front())
    if (cast<MemRefType>(v.getType()).getDimSize(0) != rows)
      return emitOpError() << "'" << name << "' must have " << rows
                           << " elements (one per accumulator row)";
  if (getValueDim() % width != 0)
    return emitOpError() << "width " << width << " does not divide the "
                         << getValueDim() << " accumulator columns";
  Builder b(getContext());
  Type idx = b.getIndexType(), f32 = b.getF32Type();
  auto vec = VectorType::get({width}, f32);
  if (failed(verifyResultRegion(*this, getOutput(), "output", {idx, idx, vec},
                                "row, column: index, o: vector<" +
                                    std::to_string(width) + "xf32>")))
    return failure();
  return verifyResultRegion(*this, getLseBody(), "lse", {idx, f32},
                            "row: index, lse: f32");
}

//===----------------------------------------------------------------------===//
// AppendKVOp
//===----------------------------------------------------------------------===//

LogicalResult AppendKVOp::verify() {
  Operation *op = getOperation();
  MemRefType kvNew = getKvNew().getType(), slots = getSlotMapping().getType(),
             kv = getKv().getType();
  for (auto [name, type, rank, what] :
       {std::tuple<StringRef, MemRefType, int64_t, StringRef>{
            rt::roles::kKvNew, kvNew, 2, "[tokens, row width]"},
        {rt::roles::kSlotMapping, slots, 1, "[tokens]"},
        {rt::roles::kKv, kv, 3, "[pages, page size, row width]"}})
    if (type.getRank() != rank)
      return emitOpError() << "operand '" << name << "' must have rank " << rank
                           << " " << what << ", got rank " << type.getRank();
  if (failed(checkMemRef(op, rt::roles::kKvNew, kvNew, {1})) ||
      failed(checkMemRef(op, rt::roles::kSlotMapping, slots, {})) ||
      failed(checkMemRef(op, rt::roles::kKv, kv, {2})))
    return failure();
  Type elem = kvNew.getElementType();
  if (!elem.isBF16() && !elem.isF16() && !elem.isF32())
    return emitOpError() << "operand 'kv_new' element type must be bf16, f16 "
                            "or f32, got "
                         << elem;
  if (kv.getElementType() != elem)
    return emitOpError() << "operand 'kv' element type " << kv.getElementType()
                         << " differs from kv_new element type " << elem;
  if (!slots.getElementType().isInteger(32))
    return emitOpError() << "operand 'slot_mapping' element type must be i32, "
                            "got "
                         << slots.getElementType();
  int64_t width = kvNew.getDimSize(1);
  if (width < 8 || width % 8 != 0)
    return emitOpError() << "row width (kv_new dim 1) must be a positive "
                            "multiple of 8, got "
                         << width;
  if (failed(checkDim(op, rt::roles::kKv, kv, 2, width, "row width")) ||
      failed(checkDim(op, rt::roles::kSlotMapping, slots, 0,
                      kvNew.getDimSize(0), "tokens")))
    return failure();
  if (failed(checkPageSize(op, kv)))
    return failure();
  if (std::optional<uint64_t> latent = getLatentDim()) {
    int64_t l = static_cast<int64_t>(*latent);
    if (l < 1 || l > width)
      return emitOpError() << "latent_dim must be in [1, " << width
                           << "] (the row width), got " << l;
  }
  return success();
}

#define GET_OP_CLASSES
#include "mla/Dialect/MLA/IR/MLAOps.cpp.inc"

//===----------------------------------------------------------------------===//
// ChunkPlanOp, ChunkMergeOp
//===----------------------------------------------------------------------===//

LogicalResult ChunkPlanOp::verify() {
  MemRefType lens = getSeqLens().getType(), plan = getPlan().getType();
  if (failed(checkMemRef(*this, "seq_lens", lens, {})) ||
      failed(checkMemRef(*this, "plan", plan, {0})))
    return failure();
  const int64_t rows = rt::schedule::planRows(getWindows());
  if (plan.getDimSize(0) != rows)
    return emitOpError() << "operand 'plan' dim 0 must be " << rows
                         << (getWindows()
                                 ? " with windows (the header and C_b row, "
                                   "the chunks' requests, P_b, the "
                                   "windows' first chunks, their requests, "
                                   "first keys, key ends and lengths, the "
                                   "requests' finished-chunk counters)"
                                 : " (the header and C_b row, the chunks' "
                                   "requests, the requests' finished-chunk "
                                   "counters)")
                         << ", got " << plan.getDimSize(0);
  if (getAdaptive() && !getWindows())
    return emitOpError() << "adaptive needs windows (it writes the windows' "
                            "plan layout)";
  if (getWindows() && getRefine() != 1)
    return emitOpError() << "windows has no refinement: refine must be 1, "
                            "got "
                         << getRefine();
  const int64_t slots = int64_t(getRefine()) * int64_t(getChunks());
  if (!lens.isDynamicDim(0) && !plan.isDynamicDim(1) &&
      plan.getDimSize(1) < lens.getDimSize(0) + slots + 2)
    return emitOpError() << "operand 'plan' dim 1 must be at least batch + "
                            "refine * chunks + 2 = "
                         << lens.getDimSize(0) + slots + 2 << ", got "
                         << plan.getDimSize(1);
  return success();
}

LogicalResult ChunkMergeOp::verify() {
  Operation *op = getOperation();
  MemRefType oParts = getOParts().getType(), lseParts = getLseParts().getType(),
             plan = getPlan().getType(), o = getO().getType(),
             lse = getLse().getType();
  for (auto [name, type] :
       {std::pair<StringRef, MemRefType>{rt::roles::kOParts, oParts},
        {rt::roles::kLseParts, lseParts},
        {"plan", plan},
        {rt::roles::kO, o},
        {rt::roles::kLse, lse}})
    if (failed(checkMemRef(op, name, type, {})))
      return failure();
  // mla.chunk_plan's rows, with or without windows.
  if (!compatible(plan.getDimSize(0), rt::schedule::planRows(false)) &&
      !compatible(plan.getDimSize(0), rt::schedule::planRows(true)))
    return emitOpError() << "operand 'plan' dim 0 must be "
                         << rt::schedule::planRows(false) << " or "
                         << rt::schedule::planRows(true)
                         << " (mla.chunk_plan's rows), got "
                         << plan.getDimSize(0);
  if (getGroups() > kMaxMergeGroups)
    return emitOpError() << "groups must be in [1, " << kMaxMergeGroups
                         << "], got " << getGroups();
  // Slots: dim 0 of the parts; requests: dim 0 of o and lse.
  if (failed(checkDim(op, rt::roles::kLseParts, lseParts, 0,
                      oParts.getDimSize(0), "chunk slots")) ||
      failed(checkDim(op, rt::roles::kLse, lse, 0, o.getDimSize(0), "batch")))
    return failure();
  for (unsigned d = 1; d < 3; ++d)
    if (failed(checkDim(op, rt::roles::kOParts, oParts, d, o.getDimSize(d),
                        d == 1 ? "query length" : "heads")) ||
        failed(checkDim(op, rt::roles::kLseParts, lseParts, d, o.getDimSize(d),
                        d == 1 ? "query length" : "heads")) ||
        failed(checkDim(op, rt::roles::kLse, lse, d, o.getDimSize(d),
                        d == 1 ? "query length" : "heads")))
      return failure();
  if (o.isDynamicDim(3))
    return emitOpError() << "the value dim (last dim of o) must be static";
  return checkDim(op, rt::roles::kOParts, oParts, 3, o.getDimSize(3),
                  "value dim");
}
