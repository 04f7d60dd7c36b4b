//===- Distribute.cpp - mla-distribute: blockwise -> threads of a GPU -----===//
//
// Layer 4 for GPU targets. Inside every mla.grid:
//   * each mla.attention_step becomes register-resident code where one of
//     the target's fused strategies is feasible (NVIDIA: mma.sync, or wgmma
//     from swizzled shared memory on sm_90a; NVIDIA/FusedStep.cpp), and is
//     otherwise decomposed (Q·Kᵀ, mla.online_softmax, P·V) with the online
//     softmax expanded into parallel phases;
//   * each mla.attention_finish is lowered from the output registers where
//     the register step before it kept them (GPU/RegisterStep.cpp), and
//     becomes a parallel loop over the accumulator tile otherwise;
//   * each scf.parallel becomes a loop over its linearised iteration space
//     strided by the workgroup's thread count (`idx = tid; idx < n;
//     idx += threads`), followed by a gpu.barrier (none after an
//     mla.unsynchronized one; on targets without asynchronous copies a
//     phase followed by one touching other tiles gets that mark); on AMD
//     one with at most 16 iterations per thread and a constant trip count
//     is written out instead, each iteration's reads before the
//     iterations' writes, and a key loop's KV copy reads the next tile
//     during the current one, into registers (GPU/ThreadLoops.cpp);
//   * each mla.matmul becomes matrix-instruction code through the emitter
//     of the instruction the arch table gives for its operand type
//     (GPU/MatrixEmitter.h: mma.sync m16n8k16 on NVIDIA, MFMA 16x16x16 on
//     AMD), or a thread-distributed f32 FMA loop otherwise, followed by a
//     gpu.barrier.
// The thread count is the grid config's `warps` times the target's warp size
// and is recorded on the grid as `block_size`.
//
//===----------------------------------------------------------------------===//
#include "../AMD/AMD.h"
#include "../AttentionLayout.h"
#include "../ExpandSoftmax.h"
#include "../NVIDIA/NVIDIA.h"
#include "../Utils.h"
#include "GPUCommon.h"
#include "MatrixEmitter.h"
#include "RegisterStep.h"
#include "ThreadLoops.h"
#include "mla/Target/Arch.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define DEBUG_TYPE "mla-distribute"

namespace mla {
#define GEN_PASS_DEF_MLADISTRIBUTE
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {

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

/// The grid tiles `par` reads and writes; false when it writes memory that
/// is not a grid tile (or does not say what it writes).
bool tileAccesses(scf::ParallelOp par, DenseSet<Operation *> &reads,
                  DenseSet<Operation *> &writes) {
  bool known = true;
  par.walk([&](Operation *op) {
    auto iface = dyn_cast<MemoryEffectOpInterface>(op);
    if (!iface) {
      known &= op->hasTrait<OpTrait::HasRecursiveMemoryEffects>();
      return;
    }
    SmallVector<MemoryEffects::EffectInstance> effects;
    iface.getEffects(effects);
    for (const MemoryEffects::EffectInstance &e : effects) {
      memref::AllocaOp root = e.getValue() ? gridTile(e.getValue()) : nullptr;
      bool write = isa<MemoryEffects::Write>(e.getEffect());
      if (!root) {
        known &= !write;
        continue;
      }
      (write ? writes : reads).insert(root);
    }
  });
  return known;
}

/// Whether nothing `second` does depends on or conflicts with what
/// `first` does: both touch only grid tiles besides global reads, and no
/// tile one writes is read or written by the other.
bool independentPhases(scf::ParallelOp first, scf::ParallelOp second) {
  DenseSet<Operation *> r1, w1, r2, w2;
  if (!tileAccesses(first, r1, w1) || !tileAccesses(second, r2, w2))
    return false;
  auto meets = [](const DenseSet<Operation *> &a,
                  const DenseSet<Operation *> &b) {
    return llvm::any_of(a, [&](Operation *x) { return b.contains(x); });
  };
  return !meets(w1, r2) && !meets(w1, w2) && !meets(r1, w2);
}

/// Marks mla.unsynchronized each phase of `pars` (in program order) whose
/// next op, past memory-free ones, is a phase independent of it that keeps
/// its barrier: that barrier orders both (e.g. prefill's K and V copies).
void elideBarriersBetweenIndependentPhases(ArrayRef<scf::ParallelOp> pars) {
  for (scf::ParallelOp p : llvm::reverse(pars)) {
    if (p->hasAttr(MLADialect::kUnsynchronizedAttrName))
      continue;
    Operation *next = p->getNextNode();
    while (next && !isa<scf::ParallelOp>(next) && isMemoryEffectFree(next))
      next = next->getNextNode();
    auto q = dyn_cast_or_null<scf::ParallelOp>(next);
    if (!q || q->hasAttr(MLADialect::kUnsynchronizedAttrName) ||
        !independentPhases(p, q))
      continue;
    LLVM_DEBUG(llvm::dbgs() << "mla-distribute: no barrier after the phase at "
                            << p.getLoc() << ": the next is independent\n");
    p->setAttr(MLADialect::kUnsynchronizedAttrName,
               UnitAttr::get(p.getContext()));
  }
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

/// The instruction for `mm`: the chip's warp / wave instruction for its
/// operand type where the shapes take it, the scalar FMA otherwise.
const MatrixInstr &matmulInstr(MatmulOp mm, const ArchInfo &arch) {
  Type a = mm.getA().getType().getElementType();
  Type bt = mm.getB().getType().getElementType();
  int64_t n = mm.getC().getType().getDimSize(1);
  int64_t k = mm.getA().getType().getDimSize(1);
  const MatrixInstr *mi = nullptr;
  if (a == bt && (a.isBF16() || a.isF16()))
    mi = arch.matmulInstr(a.isBF16() ? MatrixType::BF16 : MatrixType::F16);
  if (mi && k % mi->k == 0 && n % mi->n == 0)
    return *mi;
  return matrixInstr(MatrixInstrId::ScalarFmaF32);
}

/// exp2 / log2 as the chip's special-function instructions (NVIDIA
/// ex2.approx / lg2.approx, AMD v_exp_f32 / v_log_f32; ~1-2 ulp) and fma as
/// the LLVM intrinsic, so that kernels need no device library (libdevice,
/// ocml).
void lowerGPUMath(GridOp grid, const ArchInfo &arch) {
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
    StringRef name = exp ? arch.exp2Intrinsic() : arch.log2Intrinsic();
    auto call =
        LLVM::CallIntrinsicOp::create(b, op->getLoc(), b.getF32Type(),
                                      b.getStringAttr(name), op->getOperands());
    op->replaceAllUsesWith(call->getResults());
    op->erase();
  }
}

/// The phases of `grid` (its scf.parallel ops) as thread loops of `ti`:
/// global -> shared copies asynchronous where `arch` has them (`ahead`: the
/// copies of pipelined key loops and how many stages ahead they run), the
/// key loops' copies (`copies`) and next-tile page phases read an iteration
/// early where `arch` prefetches through registers, and so the page
/// lookups of pipelined key loops where it prefetches those, asynchronous
/// copy phases spread row by row where `arch` blocks them and the grid's
/// config does not ask for the linear mapping (`ti.blockedCopies`); the phases
/// a fused step handed to its second warpgroup (`handed`) over that
/// warpgroup's threads.
void distributePhases(GridOp grid, const ArchInfo &arch, const ThreadInfo &ti,
                      const DenseMap<Operation *, int64_t> &ahead,
                      const DenseSet<Operation *> &copies,
                      const DenseSet<Operation *> &handed) {
  SmallVector<scf::ParallelOp> pars;
  grid.walk([&](scf::ParallelOp p) { pars.push_back(p); });
  DenseMap<Operation *, bool> async;
  // A pipelined loop's next-tile pages stay synchronous: an
  // unsynchronized copy commits no group of its own, so its pages would
  // land with a tile the loop waits for only later.
  for (scf::ParallelOp p : pars)
    async[p] = arch.hasAsyncCopies() &&
               !(p->hasAttr(MLADialect::kNextTileAttrName) && ahead.count(p)) &&
               nvidia::asyncCopies(p);
  DenseMap<Operation *, int64_t> pending =
      nvidia::prefetchWaits(pars, async, ahead);
  // Without asynchronous copies (whose waits and barriers pipeline
  // them), adjacent independent phases share one barrier.
  if (!arch.hasAsyncCopies())
    elideBarriersBetweenIndependentPhases(pars);
  DenseSet<Operation *> nextTile;
  // The phases staging the next tile's pages (mla.next_tile) read an
  // iteration early too. The copies first: whether one may be rotated
  // depends on those phases, which must still be scf.parallel ops.
  if (arch.prefetchesThroughRegisters())
    for (scf::ParallelOp p : pars)
      if (p->hasAttr(MLADialect::kNextTileAttrName))
        nextTile.insert(p);
  // The page lookups of key loops with their own lookup phase before the
  // copy (its synchronous phases before a pipelined step) read an
  // iteration early where the target prefetches them.
  DenseSet<Operation *> lookups;
  for (scf::ParallelOp p : pars) {
    auto it = ahead.find(p);
    if (it != ahead.end() && !async[p] &&
        arch.prefetchesPageLookups(it->second + 1))
      lookups.insert(p);
  }
  std::stable_partition(pars.begin(), pars.end(),
                        [&](scf::ParallelOp p) { return copies.contains(p); });
  std::stable_partition(
      std::find_if(pars.begin(), pars.end(),
                   [&](scf::ParallelOp p) { return !copies.contains(p); }),
      pars.end(), [&](scf::ParallelOp p) { return nextTile.contains(p); });
  for (scf::ParallelOp p : pars) {
    ThreadLoopOptions options;
    // An unsynchronized copy's group is taken by a later wait.
    options.waitAsyncCopies =
        async[p] && !p->hasAttr(MLADialect::kUnsynchronizedAttrName);
    options.pending = pending.lookup(p);
    options.unroll = arch.unrollsThreadLoops() || lookups.contains(p);
    options.prefetch =
        copies.contains(p) || nextTile.contains(p) || lookups.contains(p);
    options.blockCopies =
        async[p] && arch.blocksCopyThreads() && ti.blockedCopies;
    ThreadInfo pti = ti;
    if (handed.contains(p)) {
      // The second warpgroup's threads, in its branch; the copies join the
      // group that the step's next wait commits.
      ImplicitLocOpBuilder hb(p.getLoc(), p);
      pti.threads = ti.threads / 2;
      pti.tid = arith::SubIOp::create(hb, ti.tid, indexConst(hb, pti.threads));
    }
    distributeParallel(p, pti, options);
  }
}

struct DistributePass : public mla::impl::MLADistributeBase<DistributePass> {
  using MLADistributeBase::MLADistributeBase;

  void runOnOperation() override {
    FailureOr<const ArchInfo *> target =
        moduleTarget(getOperation(), "mla-distribute");
    if (failed(target))
      return signalPassFailure();
    const ArchInfo *arch = *target;
    if (!arch->isGPU()) {
      getOperation().emitError() << "mla-distribute: the module's target '"
                                 << arch->name << "' is not a GPU target";
      return signalPassFailure();
    }
    // The option, read once, in the range a config's warps may take (the
    // block size it gives is a 32-bit launch dimension).
    if (defaultWarps < 1 || defaultWarps > kMaxConfigWarps) {
      getOperation().emitError()
          << "mla-distribute: default-warps must be in [1, " << kMaxConfigWarps
          << "], got " << defaultWarps;
      return signalPassFailure();
    }
    WalkResult result = getOperation().walk([&](GridOp grid) {
      int64_t warps = defaultWarps;
      if (auto cfg = grid.getConfigAttr())
        warps = cfg.getWarps();
      ThreadInfo ti;
      ti.threads = warps * arch->warpSize;
      ti.warpSize = arch->warpSize;
      ti.wgmma = arch->hasWarpgroupMma();
      if (auto cfg = grid.getConfigAttr()) {
        ti.wgmma &= cfg.getWgmma() != 0;
        ti.leadScores = cfg.getLeadScores() != 0;
        ti.handsCopy = cfg.getLeadScores() >= 2;
        ti.lagsValues = cfg.getLeadScores() >= 3;
        ti.splitsHandedCopy = cfg.getLeadScores() == 4;
        ti.blockedCopies = cfg.getBlockedCopies() != 0;
      }
      ImplicitLocOpBuilder b = ImplicitLocOpBuilder::atBlockBegin(
          grid.getLoc(), &grid.getBody().front());
      ti.tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
      grid.setBlockSizeAttr(b.getI64IntegerAttr(ti.threads));

      // The copies of pipelined key loops, which may stay in flight: those
      // before an attention step with stages > 1 in its loop's body.
      DenseMap<Operation *, int64_t> ahead;
      grid.walk([&](AttentionStepOp step) {
        if (step.getStages() > 1 && isa<scf::ForOp>(step->getParentOp()))
          for (Operation *op = step->getPrevNode(); op; op = op->getPrevNode())
            if (isa<scf::ParallelOp>(op))
              ahead[op] = step.getStages() - 1;
      });
      // The copies into a key loop's step tiles whose reads may be issued
      // an iteration early, into registers (GPU/ThreadLoops.cpp).
      DenseSet<Operation *> copies;
      if (arch->prefetchesThroughRegisters())
        grid.walk([&](AttentionStepOp step) {
          if (!isa<scf::ForOp>(step->getParentOp()))
            return;
          memref::AllocaOp k = gridTile(step.getK()), v = gridTile(step.getV());
          for (Operation *op = step->getPrevNode(); op; op = op->getPrevNode())
            if (auto p = dyn_cast<scf::ParallelOp>(op)) {
              DenseSet<Operation *> reads, writes;
              tileAccesses(p, reads, writes);
              if ((k && writes.contains(k)) || (v && writes.contains(v)))
                copies.insert(p);
            }
        });
      // The attention steps: fused into registers where one of the target's
      // strategies is feasible, decomposed into parallel phases otherwise.
      SmallVector<AttentionStepOp> steps;
      SmallVector<scf::ParallelOp> handed;
      grid.walk([&](AttentionStepOp step) { steps.push_back(step); });
      // Only AMD's register step reads queries in place (from global
      // memory into registers); the other lowerings stage them in a tile.
      for (AttentionStepOp step : steps) {
        if (arch->hasRegisterFusedStep()) {
          scf::ParallelOp queries = stageStepQueries(step);
          if (succeeded(nvidia::fuseAttentionStep(step, ti, handed))) {
            // The queries' copy may stay in flight until the step's first
            // key tile has landed: the key copy's wait takes every group
            // of the thread and its barrier orders them, and a fused step
            // waits for all copies before its accumulator tile, which may
            // share the query tile's bytes, is written. Its global
            // latency then overlaps the page lookups and the key copy.
            if (queries && arch->hasAsyncCopies())
              queries->setAttr(MLADialect::kUnsynchronizedAttrName,
                               b.getUnitAttr());
            continue;
          }
        }
        // A step whose values are copied one tile behind its keys reads
        // them only once its P·V is lagged: no other lowering may take it.
        if (step.getOverlap()) {
          step.emitOpError()
              << "has overlap (values copied one tile behind the keys), "
                 "which only NVIDIA's fused warpgroup-MMA step with whole "
                 "scores lowers; target "
              << arch->name
              << " cannot take this step (-debug-only=mla-distribute says "
                 "why)";
          return WalkResult::interrupt();
        }
        if (succeeded(registerAttentionStep(step, ti, arch->matrixInstrs,
                                            arch->sharedBytes)))
          continue;
        stageStepQueries(step);
        expandOnlineSoftmax(decomposeAttentionStep(step));
      }
      SmallVector<OnlineSoftmaxOp> softmaxes;
      grid.walk([&](OnlineSoftmaxOp sm) { softmaxes.push_back(sm); });
      for (OnlineSoftmaxOp sm : softmaxes)
        expandOnlineSoftmax(sm);
      // The finishes that no register step lowered read their accumulator.
      SmallVector<AttentionFinishOp> finishes;
      grid.walk([&](AttentionFinishOp f) { finishes.push_back(f); });
      for (AttentionFinishOp f : finishes)
        expandAttentionFinish(f);
      eraseDeadTiles(grid);
      allocasToWorkgroup(grid);
      distributePhases(grid, *arch, ti, ahead, copies,
                       DenseSet<Operation *>(handed.begin(), handed.end()));
      SmallVector<MatmulOp> mms;
      grid.walk([&](MatmulOp mm) { mms.push_back(mm); });
      for (MatmulOp mm : mms) {
        std::unique_ptr<MatrixEmitter> em =
            createMatrixEmitter(matmulInstr(mm, *arch), ti);
        lowerMatmul(mm, *em);
      }
      if (failed(nvidia::applySwizzle(grid)))
        return WalkResult::interrupt();
      lowerGPUMath(grid, *arch);
      if (arch->marksVectorAlignment())
        nvidia::markGlobalVectorAlignment(grid);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace