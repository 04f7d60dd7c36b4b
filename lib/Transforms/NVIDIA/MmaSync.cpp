//===- MmaSync.cpp - mla.matmul as warp-level mma.sync --------------------===//
#include "MmaSync.h"
#include "../Utils.h"
#include "NVIDIA.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;
using namespace mla;

namespace mla::nvidia {
/// Packs a vector<2xbf16> into the i32 register mma.sync takes, or keeps a
/// vector<2xf16> as is.
Value mmaOperand(ImplicitLocOpBuilder &b, Value pair) {
  auto vt = cast<VectorType>(pair.getType());
  if (vt.getElementType().isF16())
    return pair;
  Value asInt =
      vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, asInt, ArrayRef<int64_t>{0});
}

LaneLayout::LaneLayout(ImplicitLocOpBuilder &b, const ThreadInfo &ti) {
  Value c2 = indexConst(b, 2), c8 = indexConst(b, 8);
  warp = arith::DivUIOp::create(b, ti.tid, indexConst(b, ti.warpSize));
  lane = arith::RemUIOp::create(b, ti.tid, indexConst(b, ti.warpSize));
  group = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  quadPos = arith::RemUIOp::create(b, lane, indexConst(b, 4));
  twoTg = arith::MulIOp::create(b, quadPos, c2);
  lane16 = arith::RemUIOp::create(b, lane, indexConst(b, 16));
  lane8 = arith::RemUIOp::create(b, lane, c8);
  laneHi8 = arith::MulIOp::create(
      b, arith::DivUIOp::create(b, lane, indexConst(b, 16)), c8);
  laneMid8 = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, arith::DivUIOp::create(b, lane, c8), c2),
      c8);
}

/// One mma.sync m16n8k16 (row.col, f32 accumulation) on bf16/f16
/// registers; returns the four accumulators.
SmallVector<Value> mmaM16N8K16(ImplicitLocOpBuilder &b, Type elem,
                               ArrayRef<Value> aRegs, ArrayRef<Value> bRegs,
                               ArrayRef<Value> c) {
  Type f32 = b.getF32Type();
  auto resType =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes ptxType =
      elem.isF16() ? NVVM::MMATypes::f16 : NVVM::MMATypes::bf16;
  auto mma = NVVM::MmaOp::create(
      b, resType, aRegs, bRegs, c, ArrayRef<int64_t>{16, 8, 16}, std::nullopt,
      std::nullopt, std::array<NVVM::MMATypes, 2>{ptxType, ptxType},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, mma, i));
  return out;
}

namespace {
/// What the mma.sync lowering of one mla.matmul needs everywhere.
struct MmaSync {
  // The operands, kept as values: the op itself is erased before the
  // accumulators are stored back after a hoisted loop.
  Value a, bMat, c, cScale;
  bool transposeB;
  const ThreadInfo &ti;
  Type elem;
  int64_t m, k, n, mt, nt, warps;
  bool full;        // M is a multiple of 16: no row masks
  bool useLdmatrix; // full tiles of A and B in shared memory
  LaneLayout lanes;
  Value warp, lane, group, twoTg, lane16, lane8, laneHi8, laneMid8;

  MmaSync(MatmulOp op, const ThreadInfo &ti, ImplicitLocOpBuilder &b)
      : a(op.getA()), bMat(op.getB()), c(op.getC()), cScale(op.getCScale()),
        transposeB(op.getTransposeB()), ti(ti), lanes(b, ti), warp(lanes.warp),
        lane(lanes.lane), group(lanes.group), twoTg(lanes.twoTg),
        lane16(lanes.lane16), lane8(lanes.lane8), laneHi8(lanes.laneHi8),
        laneMid8(lanes.laneMid8) {
    MemRefType aType = op.getA().getType();
    elem = aType.getElementType();
    m = aType.getDimSize(0);
    k = aType.getDimSize(1);
    n = op.getC().getType().getDimSize(1);
    mt = (m + 15) / 16;
    nt = n / 8;
    warps = ti.threads / ti.warpSize;
    full = m % 16 == 0;
    // Full 16-row tiles in shared memory are read with ldmatrix (one
    // instruction per operand fragment instead of 4-6 loads).
    useLdmatrix = full && isWorkgroup(a) && isWorkgroup(bMat);
  }

  /// This lane's accumulator positions in C tile `tile`: rows g and g + 8,
  /// columns 2*tg and 2*tg + 1 of the 16x8 tile at (m0, n0).
  struct Tile {
    Value m0, n0, row0, row1, col, col1, ok0, ok1;
  };
  Tile tile(ImplicitLocOpBuilder &b, Value t) const {
    Tile r;
    Value c8 = indexConst(b, 8), cNt = indexConst(b, nt);
    r.m0 = arith::MulIOp::create(b, arith::DivUIOp::create(b, t, cNt),
                                 indexConst(b, 16));
    r.n0 = arith::MulIOp::create(b, arith::RemUIOp::create(b, t, cNt), c8);
    r.row0 = arith::AddIOp::create(b, r.m0, group);
    r.row1 = arith::AddIOp::create(b, r.row0, c8);
    r.col = arith::AddIOp::create(b, r.n0, twoTg);
    r.col1 = arith::AddIOp::create(b, r.col, indexConst(b, 1));
    Value always = arith::ConstantIntOp::create(b, 1, 1);
    Value cM = indexConst(b, m);
    auto inRows = [&](Value row) -> Value {
      return full ? always
                  : arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row, cM)
                        .getResult();
    };
    r.ok0 = inRows(r.row0);
    r.ok1 = inRows(r.row1);
    return r;
  }

  /// The four accumulators of `t` (rows masked to 0), optionally scaled by
  /// c_scale.
  SmallVector<Value> loadC(ImplicitLocOpBuilder &b, const Tile &t,
                           bool scale) const {
    Value zero = f32Const(b, 0.0);
    SmallVector<Value> out;
    for (auto [row, ok, col] :
         {std::tuple{t.row0, t.ok0, t.col}, std::tuple{t.row0, t.ok0, t.col1},
          std::tuple{t.row1, t.ok1, t.col}, std::tuple{t.row1, t.ok1, t.col1}})
      out.push_back(guardedValue(b, ok, zero, [&](ImplicitLocOpBuilder &ib) {
        Value v = memref::LoadOp::create(ib, c, ValueRange{row, col});
        return scale ? scaleRow(ib, v, row) : v;
      }));
    return out;
  }

  Value scaleRow(ImplicitLocOpBuilder &b, Value v, Value row) const {
    if (!cScale)
      return v;
    return arith::MulFOp::create(
        b, v, memref::LoadOp::create(b, cScale, ValueRange{row}));
  }

  void storeC(ImplicitLocOpBuilder &b, const Tile &t,
              ArrayRef<Value> acc) const {
    guarded(b, t.ok0, [&](ImplicitLocOpBuilder &ib) {
      memref::StoreOp::create(ib, acc[0], c, ValueRange{t.row0, t.col});
      memref::StoreOp::create(ib, acc[1], c, ValueRange{t.row0, t.col1});
    });
    guarded(b, t.ok1, [&](ImplicitLocOpBuilder &ib) {
      memref::StoreOp::create(ib, acc[2], c, ValueRange{t.row1, t.col});
      memref::StoreOp::create(ib, acc[3], c, ValueRange{t.row1, t.col1});
    });
  }

  /// acc += A[m0:m0+16, :] * B(:, n0:n0+8), walking K in steps of 16.
  SmallVector<Value> product(ImplicitLocOpBuilder &b, const Tile &t,
                             ValueRange init) const {
    Value c1 = indexConst(b, 1), c8 = indexConst(b, 8);
    Value always = arith::ConstantIntOp::create(b, 1, 1);
    auto kLoop = scf::ForOp::create(
        b, indexConst(b, 0), indexConst(b, k), indexConst(b, 16), init,
        [&](OpBuilder &nb, Location loc, Value k0, ValueRange acc) {
          ImplicitLocOpBuilder kb(loc, nb);
          SmallVector<Value> aRegs, bRegs;
          if (useLdmatrix) {
            // ldmatrix.x4: lane l addresses row m0 + l%16, column
            // k0 + 8*(l/16); the four 8x8 matrices are the A registers.
            Value frag = nvgpu::LdMatrixOp::create(
                kb, VectorType::get({4, 2}, elem), a,
                ValueRange{arith::AddIOp::create(kb, t.m0, lane16),
                           arith::AddIOp::create(kb, k0, laneHi8)},
                kb.getBoolAttr(false), kb.getI32IntegerAttr(4));
            for (int64_t i = 0; i < 4; ++i)
              aRegs.push_back(mmaOperand(
                  kb,
                  vector::ExtractOp::create(kb, frag, ArrayRef<int64_t>{i})));
            // B: x2; transposed B [N, K] is read row-wise, [K, N] with
            // .trans. Lanes 16..31 repeat the addresses of 0..15.
            Value bFrag =
                transposeB
                    ? nvgpu::LdMatrixOp::create(
                          kb, VectorType::get({2, 2}, elem), bMat,
                          ValueRange{arith::AddIOp::create(kb, t.n0, lane8),
                                     arith::AddIOp::create(kb, k0, laneMid8)},
                          kb.getBoolAttr(false), kb.getI32IntegerAttr(2))
                    : nvgpu::LdMatrixOp::create(
                          kb, VectorType::get({2, 2}, elem), bMat,
                          ValueRange{arith::AddIOp::create(kb, k0, lane16),
                                     t.n0},
                          kb.getBoolAttr(true), kb.getI32IntegerAttr(2));
            for (int64_t i = 0; i < 2; ++i)
              bRegs.push_back(mmaOperand(
                  kb,
                  vector::ExtractOp::create(kb, bFrag, ArrayRef<int64_t>{i})));
          } else {
            Value kc = arith::AddIOp::create(kb, k0, twoTg);
            Value kc8 = arith::AddIOp::create(kb, kc, c8);
            // A registers r: rows g + 8*(r&1), cols 2*tg + 8*(r>>1).
            aRegs = {mmaOperand(kb, loadPair(kb, a, t.row0, kc, t.ok0, 2)),
                     mmaOperand(kb, loadPair(kb, a, t.row1, kc, t.ok1, 2)),
                     mmaOperand(kb, loadPair(kb, a, t.row0, kc8, t.ok0, 2)),
                     mmaOperand(kb, loadPair(kb, a, t.row1, kc8, t.ok1, 2))};
            // B registers r: k = 2*tg + 8*r (+0, +1), n = g.
            Value nIdx = arith::AddIOp::create(kb, t.n0, group);
            for (Value kk : {kc, kc8}) {
              Value pair;
              if (transposeB) {
                pair = loadPair(kb, bMat, nIdx, kk, always, 2);
              } else {
                Value lo =
                    memref::LoadOp::create(kb, bMat, ValueRange{kk, nIdx});
                Value hi = memref::LoadOp::create(
                    kb, bMat,
                    ValueRange{arith::AddIOp::create(kb, kk, c1), nIdx});
                pair = vector::FromElementsOp::create(
                    kb, VectorType::get({2}, elem), ValueRange{lo, hi});
              }
              bRegs.push_back(mmaOperand(kb, pair));
            }
          }
          scf::YieldOp::create(
              kb, mmaM16N8K16(kb, elem, aRegs, bRegs,
                              SmallVector<Value>(acc.begin(), acc.end())));
        });
    return SmallVector<Value>(kLoop.getResults());
  }
};

/// The accumulating product inside a loop whose C tile nothing else in the
/// loop touches (the P·V of the online softmax): the accumulators stay in
/// registers across the loop's iterations, loaded once before it and stored
/// once after it (followed by a barrier), instead of a shared-memory round
/// trip per iteration. Needs full 16-row tiles spread evenly over the warps.
LogicalResult hoistAccumulator(MatmulOp op, const ThreadInfo &ti) {
  auto loop = dyn_cast<scf::ForOp>(op->getParentOp());
  if (!loop || !op.getAccumulate() ||
      op->getNextNode() != loop.getBody()->getTerminator())
    return failure();
  // Nothing else in the loop may touch C's buffer.
  Value root = op.getC();
  while (auto sub = root.getDefiningOp<memref::SubViewOp>())
    root = sub.getSource();
  bool otherUse = false;
  loop.walk([&](Operation *user) {
    if (user == op.getOperation())
      return;
    for (Value v : user->getOperands()) {
      Value r = v;
      while (auto sub = r.getDefiningOp<memref::SubViewOp>())
        r = sub.getSource();
      if (r == root && isa<MemRefType>(v.getType()))
        otherUse = true;
    }
  });
  ImplicitLocOpBuilder b(loop.getLoc(), loop);
  MmaSync mm(op, ti, b);
  if (otherUse || !mm.full || (mm.mt * mm.nt) % mm.warps != 0)
    return failure();
  const int64_t perWarp = mm.mt * mm.nt / mm.warps;
  auto fragType = VectorType::get({perWarp * 4}, b.getF32Type());
  auto tileOf = [&](ImplicitLocOpBuilder &ib, int64_t i) {
    return mm.tile(
        ib, arith::AddIOp::create(ib, mm.warp, indexConst(ib, i * mm.warps)));
  };
  // Before the loop: this warp's accumulators from C.
  SmallVector<Value> init;
  for (int64_t i = 0; i < perWarp; ++i)
    llvm::append_range(init, mm.loadC(b, tileOf(b, i), /*scale=*/false));
  Value initVec = vector::FromElementsOp::create(b, fragType, init);
  IRRewriter rewriter(loop.getContext());
  FailureOr<LoopLikeOpInterface> newLoop = loop.replaceWithAdditionalYields(
      rewriter, ValueRange{initVec}, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &, Location loc, ArrayRef<BlockArgument> args) {
        ImplicitLocOpBuilder ib(loc, op);
        Value frags = args[0];
        for (int64_t i = 0; i < perWarp; ++i) {
          MmaSync::Tile t = tileOf(ib, i);
          SmallVector<Value> acc;
          Value rows[4] = {t.row0, t.row0, t.row1, t.row1};
          for (int64_t j = 0; j < 4; ++j)
            acc.push_back(
                mm.scaleRow(ib,
                            vector::ExtractOp::create(
                                ib, frags, ArrayRef<int64_t>{i * 4 + j}),
                            rows[j]));
          SmallVector<Value> res = mm.product(ib, t, acc);
          for (int64_t j = 0; j < 4; ++j)
            frags = vector::InsertOp::create(ib, res[j], frags,
                                             ArrayRef<int64_t>{i * 4 + j});
        }
        return SmallVector<Value>{frags};
      });
  if (failed(newLoop))
    return failure();
  // The barrier mla-distribute puts after a matmul still separates this
  // iteration's reads of B from the next iteration's copies into it.
  ImplicitLocOpBuilder inB(op.getLoc(), op);
  gpu::BarrierOp::create(inB);
  op.erase();
  // After the loop (the old loop is gone): the accumulators back to C,
  // visible to all threads.
  ImplicitLocOpBuilder ab((*newLoop)->getLoc(), (*newLoop)->getContext());
  ab.setInsertionPointAfter(*newLoop);
  Value frags = (*newLoop)->getResults().back();
  for (int64_t i = 0; i < perWarp; ++i) {
    SmallVector<Value> acc;
    for (int64_t j = 0; j < 4; ++j)
      acc.push_back(
          vector::ExtractOp::create(ab, frags, ArrayRef<int64_t>{i * 4 + j}));
    mm.storeC(ab, tileOf(ab, i), acc);
  }
  gpu::BarrierOp::create(ab);
  return success();
}

} // namespace

/// mma.sync m16n8k16 with f32 accumulation. C tiles of 16x8 are spread over
/// the warps; each warp walks K in steps of 16 loading its fragments from A
/// and B (any memory space) and keeps the four accumulators in registers.
/// Rows past M read as zero and are not stored.
void lowerMatmulMmaSync(MatmulOp op, const ThreadInfo &ti) {
  if (succeeded(hoistAccumulator(op, ti)))
    return;
  ImplicitLocOpBuilder b(op.getLoc(), op);
  MmaSync mm(op, ti, b);
  forLoop(b, mm.warp, indexConst(b, mm.mt * mm.nt), indexConst(b, mm.warps),
          [&](ImplicitLocOpBuilder &tb, Value tileIdx) {
            MmaSync::Tile t = mm.tile(tb, tileIdx);
            SmallVector<Value> init =
                op.getAccumulate() ? mm.loadC(tb, t, /*scale=*/true)
                                   : SmallVector<Value>(4, f32Const(tb, 0.0));
            mm.storeC(tb, t, mm.product(tb, t, init));
          });
  gpu::BarrierOp::create(b);
  op.erase();
}

} // namespace mla::nvidia
