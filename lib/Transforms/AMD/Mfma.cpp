//===- Mfma.cpp - the MFMA emitter ----------------------------------------===//
//
// MFMA (bf16/f16, f32 accumulation) on wave64, any of the shapes of
// MatrixInstrs.def: every address comes from the instruction's layouts. In
// the 16x16x16 form lane l works on column l % 16 and the 4-element k (A,
// B) or row (C) block 4 * (l / 16):
//   A[m0 + l%16][k0 + 4*(l/16) + j],  B(k0 + 4*(l/16) + j, n0 + l%16),
//   C[m0 + 4*(l/16) + j][n0 + l%16],  j = 0..3.
// The A and B elements of a lane are consecutive in k (one vector load of
// A, and of B when it is transposed).
//
//===----------------------------------------------------------------------===//
#include "../Utils.h"
#include "AMD.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mla;

namespace {

class MfmaEmitter : public MatrixEmitter {
public:
  using MatrixEmitter::MatrixEmitter;

  void begin(ImplicitLocOpBuilder &b, MatmulOp op) override {
    MatrixEmitter::begin(b, op);
    elem = op.getA().getType().getElementType();
    aRowLane = laneCoord(b, instr.a.row);
    kLane = laneCoord(b, instr.a.col);
    bColLane = laneCoord(b, instr.b.col);
  }

  /// The accumulators travel as one vector, the instruction's operand.
  SmallVector<Value> packAcc(ImplicitLocOpBuilder &b,
                             ArrayRef<Value> elems) override {
    return {vector::FromElementsOp::create(
        b, VectorType::get({instr.c.elems}, b.getF32Type()), elems)};
  }
  SmallVector<Value> unpackAcc(ImplicitLocOpBuilder &b,
                               ValueRange carried) override {
    SmallVector<Value> out;
    for (int64_t j = 0; j < instr.c.elems; ++j)
      out.push_back(
          vector::ExtractOp::create(b, carried[0], ArrayRef<int64_t>{j}));
    return out;
  }

  /// This lane's row of A (and whether it is inside M) and column of B.
  void beginTile(ImplicitLocOpBuilder &b, MatmulOp op, AccTile &t) override {
    const int64_t m = op.getA().getType().getDimSize(0);
    Value aRow = arith::AddIOp::create(b, t.m0, aRowLane);
    Value aOk = m % instr.m == 0
                    ? arith::ConstantIntOp::create(b, 1, 1).getResult()
                    : arith::CmpIOp::create(b, arith::CmpIPredicate::ult, aRow,
                                            indexConst(b, m))
                          .getResult();
    t.extra = {aRow, aOk, arith::AddIOp::create(b, t.n0, bColLane)};
  }

  SmallVector<Value> step(ImplicitLocOpBuilder &kb, MatmulOp op,
                          const AccTile &t, Value k0, ValueRange acc) override {
    const int64_t perLane = instr.a.elems;
    Value aRow = t.extra[0], aOk = t.extra[1], bCol = t.extra[2];
    Value kk = arith::AddIOp::create(kb, k0, kLane);
    Value a = loadPair(kb, op.getA(), aRow, kk, aOk, perLane);
    Value bFrag;
    if (op.getTransposeB()) {
      bFrag = loadPair(kb, op.getB(), bCol, kk,
                       arith::ConstantIntOp::create(kb, 1, 1), perLane);
    } else {
      SmallVector<Value> elems;
      for (int64_t j = 0; j < perLane; ++j)
        elems.push_back(memref::LoadOp::create(
            kb, op.getB(),
            ValueRange{arith::AddIOp::create(kb, kk, indexConst(kb, j)),
                       bCol}));
      bFrag = vector::FromElementsOp::create(
          kb, VectorType::get({perLane}, elem), elems);
    }
    return multiply(kb, a, bFrag, acc[0]);
  }

  bool multipliesFragments() const override { return true; }
  /// One vector register per operand.
  SmallVector<Value> multiply(ImplicitLocOpBuilder &b, ValueRange a,
                              ValueRange bFrag, ValueRange acc) override {
    assert(a.size() == 1 && bFrag.size() == 1 && acc.size() == 1);
    return {amdgpu::MFMAOp::create(
        b, acc[0].getType(), b.getI32IntegerAttr(instr.m),
        b.getI32IntegerAttr(instr.n), b.getI32IntegerAttr(instr.k),
        b.getI32IntegerAttr(1), a[0], bFrag[0], acc[0])};
  }

private:
  Type elem;
  Value aRowLane, kLane, bColLane;
};

} // namespace

std::unique_ptr<MatrixEmitter>
mla::amd::createMfmaEmitter(const MatrixInstr &mi, const ThreadInfo &ti) {
  return std::make_unique<MfmaEmitter>(mi, ti);
}
