//===- MmaSync.cpp - the mma.sync emitter ---------------------------------===//
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

void LaneLayout::warpAndLane(ImplicitLocOpBuilder &b, const ThreadInfo &ti) {
  warp = arith::DivUIOp::create(b, ti.tid, indexConst(b, ti.warpSize));
  lane = arith::RemUIOp::create(b, ti.tid, indexConst(b, ti.warpSize));
}

LaneLayout::LaneLayout(ImplicitLocOpBuilder &b, const ThreadInfo &ti) {
  warpAndLane(b, ti);
  group = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  quadPos = arith::RemUIOp::create(b, lane, indexConst(b, 4));
  twoTg = arith::MulIOp::create(b, quadPos, indexConst(b, 2));
  ldmatrixOffsets(b);
}

LaneLayout::LaneLayout(ImplicitLocOpBuilder &b, const ThreadInfo &ti,
                       MatrixEmitter &em) {
  warpAndLane(b, ti);
  em.group = warp;
  em.lane = lane;
  group = em.cRowLane = em.laneCoord(b, em.instr.c.row);
  twoTg = em.cColLane = em.laneCoord(b, em.instr.c.col);
  ldmatrixOffsets(b);
}

void LaneLayout::ldmatrixOffsets(ImplicitLocOpBuilder &b) {
  Value c2 = indexConst(b, 2), c8 = indexConst(b, 8);
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
/// mma.sync m16n8k16 with f32 accumulation: each warp loads its A and B
/// fragments (any memory space; ldmatrix for full 16-row tiles of A and B
/// in shared memory) and keeps the four accumulators in registers.
class MmaSyncEmitter : public MatrixEmitter {
public:
  using MatrixEmitter::MatrixEmitter;

  void begin(ImplicitLocOpBuilder &b, MatmulOp op) override {
    lanes.emplace(b, ti);
    group = lanes->warp;
    lane = lanes->lane;
    elem = op.getA().getType().getElementType();
    // Full 16-row tiles in shared memory are read with ldmatrix (one
    // instruction per operand fragment instead of 4-6 loads).
    useLdmatrix = op.getA().getType().getDimSize(0) % 16 == 0 &&
                  isWorkgroup(op.getA()) && isWorkgroup(op.getB());
  }

  bool keepsAccumulatorsInLoops() const override { return true; }

  /// One k-step of 16: A rows are the C tile's rows g and g + 8 (elements
  /// 0 and 2 of the accumulator layout).
  SmallVector<Value> step(ImplicitLocOpBuilder &kb, MatmulOp op,
                          const AccTile &t, Value k0, ValueRange acc) override {
    Value a = op.getA(), bMat = op.getB();
    bool transposeB = op.getTransposeB();
    Value c1 = indexConst(kb, 1), c8 = indexConst(kb, 8);
    Value always = arith::ConstantIntOp::create(kb, 1, 1);
    SmallVector<Value> aRegs, bRegs;
    if (useLdmatrix) {
      // ldmatrix.x4: the four 8x8 matrices are the A registers.
      aRegs = loadA(kb, a, t.m0, k0);
      // B: x2; transposed B [N, K] is read row-wise, [K, N] with .trans.
      // Lanes 16..31 repeat the addresses of 0..15.
      bRegs =
          transposeB
              ? ldmatrix(
                    kb, bMat, arith::AddIOp::create(kb, t.n0, lanes->lane8),
                    arith::AddIOp::create(kb, k0, lanes->laneMid8), false, 2)
              : ldmatrix(kb, bMat, arith::AddIOp::create(kb, k0, lanes->lane16),
                         t.n0, true, 2);
    } else {
      Value kc = arith::AddIOp::create(kb, k0, lanes->twoTg);
      Value kc8 = arith::AddIOp::create(kb, kc, c8);
      Value row0 = t.rows[0], row1 = t.rows[2];
      // A registers r: rows g + 8*(r&1), cols 2*tg + 8*(r>>1).
      aRegs = {mmaOperand(kb, loadPair(kb, a, row0, kc, t.ok[0], 2)),
               mmaOperand(kb, loadPair(kb, a, row1, kc, t.ok[2], 2)),
               mmaOperand(kb, loadPair(kb, a, row0, kc8, t.ok[0], 2)),
               mmaOperand(kb, loadPair(kb, a, row1, kc8, t.ok[2], 2))};
      // B registers r: k = 2*tg + 8*r (+0, +1), n = g.
      Value nIdx = arith::AddIOp::create(kb, t.n0, lanes->group);
      for (Value kk : {kc, kc8}) {
        Value pair;
        if (transposeB) {
          pair = loadPair(kb, bMat, nIdx, kk, always, 2);
        } else {
          Value lo = memref::LoadOp::create(kb, bMat, ValueRange{kk, nIdx});
          Value hi = memref::LoadOp::create(
              kb, bMat, ValueRange{arith::AddIOp::create(kb, kk, c1), nIdx});
          pair = vector::FromElementsOp::create(kb, VectorType::get({2}, elem),
                                                ValueRange{lo, hi});
        }
        bRegs.push_back(mmaOperand(kb, pair));
      }
    }
    return mmaM16N8K16(kb, elem, aRegs, bRegs,
                       SmallVector<Value>(acc.begin(), acc.end()));
  }

  // The fragment interface (the fused attention step): operands from
  // workgroup tiles by ldmatrix.x4, whose four 8x8 matrices are one A
  // fragment or the B fragments of two n8 tiles.
  void beginFragments(ImplicitLocOpBuilder &b) override {
    lanes.emplace(b, ti, *this);
    MLIRContext *ctx = b.getContext();
    elem = instr.type == MatrixType::F16 ? Type(Float16Type::get(ctx))
                                         : Type(BFloat16Type::get(ctx));
  }
  bool multipliesFragments() const override { return true; }
  SmallVector<Value> multiply(ImplicitLocOpBuilder &b, ValueRange a,
                              ValueRange bFrag, ValueRange acc) override {
    return mmaM16N8K16(b, elem, SmallVector<Value>(a),
                       SmallVector<Value>(bFrag), SmallVector<Value>(acc));
  }
  /// Lane l addresses row m0 + l % 16, column k0 + 8·(l / 16).
  SmallVector<Value> loadA(ImplicitLocOpBuilder &b, Value mem, Value m0,
                           Value k0) override {
    return ldmatrix(b, mem, arith::AddIOp::create(b, m0, lanes->lane16),
                    arith::AddIOp::create(b, k0, lanes->laneHi8), false, 4);
  }
  /// N x K: lane l addresses row n0 + nOffset + 8·(l / 16) + l % 8, column
  /// k0 + 8·((l / 8) % 2); K x N: transposed, row k0 + 8·((l / 8) % 2) +
  /// l % 8, column n0 + nOffset + 8·(l / 16).
  SmallVector<SmallVector<Value>> loadB(ImplicitLocOpBuilder &b, Value mem,
                                        Value k0, Value n0, int64_t nOffset,
                                        bool nMajor) override {
    Value off = indexConst(b, nOffset);
    SmallVector<Value> regs =
        nMajor
            ? ldmatrix(
                  b, mem,
                  arith::AddIOp::create(
                      b, arith::AddIOp::create(b, n0, off),
                      arith::AddIOp::create(b, lanes->laneHi8, lanes->lane8)),
                  arith::AddIOp::create(b, k0, lanes->laneMid8), false, 4)
            : ldmatrix(
                  b, mem,
                  arith::AddIOp::create(
                      b, k0,
                      arith::AddIOp::create(b, lanes->laneMid8, lanes->lane8)),
                  arith::AddIOp::create(
                      b, n0, arith::AddIOp::create(b, off, lanes->laneHi8)),
                  true, 4);
    return {{regs[0], regs[1]}, {regs[2], regs[3]}};
  }
  int64_t bTilesPerLoad() const override { return 2; }
  /// Two elements per register.
  SmallVector<Value> packA(ImplicitLocOpBuilder &b,
                           ArrayRef<Value> elems) override {
    SmallVector<Value> regs;
    for (size_t i = 0; i + 1 < elems.size(); i += 2)
      regs.push_back(
          mmaOperand(b, vector::FromElementsOp::create(
                            b, VectorType::get({2}, elem),
                            ValueRange{castFloat(b, elems[i], elem),
                                       castFloat(b, elems[i + 1], elem)})));
    return regs;
  }

private:
  /// ldmatrix of `count` 8x8 matrices (x2 or x4), lane addressing row r,
  /// column c: one mma operand register per matrix.
  SmallVector<Value> ldmatrix(ImplicitLocOpBuilder &b, Value mem, Value r,
                              Value c, bool trans, int64_t count) {
    Value frag = nvgpu::LdMatrixOp::create(
        b, VectorType::get({count, 2}, elem), mem, ValueRange{r, c},
        b.getBoolAttr(trans), b.getI32IntegerAttr(count));
    SmallVector<Value> regs;
    for (int64_t i = 0; i < count; ++i)
      regs.push_back(mmaOperand(
          b, vector::ExtractOp::create(b, frag, ArrayRef<int64_t>{i})));
    return regs;
  }

  std::optional<LaneLayout> lanes;
  Type elem;
  bool useLdmatrix = false;
};

} // namespace

std::unique_ptr<MatrixEmitter> createMmaSyncEmitter(const MatrixInstr &mi,
                                                    const ThreadInfo &ti) {
  return std::make_unique<MmaSyncEmitter>(mi, ti);
}

} // namespace mla::nvidia
