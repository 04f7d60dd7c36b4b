//===- Distribute.cpp - mla-distribute: blockwise -> threads of a GPU ------===//
//
// Layer 4 for GPU targets. Inside every mla.grid:
//   * each scf.parallel becomes a loop over its linearised iteration space
//     strided by the workgroup's thread count (`idx = tid; idx < n;
//     idx += threads`), followed by a gpu.barrier;
//   * each mla.matmul becomes warp-level tensor-core code (mma.sync
//     m16n8k16 on NVIDIA) for bf16/f16 operands, or a thread-distributed f32
//     FMA loop otherwise, followed by a gpu.barrier.
// The thread count is the grid config's `warps` times the target's warp size
// and is recorded on the grid as `mla.block_size`.
//
//===----------------------------------------------------------------------===//
#include "mla/Target/Arch.h"
#include "mla/Transforms/Passes.h"
#include "mla/Transforms/Utils.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#define DEBUG_TYPE "mla-distribute"

namespace mla {
#define GEN_PASS_DEF_MLADISTRIBUTE
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {

struct ThreadInfo {
  Value tid;       // linear thread id in the workgroup
  int64_t threads; // threads per workgroup
  int64_t warpSize;
};

/// The grid's tiles (top-level memref.allocas) live in workgroup memory
/// (shared memory / LDS); mla-outline-gpu-kernels places them.
void allocasToWorkgroup(GridOp grid) {
  MLIRContext *ctx = grid.getContext();
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  SmallVector<memref::AllocaOp> allocas(
      grid.getBody().front().getOps<memref::AllocaOp>());
  for (memref::AllocaOp a : allocas) {
    MemRefType t = a.getType();
    OpBuilder b(a);
    auto shared = memref::AllocaOp::create(
        b, a.getLoc(),
        MemRefType::get(t.getShape(), t.getElementType(), t.getLayout(), wg));
    replaceMemRefUses(a.getResult(), shared.getResult());
    a.erase();
  }
}

bool isWorkgroup(Value memref) {
  auto space = dyn_cast_or_null<gpu::AddressSpaceAttr>(
      cast<MemRefType>(memref.getType()).getMemorySpace());
  return space && space.getValue() == gpu::AddressSpace::Workgroup;
}

bool isZeroVector(Value v) {
  DenseElementsAttr attr;
  return matchPattern(v, m_Constant(&attr)) && attr.isSplat() &&
         cast<FloatAttr>(attr.getSplatValue<Attribute>()).getValue().isZero();
}

/// NVIDIA: a parallel copy `tile[...] = cond ? global[...] : 0` of 16-byte
/// multiples becomes cp.async (global -> shared without registers, all of a
/// thread's copies in flight at once; a masked copy reads 0 bytes and
/// zero-fills). The source indices are still computed under `cond` (the
/// page lookup must not read past the block table); masked copies read from
/// index 0. Returns true when the loop was rewritten; the caller then waits
/// for the copies before the barrier.
bool asyncCopies(scf::ParallelOp par) {
  Block *body = par.getBody();
  auto store = dyn_cast<vector::StoreOp>(body->getTerminator()->getPrevNode());
  if (!store || !isWorkgroup(store.getBase()))
    return false;
  auto ifOp = store.getValueToStore().getDefiningOp<scf::IfOp>();
  if (!ifOp || ifOp.getNumResults() != 1 || ifOp.getElseRegion().empty())
    return false;
  auto load = cast<scf::YieldOp>(ifOp.thenBlock()->getTerminator())
                  .getOperand(0)
                  .getDefiningOp<vector::LoadOp>();
  Value elseVal =
      cast<scf::YieldOp>(ifOp.elseBlock()->getTerminator()).getOperand(0);
  VectorType vt = store.getVectorType();
  int64_t bytes = vt.getNumElements() * vt.getElementTypeBitWidth() / 8;
  if (!load || !isZeroVector(elseVal) || bytes % 16 != 0 ||
      cast<MemRefType>(load.getBase().getType()).getMemorySpace())
    return false;
  // The source indices, computed only when in range.
  ImplicitLocOpBuilder b(ifOp.getLoc(), ifOp);
  SmallVector<Type> idxTypes(load.getIndices().size(), b.getIndexType());
  auto idxIf = scf::IfOp::create(b, idxTypes, ifOp.getCondition(),
                                 /*withElseRegion=*/true);
  {
    Block *thenBlock = idxIf.thenBlock();
    thenBlock->getOperations().splice(
        thenBlock->begin(), ifOp.thenBlock()->getOperations(),
        ifOp.thenBlock()->begin(), Block::iterator(load));
    ImplicitLocOpBuilder tb = ImplicitLocOpBuilder::atBlockEnd(
        load.getLoc(), thenBlock);
    scf::YieldOp::create(tb, load.getIndices());
    ImplicitLocOpBuilder eb = ImplicitLocOpBuilder::atBlockBegin(
        load.getLoc(), idxIf.elseBlock());
    SmallVector<Value> zeros(idxTypes.size(), indexConst(eb, 0));
    scf::YieldOp::create(eb, zeros);
  }
  int64_t perCopy = 16 * 8 / vt.getElementTypeBitWidth();
  Value full = indexConst(b, perCopy);
  Value srcElems =
      arith::SelectOp::create(b, ifOp.getCondition(), full, indexConst(b, 0));
  for (int64_t piece = 0; piece < vt.getNumElements() / perCopy; ++piece) {
    SmallVector<Value> src(idxIf.getResults());
    SmallVector<Value> dst(store.getIndices());
    Value off = indexConst(b, piece * perCopy);
    src.back() = arith::AddIOp::create(b, src.back(), off);
    dst.back() = arith::AddIOp::create(b, dst.back(), off);
    nvgpu::DeviceAsyncCopyOp::create(
        b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), store.getBase(),
        dst, load.getBase(), src, b.getIndexAttr(perCopy), srcElems,
        b.getUnitAttr());
  }
  store.erase();
  ifOp.erase();
  return true;
}

/// scf.parallel -> strided loop over the linearised space + barrier.
void distributeParallel(scf::ParallelOp par, const ThreadInfo &ti,
                        bool waitAsyncCopies) {
  ImplicitLocOpBuilder b(par.getLoc(), par);
  // Extent of each dim: (ub - lb) / step, all our loops have lb 0 / step 1.
  SmallVector<Value> extents;
  Value total = indexConst(b, 1);
  for (auto [lb, ub, step] :
       llvm::zip(par.getLowerBound(), par.getUpperBound(), par.getStep())) {
    Value n = arith::CeilDivSIOp::create(
        b, arith::SubIOp::create(b, ub, lb), step);
    extents.push_back(n);
    total = arith::MulIOp::create(b, total, n);
  }
  forLoop(b, ti.tid, total, indexConst(b, ti.threads),
          [&](ImplicitLocOpBuilder &lb, Value idx) {
            IRMapping map;
            Value rest = idx;
            // Innermost dim varies fastest.
            SmallVector<Value> ivs(extents.size());
            for (int64_t d = extents.size() - 1; d >= 0; --d) {
              Value local = d == 0 ? rest
                                   : arith::RemUIOp::create(lb, rest,
                                                            extents[d]);
              if (d > 0)
                rest = arith::DivUIOp::create(lb, rest, extents[d]);
              ivs[d] = arith::AddIOp::create(
                  lb, par.getLowerBound()[d],
                  arith::MulIOp::create(lb, local, par.getStep()[d]));
            }
            for (auto [iv, v] : llvm::zip(par.getInductionVars(), ivs))
              map.map(iv, v);
            for (Operation &op : par.getBody()->without_terminator())
              lb.clone(op, map);
          });
  if (waitAsyncCopies) {
    // One group of all this thread's copies; wait for it before the barrier.
    Value group = nvgpu::DeviceAsyncCreateGroupOp::create(
        b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), ValueRange{});
    nvgpu::DeviceAsyncWaitOp::create(b, group, b.getI32IntegerAttr(0));
  }
  gpu::BarrierOp::create(b);
  par.erase();
}

/// Loads `width` consecutive elements at (row, col) of a 2-D memref, or zeros
/// when `inBounds` is false.
Value loadPair(ImplicitLocOpBuilder &b, Value mem, Value row, Value col,
               Value inBounds, int64_t width) {
  auto type = cast<MemRefType>(mem.getType());
  auto vecType = VectorType::get({width}, type.getElementType());
  if (matchPattern(inBounds, m_One()))
    return vector::LoadOp::create(b, vecType, mem, ValueRange{row, col});
  auto ifOp = scf::IfOp::create(
      b, inBounds,
      [&](OpBuilder &nb, Location loc) {
        ImplicitLocOpBuilder ib(loc, nb);
        scf::YieldOp::create(
            ib, ValueRange{vector::LoadOp::create(ib, vecType, mem,
                                                  ValueRange{row, col})});
      },
      [&](OpBuilder &nb, Location loc) {
        ImplicitLocOpBuilder ib(loc, nb);
        Value z = arith::ConstantOp::create(
            ib, vecType,
            DenseElementsAttr::get(
                vecType, ib.getFloatAttr(type.getElementType(), 0.0)));
        scf::YieldOp::create(ib, z);
      });
  return ifOp.getResult(0);
}

/// Runs `body` under `cond`, or unconditionally when `cond` is constant true.
void guarded(ImplicitLocOpBuilder &b, Value cond,
             function_ref<void(ImplicitLocOpBuilder &)> body) {
  if (matchPattern(cond, m_One())) {
    body(b);
    return;
  }
  scf::IfOp::create(b, cond, [&](OpBuilder &nb, Location loc) {
    ImplicitLocOpBuilder ib(loc, nb);
    body(ib);
    scf::YieldOp::create(ib);
  });
}

/// `value()` under `cond`, else `fallback` (no branch when `cond` is
/// constant true).
Value guardedValue(ImplicitLocOpBuilder &b, Value cond, Value fallback,
                   function_ref<Value(ImplicitLocOpBuilder &)> value) {
  if (matchPattern(cond, m_One()))
    return value(b);
  auto ifOp = scf::IfOp::create(
      b, cond,
      [&](OpBuilder &nb, Location loc) {
        ImplicitLocOpBuilder ib(loc, nb);
        scf::YieldOp::create(ib, value(ib));
      },
      [&](OpBuilder &nb, Location loc) {
        ImplicitLocOpBuilder ib(loc, nb);
        scf::YieldOp::create(ib, fallback);
      });
  return ifOp.getResult(0);
}

/// Packs a vector<2xbf16> into the i32 register mma.sync takes, or keeps a
/// vector<2xf16> as is.
Value mmaOperand(ImplicitLocOpBuilder &b, Value pair) {
  auto vt = cast<VectorType>(pair.getType());
  if (vt.getElementType().isF16())
    return pair;
  Value asInt = vector::BitCastOp::create(
      b, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, asInt, ArrayRef<int64_t>{0});
}

/// mma.sync m16n8k16 with f32 accumulation. C tiles of 16x8 are spread over
/// the warps; each warp walks K in steps of 16 loading its fragments from A
/// and B (any memory space) and keeps the four accumulators in registers.
/// Rows past M read as zero and are not stored.
void lowerMatmulMmaSync(MatmulOp op, const ThreadInfo &ti) {
  ImplicitLocOpBuilder b(op.getLoc(), op);
  auto aType = op.getA().getType();
  Type elem = aType.getElementType();
  const int64_t m = aType.getDimSize(0), k = aType.getDimSize(1);
  const int64_t n = op.getC().getType().getDimSize(1);
  const int64_t mt = (m + 15) / 16, nt = n / 8;
  const int64_t warps = ti.threads / ti.warpSize;
  Type f32 = b.getF32Type();
  Value c0 = indexConst(b, 0), c1 = indexConst(b, 1), c2 = indexConst(b, 2);
  Value c8 = indexConst(b, 8), cM = indexConst(b, m);
  Value warp = arith::DivUIOp::create(b, ti.tid, indexConst(b, ti.warpSize));
  Value lane = arith::RemUIOp::create(b, ti.tid, indexConst(b, ti.warpSize));
  Value group = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  Value inGroup = arith::RemUIOp::create(b, lane, indexConst(b, 4));
  Value twoTg = arith::MulIOp::create(b, inGroup, c2);
  Value zeroF = f32Const(b, 0.0);
  auto resType = LLVM::LLVMStructType::getLiteral(
      b.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes ptxType =
      elem.isF16() ? NVVM::MMATypes::f16 : NVVM::MMATypes::bf16;
  // Full 16-row tiles in shared memory are read with ldmatrix (one
  // instruction per operand fragment instead of 4-6 loads).
  bool useLdmatrix = m % 16 == 0 && isWorkgroup(op.getA()) &&
                     isWorkgroup(op.getB());
  Value lane16 = arith::RemUIOp::create(b, lane, indexConst(b, 16));
  Value lane8 = arith::RemUIOp::create(b, lane, c8);
  Value laneHi8 = arith::MulIOp::create(
      b, arith::DivUIOp::create(b, lane, indexConst(b, 16)), c8);
  Value laneMid8 = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, arith::DivUIOp::create(b, lane, c8), c2),
      c8);

  forLoop(b, warp, indexConst(b, mt * nt), indexConst(b, warps),
          [&](ImplicitLocOpBuilder &tb, Value tile) {
    Value m0 = arith::MulIOp::create(
        tb, arith::DivUIOp::create(tb, tile, indexConst(tb, nt)),
        indexConst(tb, 16));
    Value n0 = arith::MulIOp::create(
        tb, arith::RemUIOp::create(tb, tile, indexConst(tb, nt)), c8);
    // Accumulator rows g and g + 8, columns 2*tg and 2*tg + 1.
    Value row0 = arith::AddIOp::create(tb, m0, group);
    Value row1 = arith::AddIOp::create(tb, row0, c8);
    Value col = arith::AddIOp::create(tb, n0, twoTg);
    // Row masks, only when M is not a multiple of the tile.
    Value always = arith::ConstantIntOp::create(tb, 1, 1);
    bool full = m % 16 == 0;
    Value ok0 = full ? always
                     : arith::CmpIOp::create(tb, arith::CmpIPredicate::ult,
                                             row0, cM).getResult();
    Value ok1 = full ? always
                     : arith::CmpIOp::create(tb, arith::CmpIPredicate::ult,
                                             row1, cM).getResult();
    auto loadC = [&](Value row, Value ok, Value colIdx) -> Value {
      if (!op.getAccumulate())
        return zeroF;
      return guardedValue(tb, ok, zeroF, [&](ImplicitLocOpBuilder &ib) {
        Value v = memref::LoadOp::create(ib, op.getC(), ValueRange{row, colIdx});
        if (Value s = op.getCScale())
          v = arith::MulFOp::create(
              ib, v, memref::LoadOp::create(ib, s, ValueRange{row}));
        return v;
      });
    };
    Value col1 = arith::AddIOp::create(tb, col, c1);
    SmallVector<Value> init = {loadC(row0, ok0, col), loadC(row0, ok0, col1),
                               loadC(row1, ok1, col), loadC(row1, ok1, col1)};
    auto kLoop = scf::ForOp::create(
        tb, c0, indexConst(tb, k), indexConst(tb, 16), init,
        [&](OpBuilder &nb, Location loc, Value k0, ValueRange acc) {
          ImplicitLocOpBuilder kb(loc, nb);
          Value kc = arith::AddIOp::create(kb, k0, twoTg);
          Value kc8 = arith::AddIOp::create(kb, kc, c8);
          SmallVector<Value> a, bRegs;
          if (useLdmatrix) {
            // ldmatrix.x4: lane l addresses row m0 + l%16, column
            // k0 + 8*(l/16); the four 8x8 matrices are the A registers.
            Value r = arith::AddIOp::create(kb, m0, lane16);
            Value c = arith::AddIOp::create(kb, k0, laneHi8);
            Value frag = nvgpu::LdMatrixOp::create(
                kb, VectorType::get({4, 2}, elem), op.getA(),
                ValueRange{r, c}, kb.getBoolAttr(false),
                kb.getI32IntegerAttr(4));
            for (int64_t i = 0; i < 4; ++i)
              a.push_back(mmaOperand(
                  kb, vector::ExtractOp::create(kb, frag,
                                                ArrayRef<int64_t>{i})));
            // B: x2; transposed B [N, K] is read row-wise, [K, N] with
            // .trans. Lanes 16..31 repeat the addresses of 0..15.
            Value bFrag;
            if (op.getTransposeB()) {
              Value rB = arith::AddIOp::create(kb, n0, lane8);
              Value cB = arith::AddIOp::create(kb, k0, laneMid8);
              bFrag = nvgpu::LdMatrixOp::create(
                  kb, VectorType::get({2, 2}, elem), op.getB(),
                  ValueRange{rB, cB}, kb.getBoolAttr(false),
                  kb.getI32IntegerAttr(2));
            } else {
              Value rB = arith::AddIOp::create(kb, k0, lane16);
              bFrag = nvgpu::LdMatrixOp::create(
                  kb, VectorType::get({2, 2}, elem), op.getB(),
                  ValueRange{rB, n0}, kb.getBoolAttr(true),
                  kb.getI32IntegerAttr(2));
            }
            for (int64_t i = 0; i < 2; ++i)
              bRegs.push_back(mmaOperand(
                  kb, vector::ExtractOp::create(kb, bFrag,
                                                ArrayRef<int64_t>{i})));
          } else {
          // A registers r: rows g + 8*(r&1), cols 2*tg + 8*(r>>1).
          a = {mmaOperand(kb, loadPair(kb, op.getA(), row0, kc, ok0, 2)),
               mmaOperand(kb, loadPair(kb, op.getA(), row1, kc, ok1, 2)),
               mmaOperand(kb, loadPair(kb, op.getA(), row0, kc8, ok0, 2)),
               mmaOperand(kb, loadPair(kb, op.getA(), row1, kc8, ok1, 2))};
          // B registers r: k = 2*tg + 8*r (+0, +1), n = g.
          Value nIdx = arith::AddIOp::create(kb, n0, group);
          for (Value kk : {kc, kc8}) {
            Value pair;
            if (op.getTransposeB()) {
              pair = loadPair(kb, op.getB(), nIdx, kk, always, 2);
            } else {
              Value lo = memref::LoadOp::create(kb, op.getB(),
                                                ValueRange{kk, nIdx});
              Value hi = memref::LoadOp::create(
                  kb, op.getB(),
                  ValueRange{arith::AddIOp::create(kb, kk, c1), nIdx});
              pair = vector::FromElementsOp::create(
                  kb, VectorType::get({2}, elem), ValueRange{lo, hi});
            }
            bRegs.push_back(mmaOperand(kb, pair));
          }
          }
          auto mma = NVVM::MmaOp::create(
              kb, resType, a, bRegs, acc, ArrayRef<int64_t>{16, 8, 16},
              std::nullopt, std::nullopt,
              std::array<NVVM::MMATypes, 2>{ptxType, ptxType},
              std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                             NVVM::MMALayout::col});
          SmallVector<Value> next;
          for (int64_t i = 0; i < 4; ++i)
            next.push_back(LLVM::ExtractValueOp::create(kb, mma, i));
          scf::YieldOp::create(kb, next);
        });
    auto storeC = [&](Value row, Value ok, Value v0, Value v1) {
      guarded(tb, ok, [&](ImplicitLocOpBuilder &ib) {
        memref::StoreOp::create(ib, v0, op.getC(), ValueRange{row, col});
        memref::StoreOp::create(ib, v1, op.getC(), ValueRange{row, col1});
      });
    };
    storeC(row0, ok0, kLoop.getResult(0), kLoop.getResult(1));
    storeC(row1, ok1, kLoop.getResult(2), kLoop.getResult(3));
  });
  gpu::BarrierOp::create(b);
  op.erase();
}

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
  Value block4 = arith::MulIOp::create(
      b, arith::DivUIOp::create(b, lane, c16), indexConst(b, 4));
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
                  : arith::CmpIOp::create(tb, arith::CmpIPredicate::ult, r, cM)
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
            Value v = memref::LoadOp::create(ib, op.getC(),
                                             ValueRange{cRows[j], bCol});
            if (Value s = op.getCScale())
              v = arith::MulFOp::create(
                  ib, v, memref::LoadOp::create(ib, s, ValueRange{cRows[j]}));
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
                  ValueRange{arith::AddIOp::create(kb, kk, indexConst(kb, j)),
                             bCol}));
            bFrag = vector::FromElementsOp::create(kb, fragType, elems);
          }
          Value d = amdgpu::MFMAOp::create(
              kb, accType, kb.getI32IntegerAttr(16), kb.getI32IntegerAttr(16),
              kb.getI32IntegerAttr(16), kb.getI32IntegerAttr(1), a, bFrag,
              acc[0]);
          scf::YieldOp::create(kb, d);
        });
    for (int64_t j = 0; j < 4; ++j) {
      Value v = vector::ExtractOp::create(tb, kLoop.getResult(0),
                                          ArrayRef<int64_t>{j});
      guarded(tb, cOk[j], [&](ImplicitLocOpBuilder &ib) {
        memref::StoreOp::create(ib, v, op.getC(), ValueRange{cRows[j], bCol});
      });
    }
  });
  gpu::BarrierOp::create(b);
  op.erase();
}

/// Any element types: one thread per C element, scalar f32 FMAs.
void lowerMatmulScalar(MatmulOp op, const ThreadInfo &ti) {
  ImplicitLocOpBuilder b(op.getLoc(), op);
  const int64_t m = op.getA().getType().getDimSize(0),
                k = op.getA().getType().getDimSize(1),
                n = op.getC().getType().getDimSize(1);
  Type f32 = b.getF32Type();
  Value c0 = indexConst(b, 0), c1 = indexConst(b, 1), cN = indexConst(b, n);
  forLoop(b, ti.tid, indexConst(b, m * n), indexConst(b, ti.threads),
          [&](ImplicitLocOpBuilder &ib, Value idx) {
            Value i = arith::DivUIOp::create(ib, idx, cN);
            Value j = arith::RemUIOp::create(ib, idx, cN);
            Value init = f32Const(ib, 0.0);
            if (op.getAccumulate()) {
              init = memref::LoadOp::create(ib, op.getC(), ValueRange{i, j});
              if (Value s = op.getCScale())
                init = arith::MulFOp::create(
                    ib, init, memref::LoadOp::create(ib, s, ValueRange{i}));
            }
            Value sum = reduceLoop(
                ib, c0, indexConst(ib, k), c1, init,
                [&](ImplicitLocOpBuilder &kb, Value kk, Value acc) -> Value {
                  Value a = castFloat(
                      kb, memref::LoadOp::create(kb, op.getA(),
                                                 ValueRange{i, kk}),
                      f32);
                  Value bv = castFloat(
                      kb,
                      memref::LoadOp::create(
                          kb, op.getB(),
                          op.getTransposeB() ? ValueRange{j, kk}
                                             : ValueRange{kk, j}),
                      f32);
                  return math::FmaOp::create(kb, a, bv, acc);
                });
            memref::StoreOp::create(ib, sum, op.getC(), ValueRange{i, j});
          });
  gpu::BarrierOp::create(b);
  op.erase();
}

/// exp2 / log2 as the chip's special-function instructions (NVIDIA
/// ex2.approx / lg2.approx, AMD v_exp_f32 / v_log_f32; ~1-2 ulp) and fma as
/// the LLVM intrinsic, so that kernels need no device library (libdevice,
/// ocml).
void lowerGPUMath(GridOp grid, TargetKind kind) {
  SmallVector<Operation *> ops;
  grid.walk([&](Operation *op) {
    if (isa<math::Exp2Op, math::Log2Op, math::FmaOp>(op) &&
        op->getResultTypes()[0].isF32())
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    OpBuilder b(op);
    if (auto fma = dyn_cast<math::FmaOp>(op)) {
      Value r = LLVM::FMAOp::create(b, fma.getLoc(), fma.getA(), fma.getB(),
                                    fma.getC());
      fma.replaceAllUsesWith(r);
      fma.erase();
      continue;
    }
    bool exp = isa<math::Exp2Op>(op);
    StringRef name = kind == TargetKind::NVIDIA
                         ? (exp ? "llvm.nvvm.ex2.approx.ftz.f"
                                : "llvm.nvvm.lg2.approx.ftz.f")
                         : (exp ? "llvm.amdgcn.exp2.f32" : "llvm.amdgcn.log.f32");
    auto call = LLVM::CallIntrinsicOp::create(
        b, op->getLoc(), b.getF32Type(), b.getStringAttr(name),
        op->getOperands());
    op->replaceAllUsesWith(call->getResults());
    op->erase();
  }
}

struct DistributePass : public mla::impl::MLADistributeBase<DistributePass> {
  using MLADistributeBase::MLADistributeBase;

  void runOnOperation() override {
    const ArchInfo *arch = lookupArch(target);
    if (!arch || arch->kind == TargetKind::Host) {
      getOperation().emitError()
          << "mla-distribute: '" << target << "' is not a GPU target";
      return signalPassFailure();
    }
    WalkResult result = getOperation().walk([&](GridOp grid) {
      int64_t warps = defaultWarps;
      if (auto cfg = grid->getAttrOfType<ConfigAttr>("config"))
        warps = cfg.getWarps();
      ThreadInfo ti;
      ti.threads = warps * arch->warpSize;
      ti.warpSize = arch->warpSize;
      ImplicitLocOpBuilder b = ImplicitLocOpBuilder::atBlockBegin(
          grid.getLoc(), &grid.getBody().front());
      ti.tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
      grid->setAttr("mla.block_size", b.getI64IntegerAttr(ti.threads));

      allocasToWorkgroup(grid);
      SmallVector<scf::ParallelOp> pars;
      grid.walk([&](scf::ParallelOp p) { pars.push_back(p); });
      for (scf::ParallelOp p : pars) {
        bool async = arch->kind == TargetKind::NVIDIA && asyncCopies(p);
        distributeParallel(p, ti, async);
      }
      SmallVector<MatmulOp> mms;
      grid.walk([&](MatmulOp mm) { mms.push_back(mm); });
      for (MatmulOp mm : mms) {
        Type a = mm.getA().getType().getElementType();
        Type bt = mm.getB().getType().getElementType();
        int64_t n = mm.getC().getType().getDimSize(1);
        int64_t k = mm.getA().getType().getDimSize(1);
        bool matrixUnit = a == bt && (a.isBF16() || a.isF16()) &&
                          k % arch->mmaK == 0 && n % arch->mmaN == 0;
        if (matrixUnit && arch->kind == TargetKind::NVIDIA)
          lowerMatmulMmaSync(mm, ti);
        else if (matrixUnit && arch->kind == TargetKind::AMD)
          lowerMatmulMfma(mm, ti);
        else
          lowerMatmulScalar(mm, ti);
      }
      lowerGPUMath(grid, arch->kind);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
