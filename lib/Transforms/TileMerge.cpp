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

/// Parts read together by one thread of the chunk merge (mla.chunk_merge),
/// with independent loads, so that a request cut into tens of chunks does
/// not wait for one part's load before the next. One group: kMergeUnroll
/// (H200, ncu with caches flushed: the merge of 43 chunks of one request
/// took 34.0 us one part at a time, 25.9 us eight at a time, 2026-12-02);
/// `groups > 1` groups of threads: kGroupMergeUnroll each, so that groups x
/// kGroupMergeUnroll parts are in flight.
constexpr int64_t kMergeUnroll = 8;
constexpr int64_t kGroupMergeUnroll = 4;
/// The most parts the one-group path takes when part groups exist: two
/// rounds of kMergeUnroll (H200, 2026-12-06, the peers harness with the
/// plan reused: H=16 B=8 L=2048, 16 chunks a request, 22.6 -> 20.3 us
/// against the groups' path; B=1 and the production batch unchanged;
/// docs/Performance.md).
constexpr int64_t kOneGroupParts = 2 * kMergeUnroll;
/// The chunk merge's workgroups one SM holds at once on NVIDIA (mla.grid
/// `occupancy`): a grid of B x Sq x H small workgroups, each a few
/// dependent loads long, ends sooner in one wave than in two (8 workgroups
/// of 128 threads an SM leave 64 registers a thread; the production
/// batch's 1024 merge workgroups at 72 registers took two waves, 7 an SM
/// on 132 SMs; H200, 2026-12-06, the peers harness with the plan reused:
/// 47.6 -> 47.3 us, docs/Performance.md). Not on AMD: its 256-thread merge
/// workgroups at 8 a CU would get 64 VGPRs and spill (gfx942: 20 bytes of
/// scratch), unmeasured there.
constexpr int64_t kMergeOccupancy = 8;
/// The most workgroup memory the part groups' sums take (fewer groups for a
/// wide value dim).
constexpr int64_t kMergeSumBytes = 16 * 1024;

/// The f32 values one thread of the chunk merge's one-group path loads
/// from a part's row. GPUs: 16-byte columns (4 floats), so that a 512-wide
/// row keeps a 128-thread workgroup busy (16-float columns left 96 of its
/// 128 threads idle; H100, the production batch's merge: 7.2-7.7 us ->
/// 5.3-5.6 us, docs/Performance.md). Host: the widest vector that divides
/// the row (one thread per workgroup). The groups' path keeps the widest
/// columns: its groups x columns already fill the workgroup.
static int64_t mergeVectorWidth(int64_t dv, const ArchInfo *arch) {
  if (!arch || !arch->isGPU())
    return vectorWidthFor(dv);
  return std::min<int64_t>(4, vectorWidthFor(dv));
}

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

/// One pass over fully written parts lo, lo + stride, ... < hi,
/// `unroll` at a time (every part's output is written, 0 where it
/// saw no key, so it is read without a branch): the round's loads first,
/// then an online rescale of the sums to the running max. Past `hi` a round
/// reads part `lo` again and weighs it 0. No part: ref -inf, sums 0.
MergeSums mergeOnline(ImplicitLocOpBuilder &ib, Value lo, Value hi,
                      int64_t stride, int64_t unroll, Value d,
                      VectorType vecType, const MergeRowIO &io) {
  Value negInf = f32Const(ib, kNegInf), zeroF = f32Const(ib, 0.0);
  Value log2e = f32Const(ib, kLog2e);
  Value zeroVec = arith::ConstantOp::create(
      ib, vecType, DenseElementsAttr::get(vecType, ib.getF32FloatAttr(0.0)));
  auto loop = scf::ForOp::create(
      ib, lo, hi, indexConst(ib, unroll * stride),
      ValueRange{negInf, zeroF, zeroVec},
      [&](OpBuilder &nb, Location loc, Value n0, ValueRange args) {
        ImplicitLocOpBuilder jb(loc, nb);
        SmallVector<Value> lse, part;
        for (int64_t u = 0; u < unroll; ++u) {
          Value n = arith::AddIOp::create(jb, n0, indexConst(jb, u * stride));
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
        for (int64_t u = 0; u < unroll; ++u) {
          Value w = weight(lse[u]);
          total = arith::AddFOp::create(jb, total, w);
          acc = vector::FMAOp::create(
              jb, part[u], vector::BroadcastOp::create(jb, vecType, w), acc);
        }
        scf::YieldOp::create(jb, ValueRange{m, total, acc});
      });
  return {loop.getResult(0), loop.getResult(1), loop.getResult(2)};
}

/// The merged row's vector chunk at `d` from its sums: o = acc / total
/// (0 when every part is empty), stored through `storeO`; where `writesLse`
/// the LSE ref + ln(total) (-inf when empty) through `storeLse`.
void storeMerged(ImplicitLocOpBuilder &ib, const MergeSums &sums, Value d,
                 VectorType vecType, Type outElem,
                 function_ref<Value(ImplicitLocOpBuilder &)> writesLse,
                 const MergeRowIO &io) {
  Value negInf = f32Const(ib, kNegInf), zeroF = f32Const(ib, 0.0);
  Value empty =
      arith::CmpFOp::create(ib, arith::CmpFPredicate::OEQ, sums.ref, negInf);
  Value ref = arith::SelectOp::create(ib, empty, zeroF, sums.ref);
  Value safeTotal =
      arith::SelectOp::create(ib, empty, f32Const(ib, 1.0), sums.total);
  Value inv = arith::SelectOp::create(
      ib, empty, zeroF,
      arith::DivFOp::create(ib, f32Const(ib, 1.0), safeTotal));
  Value merged = arith::MulFOp::create(
      ib, sums.acc, vector::BroadcastOp::create(ib, vecType, inv));
  io.storeO(ib, d, castFloat(ib, merged, outElem));
  scf::IfOp::create(ib, writesLse(ib), [&](OpBuilder &nb, Location loc) {
    ImplicitLocOpBuilder jb(loc, nb);
    Value lse = arith::AddFOp::create(
        jb, ref,
        arith::MulFOp::create(jb, math::Log2Op::create(jb, safeTotal),
                              f32Const(jb, kLn2)));
    io.storeLse(jb, arith::SelectOp::create(jb, empty, negInf, lse));
    scf::YieldOp::create(jb);
  });
}
} // namespace

/// One merged row: the parts n in [lo, hi) (`lseAt(n)`, `oAt(n, d)`),
/// LSE-weighted; stores the merged output through `storeO(d, o)` and the
/// LSE through `storeLse`. Inside the current workgroup: each parallel
/// iteration owns one vector chunk of the value dim; the parts' LSEs are
/// re-read by every iteration instead of being shared. An empty part's
/// output may be unwritten and is not read (mergeTwoPass).
static void emitMergeRow(ImplicitLocOpBuilder &g, Value lo, Value hi,
                         int64_t dv, Type outElem, const MergeRowIO &io) {
  const int64_t vw = vectorWidthFor(dv);
  auto vecType = VectorType::get({vw}, g.getF32Type());
  parallelFor(g, {indexConst(g, dv / vw)},
              [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
                Value d = arith::MulIOp::create(ib, iv[0], indexConst(ib, vw));
                MergeSums sums = mergeTwoPass(ib, lo, hi, d, vecType, io);
                storeMerged(
                    ib, sums, d, vecType, outElem,
                    [&](ImplicitLocOpBuilder &jb) -> Value {
                      return arith::CmpIOp::create(jb, arith::CmpIPredicate::eq,
                                                   iv[0], indexConst(jb, 0));
                    },
                    io);
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
  emitMergeRow(g, indexConst(g, 0), indexConst(g, parts),
               oType.getDimSize(lead), oType.getElementType(),
               MergeRowIO{[&](ImplicitLocOpBuilder &jb, Value n) -> Value {
                            return memref::LoadOp::create(jb, op.getLseParts(),
                                                          withPart(n));
                          },
                          [&](ImplicitLocOpBuilder &pb, Value n, Value d,
                              VectorType t) -> Value {
                            SmallVector<Value> at = withPart(n);
                            at.push_back(d);
                            return vector::LoadOp::create(pb, t, op.getOParts(),
                                                          at);
                          },
                          [&](ImplicitLocOpBuilder &ib, Value d, Value merged) {
                            SmallVector<Value> at(idx);
                            at.push_back(d);
                            vector::StoreOp::create(ib, merged, op.getO(), at);
                          },
                          [&](ImplicitLocOpBuilder &jb, Value lse) {
                            memref::StoreOp::create(jb, lse, op.getLse(), idx);
                          }});
  op.erase();
  return success();
}

//===----------------------------------------------------------------------===//
// mla.chunk_merge
//===----------------------------------------------------------------------===//

/// The groups' sums of one vector column at `d` combined: rescaled to
/// their common max (a group without parts has max -inf and weighs 0).
static MergeSums combineGroups(ImplicitLocOpBuilder &b, int64_t groups,
                               Value maxT, Value totalT, Value accT, Value d,
                               VectorType vecType) {
  Value negInf = f32Const(b, kNegInf), zeroF = f32Const(b, 0.0);
  SmallVector<Value> maxes;
  Value m = negInf;
  for (int64_t p = 0; p < groups; ++p) {
    maxes.push_back(memref::LoadOp::create(b, maxT, indexConst(b, p)));
    m = arith::MaximumFOp::create(b, m, maxes.back());
  }
  Value ref = arith::SelectOp::create(
      b, arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, m, negInf), zeroF,
      m);
  Value total = zeroF;
  Value acc = arith::ConstantOp::create(
      b, vecType, DenseElementsAttr::get(vecType, b.getF32FloatAttr(0.0)));
  for (int64_t p = 0; p < groups; ++p) {
    Value none =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, maxes[p], negInf);
    Value w = arith::SelectOp::create(
        b, none, zeroF,
        math::Exp2Op::create(
            b, arith::MulFOp::create(b, arith::SubFOp::create(b, maxes[p], ref),
                                     f32Const(b, kLog2e))));
    total = arith::AddFOp::create(
        b, total,
        arith::MulFOp::create(
            b, memref::LoadOp::create(b, totalT, indexConst(b, p)), w));
    Value part = vector::LoadOp::create(b, vecType, accT,
                                        ValueRange{indexConst(b, p), d});
    acc = vector::FMAOp::create(
        b, part, vector::BroadcastOp::create(b, vecType, w), acc);
  }
  return {m, total, acc};
}

/// mla.chunk_merge: a grid over (request, query, head). One group: each
/// parallel iteration sums every part of its vector column (mergeOnline)
/// and stores it. `groups > 1`: part group p sums the parts lo + p,
/// lo + p + groups, ... for every vector column, the groups' sums meet in
/// workgroup memory and one pass rescales them to their common max and
/// stores the row; a request of at most kOneGroupParts parts takes the
/// one-group path instead (a branch on its part count).
LogicalResult tileChunkMerge(ChunkMergeOp op, const ArchInfo *arch) {
  ImplicitLocOpBuilder b(op.getLoc(), op);
  auto oType = op.getO().getType();
  const int64_t dv = oType.getDimSize(3);
  const int64_t vw = vectorWidthFor(dv), vecCols = dv / vw;
  const int64_t oneVw = mergeVectorWidth(dv, arch);
  const int64_t groups =
      std::clamp<int64_t>(kMergeSumBytes / (dv * 4), 1, op.getGroups());
  auto [grid, ids] =
      createGrid(b, dimValue(b, op.getO(), 0), dimValue(b, op.getO(), 1),
                 dimValue(b, op.getO(), 2));
  if (arch && arch->kind == TargetKind::NVIDIA)
    grid.setOccupancy(kMergeOccupancy);
  ImplicitLocOpBuilder g =
      ImplicitLocOpBuilder::atBlockBegin(op.getLoc(), &grid.getBody().front());
  Value req = ids[0], i = ids[1], head = ids[2];
  Type f32 = g.getF32Type();
  auto vecType = VectorType::get({vw}, f32);
  auto oneVecType = VectorType::get({oneVw}, f32);
  // Request req's chunks: [plan[0][2 + req], plan[0][3 + req]).
  auto planAt = [&](Value col) -> Value {
    Value v = memref::LoadOp::create(g, op.getPlan(),
                                     ValueRange{indexConst(g, 0), col});
    return arith::IndexCastOp::create(g, g.getIndexType(), v);
  };
  Value lo = planAt(arith::AddIOp::create(g, req, indexConst(g, 2)));
  Value hi = planAt(arith::AddIOp::create(g, req, indexConst(g, 3)));
  // Every chunk writes all its rows (o = 0 where it saw no key).
  auto lseAt = [&](ImplicitLocOpBuilder &jb, Value n) -> Value {
    return memref::LoadOp::create(jb, op.getLseParts(), ValueRange{n, i, head});
  };
  auto oAt = [&](ImplicitLocOpBuilder &pb, Value n, Value d,
                 VectorType t) -> Value {
    return vector::LoadOp::create(pb, t, op.getOParts(),
                                  ValueRange{n, i, head, d});
  };
  auto storeO = [&](ImplicitLocOpBuilder &ib, Value d, Value merged) {
    vector::StoreOp::create(ib, merged, op.getO(), ValueRange{req, i, head, d});
  };
  auto storeLse = [&](ImplicitLocOpBuilder &jb, Value lse) {
    memref::StoreOp::create(jb, lse, op.getLse(), ValueRange{req, i, head});
  };
  MergeRowIO io{lseAt, oAt, storeO, storeLse};
  auto firstColumn = [](Value col) {
    return [col](ImplicitLocOpBuilder &jb) -> Value {
      return arith::CmpIOp::create(jb, arith::CmpIPredicate::eq, col,
                                   indexConst(jb, 0));
    };
  };
  auto columnAt = [&](ImplicitLocOpBuilder &ib, Value col, int64_t width) {
    return arith::MulIOp::create(ib, col, indexConst(ib, width));
  };
  // One group: every thread sums all parts of its vector column.
  auto oneGroup = [&](ImplicitLocOpBuilder &rb) {
    parallelFor(
        rb, {indexConst(rb, dv / oneVw)},
        [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
          Value d = columnAt(ib, iv[0], oneVw);
          storeMerged(
              ib, mergeOnline(ib, lo, hi, 1, kMergeUnroll, d, oneVecType, io),
              d, oneVecType, oType.getElementType(), firstColumn(iv[0]), io);
        });
  };
  if (groups == 1) {
    oneGroup(g);
    op.erase();
    return success();
  }
  // The groups' sums: running max and total per group, acc per column.
  Value maxT = memref::AllocaOp::create(g, MemRefType::get({groups}, f32));
  Value totalT = memref::AllocaOp::create(g, MemRefType::get({groups}, f32));
  Value accT = memref::AllocaOp::create(g, MemRefType::get({groups, dv}, f32));
  // A request of at most kOneGroupParts parts is at most two rounds of
  // loads for one group: merged so, without the groups' exchange through
  // workgroup memory (the condition is the workgroup's: one request per
  // workgroup).
  Value few = arith::CmpIOp::create(g, arith::CmpIPredicate::sle,
                                    arith::SubIOp::create(g, hi, lo),
                                    indexConst(g, kOneGroupParts));
  auto split = scf::IfOp::create(g, few, /*withElseRegion=*/true);
  ImplicitLocOpBuilder tb(op.getLoc(), split.thenBlock()->getTerminator());
  oneGroup(tb);
  g.setInsertionPoint(split.elseBlock()->getTerminator());
  parallelFor(
      g, {indexConst(g, groups), indexConst(g, vecCols)},
      [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
        Value d = columnAt(ib, iv[1], vw);
        MergeSums sums =
            mergeOnline(ib, arith::AddIOp::create(ib, lo, iv[0]), hi, groups,
                        kGroupMergeUnroll, d, vecType, io);
        vector::StoreOp::create(ib, sums.acc, accT, ValueRange{iv[0], d});
        scf::IfOp::create(
            ib, firstColumn(iv[1])(ib), [&](OpBuilder &nb, Location loc) {
              ImplicitLocOpBuilder jb(loc, nb);
              memref::StoreOp::create(jb, sums.ref, maxT, iv[0]);
              memref::StoreOp::create(jb, sums.total, totalT, iv[0]);
              scf::YieldOp::create(jb);
            });
      });
  parallelFor(g, {indexConst(g, vecCols)},
              [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
                Value d = columnAt(ib, iv[0], vw);
                storeMerged(
                    ib,
                    combineGroups(ib, groups, maxT, totalT, accT, d, vecType),
                    d, vecType, oType.getElementType(), firstColumn(iv[0]), io);
              });
  op.erase();
  return success();
}

/// The merge of request `req`'s parts [lo, hi) for every query and head of
/// `o` by the current workgroup (#mla.config fused_merge: the workgroup
/// whose chunk finished the request): one parallel phase over (query x
/// head, vector column), each iteration summing its column's parts in
/// rounds of kMergeUnroll loads (mergeOnline) and storing it.
void emitRequestMerge(ImplicitLocOpBuilder &b, Value oParts, Value lseParts,
                      Value o, Value lse, Value req, Value lo, Value hi,
                      const ArchInfo *arch) {
  auto oType = cast<MemRefType>(o.getType());
  const int64_t sq = oType.getDimSize(1), heads = oType.getDimSize(2),
                dv = oType.getDimSize(3);
  const int64_t vw = mergeVectorWidth(dv, arch);
  auto vecType = VectorType::get({vw}, b.getF32Type());
  parallelFor(
      b, {indexConst(b, sq * heads), indexConst(b, dv / vw)},
      [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
        Value cHeads = indexConst(ib, heads);
        Value i = arith::DivUIOp::create(ib, iv[0], cHeads);
        Value head = arith::RemUIOp::create(ib, iv[0], cHeads);
        Value d = arith::MulIOp::create(ib, iv[1], indexConst(ib, vw));
        // Named: MergeRowIO holds references to them.
        auto lseAt = [&](ImplicitLocOpBuilder &jb, Value n) -> Value {
          return memref::LoadOp::create(jb, lseParts, ValueRange{n, i, head});
        };
        auto oAt = [&](ImplicitLocOpBuilder &pb, Value n, Value col,
                       VectorType t) -> Value {
          return vector::LoadOp::create(pb, t, oParts,
                                        ValueRange{n, i, head, col});
        };
        auto storeO = [&](ImplicitLocOpBuilder &jb, Value col, Value merged) {
          vector::StoreOp::create(jb, merged, o, ValueRange{req, i, head, col});
        };
        auto storeLse = [&](ImplicitLocOpBuilder &jb, Value l) {
          memref::StoreOp::create(jb, l, lse, ValueRange{req, i, head});
        };
        MergeRowIO io{lseAt, oAt, storeO, storeLse};
        storeMerged(
            ib, mergeOnline(ib, lo, hi, 1, kMergeUnroll, d, vecType, io), d,
            vecType, oType.getElementType(),
            [&](ImplicitLocOpBuilder &jb) -> Value {
              return arith::CmpIOp::create(jb, arith::CmpIPredicate::eq, iv[1],
                                           indexConst(jb, 0));
            },
            io);
      });
}

} // namespace mla::tiling
