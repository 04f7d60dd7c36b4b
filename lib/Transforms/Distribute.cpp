//===- Distribute.cpp - mla-distribute: blockwise -> threads of a GPU ------===//
//
// Layer 4 for GPU targets. Inside every mla.grid:
//   * each online-softmax key step (Q·Kᵀ, mla.online_softmax, P·V) becomes
//     register-resident code (NVIDIA: mma.sync, or wgmma from swizzled
//     shared memory on sm_90a) where it fits, parallel phases otherwise;
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
#include "mla/Transforms/ExpandSoftmax.h"
#include "mla/Transforms/Passes.h"
#include "mla/Transforms/Utils.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
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
  bool wgmma = false; // warpgroup MMA for the fused attention step
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
    shared->setAttrs(a->getAttrDictionary());
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

/// NVIDIA: vector loads and stores of global memory whose every address is a
/// multiple of 16 bytes are marked so (one 16-byte access instead of one per
/// element). That holds for identity-layout memrefs whose innermost extent
/// is a multiple of 16 bytes, accessed at a last index that is a multiple of
/// the vector width (every chunked access mla-tile emits), with 16-byte
/// aligned base pointers, which the runtime requires of GPU float tensors.
void markGlobalVectorAlignment(GridOp grid) {
  auto aligned16 = [](Value base, VectorType vt, Value lastIndex) {
    auto type = cast<MemRefType>(base.getType());
    int64_t elemBytes = type.getElementTypeBitWidth() / 8;
    int64_t vecBytes = vt.getNumElements() * elemBytes;
    if (isWorkgroup(base) || !type.getLayout().isIdentity() ||
        type.getRank() == 0 || type.isDynamicDim(type.getRank() - 1) ||
        (type.getDimSize(type.getRank() - 1) * elemBytes) % 16 != 0 ||
        vecBytes % 16 != 0)
      return false;
    // The last index: c * k with k a multiple of the vector width (or a
    // constant multiple of it), plus such terms.
    std::function<bool(Value)> multipleOfWidth = [&](Value v) -> bool {
      if (std::optional<int64_t> c = getConstantIntValue(v))
        return *c % vt.getNumElements() == 0;
      Operation *def = v.getDefiningOp();
      if (auto mul = dyn_cast_or_null<arith::MulIOp>(def))
        return multipleOfWidth(mul.getLhs()) || multipleOfWidth(mul.getRhs());
      if (auto add = dyn_cast_or_null<arith::AddIOp>(def))
        return multipleOfWidth(add.getLhs()) && multipleOfWidth(add.getRhs());
      return false;
    };
    return multipleOfWidth(lastIndex);
  };
  grid.walk([&](Operation *op) {
    if (auto load = dyn_cast<vector::LoadOp>(op)) {
      if (!load.getIndices().empty() &&
          aligned16(load.getBase(), load.getVectorType(),
                    load.getIndices().back()))
        load.setAlignment(16);
    } else if (auto store = dyn_cast<vector::StoreOp>(op)) {
      if (!store.getIndices().empty() &&
          aligned16(store.getBase(), store.getVectorType(),
                    store.getIndices().back()))
        store.setAlignment(16);
    }
  });
}

/// scf.parallel -> strided loop over the linearised space + barrier.
void distributeParallel(scf::ParallelOp par, const ThreadInfo &ti,
                        bool waitAsyncCopies, int64_t pending = 0) {
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
    // One group of all this thread's copies; wait until at most `pending`
    // groups are in flight (0: this one has landed) before the barrier.
    Value group = nvgpu::DeviceAsyncCreateGroupOp::create(
        b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), ValueRange{});
    nvgpu::DeviceAsyncWaitOp::create(b, group,
                                     b.getI32IntegerAttr(pending));
  }
  gpu::BarrierOp::create(b);
  par.erase();
}

/// How many cp.async groups each asynchronous prefetch copy of a pipelined
/// key loop (`mla.prefetch = S - 1`, S stages; mla-tile) may leave in
/// flight. Iteration i copies tile i + S - 1 in g groups (the loop's async
/// prefetches, in order) and then reads tile i, whose groups were
/// committed S - 1 iterations earlier: after committing its j-th group,
/// (S - 2)·g + j + 1 newer groups may still be pending. Copies that are not
/// asynchronous complete at once and commit no group.
DenseMap<Operation *, int64_t>
prefetchWaits(ArrayRef<scf::ParallelOp> pars,
              const DenseMap<Operation *, bool> &async) {
  DenseMap<Operation *, SmallVector<scf::ParallelOp>> byLoop;
  for (scf::ParallelOp p : pars)
    if (p->hasAttr("mla.prefetch") && async.lookup(p))
      byLoop[p->getParentOp()].push_back(p);
  DenseMap<Operation *, int64_t> waits;
  for (auto &[loop, copies] : byLoop) {
    const int64_t g = copies.size();
    for (auto [j, p] : llvm::enumerate(copies)) {
      int64_t ahead =
          cast<IntegerAttr>(p->getAttr("mla.prefetch")).getInt(); // S - 1
      waits[p] = (ahead - 1) * g + static_cast<int64_t>(j) + 1;
    }
  }
  return waits;
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

/// Where a lane sits in the mma.sync m16n8k16 fragments and in ldmatrix
/// address patterns: its warp, lane, group (lane / 4: accumulator row),
/// 2·(lane % 4) (accumulator column pair), and the ldmatrix row/column
/// offsets lane % 16, lane % 8, 8·(lane / 16), 8·((lane / 8) % 2).
struct LaneLayout {
  Value warp, lane, group, quadPos, twoTg, lane16, lane8, laneHi8, laneMid8;

  LaneLayout(ImplicitLocOpBuilder &b, const ThreadInfo &ti) {
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
};

/// One mma.sync m16n8k16 (row.col, f32 accumulation) on bf16/f16
/// registers; returns the four accumulators.
SmallVector<Value> mmaM16N8K16(ImplicitLocOpBuilder &b, Type elem,
                               ArrayRef<Value> aRegs, ArrayRef<Value> bRegs,
                               ArrayRef<Value> c) {
  Type f32 = b.getF32Type();
  auto resType = LLVM::LLVMStructType::getLiteral(b.getContext(),
                                                  {f32, f32, f32, f32});
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
        transposeB(op.getTransposeB()), ti(ti), lanes(b, ti),
        warp(lanes.warp), lane(lanes.lane), group(lanes.group),
        twoTg(lanes.twoTg), lane16(lanes.lane16), lane8(lanes.lane8),
        laneHi8(lanes.laneHi8), laneMid8(lanes.laneMid8) {
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
                  : arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row,
                                          cM)
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
      memref::StoreOp::create(ib, acc[1], c,
                              ValueRange{t.row0, t.col1});
    });
    guarded(b, t.ok1, [&](ImplicitLocOpBuilder &ib) {
      memref::StoreOp::create(ib, acc[2], c, ValueRange{t.row1, t.col});
      memref::StoreOp::create(ib, acc[3], c,
                              ValueRange{t.row1, t.col1});
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
                  kb, vector::ExtractOp::create(kb, frag,
                                                ArrayRef<int64_t>{i})));
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
                  kb, vector::ExtractOp::create(kb, bFrag,
                                                ArrayRef<int64_t>{i})));
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
                Value lo = memref::LoadOp::create(kb, bMat,
                                                  ValueRange{kk, nIdx});
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
  if (!loop || !op.getAccumulate() || op->getNextNode() != loop.getBody()->getTerminator())
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
    return mm.tile(ib, arith::AddIOp::create(
                           ib, mm.warp, indexConst(ib, i * mm.warps)));
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
            acc.push_back(mm.scaleRow(
                ib,
                vector::ExtractOp::create(ib, frags,
                                          ArrayRef<int64_t>{i * 4 + j}),
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
      acc.push_back(vector::ExtractOp::create(ab, frags,
                                              ArrayRef<int64_t>{i * 4 + j}));
    mm.storeC(ab, tileOf(ab, i), acc);
  }
  gpu::BarrierOp::create(ab);
  return success();
}

/// The root buffer of a tile view: a memref.alloca at the top of the grid
/// (looking through subviews), or null.
memref::AllocaOp gridTile(Value v) {
  while (auto sub = v.getDefiningOp<memref::SubViewOp>())
    v = sub.getSource();
  auto alloca = v.getDefiningOp<memref::AllocaOp>();
  if (!alloca || !isa<GridOp>(alloca->getParentOp()))
    return nullptr;
  return alloca;
}

/// Whether `op` reads or writes (a view of) `root`.
bool touches(Operation *op, memref::AllocaOp root) {
  bool hit = false;
  op->walk([&](Operation *inner) {
    for (Value v : inner->getOperands())
      if (isa<MemRefType>(v.getType()) && gridTile(v) == root)
        hit = true;
  });
  return hit;
}

/// The scf.parallel before `loop` in its block that fills `root` with
/// zeros (a fillBuffer), when nothing between it and the loop touches
/// `root`; null otherwise.
scf::ParallelOp zeroFillBefore(scf::ForOp loop, memref::AllocaOp root) {
  for (Operation *op = loop->getPrevNode(); op; op = op->getPrevNode()) {
    if (!touches(op, root))
      continue;
    auto par = dyn_cast<scf::ParallelOp>(op);
    if (!par)
      return nullptr;
    int64_t stores = 0;
    bool other = false;
    par.getBody()->walk([&](Operation *inner) {
      if (auto st = dyn_cast<vector::StoreOp>(inner)) {
        if (gridTile(st.getBase()) == root &&
            isZeroVector(st.getValueToStore()))
          ++stores;
        else
          other = true;
      } else if (!isPure(inner) && !isa<scf::ReduceOp, scf::YieldOp>(inner)) {
        other = true;
      }
    });
    return stores == 1 && !other ? par : nullptr;
  }
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Warpgroup MMA (sm_90a): 128-byte-swizzled operand tiles and wgmma
//===----------------------------------------------------------------------===//

/// wgmma reads its shared-memory operands through descriptors, in one of a
/// few canonical layouts. The fused attention step uses the 128-byte
/// swizzle (CUTLASS's `Swizzle<3,4,3>`) for the query, key and value tiles:
/// a tile of R rows and C columns of 16-bit elements (C a multiple of 64)
/// is stored as C/64 column blocks of R rows of 128 bytes, and the 16-byte
/// chunk j of row r sits at chunk j ^ (r % 8) of its row. The same bytes
/// serve a K-major operand (Q or K: rows are M or N, 64 K-columns per
/// block) and an MN-major one (V: rows are K, 64 N-columns per block), and
/// both ldmatrix-free reads and the 16-byte copies into it are free of bank
/// conflicts. Buffers are 1024-byte aligned (the swizzle repeats every 8
/// rows of 128 bytes and the hardware applies it to address bits).
constexpr int64_t kSwizzleAlign = 1024;

/// A view of a grid tile: its root buffer and the static column offset of
/// the view; `rowsAligned` when every row offset on the way is a multiple
/// of 8 (a constant, or a product with such a constant).
struct ViewInfo {
  memref::AllocaOp root;
  int64_t col0 = 0;
  bool rowsAligned = true;
};

ViewInfo analyzeView(Value v) {
  ViewInfo info;
  auto multipleOf8 = [](OpFoldResult r) {
    if (std::optional<int64_t> c = getConstantIntValue(r))
      return *c % 8 == 0;
    auto mul = cast<Value>(r).getDefiningOp<arith::MulIOp>();
    if (!mul)
      return false;
    for (Value operand : mul->getOperands())
      if (std::optional<int64_t> c = getConstantIntValue(operand))
        if (*c % 8 == 0)
          return true;
    return false;
  };
  while (auto sub = v.getDefiningOp<memref::SubViewOp>()) {
    SmallVector<OpFoldResult> offs = sub.getMixedOffsets();
    std::optional<int64_t> c =
        offs.size() == 2 ? getConstantIntValue(offs[1]) : std::nullopt;
    if (!sub.hasUnitStride() || !c)
      return {};
    info.col0 += *c;
    info.rowsAligned &= multipleOf8(offs[0]);
    v = sub.getSource();
  }
  info.root = v.getDefiningOp<memref::AllocaOp>();
  if (info.root && info.root.getType().getRank() != 2)
    info.root = nullptr;
  return info;
}

/// The row offset of a view in its root buffer, built at `b`.
Value viewRow(ImplicitLocOpBuilder &b, Value v) {
  Value row = indexConst(b, 0);
  while (auto sub = v.getDefiningOp<memref::SubViewOp>()) {
    row = arith::AddIOp::create(
        b, row,
        getValueOrCreateConstantIndexOp(b, b.getLoc(),
                                        sub.getMixedOffsets()[0]));
    v = sub.getSource();
  }
  return row;
}

/// Columns of a (padded) tile buffer that the swizzled layout keeps: the
/// largest multiple of 64 (mla-tile pads rows by 16 bytes).
int64_t swizzledCols(memref::AllocaOp root) {
  return root.getType().getDimSize(1) / 64 * 64;
}

/// The memref.subview ops on `root` (transitively, outermost first) and
/// the other ops that use it or one of them.
void collectViews(Value root, SmallVectorImpl<Operation *> &views,
                  SmallVectorImpl<Operation *> &users) {
  for (Operation *user : root.getUsers()) {
    if (auto sub = dyn_cast<memref::SubViewOp>(user)) {
      views.push_back(sub);
      collectViews(sub.getResult(), views, users);
    } else {
      users.push_back(user);
    }
  }
}

/// Whether `root` can move to the swizzled layout: 16-bit elements, rows a
/// multiple of 8, every view within the kept columns, and no users but
/// views, the matmuls in `fused` and 16-byte-multiple vector stores (the
/// copies mla-tile emits, at columns that are multiples of their width).
bool canSwizzle(memref::AllocaOp root, ArrayRef<Operation *> fused) {
  MemRefType t = root.getType();
  int64_t rows = t.getDimSize(0), cols = swizzledCols(root);
  if (t.getElementTypeBitWidth() != 16 || rows % 8 || cols == 0 ||
      rows * 128 / 16 >= (1 << 14))
    return false;
  SmallVector<Operation *> views, users;
  collectViews(root.getResult(), views, users);
  for (Operation *view : views) {
    auto sub = cast<memref::SubViewOp>(view);
    ViewInfo info = analyzeView(sub.getResult());
    if (info.root != root || info.col0 + sub.getType().getDimSize(1) > cols)
      return false;
  }
  return llvm::all_of(users, [&](Operation *user) {
    auto st = dyn_cast<vector::StoreOp>(user);
    return llvm::is_contained(fused, user) ||
           (st && st.getVectorType().getNumElements() % 8 == 0);
  });
}

/// The swizzled column position (block, row, column in the block) of
/// element (r, c) of a swizzled tile.
SmallVector<Value> swizzledIndex(ImplicitLocOpBuilder &b, Value r, Value c) {
  Value c8 = indexConst(b, 8), c64 = indexConst(b, 64);
  Value block = arith::DivUIOp::create(b, c, c64);
  Value inBlock = arith::RemUIOp::create(b, c, c64);
  Value chunk = arith::XOrIOp::create(
      b, arith::DivUIOp::create(b, inBlock, c8),
      arith::RemUIOp::create(b, r, c8));
  Value col = arith::AddIOp::create(b, arith::MulIOp::create(b, chunk, c8),
                                    arith::RemUIOp::create(b, c, c8));
  return {block, r, col};
}

/// After distribution: the copies into each tile marked `mla.swizzle_src`
/// (cp.async or vector stores of its views) write the buffer marked with
/// the same `mla.swizzle_dst` id instead, at swizzled positions; the old
/// buffer goes. Every thread fences its generic-proxy writes of shared
/// memory before each barrier (`fence.proxy.async.shared::cta`), so that
/// wgmma, which reads through the async proxy, sees them.
LogicalResult applySwizzle(GridOp grid) {
  DenseMap<int64_t, Value> dst;
  SmallVector<memref::AllocaOp> srcs;
  for (auto a : grid.getBody().front().getOps<memref::AllocaOp>()) {
    if (auto id = a->getAttrOfType<IntegerAttr>("mla.swizzle_dst"))
      dst[id.getInt()] = a.getResult();
    if (a->hasAttr("mla.swizzle_src"))
      srcs.push_back(a);
  }
  if (srcs.empty())
    return success();
  for (memref::AllocaOp src : srcs) {
    Value to = dst.lookup(
        src->getAttrOfType<IntegerAttr>("mla.swizzle_src").getInt());
    SmallVector<Operation *> users, views;
    collectViews(src.getResult(), views, users);
    for (Operation *user : users) {
      ImplicitLocOpBuilder b(user->getLoc(), user);
      auto position = [&](Value view, ValueRange idx, int64_t extra) {
        ViewInfo info = analyzeView(view);
        Value r = arith::AddIOp::create(b, viewRow(b, view), idx[0]);
        Value c = arith::AddIOp::create(
            b, idx[1], indexConst(b, info.col0 + extra));
        return swizzledIndex(b, r, c);
      };
      if (auto cp = dyn_cast<nvgpu::DeviceAsyncCopyOp>(user)) {
        SmallVector<Value> idx = position(cp.getDst(), cp.getDstIndices(), 0);
        cp.getDstMutable().assign(to);
        cp.getDstIndicesMutable().assign(idx);
        continue;
      }
      if (auto st = dyn_cast<vector::StoreOp>(user)) {
        VectorType vt = st.getVectorType();
        for (int64_t piece = 0; piece < vt.getNumElements() / 8; ++piece) {
          SmallVector<int64_t> mask;
          for (int64_t i = 0; i < 8; ++i)
            mask.push_back(piece * 8 + i);
          Value part = vector::ShuffleOp::create(b, st.getValueToStore(),
                                                 st.getValueToStore(), mask);
          vector::StoreOp::create(
              b, part, to, position(st.getBase(), st.getIndices(), piece * 8));
        }
        st.erase();
        continue;
      }
      return user->emitOpError()
             << "mla-distribute: unexpected access to a tile that the "
                "warpgroup MMA lowering stores swizzled";
    }
    for (Operation *view : llvm::reverse(views))
      view->erase();
    src.erase();
  }
  SmallVector<gpu::BarrierOp> barriers;
  grid.walk([&](gpu::BarrierOp bar) { barriers.push_back(bar); });
  for (gpu::BarrierOp bar : barriers) {
    ImplicitLocOpBuilder b(bar.getLoc(), bar);
    NVVM::FenceProxyOp::create(
        b, NVVM::ProxyKindAttr::get(b.getContext(), NVVM::ProxyKind::async_shared),
        NVVM::SharedSpaceAttr::get(b.getContext(),
                                   NVVM::SharedSpace::shared_cta));
  }
  return success();
}

/// A wgmma shared-memory matrix descriptor for an operand whose first
/// element is at shared byte address `addr` (i64), 128-byte swizzle:
/// start address >> 4 (14 bits), leading byte offset >> 4 at bit 16,
/// stride byte offset >> 4 at bit 32, swizzle mode 1 at bit 62.
Value wgmmaDescriptor(ImplicitLocOpBuilder &b, Value addr, int64_t lbo,
                      int64_t sbo) {
  Type i64 = b.getI64Type();
  auto c = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, i64, v).getResult();
  };
  Value start = arith::AndIOp::create(
      b, arith::ShRUIOp::create(b, addr, c(4)), c(0x3FFF));
  return arith::OrIOp::create(
      b, start, c(((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (1LL << 62)));
}

/// The shared-memory byte address of a buffer, as i64.
Value sharedAddress(ImplicitLocOpBuilder &b, Value mem) {
  Value p = memref::ExtractAlignedPointerAsIndexOp::create(b, mem);
  return arith::IndexCastUIOp::create(b, b.getI64Type(), p);
}

/// An i32 register holding two 16-bit floats (the mma.sync operand form).
Value asI32(ImplicitLocOpBuilder &b, Value reg) {
  if (reg.getType().isInteger(32))
    return reg;
  Value asInt = vector::BitCastOp::create(
      b, VectorType::get({1}, b.getI32Type()), reg);
  return vector::ExtractOp::create(b, asInt, ArrayRef<int64_t>{0});
}

/// Values through an empty side-effecting inline asm that claims to
/// rewrite them: the compiler may not move their computation past the asm
/// (before a wgmma.fence) nor their uses before it (after a
/// wgmma.wait_group) — CUTLASS's warpgroup_fence_operand.
SmallVector<Value> registerFence(ImplicitLocOpBuilder &b,
                                 ArrayRef<Value> vals) {
  if (vals.empty())
    return {};
  std::string constraints;
  SmallVector<Type> types;
  for (auto [i, v] : llvm::enumerate(vals)) {
    types.push_back(v.getType());
    constraints += (i ? ",=" : "=");
    constraints += v.getType().isF32() ? "f" : "r";
  }
  for (size_t i = 0; i < vals.size(); ++i)
    constraints += "," + std::to_string(i);
  Type resType = types.size() == 1
                     ? types[0]
                     : LLVM::LLVMStructType::getLiteral(b.getContext(), types);
  auto asmOp = LLVM::InlineAsmOp::create(
      b, resType, vals, b.getStringAttr(""), b.getStringAttr(constraints),
      b.getUnitAttr(), UnitAttr(), LLVM::TailCallKindAttr(),
      LLVM::AsmDialectAttr(), ArrayAttr());
  if (types.size() == 1)
    return {asmOp.getResult(0)};
  SmallVector<Value> out;
  for (size_t i = 0; i < vals.size(); ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, asmOp.getResult(0), i));
  return out;
}

/// One `wgmma.mma_async.sync.aligned.m64n<N>k16.f32.<t>.<t>` as inline PTX:
/// D (N/2 f32 per thread, the mma.sync m16n8 accumulator layout per warp
/// and 8 columns) += A·B with A from a descriptor (`aDesc`) or from four
/// 32-bit registers (`aRegs`, the mma.sync m16n8k16 A fragment of the
/// warp's 16 rows) and B from a descriptor (`transB`: MN-major). With an
/// empty `acc`, D is not read (scale-d = 0).
SmallVector<Value> wgmma(ImplicitLocOpBuilder &b, Type elem, int64_t n,
                         ArrayRef<Value> acc, Value aDesc,
                         ArrayRef<Value> aRegs, Value bDesc, bool transB) {
  const int64_t nd = n / 2;
  std::string text;
  llvm::raw_string_ostream os(text);
  StringRef t = elem.isF16() ? "f16" : "bf16";
  int64_t next = nd + (acc.empty() ? 0 : nd);
  std::string constraints;
  for (int64_t i = 0; i < nd; ++i)
    constraints += i ? ",=f" : "=f";
  for (int64_t i = 0; i < (int64_t)acc.size(); ++i)
    constraints += "," + std::to_string(i);
  std::string aText;
  if (aDesc) {
    aText = "$" + std::to_string(next++);
    constraints += ",l";
  } else {
    aText = "{";
    for (int64_t i = 0; i < 4; ++i) {
      aText += (i ? ", $" : "$") + std::to_string(next++);
      constraints += ",r";
    }
    aText += "}";
  }
  int64_t bIdx = next++, scaleIdx = next++;
  constraints += ",l,r,~{memory}";
  os << "{\n.reg .pred p;\nsetp.ne.b32 p, $" << scaleIdx << ", 0;\n"
     << "wgmma.mma_async.sync.aligned.m64n" << n << "k16.f32." << t << "."
     << t << " {";
  for (int64_t i = 0; i < nd; ++i)
    os << (i ? ", $" : "$") << i;
  os << "}, " << aText << ", $" << bIdx << ", p, 1, 1"
     << (aDesc ? ", 0" : "") << ", " << (transB ? 1 : 0) << ";\n}";
  SmallVector<Value> operands(acc.begin(), acc.end());
  if (aDesc)
    operands.push_back(aDesc);
  else
    for (Value r : aRegs)
      operands.push_back(asI32(b, r));
  operands.push_back(bDesc);
  operands.push_back(arith::ConstantIntOp::create(b, b.getI32Type(),
                                                  acc.empty() ? 0 : 1));
  Type f32 = b.getF32Type();
  auto resType = LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(nd, f32));
  auto asmOp = LLVM::InlineAsmOp::create(
      b, resType, operands, b.getStringAttr(text),
      b.getStringAttr(constraints), b.getUnitAttr(), UnitAttr(),
      LLVM::TailCallKindAttr(), LLVM::AsmDialectAttr(), ArrayAttr());
  SmallVector<Value> out;
  for (int64_t i = 0; i < nd; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, asmOp.getResult(0), i));
  return out;
}

/// NVIDIA: one key tile of flash attention in registers. mla-tile emits,
/// as the whole body of the key loop after the copies,
///   S = Q·Kᵀ;  online_softmax(S) -> P, m, l, corr;  acc = corr·acc + P·V.
/// Here each warp owns 16 query rows (row block `warp % RB`) and a slice
/// of the value columns (`warp / RB` of `warps / RB`, at most 2): it
/// computes its rows' scores with mma.sync into registers, evaluates the
/// softmax element function on the accumulator fragments, takes row maxima
/// and sums with quad shuffles and keeps its accumulators, maxima and
/// (per-lane partial) sums in registers across the loop. With one warp per
/// row block, or when the key tile does not split into 16-key halves, the
/// warp computes all of the tile's scores and converts the probabilities
/// in registers into the A operand of the P·V product (the m16n8
/// accumulator layout is the m16n8k16 A layout): nothing of S, P or the
/// accumulators goes through shared memory inside the loop. With two warps
/// per row block each computes half of the key columns; their row maxima
/// meet in a small shared buffer and each half of P is stored to the
/// probability tile, from which both read the A operand. After the loop,
/// acc, m and l are written back once for the epilogue.
LogicalResult fuseAttentionStep(OnlineSoftmaxOp sm, const ThreadInfo &ti) {
  // Side-effect-free ops (index arithmetic) may sit between the three; they
  // move in front of the first.
  SmallVector<Operation *> pure;
  auto skipPure = [&](Operation *op, bool forward) {
    while (op && isPure(op) && op->getNumRegions() == 0 &&
           !op->hasTrait<OpTrait::IsTerminator>()) {
      pure.push_back(op);
      op = forward ? op->getNextNode() : op->getPrevNode();
    }
    return op;
  };
  auto qk = dyn_cast_or_null<MatmulOp>(skipPure(sm->getPrevNode(), false));
  auto pv = dyn_cast_or_null<MatmulOp>(skipPure(sm->getNextNode(), true));
  auto loop = dyn_cast<scf::ForOp>(sm->getParentOp());
  if (!qk || !pv || !loop ||
      skipPure(pv->getNextNode(), true) != loop.getBody()->getTerminator())
    return failure();
  if (qk.getC() != sm.getS() || !qk.getTransposeB() || qk.getAccumulate() ||
      pv.getA() != sm.getP() || !pv.getAccumulate() ||
      pv.getCScale() != sm.getCorr())
    return failure();
  Value q = qk.getA(), k = qk.getB(), v = pv.getB(), acc = pv.getC();
  Value mBuf = sm.getM(), lBuf = sm.getL(), sTile = sm.getS(),
        pTile = sm.getP(), corrBuf = sm.getCorr();
  for (Value tileV : {q, k, v, acc, mBuf, lBuf, sTile, pTile, corrBuf})
    if (!gridTile(tileV))
      return failure();
  Type elem = cast<MemRefType>(q.getType()).getElementType();
  if (!(elem.isBF16() || elem.isF16()) ||
      cast<MemRefType>(k.getType()).getElementType() != elem ||
      cast<MemRefType>(v.getType()).getElementType() != elem ||
      sm.getP().getType().getElementType() != elem)
    return failure();
  const int64_t rows = cast<MemRefType>(q.getType()).getDimSize(0);
  const int64_t dim = cast<MemRefType>(q.getType()).getDimSize(1);
  const int64_t tile = cast<MemRefType>(k.getType()).getDimSize(0);
  const int64_t dv = cast<MemRefType>(v.getType()).getDimSize(1);
  const int64_t warps = ti.threads / ti.warpSize;
  if (rows % 16 || tile % 16 || dim % 16 || warps % (rows / 16) != 0)
    return failure();
  const int64_t rowBlocks = rows / 16, colSplit = warps / rowBlocks;
  // Warps that share a row block all compute its scores: measured on the
  // H200 (decode, 16 rows), four-fold redundant Q·Kᵀ (4 warps) is 1.3x
  // slower than the shared-memory phases, two-fold is not.
  if (colSplit > 2 || dv % (16 * colSplit) != 0)
    return failure();
  // Two warps per row block split the key columns of the scores (each
  // computes half, row maxima and probabilities meet in shared memory)
  // when the halves are whole 16-key steps; otherwise both compute all.
  const bool splitScores = colSplit == 2 && tile % 32 == 0;
  const int64_t sBlocks = splitScores ? tile / 16 : tile / 8; // own 16x8
  const int64_t vBlocks = dv / colSplit / 8; // 16x8 accumulator fragments
  if (sBlocks * 4 > 64 || vBlocks * 4 > 128)
    return failure(); // would not fit the register file
  // Nothing else in the loop may touch the state buffers.
  SmallVector<memref::AllocaOp> roots;
  for (Value tileV : {acc, mBuf, lBuf, sTile, pTile, corrBuf})
    roots.push_back(gridTile(tileV));
  bool otherUse = false;
  loop.walk([&](Operation *user) {
    if (user == qk.getOperation() || user == sm.getOperation() ||
        user == pv.getOperation() || isa<memref::SubViewOp>(user))
      return;
    for (Value operand : user->getOperands())
      if (isa<MemRefType>(operand.getType()))
        if (memref::AllocaOp r = gridTile(operand))
          if (llvm::is_contained(roots, r))
            otherUse = true;
  });
  if (otherUse)
    return failure();
  // Warpgroup MMA (sm_90a), both products by wgmma from swizzled Q, K and
  // V tiles. Warpgroups (4 warps) own 64 rows each: with one warp per row
  // block, different rows; with split scores (two warps per row block, the
  // absorbed decode), warpgroup g computes the scores of key half g and
  // value columns half g of all 64 rows.
  ViewInfo qInfo = analyzeView(q), kInfo = analyzeView(k),
           vInfo = analyzeView(v);
  bool useWgmma = ti.wgmma && warps % 4 == 0 && rowBlocks % 4 == 0 &&
                  (colSplit == 1 || splitScores) && dim % 64 == 0 &&
                  (dv / colSplit) % 64 == 0 && tile <= 256;
  for (const ViewInfo &info : {qInfo, kInfo, vInfo})
    useWgmma &= info.root && info.rowsAligned && info.col0 % 64 == 0;
  SmallVector<memref::AllocaOp> swizzleRoots;
  if (useWgmma) {
    for (const ViewInfo &info : {qInfo, kInfo, vInfo})
      if (!llvm::is_contained(swizzleRoots, info.root))
        swizzleRoots.push_back(info.root);
    SmallVector<Operation *> fused = {qk, pv};
    for (memref::AllocaOp root : swizzleRoots)
      useWgmma &= canSwizzle(root, fused);
  }
  DenseMap<Operation *, Value> swizzled;
  if (useWgmma) {
    ImplicitLocOpBuilder top = builderAtGridTop(loop.getLoc(),
                                                loop->getBlock());
    int64_t id = 0;
    top.getBlock()->walk([&](memref::AllocaOp a) {
      if (a->hasAttr("mla.swizzle_dst"))
        ++id;
    });
    for (memref::AllocaOp root : swizzleRoots) {
      MemRefType t = root.getType();
      auto a = memref::AllocaOp::create(
          top, MemRefType::get({swizzledCols(root) / 64, t.getDimSize(0), 64},
                               t.getElementType()));
      a->setAttr(a.getAlignmentAttrName(),
                 top.getI64IntegerAttr(kSwizzleAlign));
      a->setAttr("mla.swizzle_dst", top.getI64IntegerAttr(id));
      root->setAttr("mla.swizzle_src", top.getI64IntegerAttr(id));
      swizzled[root] = a.getResult();
      ++id;
    }
  }

  llvm::sort(pure, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  for (Operation *op : pure)
    op->moveBefore(qk);

  ImplicitLocOpBuilder b(loop.getLoc(), loop);
  LaneLayout lanes(b, ti);
  Value c8 = indexConst(b, 8);
  Value warp = lanes.warp, group = lanes.group, quadPos = lanes.quadPos,
        twoTg = lanes.twoTg, lane16 = lanes.lane16, lane8 = lanes.lane8,
        laneHi8 = lanes.laneHi8, laneMid8 = lanes.laneMid8;
  Value rowBase = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, warp, indexConst(b, rowBlocks)),
      indexConst(b, 16));
  Value colPart = arith::DivUIOp::create(b, warp, indexConst(b, rowBlocks));
  Value colBase = arith::MulIOp::create(b, colPart,
                                        indexConst(b, dv / colSplit));
  // This warp's first key column, and the shared buffers of split scores:
  // per (half, row) maxima; the probability tile (P of both halves, read
  // as the A operand of P·V); after the loop, the second half's row sums.
  Value keyBase =
      splitScores
          ? arith::MulIOp::create(b, colPart, indexConst(b, tile / 2))
                .getResult()
          : indexConst(b, 0);
  Value halfMax;
  if (splitScores) {
    ImplicitLocOpBuilder top = builderAtGridTop(loop.getLoc(),
                                                loop->getBlock());
    halfMax = memref::AllocaOp::create(
        top, MemRefType::get({2, rows}, Float32Type::get(b.getContext())));
  }
  Value row0 = arith::AddIOp::create(b, rowBase, group);
  Value row1 = arith::AddIOp::create(b, row0, c8);
  // The lanes that own m and l of their two rows when writing back.
  Value owner = arith::AndIOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, quadPos,
                            indexConst(b, 0)),
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, colPart,
                            indexConst(b, 0)));
  auto accCol = [&](ImplicitLocOpBuilder &ib, int64_t blk, int64_t odd) {
    return arith::AddIOp::create(
        ib, colBase, arith::AddIOp::create(ib, twoTg,
                                           indexConst(ib, blk * 8 + odd)));
  };
  // State: vBlocks x 4 accumulators, m of rows 0/1, l of rows 0/1 (l is
  // a per-lane partial sum; only the owner lane starts from l[row]). When
  // the accumulator tile was just zero-filled, the registers start at 0
  // and the fill goes: the tile is then only written after the loop (and
  // may share memory with the tiles the loop reads).
  SmallVector<Value> init;
  Value zeroF = f32Const(b, 0.0);
  if (scf::ParallelOp fill = zeroFillBefore(loop, gridTile(acc))) {
    fill.erase();
    init.assign(vBlocks * 4, zeroF);
  } else {
    for (int64_t blk = 0; blk < vBlocks; ++blk)
      for (int64_t i = 0; i < 4; ++i)
        init.push_back(memref::LoadOp::create(
            b, acc, ValueRange{i < 2 ? row0 : row1, accCol(b, blk, i & 1)}));
  }
  Value negInf = f32Const(b, -std::numeric_limits<double>::infinity());
  for (Value r : {row0, row1})
    init.push_back(memref::LoadOp::create(b, mBuf, ValueRange{r}));
  for (Value r : {row0, row1})
    init.push_back(arith::SelectOp::create(
        b, owner, memref::LoadOp::create(b, lBuf, ValueRange{r}), zeroF));
  const int64_t nAcc = vBlocks * 4;

  auto mma = [&](ImplicitLocOpBuilder &ib, ArrayRef<Value> aRegs,
                 ArrayRef<Value> bRegs, ArrayRef<Value> c) {
    return mmaM16N8K16(ib, elem, aRegs, bRegs, c);
  };
  auto ldmatrix4 = [&](ImplicitLocOpBuilder &ib, Value mem, Value r, Value c,
                       bool trans) {
    Value frag = nvgpu::LdMatrixOp::create(
        ib, VectorType::get({4, 2}, elem), mem, ValueRange{r, c},
        ib.getBoolAttr(trans), ib.getI32IntegerAttr(4));
    SmallVector<Value> regs;
    for (int64_t i = 0; i < 4; ++i)
      regs.push_back(mmaOperand(
          ib, vector::ExtractOp::create(ib, frag, ArrayRef<int64_t>{i})));
    return regs;
  };
  auto quadReduce = [&](ImplicitLocOpBuilder &ib, Value x, bool isMax) {
    for (int32_t off : {1, 2}) {
      Value other =
          gpu::ShuffleOp::create(ib, x, off, ti.warpSize,
                                 gpu::ShuffleMode::XOR)
              .getShuffleResult();
      x = isMax ? arith::MaximumFOp::create(ib, x, other).getResult()
                : arith::AddFOp::create(ib, x, other).getResult();
    }
    return x;
  };

  IRRewriter rewriter(loop.getContext());
  FailureOr<LoopLikeOpInterface> newLoop = loop.replaceWithAdditionalYields(
      rewriter, init, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &, Location loc, ArrayRef<BlockArgument> args) {
        ImplicitLocOpBuilder ib(loc, qk);
        // Byte address of element (row 0, column `col`) of a swizzled
        // operand view plus `rowBytes`, and its descriptor.
        auto operandDesc = [&](ViewInfo info, Value rowBytes, int64_t col,
                               int64_t lbo) {
          Value root = swizzled.lookup(info.root);
          int64_t c = info.col0 + col;
          int64_t off = c / 64 * info.root.getType().getDimSize(0) * 128 +
                        c % 64 * 2;
          Value addr = arith::AddIOp::create(
              ib, sharedAddress(ib, root),
              arith::AddIOp::create(
                  ib, rowBytes,
                  arith::ConstantIntOp::create(ib, ib.getI64Type(), off)));
          return wgmmaDescriptor(ib, addr, lbo, 1024);
        };
        auto rowBytes = [&](Value view, Value extraRows) {
          Value r = arith::AddIOp::create(ib, viewRow(ib, view), extraRows);
          return arith::IndexCastUIOp::create(
              ib, ib.getI64Type(),
              arith::MulIOp::create(ib, r, indexConst(ib, 128)));
        };
        // S = Q·Kᵀ for this warp's 16 rows and key columns (all, or its
        // half from keyBase with split scores). With few
        // score fragments (a narrow key tile), consecutive k-steps go to
        // `kSplit` separate accumulator sets, summed at the end, so that
        // enough independent mma.sync chains are in flight. With warpgroup
        // MMA: the warpgroup's 64 rows times the whole key tile, dim / 16
        // wgmma in one group, waited for before the softmax.
        SmallVector<Value> scores;
        if (useWgmma) {
          Value wgIdx = arith::DivUIOp::create(ib, warp, indexConst(ib, 4));
          // The warpgroup's first row: warp w owns rows 16·(w % RB).
          Value wgRows = arith::MulIOp::create(
              ib,
              arith::RemUIOp::create(ib, wgIdx, indexConst(ib, rowBlocks / 4)),
              indexConst(ib, 64));
          Value qRows = rowBytes(q, wgRows);
          Value kRows = rowBytes(k, keyBase);
          // With several warpgroups, warpgroup g issues its scores only
          // after g - 1 has issued its own (named barrier g, 256 threads:
          // g - 1 arrives, g waits): the tensor cores then finish them one
          // warpgroup after the other, and each warpgroup's softmax runs
          // while the next one's product is computed, instead of all
          // products finishing together and all softmaxes leaving the
          // tensor cores idle (FlashAttention-3's ping-pong).
          const int64_t groups = splitScores ? 1 : warps / 4;
          auto namedBarrier = [&](Value cond, Value id, bool arrive) {
            guarded(ib, cond, [&](ImplicitLocOpBuilder &gb) {
              Value i32Id = arith::IndexCastUIOp::create(gb, gb.getI32Type(),
                                                         id);
              Value count = arith::ConstantIntOp::create(gb, gb.getI32Type(),
                                                         256);
              if (arrive)
                NVVM::BarrierArriveOp::create(gb, i32Id, count);
              else
                NVVM::BarrierOp::create(gb, Type(), i32Id, count,
                                        NVVM::BarrierReductionAttr(), Value());
            });
          };
          if (groups > 1)
            namedBarrier(arith::CmpIOp::create(ib, arith::CmpIPredicate::ugt,
                                               wgIdx, indexConst(ib, 0)),
                         wgIdx, /*arrive=*/false);
          SmallVector<Value> s;
          NVVM::WgmmaFenceAlignedOp::create(ib);
          for (int64_t k0 = 0; k0 < dim; k0 += 16)
            s = wgmma(ib, elem, sBlocks * 8, s,
                      operandDesc(qInfo, qRows, k0, 16), {},
                      operandDesc(kInfo, kRows, k0, 16), /*transB=*/false);
          NVVM::WgmmaGroupSyncAlignedOp::create(ib);
          if (groups > 1)
            namedBarrier(arith::CmpIOp::create(ib, arith::CmpIPredicate::ult,
                                               wgIdx,
                                               indexConst(ib, groups - 1)),
                         arith::AddIOp::create(ib, wgIdx, indexConst(ib, 1)),
                         /*arrive=*/true);
          NVVM::WgmmaWaitGroupSyncOp::create(ib, 0);
          scores = registerFence(ib, s);
        }
        const int64_t kSplit = sBlocks < 8 && dim % 32 == 0 ? 2 : 1;
        SmallVector<Value> sInit(sBlocks * 4 * kSplit, f32Const(ib, 0.0));
        if (!useWgmma) {
        auto kLoop = scf::ForOp::create(
            ib, indexConst(ib, 0), indexConst(ib, dim),
            indexConst(ib, 16 * kSplit), sInit,
            [&](OpBuilder &nb, Location l, Value kBase, ValueRange sAcc) {
              ImplicitLocOpBuilder kb(l, nb);
              SmallVector<Value> next(sAcc.begin(), sAcc.end());
              for (int64_t part = 0; part < kSplit; ++part) {
                Value k0 = arith::AddIOp::create(kb, kBase,
                                                 indexConst(kb, 16 * part));
                SmallVector<Value> aRegs = ldmatrix4(
                    kb, q, arith::AddIOp::create(kb, rowBase, lane16),
                    arith::AddIOp::create(kb, k0, laneHi8), false);
                for (int64_t jp = 0; jp < sBlocks / 2; ++jp) {
                  SmallVector<Value> bRegs = ldmatrix4(
                      kb, k,
                      arith::AddIOp::create(
                          kb,
                          arith::AddIOp::create(kb, keyBase,
                                                indexConst(kb, jp * 16)),
                          arith::AddIOp::create(kb, laneHi8, lane8)),
                      arith::AddIOp::create(kb, k0, laneMid8), false);
                  for (int64_t h = 0; h < 2; ++h) {
                    int64_t at = (part * sBlocks + 2 * jp + h) * 4;
                    SmallVector<Value> res =
                        mma(kb, aRegs, {bRegs[2 * h], bRegs[2 * h + 1]},
                            ArrayRef<Value>(next).slice(at, 4));
                    llvm::copy(res, next.begin() + at);
                  }
                }
              }
              scf::YieldOp::create(kb, next);
            });
        scores.assign(kLoop.getResults().take_front(sBlocks * 4).begin(),
                      kLoop.getResults().take_front(sBlocks * 4).end());
        for (int64_t part = 1; part < kSplit; ++part)
          for (int64_t e = 0; e < sBlocks * 4; ++e)
            scores[e] = arith::AddFOp::create(
                ib, scores[e], kLoop.getResult(part * sBlocks * 4 + e));
        }
        // The softmax on the fragments: element e = (block j, i) sits at
        // row row0 (i < 2) or row1, column 8j + 2·(lane % 4) + (i & 1).
        SmallVector<Value> x(sBlocks * 4), vis(sBlocks * 4);
        Value mx[2] = {negInf, negInf};
        for (int64_t j = 0; j < sBlocks; ++j)
          for (int64_t i = 0; i < 4; ++i) {
            int64_t e = j * 4 + i;
            Value col = arith::AddIOp::create(
                ib, arith::AddIOp::create(ib, keyBase, twoTg),
                indexConst(ib, j * 8 + (i & 1)));
            SmallVector<Value> r =
                inlineRegion(ib, sm.getBody(),
                             {i < 2 ? row0 : row1, col, scores[e]});
            x[e] = r[0];
            vis[e] = r[1];
            mx[i / 2] = arith::MaximumFOp::create(
                ib, mx[i / 2],
                arith::SelectOp::create(ib, vis[e], x[e], negInf));
          }
        Value ref[2], corr[2], mNew[2];
        for (int64_t r = 0; r < 2; ++r)
          mx[r] = quadReduce(ib, mx[r], true);
        if (splitScores) {
          // Each half's row maxima to shared memory; the row maximum is the
          // larger of the two halves'.
          Value other = arith::SubIOp::create(ib, indexConst(ib, 1), colPart);
          guarded(ib,
                  arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, quadPos,
                                        indexConst(ib, 0)),
                  [&](ImplicitLocOpBuilder &gb) {
                    for (int64_t r = 0; r < 2; ++r)
                      memref::StoreOp::create(
                          gb, mx[r], halfMax,
                          ValueRange{colPart, r ? row1 : row0});
                  });
          gpu::BarrierOp::create(ib);
          for (int64_t r = 0; r < 2; ++r)
            mx[r] = arith::MaximumFOp::create(
                ib, mx[r],
                memref::LoadOp::create(ib, halfMax,
                                       ValueRange{other, r ? row1 : row0}));
        }
        for (int64_t r = 0; r < 2; ++r) {
          Value mOld = args[nAcc + r];
          mNew[r] = arith::MaximumFOp::create(ib, mOld, mx[r]);
          Value isEmpty = arith::CmpFOp::create(
              ib, arith::CmpFPredicate::OEQ, mNew[r], negInf);
          ref[r] = arith::SelectOp::create(ib, isEmpty, f32Const(ib, 0.0),
                                           mNew[r]);
          corr[r] = math::Exp2Op::create(
              ib, arith::SubFOp::create(ib, mOld, ref[r]));
        }
        SmallVector<Value> p(sBlocks * 4);
        Value sum[2] = {f32Const(ib, 0.0), f32Const(ib, 0.0)};
        for (int64_t e = 0; e < sBlocks * 4; ++e) {
          int64_t r = (e % 4) / 2;
          Value ex = math::Exp2Op::create(
              ib, arith::SubFOp::create(ib, x[e], ref[r]));
          p[e] = arith::SelectOp::create(ib, vis[e], ex, f32Const(ib, 0.0));
          sum[r] = arith::AddFOp::create(ib, sum[r], p[e]);
        }
        SmallVector<Value> state;
        for (int64_t a = 0; a < nAcc; ++a)
          state.push_back(arith::MulFOp::create(ib, args[a],
                                                corr[(a % 4) / 2]));
        // acc += P·V over the key tile in steps of 16 keys.
        auto pack = [&](Value lo, Value hi) {
          return mmaOperand(
              ib, vector::FromElementsOp::create(
                      ib, VectorType::get({2}, elem),
                      ValueRange{castFloat(ib, lo, elem),
                                 castFloat(ib, hi, elem)}));
        };
        if (splitScores) {
          // This half of P to the probability tile; after the barrier each
          // warp reads all of its rows' P as the A operand.
          for (int64_t j = 0; j < sBlocks; ++j)
            for (int64_t h = 0; h < 2; ++h) {
              Value col = arith::AddIOp::create(
                  ib, arith::AddIOp::create(ib, keyBase, twoTg),
                  indexConst(ib, j * 8));
              Value pair = vector::FromElementsOp::create(
                  ib, VectorType::get({2}, elem),
                  ValueRange{castFloat(ib, p[j * 4 + 2 * h], elem),
                             castFloat(ib, p[j * 4 + 2 * h + 1], elem)});
              vector::StoreOp::create(ib, pair, pTile,
                                      ValueRange{h ? row1 : row0, col});
            }
          gpu::BarrierOp::create(ib);
        }
        if (useWgmma) {
          // The probabilities are the A registers (the m16n8 accumulator
          // layout is the A fragment layout); V is an MN-major operand:
          // 64-column blocks R·128 bytes apart, 8-key groups 1024 apart.
          SmallVector<Value> regs(state);
          for (int64_t kk = 0; kk < tile / 16; ++kk) {
            if (splitScores) {
              // Both halves of P from the probability tile.
              for (Value r : ldmatrix4(
                       ib, pTile, arith::AddIOp::create(ib, rowBase, lane16),
                       arith::AddIOp::create(ib, indexConst(ib, kk * 16),
                                             laneHi8),
                       false))
                regs.push_back(asI32(ib, r));
              continue;
            }
            int64_t j0 = 2 * kk * 4, j1 = (2 * kk + 1) * 4;
            for (Value r : {pack(p[j0], p[j0 + 1]), pack(p[j0 + 2], p[j0 + 3]),
                            pack(p[j1], p[j1 + 1]), pack(p[j1 + 2], p[j1 + 3])})
              regs.push_back(asI32(ib, r));
          }
          regs = registerFence(ib, regs);
          state.assign(regs.begin(), regs.begin() + nAcc);
          // This warpgroup's value columns [colBase, colBase + dv / colSplit)
          // in wgmma steps of at most 256 columns.
          const int64_t cols = dv / colSplit;
          const int64_t chunk = std::min<int64_t>(cols, 256);
          ViewInfo vi = vInfo;
          const int64_t vRootRows = vi.root.getType().getDimSize(0);
          const int64_t vLbo = vRootRows * 128;
          Value colBlockBytes = arith::IndexCastUIOp::create(
              ib, ib.getI64Type(),
              arith::MulIOp::create(
                  ib, arith::DivUIOp::create(ib, colBase, indexConst(ib, 64)),
                  indexConst(ib, vRootRows * 128)));
          NVVM::WgmmaFenceAlignedOp::create(ib);
          for (int64_t kk = 0; kk < tile / 16; ++kk) {
            Value vRows = arith::AddIOp::create(
                ib, rowBytes(v, indexConst(ib, kk * 16)), colBlockBytes);
            ArrayRef<Value> aRegs =
                ArrayRef<Value>(regs).slice(nAcc + kk * 4, 4);
            for (int64_t n0 = 0; n0 < cols; n0 += chunk) {
              int64_t n = std::min(chunk, cols - n0);
              // An MN-major descriptor starts at a 64-column block.
              Value root = swizzled.lookup(vi.root);
              int64_t c = vi.col0 + n0;
              Value addr = arith::AddIOp::create(
                  ib, sharedAddress(ib, root),
                  arith::AddIOp::create(
                      ib, vRows,
                      arith::ConstantIntOp::create(
                          ib, ib.getI64Type(),
                          c / 64 * vRootRows * 128)));
              SmallVector<Value> res =
                  wgmma(ib, elem, n,
                        ArrayRef<Value>(state).slice(n0 / 2, n / 2), Value(),
                        aRegs, wgmmaDescriptor(ib, addr, vLbo, 1024),
                        /*transB=*/true);
              llvm::copy(res, state.begin() + n0 / 2);
            }
          }
          NVVM::WgmmaGroupSyncAlignedOp::create(ib);
          NVVM::WgmmaWaitGroupSyncOp::create(ib, 0);
          SmallVector<Value> done = registerFence(ib, state);
          state.assign(done.begin(), done.end());
        }
        for (int64_t kk = 0; kk < (useWgmma ? 0 : tile / 16); ++kk) {
          SmallVector<Value> aRegs;
          if (splitScores) {
            aRegs = ldmatrix4(
                ib, pTile, arith::AddIOp::create(ib, rowBase, lane16),
                arith::AddIOp::create(ib, indexConst(ib, kk * 16), laneHi8),
                false);
          } else {
            int64_t j0 = 2 * kk * 4, j1 = (2 * kk + 1) * 4;
            aRegs = {pack(p[j0], p[j0 + 1]), pack(p[j0 + 2], p[j0 + 3]),
                     pack(p[j1], p[j1 + 1]), pack(p[j1 + 2], p[j1 + 3])};
          }
          for (int64_t dp = 0; dp < vBlocks / 2; ++dp) {
            SmallVector<Value> bRegs = ldmatrix4(
                ib, v,
                arith::AddIOp::create(
                    ib, indexConst(ib, kk * 16),
                    arith::AddIOp::create(ib, laneMid8, lane8)),
                arith::AddIOp::create(
                    ib, colBase,
                    arith::AddIOp::create(ib, indexConst(ib, dp * 16),
                                          laneHi8)),
                true);
            for (int64_t h = 0; h < 2; ++h) {
              int64_t blk = 2 * dp + h;
              SmallVector<Value> res =
                  mma(ib, aRegs, {bRegs[2 * h], bRegs[2 * h + 1]},
                      ArrayRef<Value>(state).slice(blk * 4, 4));
              for (int64_t i = 0; i < 4; ++i)
                state[blk * 4 + i] = res[i];
            }
          }
        }
        for (int64_t r = 0; r < 2; ++r)
          state.push_back(mNew[r]);
        for (int64_t r = 0; r < 2; ++r)
          state.push_back(arith::AddFOp::create(
              ib, arith::MulFOp::create(ib, args[nAcc + 2 + r], corr[r]),
              sum[r]));
        // The next iteration's copies overwrite the key and value tiles.
        gpu::BarrierOp::create(ib);
        return state;
      });
  if (failed(newLoop))
    return failure();
  pv.erase();
  sm.erase();
  qk.erase();
  // After the loop: the state back to shared memory for the epilogue.
  ImplicitLocOpBuilder ab((*newLoop)->getLoc(), (*newLoop)->getContext());
  ab.setInsertionPointAfter(*newLoop);
  ValueRange fin =
      (*newLoop)->getResults().take_back(nAcc + 4);
  for (int64_t blk = 0; blk < vBlocks; ++blk)
    for (int64_t i = 0; i < 4; ++i)
      memref::StoreOp::create(
          ab, fin[blk * 4 + i], acc,
          ValueRange{i < 2 ? row0 : row1, accCol(ab, blk, i & 1)});
  Value lTot[2] = {quadReduce(ab, fin[nAcc + 2], false),
                   quadReduce(ab, fin[nAcc + 3], false)};
  if (splitScores) {
    // The second half's row sums join the first's (through the correction
    // buffer, free after the loop).
    Value second = arith::AndIOp::create(
        ab,
        arith::CmpIOp::create(ab, arith::CmpIPredicate::eq, quadPos,
                              indexConst(ab, 0)),
        arith::CmpIOp::create(ab, arith::CmpIPredicate::eq, colPart,
                              indexConst(ab, 1)));
    guarded(ab, second, [&](ImplicitLocOpBuilder &ib) {
      for (int64_t r = 0; r < 2; ++r)
        memref::StoreOp::create(ib, lTot[r], corrBuf,
                                ValueRange{r ? row1 : row0});
    });
    gpu::BarrierOp::create(ab);
    for (int64_t r = 0; r < 2; ++r)
      lTot[r] = arith::AddFOp::create(
          ab, lTot[r],
          memref::LoadOp::create(ab, corrBuf, ValueRange{r ? row1 : row0}));
  }
  guarded(ab, owner, [&](ImplicitLocOpBuilder &ib) {
    for (int64_t r = 0; r < 2; ++r) {
      memref::StoreOp::create(ib, fin[nAcc + r], mBuf,
                              ValueRange{r ? row1 : row0});
      memref::StoreOp::create(ib, lTot[r], lBuf,
                              ValueRange{r ? row1 : row0});
    }
  });
  gpu::BarrierOp::create(ab);
  return success();
}

/// Buffers of the grid that nothing reads or writes any more (the score
/// and probability tiles of a fused attention step): erased, so that they
/// take no shared memory.
void eraseDeadTiles(GridOp grid) {
  SmallVector<memref::AllocaOp> allocas(
      grid.getBody().front().getOps<memref::AllocaOp>());
  for (memref::AllocaOp a : allocas) {
    SmallVector<Operation *> views, users;
    collectViews(a.getResult(), views, users);
    if (!users.empty())
      continue;
    for (Operation *view : llvm::reverse(views))
      view->erase();
    a.erase();
  }
}

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
                op.getAccumulate()
                    ? mm.loadC(tb, t, /*scale=*/true)
                    : SmallVector<Value>(4, f32Const(tb, 0.0));
            mm.storeC(tb, t, mm.product(tb, t, init));
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
      ti.wgmma = arch->warpgroupMma;
      if (auto cfg = grid->getAttrOfType<ConfigAttr>("config"))
        ti.wgmma &= cfg.getWgmma() != 0;
      ImplicitLocOpBuilder b = ImplicitLocOpBuilder::atBlockBegin(
          grid.getLoc(), &grid.getBody().front());
      ti.tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
      grid->setAttr("mla.block_size", b.getI64IntegerAttr(ti.threads));

      // The online-softmax steps: fused into registers where the target
      // and the tile shapes allow it (NVIDIA), parallel phases otherwise.
      SmallVector<OnlineSoftmaxOp> softmaxes;
      grid.walk([&](OnlineSoftmaxOp sm) { softmaxes.push_back(sm); });
      for (OnlineSoftmaxOp sm : softmaxes)
        if (arch->kind != TargetKind::NVIDIA ||
            failed(fuseAttentionStep(sm, ti)))
          expandOnlineSoftmax(sm);
      eraseDeadTiles(grid);
      allocasToWorkgroup(grid);
      SmallVector<scf::ParallelOp> pars;
      grid.walk([&](scf::ParallelOp p) { pars.push_back(p); });
      DenseMap<Operation *, bool> async;
      for (scf::ParallelOp p : pars)
        async[p] = arch->kind == TargetKind::NVIDIA && asyncCopies(p);
      DenseMap<Operation *, int64_t> pending = prefetchWaits(pars, async);
      for (scf::ParallelOp p : pars)
        distributeParallel(p, ti, async[p], pending.lookup(p));
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
      if (failed(applySwizzle(grid)))
        return WalkResult::interrupt();
      lowerGPUMath(grid, arch->kind);
      if (arch->kind == TargetKind::NVIDIA)
        markGlobalVectorAlignment(grid);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
