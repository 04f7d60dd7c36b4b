//===- OutlineGPUKernels.cpp - mla-outline-gpu-kernels --------------------===//
//
// Turns each function that holds (distributed) mla.grid ops into GPU kernels
// plus a launch plan:
//   * every mla.grid becomes `gpu.func @<f>_k<i>(captures...) kernel` in
//     `gpu.module @mla_kernels`, its coordinates read from gpu.block_id;
//   * the grid's top-level memref.allocas (its tiles) become views into the
//     kernel's dynamic shared memory (16-byte aligned offsets, or the
//     alloca's alignment; tiles whose uses a barrier separates share
//     memory);
//   * the launch plan records each launch's block size (`block_size` set
//     by mla-distribute) and dynamic shared-memory bytes;
//   * on targets with programmatic dependent launch, every kernel but the
//     first waits for the launches before it (griddepcontrol.wait) at its
//     start or, from the third on, after its loads of what the kernel
//     before does not write (DependentLaunch.h).
//
//===----------------------------------------------------------------------===//
#include "DependentLaunch.h"
#include "LaunchPlan.h"
#include "Utils.h"
#include "mla/Target/Arch.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include <functional>
#include <limits>

#define DEBUG_TYPE "mla-outline-gpu-kernels"

namespace mla {
#define GEN_PASS_DEF_MLAOUTLINEGPUKERNELS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {

/// Where each tile of a kernel lives and when it is in use, for packing
/// tiles whose uses never overlap into the same shared memory.
struct TileLiveness {
  /// Pre-order position of every op, and the last position inside it.
  DenseMap<Operation *, int64_t> first, last;
  /// Positions after which every thread has passed a barrier: each
  /// gpu.barrier, and the end of a loop whose body ends in one (every
  /// iteration, the last included, finishes with it).
  SmallVector<int64_t> barriers;

  explicit TileLiveness(gpu::GPUFuncOp kernel) {
    int64_t n = 0;
    std::function<void(Operation *)> number = [&](Operation *op) {
      first[op] = n++;
      for (Region &r : op->getRegions())
        for (Block &b : r)
          for (Operation &inner : b)
            number(&inner);
      last[op] = n - 1;
    };
    for (Operation &op : kernel.getBody().front())
      number(&op);
    kernel.walk([&](gpu::BarrierOp bar) {
      barriers.push_back(first[bar]);
      Operation *op = bar;
      while (op->getNextNode() &&
             op->getNextNode() == op->getBlock()->getTerminator() &&
             isa<LoopLikeOpInterface>(op->getParentOp())) {
        op = op->getParentOp();
        barriers.push_back(last[op]);
      }
    });
  }

  /// Where a tile is in use: [lo, hi] positions; a use inside a loop keeps
  /// it live for the whole outermost such loop. When every use lies in one
  /// loop marked mla.fresh_tiles (whose iterations write each tile before
  /// reading it), `fresh` is that loop and [freshLo, freshHi] the range
  /// within one iteration of it (loops inside it still count whole).
  struct Range {
    int64_t lo, hi;
    Operation *fresh = nullptr;
    int64_t freshLo = 0, freshHi = -1;
  };

  Range range(memref::AllocaOp alloca) {
    Range r{std::numeric_limits<int64_t>::max(), -1};
    r.freshLo = r.lo;
    bool allFresh = true;
    std::function<void(Value)> visit = [&](Value v) {
      for (Operation *user : v.getUsers()) {
        // Views (subview, cast, transpose, ...) alias the tile: their uses
        // count too.
        bool aliases = false;
        for (Value res : user->getResults())
          if (isa<MemRefType>(res.getType())) {
            visit(res);
            aliases = true;
          }
        if (aliases && isa<ViewLikeOpInterface>(user))
          continue;
        Operation *span = user, *inFresh = nullptr, *fresh = nullptr;
        for (Operation *p = user->getParentOp(); p && !isa<gpu::GPUFuncOp>(p);
             p = p->getParentOp()) {
          if (!isa<LoopLikeOpInterface>(p))
            continue;
          if (!fresh && p->hasAttr(MLADialect::kFreshTilesAttrName)) {
            fresh = p;
            inFresh = span;
          }
          span = p;
        }
        r.lo = std::min(r.lo, first[span]);
        r.hi = std::max(r.hi, last[span]);
        if (!fresh || (r.fresh && r.fresh != fresh)) {
          allFresh = false;
          continue;
        }
        r.fresh = fresh;
        r.freshLo = std::min(r.freshLo, first[inFresh]);
        r.freshHi = std::max(r.freshHi, last[inFresh]);
      }
    };
    visit(alloca.getResult());
    if (!allFresh)
      r.fresh = nullptr;
    return r;
  }

  /// Whether a barrier separates a use range ending at `end` from one
  /// starting at `start`.
  bool separated(int64_t end, int64_t start) const {
    return llvm::any_of(barriers,
                        [&](int64_t b) { return end <= b && b < start; });
  }

  /// Whether two tiles may share memory: their uses are separated by a
  /// barrier; for two tiles of the same fresh loop, within each iteration
  /// and from one iteration to the next (a barrier after the later one's
  /// uses or before the earlier one's, inside the loop).
  bool disjoint(const Range &a, const Range &b) const {
    if (a.hi < 0 || b.hi < 0) // an unused tile conflicts with nothing
      return true;
    if (!a.fresh || a.fresh != b.fresh)
      return separated(a.hi, b.lo) || separated(b.hi, a.lo);
    auto wraps = [&](int64_t end, int64_t start) {
      return llvm::any_of(barriers, [&](int64_t bar) {
        return (end <= bar && bar <= last.lookup(a.fresh)) ||
               (first.lookup(a.fresh) <= bar && bar < start);
      });
    };
    return (separated(a.freshHi, b.freshLo) && wraps(b.freshHi, a.freshLo)) ||
           (separated(b.freshHi, a.freshLo) && wraps(a.freshHi, b.freshLo));
  }
};

/// Moves the kernel's top-level allocas into dynamic shared memory; returns
/// the bytes used. Tiles whose uses are separated by a barrier share
/// memory (e.g. the accumulator tile that a fused attention step only
/// writes after its key loop reuses the query and key tiles).
FailureOr<int64_t> promoteToShared(gpu::GPUFuncOp kernel, int64_t limit) {
  SmallVector<memref::AllocaOp> allocas;
  for (Operation &op : kernel.getBody().front())
    if (auto a = dyn_cast<memref::AllocaOp>(op))
      allocas.push_back(a);
  if (allocas.empty())
    return 0;
  MLIRContext *ctx = kernel.getContext();
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  TileLiveness live(kernel);
  struct Placed {
    int64_t offset, bytes;
    TileLiveness::Range live;
    int64_t align;
  };
  SmallVector<Placed> placed(allocas.size());
  SmallVector<size_t> order(allocas.size());
  for (size_t i = 0; i < allocas.size(); ++i) {
    MemRefType t = allocas[i].getType();
    if (!t.hasStaticShape())
      return allocas[i].emitError() << "a GPU tile must have a static shape";
    TileLiveness::Range range = live.range(allocas[i]);
    // 16-byte aligned, or as the alloca asks (the 1024-byte aligned
    // swizzled operand tiles of warpgroup MMA).
    int64_t align =
        std::max<int64_t>(16, allocas[i].getAlignment().value_or(16));
    placed[i] = {
        0, (t.getNumElements() * t.getElementTypeBitWidth() / 8 + 15) / 16 * 16,
        range, align};
    order[i] = i;
  }
  // Largest first; each at the lowest 16-byte offset that overlaps no
  // placed tile it may not share memory with.
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    return placed[a].bytes > placed[b].bytes;
  });
  int64_t total = 0;
  SmallVector<size_t> done;
  for (size_t i : order) {
    Placed &p = placed[i];
    auto conflicts = [&](const Placed &o) {
      return !live.disjoint(p.live, o.live);
    };
    SmallVector<int64_t> candidates = {0};
    for (size_t j : done)
      if (conflicts(placed[j]))
        candidates.push_back(placed[j].offset + placed[j].bytes);
    for (int64_t &off : candidates)
      off = llvm::alignTo(off, p.align);
    llvm::sort(candidates);
    for (int64_t off : candidates) {
      bool fits = llvm::none_of(done, [&](size_t j) {
        const Placed &o = placed[j];
        return conflicts(o) && off < o.offset + o.bytes &&
               o.offset < off + p.bytes;
      });
      if (fits) {
        p.offset = off;
        break;
      }
    }
    done.push_back(i);
    total = std::max(total, p.offset + p.bytes);
  }
  ImplicitLocOpBuilder b = ImplicitLocOpBuilder::atBlockBegin(
      kernel.getLoc(), &kernel.getBody().front());
  auto bytesType = MemRefType::get({ShapedType::kDynamic},
                                   IntegerType::get(ctx, 8), nullptr, wg);
  Value smem = gpu::DynamicSharedMemoryOp::create(b, bytesType);
  for (auto [a, p] : llvm::zip(allocas, placed)) {
    MemRefType t = a.getType();
    auto shared =
        MemRefType::get(t.getShape(), t.getElementType(), nullptr, wg);
    b.setInsertionPoint(a);
    Value view = memref::ViewOp::create(b, shared, smem,
                                        indexConst(b, p.offset), ValueRange{});
    replaceMemRefUses(a.getResult(), view);
    a.erase();
  }
  if (total > limit)
    return kernel.emitError()
           << "kernel needs " << total
           << " bytes of shared memory, more than the target's " << limit
           << "; choose smaller tiles (tile_kv, tile_q, head_group) or fewer "
              "stages";
  return total;
}

/// Room for `occupancy` workgroups of `block` threads on one compute unit
/// (mla.grid `occupancy`): NVIDIA's minimum resident blocks per SM; AMD's
/// minimum waves per SIMD (four SIMDs a CU). An error at the grid where
/// they would not fit: more than 2048 threads (sm_80, sm_90a and the AMD
/// targets alike: 64 warps of 32, 32 waves of 64) or, on NVIDIA, more
/// than 32 workgroups.
LogicalResult setOccupancy(GridOp grid, gpu::GPUFuncOp kernel,
                           const ArchInfo &arch, int64_t block,
                           uint64_t occupancy) {
  constexpr uint64_t kResidentThreads = 2048, kResidentBlocks = 32;
  const uint64_t threads = llvm::alignTo(block, arch.warpSize) * occupancy;
  if (threads > kResidentThreads ||
      (arch.kind == TargetKind::NVIDIA && occupancy > kResidentBlocks))
    return grid.emitError()
           << "grid occupancy " << occupancy << " asks for " << occupancy
           << " workgroups of " << block << " threads on one compute unit of "
           << arch.name << ", which holds at most " << kResidentThreads
           << " threads"
           << (arch.kind == TargetKind::NVIDIA ? " in 32 workgroups" : "");
  Builder b(kernel.getContext());
  if (arch.kind == TargetKind::NVIDIA) {
    kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                    b.getI32IntegerAttr(int32_t(occupancy)));
    return success();
  }
  constexpr int64_t kSimdsPerCU = 4;
  const int64_t waves = threads / arch.warpSize;
  kernel->setAttr(
      ROCDL::ROCDLDialect::WavesPerEuAttrHelper(kernel.getContext()).getName(),
      b.getI32IntegerAttr(int32_t(llvm::divideCeil(waves, kSimdsPerCU))));
  return success();
}

/// Refuses a grid whose constant extent along a dim exceeds what the
/// target launches (ArchInfo::maxWorkgroups; the workgroup's `block`
/// work-items lie along x). Extents computed at launch are the launcher's
/// to check.
LogicalResult checkGridLimits(GridOp grid, const ArchInfo &arch,
                              int64_t block) {
  const char *names[] = {"x", "y", "z"};
  Value sizes[] = {grid.getGridX(), grid.getGridY(), grid.getGridZ()};
  for (unsigned d = 0; d < 3; ++d) {
    std::optional<int64_t> n = getConstantIntValue(sizes[d]);
    int64_t limit = arch.maxWorkgroups(d, d == 0 ? block : 1);
    if (n && *n > limit)
      return grid.emitError()
             << "grid dim " << names[d] << " has " << *n
             << " workgroups, more than the " << limit << " that " << arch.name
             << " launches along " << names[d];
  }
  return success();
}

LogicalResult outlineFunction(func::FuncOp func, gpu::GPUModuleOp gpuModule,
                              const ArchInfo &arch,
                              SmallVectorImpl<Attribute> &plans) {
  LaunchPlanBuilder plan(func);
  if (failed(plan.addArgsAndWorkspaces()))
    return failure();
  SmallVector<GridOp> grids(func.getOps<GridOp>());
  for (auto [gi, grid] : llvm::enumerate(grids)) {
    auto blockAttr = grid.getBlockSizeAttr();
    if (!blockAttr)
      return grid.emitError()
             << "grid has no block_size; run mla-distribute first";
    int64_t block = blockAttr.getInt();
    if (failed(checkGridLimits(grid, arch, block)))
      return failure();
    FailureOr<SmallVector<rt::DimExpr, 3>> sizes = plan.gridSizes(grid);
    FailureOr<LaunchPlanBuilder::Captures> caps = plan.captures(grid);
    if (failed(sizes) || failed(caps))
      return failure();
    SmallVector<Type> types;
    for (Value p : caps->params)
      types.push_back(p.getType());
    std::string name = (func.getSymName() + "_k" + Twine(gi)).str();
    OpBuilder mb = OpBuilder::atBlockEnd(gpuModule.getBody());
    auto kernel =
        gpu::GPUFuncOp::create(mb, grid.getLoc(), name,
                               FunctionType::get(func.getContext(), types, {}));
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), mb.getUnitAttr());
    kernel.setKnownBlockSizeAttr(
        mb.getDenseI32ArrayAttr({int32_t(block), 1, 1}));
    if (std::optional<uint64_t> occupancy = grid.getOccupancy())
      if (failed(setOccupancy(grid, kernel, arch, block, *occupancy)))
        return failure();
    // Programmatic dependent launch: each kernel but the first waits, before
    // any memory access that may depend on the launch before it, for the
    // launches before it, and each but the last lets its dependent start
    // once all its workgroups have passed their wait (the dependent's
    // workgroups then wait in griddepcontrol.wait instead of behind a kernel
    // boundary). From the third kernel on, loads of what the kernel before
    // does not write come first (DependentLaunch.h: the plan launch, which
    // plan reuse skips, is the first).
    const bool dependent = arch.hasDependentLaunch() && gi > 0;
    const bool last = gi + 1 == grids.size();
    bool waitPlaced = false;
    if (dependent && gi >= 2) {
      Operation *at = dependencyWaitPoint(grid, grids[gi - 1]);
      Block &body = grid.getBody().front();
      if (!body.empty() && at != &body.front()) {
        OpBuilder wb(grid.getContext());
        if (at)
          wb.setInsertionPoint(at);
        else
          wb.setInsertionPointToEnd(&body);
        NVVM::GriddepcontrolOp::create(wb, grid.getLoc(),
                                       NVVM::GridDepActionKind::wait);
        if (!last)
          NVVM::GriddepcontrolOp::create(
              wb, grid.getLoc(), NVVM::GridDepActionKind::launch_dependents);
        waitPlaced = true;
      }
    }
    Block &entry = kernel.getBody().front();
    ImplicitLocOpBuilder kb =
        ImplicitLocOpBuilder::atBlockBegin(grid.getLoc(), &entry);
    SmallVector<Value> coords = {gpu::BlockIdOp::create(kb, gpu::Dimension::x),
                                 gpu::BlockIdOp::create(kb, gpu::Dimension::y),
                                 gpu::BlockIdOp::create(kb, gpu::Dimension::z)};
    LaunchPlanBuilder::cloneBody(grid, *caps, entry.getArguments(), coords, kb);
    gpu::ReturnOp::create(kb);
    if (arch.hasDependentLaunch() && !waitPlaced) {
      ImplicitLocOpBuilder pb =
          ImplicitLocOpBuilder::atBlockBegin(grid.getLoc(), &entry);
      if (dependent)
        NVVM::GriddepcontrolOp::create(pb, NVVM::GridDepActionKind::wait);
      if (!last)
        NVVM::GriddepcontrolOp::create(
            pb, NVVM::GridDepActionKind::launch_dependents);
    }
    FailureOr<int64_t> shared = promoteToShared(kernel, arch.sharedBytes);
    if (failed(shared))
      return failure();
    plan.addLaunch(name, caps->params, *sizes, {block, 1, 1}, *shared,
                   dependent);
  }
  FailureOr<LaunchPlanAttr> finished = plan.finish();
  if (failed(finished))
    return failure();
  plans.push_back(*finished);
  func.erase();
  return success();
}

struct OutlineGPUKernelsPass
    : public mla::impl::MLAOutlineGPUKernelsBase<OutlineGPUKernelsPass> {
  using MLAOutlineGPUKernelsBase::MLAOutlineGPUKernelsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<const ArchInfo *> target =
        moduleTarget(module, "mla-outline-gpu-kernels");
    if (failed(target))
      return signalPassFailure();
    const ArchInfo *arch = *target;
    if (!arch->isGPU()) {
      module.emitError() << "mla-outline-gpu-kernels: the module's target '"
                         << arch->name << "' is not a GPU target";
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> funcs = functionsWithGrids(module);
    if (funcs.empty())
      return;
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto gpuModule =
        gpu::GPUModuleOp::create(b, module.getLoc(), "mla_kernels");
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    SmallVector<Attribute> plans;
    for (func::FuncOp f : funcs)
      if (failed(outlineFunction(f, gpuModule, *arch, plans)))
        return signalPassFailure();
    module->setAttr(MLADialect::kLaunchPlansAttrName,
                    ArrayAttr::get(module.getContext(), plans));
  }
};
} // namespace
