//===- RegisterStep.cpp - mla.attention_step in registers, from data ------===//
//
// See RegisterStep.h. The plan (RegisterStepPlan.cpp) checks, by
// enumerating the instruction's lanes, that its layouts allow the
// transposed form; the emitter here then derives every address and every
// cross-lane reduction from the same layouts, so that any such instruction
// (MFMA 16x16x16, 32x32x8, 16x16x32) goes through one code path.
//
//===----------------------------------------------------------------------===//
#include "RegisterStep.h"
#include "../AttentionLayout.h"
#include "../ExpandSoftmax.h"
#include "../Utils.h"
#include "MatrixEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

#include "llvm/Support/Debug.h"

#include <limits>

#define DEBUG_TYPE "mla-distribute"

using namespace mlir;
using namespace mla;

namespace {

Value addConst(ImplicitLocOpBuilder &b, Value v, int64_t c) {
  if (!v)
    return indexConst(b, c);
  return c == 0 ? v : arith::AddIOp::create(b, v, indexConst(b, c)).getResult();
}

/// The emitter of one register step (see RegisterStep.h).
class RegisterStep {
public:
  RegisterStep(AttentionStepOp op, const ThreadInfo &ti,
               const RegisterStepPlan &plan, MatrixEmitter &em,
               AttentionFinishOp finish)
      : op(op), ti(ti), p(plan), mi(*plan.instr), em(em),
        loop(stepKeyLoop(op, /*tileSkip=*/true)), finish(finish) {}

  LogicalResult emit();

private:
  void setUp(ImplicitLocOpBuilder &b);
  SmallVector<Value> initialState(ImplicitLocOpBuilder &b);
  SmallVector<Value> step(ImplicitLocOpBuilder &b, ArrayRef<BlockArgument> st);
  /// The online softmax on the scores `s`: per query block the new row
  /// maxima `m`, sums `l` and corrections `corr`, and P (returned, per
  /// query block); with `assumeVisible` without the visibility check.
  SmallVector<SmallVector<Value>>
  softmaxTile(ImplicitLocOpBuilder &b, ArrayRef<Value> s, bool assumeVisible,
              SmallVectorImpl<Value> &m, SmallVectorImpl<Value> &l,
              SmallVectorImpl<Value> &corr);
  SmallVector<SmallVector<Value>>
  softmax(ImplicitLocOpBuilder &b, ArrayRef<Value> s, SmallVectorImpl<Value> &m,
          SmallVectorImpl<Value> &l, SmallVectorImpl<Value> &corr);
  void writeBack(ImplicitLocOpBuilder &b, ValueRange st);
  void storeAcc(ImplicitLocOpBuilder &b, ValueRange o, Value factor[],
                bool add);
  void emitFinish();

  /// The head dim of this lane's first B (and A) element of Sᵀ's first k
  /// step: past the k steps of the value waves before it (score split).
  Value kColumn(ImplicitLocOpBuilder &b) {
    if (p.scoreSplit == 1)
      return kLane ? kLane : indexConst(b, 0);
    return kLane ? arith::AddIOp::create(b, kBase, kLane).getResult() : kBase;
  }
  SmallVector<Value> exchangeScores(ImplicitLocOpBuilder &b,
                                    ArrayRef<Value> partial);

  /// Index of output block (md, nb) among the loop-carried vectors.
  int64_t oIndex(int64_t md, int64_t nb) const { return md * p.qBlocks + nb; }
  int64_t nO() const { return p.dvBlocks() * p.qBlocks; }
  /// Row of C element `e` (within its tile) for this lane.
  Value cRowOf(ImplicitLocOpBuilder &b, int64_t e) {
    return addConst(b, cRow, MatrixEmitter::elemCoord(mi.c.row, e));
  }
  /// The value column of row `row` of the wave's output block `md`
  /// (RegisterStepPlan::vGroup), past the columns of the value waves
  /// before this one.
  Value valueCol(ImplicitLocOpBuilder &b, int64_t md, Value row) {
    const int64_t g = p.vGroup();
    Value r = arith::AddIOp::create(
        b, arith::MulIOp::create(b, row, indexConst(b, g)), valueBase);
    return addConst(b, r, (md / g) * g * mi.m + md % g);
  }
  /// `cond` on the first value wave alone (whose copy of the row state,
  /// the same on every value wave, is the one stored).
  Value onFirstValueWave(ImplicitLocOpBuilder &b, Value cond) {
    return p.valueWaves == 1
               ? cond
               : arith::AndIOp::create(b, cond, firstValueWave).getResult();
  }

  AttentionStepOp op;
  const ThreadInfo &ti;
  RegisterStepPlan p;
  const MatrixInstr &mi;
  MatrixEmitter &em;
  scf::ForOp loop; ///< replaced (erased) by carryStepState in emit()
  /// The finish lowered from the output registers (`finalO`), or null.
  AttentionFinishOp finish;
  SmallVector<Value> finalO;
  // setUp: the lane's coordinates and what is loop-invariant.
  Value wave, keyWave, aRow, kLane, cRow, owner, firstKeyWave, negInf;
  Value firstValueWave, valueBase; ///< valueBase: the wave's first column
  Value keyOff;                    ///< this wave's first key in the tile
  /// Score split: the first head dim of the wave's k steps, the LDS
  /// exchange ([wave][score block][lane] vectors of C) and this lane and
  /// wave's slots in it.
  Value kBase, exchange, lane, rowKeyWave, valueWave;
  SmallVector<Value> query, queryOk, regionRow; ///< per query block
  SmallVector<SmallVector<Value>> qFrag;        ///< [nb][ks]
  SmallVector<SmallVector<Value>> vKey;         ///< [s][e]: key of A slot e
};

void RegisterStep::setUp(ImplicitLocOpBuilder &b) {
  em.beginLanes(b);
  wave = arith::DivUIOp::create(b, ti.tid, indexConst(b, ti.warpSize));
  // wave = rowWave + rowWaves * (keyWave + keyWaves * valueWave)
  Value rowWave = arith::RemUIOp::create(b, wave, indexConst(b, p.rowWaves));
  Value rest = arith::DivUIOp::create(b, wave, indexConst(b, p.rowWaves));
  keyWave = arith::RemUIOp::create(b, rest, indexConst(b, p.keyWaves));
  valueWave = arith::DivUIOp::create(b, rest, indexConst(b, p.keyWaves));
  rowKeyWave =
      arith::RemUIOp::create(b, wave, indexConst(b, p.rowWaves * p.keyWaves));
  lane = arith::RemUIOp::create(b, ti.tid, indexConst(b, ti.warpSize));
  kBase = arith::MulIOp::create(b, valueWave,
                                indexConst(b, p.kStepsPerWave() * mi.k));
  if (p.scoreSplit > 1) {
    ImplicitLocOpBuilder top =
        builderAtGridTop(b.getLoc(), b.getInsertionBlock());
    exchange = memref::AllocaOp::create(
        top, MemRefType::get(
                 {p.waves(), p.sBlocks() * p.qBlocks, mi.lanes, mi.c.elems},
                 b.getF32Type()));
  }
  valueBase =
      arith::MulIOp::create(b, valueWave, indexConst(b, p.dvBlocks() * mi.m));
  aRow = em.laneCoord(b, mi.a.row);
  kLane = em.laneCoord(b, mi.b.row);
  cRow = em.laneCoord(b, mi.c.row);
  Value bCol = em.laneCoord(b, mi.b.col);
  if (!aRow)
    aRow = indexConst(b, 0);
  if (!bCol)
    bCol = indexConst(b, 0);
  Value zero = indexConst(b, 0);
  owner = cRow ? arith::CmpIOp::create(b, arith::CmpIPredicate::eq, cRow, zero)
                     .getResult()
               : arith::ConstantIntOp::create(b, 1, 1).getResult();
  firstKeyWave =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, keyWave, zero);
  firstValueWave =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, valueWave, zero);
  keyOff = arith::MulIOp::create(b, keyWave, indexConst(b, p.keysPerWave));
  negInf = f32Const(b, -std::numeric_limits<double>::infinity());
  Value qBase =
      arith::MulIOp::create(b, rowWave, indexConst(b, p.rowsPerWave()));
  Value rows = indexConst(b, p.shape.rows);
  for (int64_t nb = 0; nb < p.qBlocks; ++nb) {
    Value qr = arith::AddIOp::create(b, addConst(b, qBase, nb * mi.n), bCol);
    query.push_back(qr);
    if (!p.padded()) {
      queryOk.push_back(arith::ConstantIntOp::create(b, 1, 1));
      regionRow.push_back(qr);
      continue;
    }
    queryOk.push_back(
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, qr, rows));
    // Padded rows evaluate the element region on the last real row; their
    // results are never stored.
    regionRow.push_back(
        arith::MinUIOp::create(b, qr, indexConst(b, p.shape.rows - 1)));
  }
  // Qᵀ as B fragments, kept in registers for the whole loop.
  const int64_t be = mi.b.elems;
  for (int64_t nb = 0; nb < p.qBlocks; ++nb) {
    qFrag.emplace_back();
    Value qRow = stepQueryRow(b, op, query[nb]); // query_groups
    for (int64_t ks = 0; ks < p.kStepsPerWave(); ++ks)
      qFrag.back().push_back(loadPair(b, op.getQ(), qRow,
                                      addConst(b, kColumn(b), ks * mi.k),
                                      queryOk[nb], be));
  }
  // Every wave has its query fragments before the key loop's copies may
  // reuse the query tile's memory (queries read in place need no wait).
  if (gridTile(op.getQ()))
    gpu::BarrierOp::create(b);
  // The key of each A slot of the second product (the lane's own C rows).
  const int64_t ce = mi.c.elems;
  for (int64_t s = 0; s < p.pvSteps(); ++s) {
    vKey.emplace_back();
    for (int64_t e = 0; e < mi.a.elems; ++e) {
      int64_t j = s * be + e;
      vKey.back().push_back(arith::AddIOp::create(
          b, keyOff, addConst(b, cRowOf(b, j % ce), (j / ce) * mi.m)));
    }
  }
}

SmallVector<Value> RegisterStep::initialState(ImplicitLocOpBuilder &b) {
  const int64_t ce = mi.c.elems;
  auto vecType = VectorType::get({ce}, b.getF32Type());
  Value zeroF = f32Const(b, 0.0);
  SmallVector<Value> init;
  bool zeroAcc = false;
  if (scf::ParallelOp fill = zeroFillBefore(loop, gridTile(op.getAcc()))) {
    fill.erase();
    zeroAcc = true;
  }
  for (int64_t md = 0; md < p.dvBlocks(); ++md)
    for (int64_t nb = 0; nb < p.qBlocks; ++nb) {
      if (zeroAcc) {
        init.push_back(arith::ConstantOp::create(
            b, vecType, DenseElementsAttr::get(vecType, b.getF32FloatAttr(0))));
        continue;
      }
      // The initial accumulators belong to the first key wave.
      Value ok = arith::AndIOp::create(b, firstKeyWave, queryOk[nb]);
      SmallVector<Value> elems;
      for (int64_t e = 0; e < ce; ++e) {
        Value col = valueCol(b, md, cRowOf(b, e));
        elems.push_back(
            guardedValue(b, ok, zeroF, [&](ImplicitLocOpBuilder &ib) {
              return memref::LoadOp::create(ib, op.getAcc(),
                                            ValueRange{query[nb], col});
            }));
      }
      init.push_back(vector::FromElementsOp::create(b, vecType, elems));
    }
  for (int64_t nb = 0; nb < p.qBlocks; ++nb)
    init.push_back(
        guardedValue(b, queryOk[nb], negInf, [&](ImplicitLocOpBuilder &ib) {
          return memref::LoadOp::create(ib, op.getM(), ValueRange{query[nb]});
        }));
  // l is kept as per-lane partial sums: the initial sum on one lane.
  for (int64_t nb = 0; nb < p.qBlocks; ++nb) {
    Value ok = arith::AndIOp::create(
        b, arith::AndIOp::create(b, firstKeyWave, owner), queryOk[nb]);
    init.push_back(guardedValue(b, ok, zeroF, [&](ImplicitLocOpBuilder &ib) {
      return memref::LoadOp::create(ib, op.getL(), ValueRange{query[nb]});
    }));
  }
  return init;
}

SmallVector<Value> RegisterStep::step(ImplicitLocOpBuilder &b,
                                      ArrayRef<BlockArgument> st) {
  const int64_t ce = mi.c.elems, be = mi.b.elems, sb = p.sBlocks();
  auto vecType = VectorType::get({ce}, b.getF32Type());
  Value zeroVec = arith::ConstantOp::create(
      b, vecType, DenseElementsAttr::get(vecType, b.getF32FloatAttr(0)));
  // Sᵀ = K · Qᵀ: independent accumulator chains interleaved per k step.
  SmallVector<Value> s(sb * p.qBlocks, zeroVec);
  SmallVector<Value> kRow;
  for (int64_t t = 0; t < sb; ++t)
    kRow.push_back(
        arith::AddIOp::create(b, keyOff, addConst(b, aRow, t * mi.m)));
  Value always = arith::ConstantIntOp::create(b, 1, 1);
  Value kCol = kColumn(b);
  for (int64_t ks = 0; ks < p.kStepsPerWave(); ++ks) {
    Value col = addConst(b, kCol, ks * mi.k);
    for (int64_t t = 0; t < sb; ++t) {
      Value a = loadPair(b, op.getK(), kRow[t], col, always, mi.a.elems);
      for (int64_t nb = 0; nb < p.qBlocks; ++nb)
        s[t * p.qBlocks + nb] =
            em.multiply(b, a, qFrag[nb][ks], s[t * p.qBlocks + nb])[0];
    }
  }
  if (p.scoreSplit > 1)
    s = exchangeScores(b, s);
  // The element function and the online softmax on the accumulators.
  SmallVector<Value> m(st.begin() + nO(), st.begin() + nO() + p.qBlocks);
  SmallVector<Value> l(st.begin() + nO() + p.qBlocks, st.end());
  SmallVector<Value> corr(p.qBlocks);
  // prob[nb][j]: P of the lane's C element j = t * |C| + e.
  SmallVector<SmallVector<Value>> prob = softmax(b, s, m, l, corr);
  // Oᵀ = diag(corr) · Oᵀ + Vᵀ · Pᵀ.
  // The rescale only where the row maximum moved (corr < 1): once the
  // maxima settle, a wave's lanes all skip it (a branch on no lane).
  SmallVector<Value> o(st.begin(), st.begin() + nO());
  Value one = f32Const(b, 1.0);
  for (int64_t nb = 0; nb < p.qBlocks; ++nb) {
    SmallVector<Type> types(p.dvBlocks(), vecType);
    Value moved =
        arith::CmpFOp::create(b, arith::CmpFPredicate::ULT, corr[nb], one);
    auto ifOp = scf::IfOp::create(b, types, moved, /*withElseRegion=*/true);
    ImplicitLocOpBuilder tb(b.getLoc(), ifOp.thenBlock(),
                            ifOp.thenBlock()->end());
    ImplicitLocOpBuilder eb(b.getLoc(), ifOp.elseBlock(),
                            ifOp.elseBlock()->end());
    SmallVector<Value> scaled, kept;
    Value factor = vector::BroadcastOp::create(tb, vecType, corr[nb]);
    for (int64_t md = 0; md < p.dvBlocks(); ++md) {
      scaled.push_back(
          arith::MulFOp::create(tb, o[oIndex(md, nb)], factor).getResult());
      kept.push_back(o[oIndex(md, nb)]);
    }
    scf::YieldOp::create(tb, scaled);
    scf::YieldOp::create(eb, kept);
    for (int64_t md = 0; md < p.dvBlocks(); ++md)
      o[oIndex(md, nb)] = ifOp.getResult(md);
  }
  Type elem = op.getElementType();
  auto fragType = VectorType::get({be}, elem);
  SmallVector<SmallVector<Value>> pFrag(p.qBlocks);
  for (int64_t nb = 0; nb < p.qBlocks; ++nb)
    for (int64_t st2 = 0; st2 < p.pvSteps(); ++st2) {
      SmallVector<Value> elems;
      for (int64_t e = 0; e < be; ++e)
        elems.push_back(castFloat(b, prob[nb][st2 * be + e], elem));
      pFrag[nb].push_back(vector::FromElementsOp::create(b, fragType, elems));
    }
  // Vᵀ's A fragments, a group of vGroup() value blocks at a time: for each
  // of its A slots (a key) a lane reads the vGroup() consecutive value
  // columns of its row in the group (valueCol) with one vector load, and
  // the fragment of block j of the group takes element j of each. All of a
  // group's reads come before its products: gfx942's decode key loop (H=16,
  // page 1) has 399 instructions per 32-key tile (was 573 with a 2-byte
  // read per key and block), 431 when each k step's products follow its
  // reads (mla-compile --report, 2026-12-03).
  const int64_t g = p.vGroup();
  auto readType = VectorType::get({g}, elem);
  for (int64_t md0 = 0; md0 < p.dvBlocks(); md0 += g) {
    Value vCol = valueCol(b, md0, aRow);
    SmallVector<SmallVector<Value>> aFrag(g);
    for (int64_t st2 = 0; st2 < p.pvSteps(); ++st2) {
      SmallVector<Value> reads;
      for (int64_t e = 0; e < mi.a.elems; ++e)
        reads.push_back(vector::LoadOp::create(b, readType, op.getV(),
                                               ValueRange{vKey[st2][e], vCol}));
      for (int64_t j = 0; j < g; ++j) {
        SmallVector<Value> elems;
        for (Value r : reads)
          elems.push_back(
              vector::ExtractOp::create(b, r, ArrayRef<int64_t>{j}));
        aFrag[j].push_back(vector::FromElementsOp::create(b, fragType, elems));
      }
    }
    for (int64_t j = 0; j < g; ++j)
      for (int64_t st2 = 0; st2 < p.pvSteps(); ++st2)
        for (int64_t nb = 0; nb < p.qBlocks; ++nb)
          o[oIndex(md0 + j, nb)] = em.multiply(b, aFrag[j][st2], pFrag[nb][st2],
                                               o[oIndex(md0 + j, nb)])[0];
  }
  // The next iteration's copies overwrite the K and V tiles.
  gpu::BarrierOp::create(b);
  SmallVector<Value> next = o;
  llvm::append_range(next, m);
  llvm::append_range(next, l);
  return next;
}

/// The scores of the value waves' partial Sᵀ added, the same on each: every
/// wave writes its partial blocks to its slot of the exchange, and after a
/// barrier adds those of its row and key waves' value waves in the order of
/// the value waves (two: its own plus the other's, which commutes).
SmallVector<Value> RegisterStep::exchangeScores(ImplicitLocOpBuilder &b,
                                                ArrayRef<Value> partial) {
  // A lane's vector starts a row of the exchange, whose placement is
  // 16-byte aligned (mla-outline-gpu-kernels): one ds_write_b128 / read
  // per 4 elements rather than two of 8 bytes.
  const llvm::MaybeAlign align(std::min<int64_t>(16, 4 * mi.c.elems));
  for (auto [i, v] : llvm::enumerate(partial))
    vector::StoreOp::create(
        b, v, exchange,
        ValueRange{wave, indexConst(b, i), lane, indexConst(b, 0)},
        /*nontemporal=*/false, align);
  gpu::BarrierOp::create(b);
  auto vecType = cast<VectorType>(partial.front().getType());
  const int64_t rk = p.rowWaves * p.keyWaves;
  SmallVector<Value> sum;
  for (auto [i, v] : llvm::enumerate(partial)) {
    auto read = [&](Value w) {
      return vector::LoadOp::create(
                 b, vecType, exchange,
                 ValueRange{w, indexConst(b, i), lane, indexConst(b, 0)},
                 /*nontemporal=*/false, align)
          .getResult();
    };
    if (p.scoreSplit == 2) {
      // The other value wave's slot: (wave + rk) mod 2 rk.
      Value other = arith::RemUIOp::create(b, addConst(b, wave, rk),
                                           indexConst(b, 2 * rk));
      sum.push_back(arith::AddFOp::create(b, v, read(other)));
      continue;
    }
    Value acc;
    for (int64_t w = 0; w < p.scoreSplit; ++w) {
      Value part = read(addConst(b, rowKeyWave, w * rk));
      acc = acc ? arith::AddFOp::create(b, acc, part).getResult() : part;
    }
    sum.push_back(acc);
  }
  return sum;
}

/// acc[q][dv] (+)= factor[nb] · O for this lane's elements.
void RegisterStep::storeAcc(ImplicitLocOpBuilder &b, ValueRange o,
                            Value factor[], bool add) {
  for (int64_t nb = 0; nb < p.qBlocks; ++nb)
    guarded(b, queryOk[nb], [&](ImplicitLocOpBuilder &gb) {
      for (int64_t md = 0; md < p.dvBlocks(); ++md)
        for (int64_t e = 0; e < mi.c.elems; ++e) {
          Value col = valueCol(gb, md, cRowOf(gb, e));
          Value v = vector::ExtractOp::create(gb, o[oIndex(md, nb)],
                                              ArrayRef<int64_t>{e});
          if (factor)
            v = arith::MulFOp::create(gb, v, factor[nb]);
          if (add)
            v = arith::AddFOp::create(
                gb, v,
                memref::LoadOp::create(gb, op.getAcc(),
                                       ValueRange{query[nb], col}));
          memref::StoreOp::create(gb, v, op.getAcc(),
                                  ValueRange{query[nb], col});
        }
    });
}

/// The softmax of one tile (softmaxTile), on a step with `all_visible`
/// twice: a version without the per-element visibility where every
/// element is visible (the tiles off the diagonal), else the general one.
SmallVector<SmallVector<Value>>
RegisterStep::softmax(ImplicitLocOpBuilder &b, ArrayRef<Value> s,
                      SmallVectorImpl<Value> &m, SmallVectorImpl<Value> &l,
                      SmallVectorImpl<Value> &corr) {
  Value all = op.getAllVisible();
  if (!all)
    return softmaxTile(b, s, /*assumeVisible=*/false, m, l, corr);
  const int64_t perBlock = p.sBlocks() * mi.c.elems, nq = p.qBlocks;
  SmallVector<Type> types(nq * (perBlock + 3), b.getF32Type());
  auto ifOp = scf::IfOp::create(b, types, all, /*addThenBlock=*/true,
                                /*addElseBlock=*/true);
  for (bool visible : {true, false}) {
    ImplicitLocOpBuilder bb = ImplicitLocOpBuilder::atBlockEnd(
        b.getLoc(), visible ? ifOp.thenBlock() : ifOp.elseBlock());
    SmallVector<Value> mb(m.begin(), m.end()), lb(l.begin(), l.end()), cb(nq);
    SmallVector<Value> out;
    for (ArrayRef<Value> pr : softmaxTile(bb, s, visible, mb, lb, cb))
      llvm::append_range(out, pr);
    llvm::append_range(out, mb);
    llvm::append_range(out, lb);
    llvm::append_range(out, cb);
    scf::YieldOp::create(bb, out);
  }
  ValueRange res = ifOp.getResults();
  SmallVector<SmallVector<Value>> prob(nq);
  for (int64_t nb = 0; nb < nq; ++nb) {
    auto first = res.begin() + nb * perBlock;
    prob[nb].assign(first, first + perBlock);
    m[nb] = res[nq * perBlock + nb];
    l[nb] = res[nq * perBlock + nq + nb];
    corr[nb] = res[nq * perBlock + 2 * nq + nb];
  }
  return prob;
}

SmallVector<SmallVector<Value>>
RegisterStep::softmaxTile(ImplicitLocOpBuilder &b, ArrayRef<Value> s,
                          bool assumeVisible, SmallVectorImpl<Value> &m,
                          SmallVectorImpl<Value> &l,
                          SmallVectorImpl<Value> &corr) {
  const int64_t ce = mi.c.elems, sb = p.sBlocks();
  Value zeroF = f32Const(b, 0.0);
  SmallVector<SmallVector<Value>> prob(p.qBlocks);
  for (int64_t nb = 0; nb < p.qBlocks; ++nb) {
    SmallVector<Value> x, vis;
    Value mx = negInf;
    for (int64_t t = 0; t < sb; ++t)
      for (int64_t e = 0; e < ce; ++e) {
        Value score = vector::ExtractOp::create(b, s[t * p.qBlocks + nb],
                                                ArrayRef<int64_t>{e});
        Value key = arith::AddIOp::create(b, keyOff,
                                          addConst(b, cRowOf(b, e), t * mi.m));
        SmallVector<Value> r = inlineStepElement(
            b, op, {regionRow[nb], key, score}, assumeVisible);
        x.push_back(r[0]);
        vis.push_back(r[1]);
        mx = arith::MaxNumFOp::create(
            b, mx,
            assumeVisible
                ? r[0]
                : arith::SelectOp::create(b, r[1], r[0], negInf).getResult());
      }
    mx = reduceAcrossLanes(b, mi.c.col, mi.lanes, ti.warpSize, mx, true,
                           /*maxNum=*/true);
    Value mNew = arith::MaxNumFOp::create(b, m[nb], mx);
    Value isInf =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, mNew, negInf);
    Value ref = arith::SelectOp::create(b, isInf, zeroF, mNew);
    corr[nb] = math::Exp2Op::create(b, arith::SubFOp::create(b, m[nb], ref));
    Value sum = zeroF;
    for (size_t j = 0; j < x.size(); ++j) {
      Value e = stepExp2(b, x[j], ref);
      Value pj = assumeVisible
                     ? e
                     : arith::SelectOp::create(b, vis[j], e, zeroF).getResult();
      prob[nb].push_back(pj);
      sum = arith::AddFOp::create(b, sum, pj);
    }
    m[nb] = mNew;
    l[nb] = math::FmaOp::create(b, l[nb], corr[nb], sum);
  }
  return prob;
}

void RegisterStep::writeBack(ImplicitLocOpBuilder &b, ValueRange st) {
  ValueRange o = st.take_front(nO());
  SmallVector<Value> m(st.begin() + nO(), st.begin() + nO() + p.qBlocks);
  SmallVector<Value> l;
  for (Value part : st.take_back(p.qBlocks))
    l.push_back(
        reduceAcrossLanes(b, mi.c.col, mi.lanes, ti.warpSize, part, false));
  if (p.keyWaves == 1) {
    // Every value wave has read the initial m and l (initialState) before
    // the first one overwrites them, also where the key loop (whose
    // barriers order them otherwise) runs no iteration.
    if (p.valueWaves > 1)
      gpu::BarrierOp::create(b);
    for (int64_t nb = 0; nb < p.qBlocks; ++nb)
      guarded(b,
              onFirstValueWave(b, arith::AndIOp::create(b, owner, queryOk[nb])),
              [&](ImplicitLocOpBuilder &gb) {
                memref::StoreOp::create(gb, m[nb], op.getM(), query[nb]);
                memref::StoreOp::create(gb, l[nb], op.getL(), query[nb]);
              });
    if (finish)
      finalO.assign(o.begin(), o.end());
    else
      storeAcc(b, o, nullptr, /*add=*/false);
    gpu::BarrierOp::create(b);
    return;
  }
  // The key waves' states meet: m and l of each through a small buffer,
  // then the accumulators scaled to the common maximum, one wave at a time.
  // (`loop` was replaced by carryStepState: b stands right after its
  // successor, in the same block.)
  ImplicitLocOpBuilder top =
      builderAtGridTop(b.getLoc(), b.getInsertionBlock());
  Value buf = memref::AllocaOp::create(
      top, MemRefType::get({p.keyWaves, 2, p.paddedRows()}, b.getF32Type()));
  Value c0 = indexConst(b, 0), c1 = indexConst(b, 1);
  for (int64_t nb = 0; nb < p.qBlocks; ++nb)
    guarded(b, onFirstValueWave(b, owner), [&](ImplicitLocOpBuilder &gb) {
      memref::StoreOp::create(gb, m[nb], buf,
                              ValueRange{keyWave, c0, query[nb]});
      memref::StoreOp::create(gb, l[nb], buf,
                              ValueRange{keyWave, c1, query[nb]});
    });
  gpu::BarrierOp::create(b);
  Value zeroF = f32Const(b, 0.0);
  SmallVector<Value> factor(p.qBlocks);
  for (int64_t nb = 0; nb < p.qBlocks; ++nb) {
    SmallVector<Value> mw, lw;
    Value mAll = negInf;
    for (int64_t w = 0; w < p.keyWaves; ++w) {
      Value wi = indexConst(b, w);
      mw.push_back(
          memref::LoadOp::create(b, buf, ValueRange{wi, c0, query[nb]}));
      lw.push_back(
          memref::LoadOp::create(b, buf, ValueRange{wi, c1, query[nb]}));
      mAll = arith::MaximumFOp::create(b, mAll, mw.back());
    }
    Value isInf =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, mAll, negInf);
    Value ref = arith::SelectOp::create(b, isInf, zeroF, mAll);
    Value lAll = zeroF;
    for (int64_t w = 0; w < p.keyWaves; ++w)
      lAll = math::FmaOp::create(
          b, lw[w],
          math::Exp2Op::create(b, arith::SubFOp::create(b, mw[w], ref)), lAll);
    factor[nb] = math::Exp2Op::create(b, arith::SubFOp::create(b, m[nb], ref));
    Value writes = onFirstValueWave(
        b, arith::AndIOp::create(
               b, arith::AndIOp::create(b, firstKeyWave, owner), queryOk[nb]));
    guarded(b, writes, [&](ImplicitLocOpBuilder &gb) {
      memref::StoreOp::create(gb, mAll, op.getM(), query[nb]);
      memref::StoreOp::create(gb, lAll, op.getL(), query[nb]);
    });
  }
  for (int64_t w = 0; w < p.keyWaves; ++w) {
    Value mine = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, keyWave,
                                       indexConst(b, w));
    guarded(b, mine, [&](ImplicitLocOpBuilder &gb) {
      storeAcc(gb, o, factor.data(), /*add=*/w > 0);
    });
    gpu::BarrierOp::create(b);
  }
}

/// The finish from the registers: each lane normalises its runs of value
/// columns of each query block (m, l and the scale from LDS, where the
/// key loop and a sink left them) and runs the output region on them; the
/// lane owning a query's first C row runs the lse region. A barrier ends
/// it.
void RegisterStep::emitFinish() {
  ImplicitLocOpBuilder b(finish.getLoc(), finish);
  const int64_t width = finish.getWidth();
  auto vecType = VectorType::get({width}, b.getF32Type());
  for (int64_t nb = 0; nb < p.qBlocks; ++nb)
    guarded(b, queryOk[nb], [&](ImplicitLocOpBuilder &gb) {
      Value q = query[nb];
      Value scale =
          finish.getScale()
              ? memref::LoadOp::create(gb, finish.getScale(), q).getResult()
              : Value();
      FinishFactors f =
          finishFactors(gb, memref::LoadOp::create(gb, finish.getM(), q),
                        memref::LoadOp::create(gb, finish.getL(), q), scale);
      Value inv = vector::BroadcastOp::create(gb, vecType, f.inv);
      // A run: element e of the `width` blocks from md of a value group.
      for (int64_t md = 0; md < p.dvBlocks(); md += width)
        for (int64_t e = 0; e < mi.c.elems; ++e) {
          SmallVector<Value> elems;
          for (int64_t j = 0; j < width; ++j)
            elems.push_back(vector::ExtractOp::create(
                gb, finalO[oIndex(md + j, nb)], ArrayRef<int64_t>{e}));
          Value run = vector::FromElementsOp::create(gb, vecType, elems);
          inlineRegion(gb, finish.getOutput(),
                       {q, valueCol(gb, md, cRowOf(gb, e)),
                        arith::MulFOp::create(gb, run, inv)});
        }
      guarded(gb, onFirstValueWave(gb, owner), [&](ImplicitLocOpBuilder &ob) {
        inlineRegion(ob, finish.getLseBody(), {q, f.lse});
      });
    });
  // The reads of m, l and the scale end before anything after the finish
  // (e.g. the next chunk's state fill) overwrites them, as after the
  // parallel loop it replaces.
  gpu::BarrierOp::create(b);
  finish.erase();
}

LogicalResult RegisterStep::emit() {
  ImplicitLocOpBuilder b(loop.getLoc(), loop);
  setUp(b);
  if (failed(carryStepState(
          op, initialState(b),
          [&](ImplicitLocOpBuilder &ib, ArrayRef<BlockArgument> args) {
            return step(ib, args);
          },
          [&](ImplicitLocOpBuilder &ab, ValueRange fin) {
            writeBack(ab, fin);
          })))
    return failure();
  if (finish)
    emitFinish();
  return success();
}

/// The mla.attention_finish after `op`'s key loop that the plan lowers from
/// the output registers: the only other user of the accumulator besides
/// `op` and the zero fill before the loop. Null (and the accumulator
/// stored to its tile) otherwise, with the reason under -debug-only.
AttentionFinishOp registerFinish(AttentionStepOp op,
                                 const RegisterStepPlan &plan) {
  if (!plan.finishInRegisters)
    return nullptr;
  scf::ForOp loop = stepKeyLoop(op, /*tileSkip=*/true);
  scf::ParallelOp fill = zeroFillBefore(loop, gridTile(op.getAcc()));
  AttentionFinishOp finish;
  bool other = false;
  for (Operation *user : op.getAcc().getUsers()) {
    if (auto f = dyn_cast<AttentionFinishOp>(user);
        f && !finish && f->getBlock() == loop->getBlock() &&
        loop->isBeforeInBlock(f) &&
        int64_t(f.getWidth()) == finishWidth(plan.shape.dv))
      finish = f;
    else if (user != op && !(fill && fill->isAncestor(user)))
      other = true;
  }
  const char *why = !fill     ? "the accumulator is not zero-filled before "
                                "the key loop"
                    : !finish ? "no mla.attention_finish of the accumulator "
                                "follows the key loop in its block"
                    : other   ? "another op uses the accumulator"
                              : nullptr;
  if (why) {
    LLVM_DEBUG(llvm::dbgs() << "mla-distribute: finish at " << op.getLoc()
                            << " not in registers: " << why << "\n");
    return nullptr;
  }
  return finish;
}

} // namespace

LogicalResult mla::registerAttentionStep(AttentionStepOp op,
                                         const ThreadInfo &ti,
                                         ArrayRef<MatrixInstrId> instrs,
                                         int64_t ldsBytes) {
  StepShape shape{op.getElementType(), op.getRows(),     op.getHeadDim(),
                  op.getTileKeys(),    op.getValueDim(), ti.warps()};
  shape.separateValues = gridTile(op.getV()) != gridTile(op.getK());
  FailureOr<RegisterStepPlan> plan =
      planRegisterStep(shape, instrs, ti.warpSize, ldsBytes);
  if (failed(plan))
    return failure();
  SmallVector<Operation *> pure;
  // A mask's tile-skipping scf.if around the step carries the state.
  if (std::string why;
      failed(checkStepLoop(op, pure, why, /*tileSkip=*/true))) {
    LLVM_DEBUG(llvm::dbgs() << "mla-distribute: no register step at "
                            << op.getLoc() << ": " << why << "\n");
    return failure();
  }
  std::unique_ptr<MatrixEmitter> em = createMatrixEmitter(*plan->instr, ti);
  if (!em->multipliesFragments()) {
    LLVM_DEBUG(llvm::dbgs()
               << "mla-distribute: no register step at " << op.getLoc()
               << ": the emitter of " << plan->instr->mnemonic
               << " does not multiply register fragments\n");
    return failure();
  }
  for (Operation *pureOp : pure)
    pureOp->moveBefore(op);
  LLVM_DEBUG(llvm::dbgs() << "mla-distribute: register step at " << op.getLoc()
                          << " (" << plan->instr->mnemonic << ", "
                          << plan->rowWaves << " row x " << plan->keyWaves
                          << " key x " << plan->valueWaves
                          << " value waves)\n");
  RegisterStep step(op, ti, *plan, *em, registerFinish(op, *plan));
  return step.emit();
}
