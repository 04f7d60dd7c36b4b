//===- TileMerge.cpp - mla-tile for mla.merge -----------------------------===//
#include "AttentionLayout.h"
#include "KindRoles.h"
#include "TileCore.h"
#include "Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mla;
using namespace mla::tiling;

namespace mla::tiling {
//===----------------------------------------------------------------------===//
// mla.merge
//===----------------------------------------------------------------------===//

/// The function argument `v` is, or views through transposes.
Value viewSource(Value v) {
  while (auto t = v.getDefiningOp<memref::TransposeOp>())
    v = t.getIn();
  return v;
}

/// A merge on the function's own arguments (a standalone merge kernel, e.g.
/// for chunked prefill) describes the kernel; a decode's merge does not.
void recordMergeInfo(MergeOp op) {
  auto func = op->getParentOfType<func::FuncOp>();
  if (!func || func->hasAttr(MLADialect::kKernelInfoAttrName) ||
      !isa<BlockArgument>(viewSource(op.getO())))
    return;
  Builder b(op.getContext());
  auto oType = op.getO().getType();
  const int64_t lead = op.getLse().getType().getRank();
  NamedAttrList info;
  info.append("kernel", b.getStringAttr(rt::kernels::kMerge));
  info.append("dtype", b.getStringAttr(typeName(oType.getElementType())));
  if (lead == 2 && !oType.isDynamicDim(1))
    info.append("heads", b.getI64IntegerAttr(oType.getDimSize(1)));
  info.append("v_dim", b.getI64IntegerAttr(oType.getDimSize(lead)));
  info.append("parts",
              b.getI64IntegerAttr(op.getLseParts().getType().getDimSize(lead)));
  func->setAttr(MLADialect::kKernelInfoAttrName,
                info.getDictionary(op.getContext()));
  tagKindRoles(rt::KernelKind::Merge,
               {viewSource(op.getOParts()), viewSource(op.getLseParts()),
                viewSource(op.getO()), viewSource(op.getLse())});
}

/// Parts read together by the merge of fully written parts: their loads are
/// independent, so that a row of many parts (a long request cut into tens of
/// chunks) does not wait for one part's load before the next (H200, ncu with
/// caches flushed: the merge of 43 chunks of one request took 34.0 us one
/// part at a time, 25.9 us eight at a time).
constexpr int64_t kMergeUnroll = 8;

namespace {
/// The callbacks of one merged row (see emitMergeRow).
struct MergeRowIO {
  function_ref<Value(ImplicitLocOpBuilder &, Value)> lseAt;
  function_ref<Value(ImplicitLocOpBuilder &, Value, Value, VectorType)> oAt;
  function_ref<void(ImplicitLocOpBuilder &, Value, Value)> storeO;
  function_ref<void(ImplicitLocOpBuilder &, Value)> storeLse;
};

/// The merge's sums for one vector chunk of the value dim: the reference
/// (the parts' max LSE, -inf when every part is empty), Σ exp(lse_n - ref)
/// and Σ exp(lse_n - ref) o_n.
struct MergeSums {
  Value ref, total, acc;
};

/// Two passes over the parts (max, then the weighted sums); an empty part's
/// output (its LSE is -inf) may be unwritten and is not read.
MergeSums mergeTwoPass(ImplicitLocOpBuilder &ib, Value lo, Value hi, Value d,
                       VectorType vecType, const MergeRowIO &io) {
  Value c1 = indexConst(ib, 1);
  Value negInf = f32Const(ib, kNegInf), zeroF = f32Const(ib, 0.0);
  Value log2e = f32Const(ib, kLog2e);
  Value zeroVec = arith::ConstantOp::create(
      ib, vecType, DenseElementsAttr::get(vecType, ib.getF32FloatAttr(0.0)));
  Value maxLse =
      reduceLoop(ib, lo, hi, c1, negInf,
                 [&](ImplicitLocOpBuilder &jb, Value n, Value m) -> Value {
                   return arith::MaximumFOp::create(jb, m, io.lseAt(jb, n));
                 });
  Value ref = arith::SelectOp::create(
      ib, arith::CmpFOp::create(ib, arith::CmpFPredicate::OEQ, maxLse, negInf),
      zeroF, maxLse);
  auto loop = scf::ForOp::create(
      ib, lo, hi, c1, ValueRange{zeroF, zeroVec},
      [&](OpBuilder &nb, Location loc, Value n, ValueRange args) {
        ImplicitLocOpBuilder jb(loc, nb);
        Value l = io.lseAt(jb, n);
        Value w = math::Exp2Op::create(
            jb, arith::MulFOp::create(jb, arith::SubFOp::create(jb, l, ref),
                                      log2e));
        Value used =
            arith::CmpFOp::create(jb, arith::CmpFPredicate::OGT, l, negInf);
        auto partIf = scf::IfOp::create(
            jb, used,
            [&](OpBuilder &nb2, Location loc2) {
              ImplicitLocOpBuilder pb(loc2, nb2);
              Value part = io.oAt(pb, n, d, vecType);
              Value wv = vector::BroadcastOp::create(pb, vecType, w);
              scf::YieldOp::create(
                  pb, ValueRange{vector::FMAOp::create(pb, part, wv, args[1])});
            },
            [&](OpBuilder &nb2, Location loc2) {
              ImplicitLocOpBuilder pb(loc2, nb2);
              scf::YieldOp::create(pb, ValueRange{args[1]});
            });
        scf::YieldOp::create(jb,
                             ValueRange{arith::AddFOp::create(jb, args[0], w),
                                        partIf.getResult(0)});
      });
  return {maxLse, loop.getResult(0), loop.getResult(1)};
}

/// One pass over fully written parts, kMergeUnroll at a time (every part's
/// output is written, 0 where it saw no key, so it is read without a
/// branch): the group's loads first, then an online rescale of the sums to
/// the group's max. Past `hi` a group reads part `lo` again and weighs it 0.
MergeSums mergeOnline(ImplicitLocOpBuilder &ib, Value lo, Value hi, Value d,
                      VectorType vecType, const MergeRowIO &io) {
  Value negInf = f32Const(ib, kNegInf), zeroF = f32Const(ib, 0.0);
  Value log2e = f32Const(ib, kLog2e);
  Value zeroVec = arith::ConstantOp::create(
      ib, vecType, DenseElementsAttr::get(vecType, ib.getF32FloatAttr(0.0)));
  auto loop = scf::ForOp::create(
      ib, lo, hi, indexConst(ib, kMergeUnroll),
      ValueRange{negInf, zeroF, zeroVec},
      [&](OpBuilder &nb, Location loc, Value n0, ValueRange args) {
        ImplicitLocOpBuilder jb(loc, nb);
        SmallVector<Value> lse, part;
        for (int64_t u = 0; u < kMergeUnroll; ++u) {
          Value n = arith::AddIOp::create(jb, n0, indexConst(jb, u));
          Value in =
              arith::CmpIOp::create(jb, arith::CmpIPredicate::slt, n, hi);
          Value at = arith::SelectOp::create(jb, in, n, lo);
          lse.push_back(
              arith::SelectOp::create(jb, in, io.lseAt(jb, at), negInf));
          part.push_back(io.oAt(jb, at, d, vecType));
        }
        Value m = args[0];
        for (Value l : lse)
          m = arith::MaximumFOp::create(jb, m, l);
        // ref: the running max, 0 while every part so far is empty (the
        // weights are then exp(-inf) = 0 and the sums stay 0).
        Value ref = arith::SelectOp::create(
            jb, arith::CmpFOp::create(jb, arith::CmpFPredicate::OEQ, m, negInf),
            zeroF, m);
        auto weight = [&](Value l) -> Value {
          return math::Exp2Op::create(
              jb, arith::MulFOp::create(jb, arith::SubFOp::create(jb, l, ref),
                                        log2e));
        };
        Value scale = weight(args[0]);
        Value total = arith::MulFOp::create(jb, args[1], scale);
        Value acc = arith::MulFOp::create(
            jb, args[2], vector::BroadcastOp::create(jb, vecType, scale));
        for (int64_t u = 0; u < kMergeUnroll; ++u) {
          Value w = weight(lse[u]);
          total = arith::AddFOp::create(jb, total, w);
          acc = vector::FMAOp::create(
              jb, part[u], vector::BroadcastOp::create(jb, vecType, w), acc);
        }
        scf::YieldOp::create(jb, ValueRange{m, total, acc});
      });
  return {loop.getResult(0), loop.getResult(1), loop.getResult(2)};
}
} // namespace

/// One merged row: the parts n in [lo, hi) (`lseAt(n)`, `oAt(n, d)`),
/// LSE-weighted; stores the merged output through `storeO(d, o)` and the
/// LSE through `storeLse`. Inside the current workgroup: each parallel
/// iteration owns one vector chunk of the value dim; the parts' LSEs are
/// re-read by every iteration instead of being shared. With
/// `allPartsWritten` every part's output is written (0 where it saw no
/// key): one unrolled pass (mergeOnline); otherwise an empty part's output
/// may be unwritten and is not read (mergeTwoPass).
static void emitMergeRow(
    ImplicitLocOpBuilder &g, Value lo, Value hi, int64_t dv, Type outElem,
    bool allPartsWritten,
    function_ref<Value(ImplicitLocOpBuilder &, Value)> lseAt,
    function_ref<Value(ImplicitLocOpBuilder &, Value, Value, VectorType)> oAt,
    function_ref<void(ImplicitLocOpBuilder &, Value, Value)> storeO,
    function_ref<void(ImplicitLocOpBuilder &, Value)> storeLse) {
  const int64_t vw = vectorWidthFor(dv);
  Type f32 = g.getF32Type();
  Value c0 = indexConst(g, 0);
  Value negInf = f32Const(g, kNegInf), zeroF = f32Const(g, 0.0);
  auto vecType = VectorType::get({vw}, f32);
  MergeRowIO io{lseAt, oAt, storeO, storeLse};
  parallelFor(
      g, {indexConst(g, dv / vw)},
      [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
        Value d = arith::MulIOp::create(ib, iv[0], indexConst(ib, vw));
        MergeSums sums = allPartsWritten
                             ? mergeOnline(ib, lo, hi, d, vecType, io)
                             : mergeTwoPass(ib, lo, hi, d, vecType, io);
        Value empty = arith::CmpFOp::create(ib, arith::CmpFPredicate::OEQ,
                                            sums.ref, negInf);
        Value ref = arith::SelectOp::create(ib, empty, zeroF, sums.ref);
        Value safeTotal =
            arith::SelectOp::create(ib, empty, f32Const(ib, 1.0), sums.total);
        Value inv = arith::SelectOp::create(
            ib, empty, zeroF,
            arith::DivFOp::create(ib, f32Const(ib, 1.0), safeTotal));
        Value merged = arith::MulFOp::create(
            ib, sums.acc, vector::BroadcastOp::create(ib, vecType, inv));
        io.storeO(ib, d, castFloat(ib, merged, outElem));
        Value first =
            arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, iv[0], c0);
        scf::IfOp::create(ib, first, [&](OpBuilder &nb, Location loc) {
          ImplicitLocOpBuilder jb(loc, nb);
          Value lse = arith::AddFOp::create(
              jb, ref,
              arith::MulFOp::create(jb, math::Log2Op::create(jb, safeTotal),
                                    f32Const(jb, kLn2)));
          io.storeLse(jb, arith::SelectOp::create(jb, empty, negInf, lse));
          scf::YieldOp::create(jb);
        });
      });
}

LogicalResult tileMerge(MergeOp op) {
  recordMergeInfo(op);
  ImplicitLocOpBuilder b(op.getLoc(), op);
  auto lseType = op.getLse().getType();
  auto oType = op.getO().getType();
  const int64_t lead = lseType.getRank();
  const int64_t parts = op.getLseParts().getType().getDimSize(lead);

  SmallVector<Value, 3> sizes;
  for (int64_t d = 0; d < 3; ++d)
    sizes.push_back(d < lead ? dimValue(b, op.getLse(), d) : indexConst(b, 1));
  auto [grid, ids] = createGrid(b, sizes[0], sizes[1], sizes[2]);
  ImplicitLocOpBuilder g =
      ImplicitLocOpBuilder::atBlockBegin(op.getLoc(), &grid.getBody().front());
  SmallVector<Value> idx(ids.begin(), ids.begin() + lead);
  auto withPart = [&](Value n) {
    SmallVector<Value> v(idx);
    v.push_back(n);
    return v;
  };
  emitMergeRow(
      g, indexConst(g, 0), indexConst(g, parts), oType.getDimSize(lead),
      oType.getElementType(), /*allPartsWritten=*/false,
      [&](ImplicitLocOpBuilder &jb, Value n) -> Value {
        return memref::LoadOp::create(jb, op.getLseParts(), withPart(n));
      },
      [&](ImplicitLocOpBuilder &pb, Value n, Value d, VectorType t) -> Value {
        SmallVector<Value> at = withPart(n);
        at.push_back(d);
        return vector::LoadOp::create(pb, t, op.getOParts(), at);
      },
      [&](ImplicitLocOpBuilder &ib, Value d, Value merged) {
        SmallVector<Value> at(idx);
        at.push_back(d);
        vector::StoreOp::create(ib, merged, op.getO(), at);
      },
      [&](ImplicitLocOpBuilder &jb, Value lse) {
        memref::StoreOp::create(jb, lse, op.getLse(), idx);
      });
  op.erase();
  return success();
}

//===----------------------------------------------------------------------===//
// mla.chunk_merge
//===----------------------------------------------------------------------===//

LogicalResult tileChunkMerge(ChunkMergeOp op) {
  ImplicitLocOpBuilder b(op.getLoc(), op);
  auto oType = op.getO().getType();
  auto [grid, ids] =
      createGrid(b, dimValue(b, op.getO(), 0), dimValue(b, op.getO(), 1),
                 dimValue(b, op.getO(), 2));
  ImplicitLocOpBuilder g =
      ImplicitLocOpBuilder::atBlockBegin(op.getLoc(), &grid.getBody().front());
  Value req = ids[0], i = ids[1], head = ids[2];
  // Request req's chunks: [plan[0][2 + req], plan[0][3 + req]).
  auto planAt = [&](Value col) -> Value {
    Value v = memref::LoadOp::create(g, op.getPlan(),
                                     ValueRange{indexConst(g, 0), col});
    return arith::IndexCastOp::create(g, g.getIndexType(), v);
  };
  Value lo = planAt(arith::AddIOp::create(g, req, indexConst(g, 2)));
  Value hi = planAt(arith::AddIOp::create(g, req, indexConst(g, 3)));
  emitMergeRow(
      g, lo, hi, oType.getDimSize(3), oType.getElementType(),
      // Every chunk writes all its rows (o = 0 where it saw no key).
      /*allPartsWritten=*/true,
      [&](ImplicitLocOpBuilder &jb, Value n) -> Value {
        return memref::LoadOp::create(jb, op.getLseParts(),
                                      ValueRange{n, i, head});
      },
      [&](ImplicitLocOpBuilder &pb, Value n, Value d, VectorType t) -> Value {
        return vector::LoadOp::create(pb, t, op.getOParts(),
                                      ValueRange{n, i, head, d});
      },
      [&](ImplicitLocOpBuilder &ib, Value d, Value merged) {
        vector::StoreOp::create(ib, merged, op.getO(),
                                ValueRange{req, i, head, d});
      },
      [&](ImplicitLocOpBuilder &jb, Value lse) {
        memref::StoreOp::create(jb, lse, op.getLse(), ValueRange{req, i, head});
      });
  op.erase();
  return success();
}

} // namespace mla::tiling
