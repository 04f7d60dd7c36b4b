//===- Mfma.cpp - mla.matmul as wave-level MFMA ---------------------------===//
#include "../Utils.h"
#include "AMD.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using namespace mla;

namespace mla::amd {
/// MFMA 16x16x16 (bf16/f16, f32 accumulation) on AMD, wave64. C tiles of
/// 16x16 are spread over the waves. In each wave lane l works on column
/// l % 16 and the 4-element k (A, B) or row (C) block 4 * (l / 16):
///   A[m0 + l%16][k0 + 4*(l/16) + j],  B(k0 + 4*(l/16) + j, n0 + l%16),
///   C[m0 + 4*(l/16) + j][n0 + l%16],  j = 0..3.
/// Rows past M read as zero and are not stored.
void lowerMatmulMfma(MatmulOp op, const ThreadInfo &ti) {
  ImplicitLocOpBuilder b(op.getLoc(), op);
  auto aType = op.getA().getType();
  Type elem = aType.getElementType();
  const int64_t m = aType.getDimSize(0), k = aType.getDimSize(1);
  const int64_t n = op.getC().getType().getDimSize(1);
  const int64_t mt = (m + 15) / 16, nt = n / 16;
  const int64_t waves = ti.threads / ti.warpSize;
  Type f32 = b.getF32Type();
  auto accType = VectorType::get({4}, f32);
  auto fragType = VectorType::get({4}, elem);
  Value c0 = indexConst(b, 0), c16 = indexConst(b, 16), cM = indexConst(b, m);
  Value wave = arith::DivUIOp::create(b, ti.tid, indexConst(b, ti.warpSize));
  Value lane = arith::RemUIOp::create(b, ti.tid, indexConst(b, ti.warpSize));
  Value col16 = arith::RemUIOp::create(b, lane, c16);
  Value block4 = arith::MulIOp::create(b, arith::DivUIOp::create(b, lane, c16),
                                       indexConst(b, 4));
  Value zeroF = f32Const(b, 0.0);
  Value always = arith::ConstantIntOp::create(b, 1, 1);

  forLoop(b, wave, indexConst(b, mt * nt), indexConst(b, waves),
          [&](ImplicitLocOpBuilder &tb, Value tile) {
            Value m0 = arith::MulIOp::create(
                tb, arith::DivUIOp::create(tb, tile, indexConst(tb, nt)), c16);
            Value n0 = arith::MulIOp::create(
                tb, arith::RemUIOp::create(tb, tile, indexConst(tb, nt)), c16);
            Value aRow = arith::AddIOp::create(tb, m0, col16);
            bool full = m % 16 == 0;
            auto inRows = [&](Value r) -> Value {
              return full ? always
                          : arith::CmpIOp::create(tb, arith::CmpIPredicate::ult,
                                                  r, cM)
                                .getResult();
            };
            Value aOk = inRows(aRow);
            Value bCol = arith::AddIOp::create(tb, n0, col16);
            // Accumulator: rows m0 + block4 + j, column n0 + l % 16.
            SmallVector<Value> cRows, cOk;
            for (int64_t j = 0; j < 4; ++j) {
              Value r = arith::AddIOp::create(
                  tb, arith::AddIOp::create(tb, m0, block4), indexConst(tb, j));
              cRows.push_back(r);
              cOk.push_back(inRows(r));
            }
            SmallVector<Value> init;
            for (int64_t j = 0; j < 4; ++j) {
              if (!op.getAccumulate()) {
                init.push_back(zeroF);
                continue;
              }
              init.push_back(guardedValue(
                  tb, cOk[j], zeroF, [&](ImplicitLocOpBuilder &ib) {
                    Value v = memref::LoadOp::create(
                        ib, op.getC(), ValueRange{cRows[j], bCol});
                    if (Value s = op.getCScale())
                      v = arith::MulFOp::create(
                          ib, v,
                          memref::LoadOp::create(ib, s, ValueRange{cRows[j]}));
                    return v;
                  }));
            }
            Value acc0 = vector::FromElementsOp::create(tb, accType, init);
            auto kLoop = scf::ForOp::create(
                tb, c0, indexConst(tb, k), c16, ValueRange{acc0},
                [&](OpBuilder &nb, Location loc, Value k0, ValueRange acc) {
                  ImplicitLocOpBuilder kb(loc, nb);
                  Value kk = arith::AddIOp::create(kb, k0, block4);
                  Value a = loadPair(kb, op.getA(), aRow, kk, aOk, 4);
                  Value bFrag;
                  if (op.getTransposeB()) {
                    bFrag = loadPair(kb, op.getB(), bCol, kk, always, 4);
                  } else {
                    SmallVector<Value> elems;
                    for (int64_t j = 0; j < 4; ++j)
                      elems.push_back(memref::LoadOp::create(
                          kb, op.getB(),
                          ValueRange{
                              arith::AddIOp::create(kb, kk, indexConst(kb, j)),
                              bCol}));
                    bFrag = vector::FromElementsOp::create(kb, fragType, elems);
                  }
                  Value d = amdgpu::MFMAOp::create(
                      kb, accType, kb.getI32IntegerAttr(16),
                      kb.getI32IntegerAttr(16), kb.getI32IntegerAttr(16),
                      kb.getI32IntegerAttr(1), a, bFrag, acc[0]);
                  scf::YieldOp::create(kb, d);
                });
            for (int64_t j = 0; j < 4; ++j) {
              Value v = vector::ExtractOp::create(tb, kLoop.getResult(0),
                                                  ArrayRef<int64_t>{j});
              guarded(tb, cOk[j], [&](ImplicitLocOpBuilder &ib) {
                memref::StoreOp::create(ib, v, op.getC(),
                                        ValueRange{cRows[j], bCol});
              });
            }
          });
  gpu::BarrierOp::create(b);
  op.erase();
}

} // namespace mla::amd
