//===- ThreadLoops.cpp - scf.parallel -> the threads of a workgroup -------===//
//
// Part of mla-distribute (layer 4, GPU targets). A parallel phase becomes a
// loop over its linearised iteration space strided by the workgroup's
// thread count (`idx = tid; idx < n; idx += threads`) and a gpu.barrier
// (none after an mla.unsynchronized phase).
//
// Where the target unrolls thread loops (AMD) and a thread has at most 16
// iterations of a constant trip count, they are written out, the reads of
// every iteration (its ops before the first write) before the writes: a
// copy's loads are then all in flight before the first is waited for.
//
// Where the target also prefetches through registers (AMD: no asynchronous
// copies, and gfx942's 64 KiB of LDS cannot hold two 32-key KV tiles), a
// key loop's KV copy is rotated: the reads of the loop's next iteration are
// issued right after this iteration's copy barrier, into values the loop
// carries, so that they are in flight while the step computes the current
// tile, and the next iteration writes them to LDS. Iteration i of the loop
// then runs: write tile i (read during iteration i - 1), barrier, read tile
// i + 1, compute tile i. That is legal when the reads touch nothing the
// loop writes, except what a phase marked mla.next_tile before the copy
// writes (the next tile's page numbers, which the copy's barrier orders
// before the early reads), or when what they read is only ever read (the
// block table); the first tile's reads before the loop are guarded by the
// loop's bound, and inside the loop the reads past the last tile re-read
// the current one (no branch). The same rotation takes the page lookup of
// a pipelined key loop where the target prefetches those
// (ArchInfo::prefetchesPageLookups: NVIDIA), so that the lookup's barrier
// waits for no block-table load.
//
//===----------------------------------------------------------------------===//
#include "ThreadLoops.h"
#include "../Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Debug.h"

#include <numeric>

#define DEBUG_TYPE "mla-distribute"

using namespace mlir;
using namespace mla;

bool mla::writesMemory(Operation *op) {
  return op
      ->walk([](Operation *o) {
        if (auto iface = dyn_cast<MemoryEffectOpInterface>(o))
          return iface.hasEffect<MemoryEffects::Write>()
                     ? WalkResult::interrupt()
                     : WalkResult::advance();
        return o->hasTrait<OpTrait::HasRecursiveMemoryEffects>()
                   ? WalkResult::advance()
                   : WalkResult::interrupt();
      })
      .wasInterrupted();
}

namespace {

/// The most iterations per thread of a parallel loop with a constant trip
/// count that are written out one after the other (`unroll`).
constexpr int64_t kMaxUnrolledIterations = 16;

/// The iteration space of a phase: per dim its lower bound, step and
/// extent, innermost last.
struct Space {
  SmallVector<Value> lbs, steps, extents;
};

/// The induction variables of `par`'s first `dims` dims from `idx`, their
/// linear iteration (the innermost of them varies fastest), into `map`.
void mapLinear(ImplicitLocOpBuilder &b, scf::ParallelOp par, const Space &space,
               Value idx, int64_t dims, IRMapping &map) {
  Value rest = idx;
  for (int64_t d = dims - 1; d >= 0; --d) {
    Value local =
        d == 0 ? rest : arith::RemUIOp::create(b, rest, space.extents[d]);
    if (d > 0)
      rest = arith::DivUIOp::create(b, rest, space.extents[d]);
    map.map(
        par.getInductionVars()[d],
        arith::AddIOp::create(b, space.lbs[d],
                              arith::MulIOp::create(b, local, space.steps[d])));
  }
}

/// The induction variables of linear iteration `idx` of `space`, into
/// `map` (the innermost dim varies fastest).
void mapIvs(ImplicitLocOpBuilder &b, scf::ParallelOp par, const Space &space,
            Value idx, IRMapping &map) {
  mapLinear(b, par, space, idx, space.extents.size(), map);
}

/// The induction variables of row `row` and column `col` of `space` into
/// `map`: the rows are every dim but the innermost, linearised (the
/// innermost of them varies fastest), the columns the innermost dim.
void mapRowCol(ImplicitLocOpBuilder &b, scf::ParallelOp par, const Space &space,
               Value row, Value col, IRMapping &map) {
  const int64_t last = space.extents.size() - 1;
  mapLinear(b, par, space, row, last, map);
  map.map(
      par.getInductionVars()[last],
      arith::AddIOp::create(b, space.lbs[last],
                            arith::MulIOp::create(b, col, space.steps[last])));
}

/// The space of `par` as constants at `b`, or nullopt when a bound is not
/// constant; `total` gets the trip count.
std::optional<Space> constSpace(ImplicitLocOpBuilder &b, scf::ParallelOp par,
                                int64_t &total) {
  Space s;
  total = 1;
  for (auto [lb, ub, step] :
       llvm::zip(par.getLowerBound(), par.getUpperBound(), par.getStep())) {
    std::optional<int64_t> l = getConstantIntValue(lb),
                           u = getConstantIntValue(ub),
                           st = getConstantIntValue(step);
    if (!l || !u || !st || *st <= 0)
      return std::nullopt;
    int64_t n = std::max<int64_t>(0, llvm::divideCeil(*u - *l, *st));
    total *= n;
    s.lbs.push_back(indexConst(b, *l));
    s.steps.push_back(indexConst(b, *st));
    s.extents.push_back(indexConst(b, n));
  }
  return s;
}

/// The buffers `ops` read, into `roots`; false when one of them does not
/// say what it reads.
bool readRoots(ArrayRef<Operation *> ops, DenseSet<Value> &roots) {
  for (Operation *top : ops) {
    WalkResult r = top->walk([&](Operation *op) {
      auto iface = dyn_cast<MemoryEffectOpInterface>(op);
      if (!iface)
        return op->hasTrait<OpTrait::HasRecursiveMemoryEffects>()
                   ? WalkResult::advance()
                   : WalkResult::interrupt();
      SmallVector<MemoryEffects::EffectInstance> effects;
      iface.getEffects<MemoryEffects::Read>(effects);
      for (const MemoryEffects::EffectInstance &e : effects) {
        if (!e.getValue())
          return WalkResult::interrupt();
        roots.insert(memrefRoot(e.getValue()));
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      return false;
  }
  return true;
}

/// Whether every use of `root`, through its views, only reads it (says it
/// reads it and does nothing else to it or to memory it does not name) or
/// asks its sizes: then no op anywhere writes it, whatever the ops that do
/// not say what they write (inline assembly, NVVM's), which could reach it
/// only through a value derived from it (the block table a page lookup
/// reads). An op that derives anything else from it (its address, say)
/// counts as a writer.
bool onlyEverRead(Value root) {
  SmallVector<Value> work{root};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
        if (view.getViewSource() == v) {
          for (Value r : user->getResults())
            work.push_back(r);
          continue;
        }
      }
      if (isa<memref::DimOp>(user))
        continue;
      auto iface = dyn_cast<MemoryEffectOpInterface>(user);
      if (!iface)
        return false;
      SmallVector<MemoryEffects::EffectInstance> effects;
      iface.getEffects(effects);
      bool reads = false;
      for (const MemoryEffects::EffectInstance &e : effects) {
        bool isRead = isa<MemoryEffects::Read>(e.getEffect());
        if (!isRead && (!e.getValue() || e.getValue() == v))
          return false;
        reads |= isRead && e.getValue() == v;
      }
      if (!reads)
        return false;
    }
  }
  return true;
}

/// Whether nothing in `loop`'s body writes one of `roots`, except phases
/// marked mla.next_tile in front of `par` (which keeps its barrier).
bool onlyNextTileWrites(scf::ForOp loop, scf::ParallelOp par,
                        const DenseSet<Value> &roots, std::string &why) {
  for (Operation &top : loop.getBody()->without_terminator()) {
    bool nextTile = isa<scf::ParallelOp>(top) &&
                    top.hasAttr(MLADialect::kNextTileAttrName) &&
                    top.isBeforeInBlock(par) &&
                    !par->hasAttr(MLADialect::kUnsynchronizedAttrName);
    WalkResult r = top.walk([&](Operation *op) {
      if (isa<gpu::BarrierOp>(op))
        return WalkResult::advance();
      auto iface = dyn_cast<MemoryEffectOpInterface>(op);
      if (!iface) {
        if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
          return WalkResult::advance();
        why = "the loop has an op of unknown effects";
        return WalkResult::interrupt();
      }
      SmallVector<MemoryEffects::EffectInstance> effects;
      iface.getEffects<MemoryEffects::Write>(effects);
      for (const MemoryEffects::EffectInstance &e : effects) {
        if (!e.getValue()) {
          why = "the loop writes memory it does not name";
          return WalkResult::interrupt();
        }
        if (roots.contains(memrefRoot(e.getValue())) && !nextTile) {
          why = "the loop writes a buffer the copy reads";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      return false;
  }
  return true;
}

/// The ops of `loop`'s body outside `par` whose results `ops` use, directly
/// or through each other, in program order; fails when one is not free of
/// memory effects or a loop-carried value is used.
LogicalResult loopSlice(scf::ForOp loop, scf::ParallelOp par,
                        ArrayRef<Operation *> ops,
                        SmallVectorImpl<Operation *> &slice, std::string &why) {
  DenseSet<Operation *> inSlice;
  SmallVector<Value> work;
  for (Operation *top : ops)
    top->walk([&](Operation *op) {
      for (Value v : op->getOperands())
        work.push_back(v);
    });
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (par.getRegion().isAncestor(v.getParentRegion()) ||
        !loop.getRegion().isAncestor(v.getParentRegion()))
      continue;
    if (isa<BlockArgument>(v)) {
      if (v != loop.getInductionVar()) {
        why = "the copy uses a value the loop carries";
        return failure();
      }
      continue;
    }
    Operation *def = loop.getBody()->findAncestorOpInBlock(*v.getDefiningOp());
    if (!inSlice.insert(def).second)
      continue;
    if (!isMemoryEffectFree(def)) {
      why = "the copy's operands are computed with memory accesses";
      return failure();
    }
    def->walk([&](Operation *op) {
      for (Value operand : op->getOperands())
        work.push_back(operand);
    });
  }
  for (Operation &op : *loop.getBody())
    if (inSlice.contains(&op))
      slice.push_back(&op);
  return success();
}

/// A copy of the thread loop written out (the `whole` iterations of each
/// thread) whose reads may be issued one key-loop iteration early.
struct Rotation {
  scf::ForOp loop;
  SmallVector<Operation *> reads, writes, slice;
  /// The reads' results the writes use (the loaded values): carried by
  /// the loop, one set per thread iteration.
  SmallVector<Value> carried;
  /// The reads whose results depend on memory (they are carried; the
  /// other reads are computed again beside the writes).
  DenseSet<Operation *> loaded;
};

/// The rotation of `par` or failure, with the reason under
/// -debug-only=mla-distribute.
FailureOr<Rotation> planRotation(scf::ParallelOp par,
                                 Block::iterator firstWrite) {
  auto fail = [&](StringRef why) -> FailureOr<Rotation> {
    LLVM_DEBUG(llvm::dbgs() << "mla-distribute: no prefetch of the copy at "
                            << par.getLoc() << ": " << why << "\n");
    (void)why;
    return failure();
  };
  Rotation rot;
  rot.loop = dyn_cast<scf::ForOp>(par->getParentOp());
  if (!rot.loop)
    return fail("not in a key loop");
  Block *body = par.getBody();
  for (Operation &op : llvm::make_range(body->begin(), firstWrite))
    rot.reads.push_back(&op);
  for (Operation &op :
       llvm::make_range(firstWrite, body->getTerminator()->getIterator()))
    rot.writes.push_back(&op);
  for (Operation *op : rot.reads) {
    bool dependsOnMemory = !isMemoryEffectFree(op) ||
                           llvm::any_of(op->getOperands(), [&](Value v) {
                             Operation *def = v.getDefiningOp();
                             return def && rot.loaded.contains(def);
                           });
    if (dependsOnMemory)
      rot.loaded.insert(op);
  }
  for (Operation *op : rot.reads)
    for (Value r : op->getResults())
      if (rot.loaded.contains(op) &&
          llvm::any_of(r.getUsers(), [&](Operation *user) {
            Operation *top = body->findAncestorOpInBlock(*user);
            return top && !top->isBeforeInBlock(&*firstWrite);
          })) {
        if (!isa<IntegerType, IndexType, FloatType, VectorType>(r.getType()))
          return fail("a loaded value of a type without a zero");
        rot.carried.push_back(r);
      }
  if (rot.carried.empty())
    return fail("nothing is loaded before the writes");
  std::string why;
  DenseSet<Value> roots;
  if (!readRoots(rot.reads, roots))
    return fail("a read does not say what it reads");
  if ((!llvm::all_of(roots, onlyEverRead) &&
       !onlyNextTileWrites(rot.loop, par, roots, why)) ||
      failed(loopSlice(rot.loop, par, rot.reads, rot.slice, why)))
    return fail(why);
  return rot;
}

/// The most iterations per thread a blocked copy writes out.
constexpr int64_t kMaxBlockedIterations = 64;

/// The blocked thread mapping of a copy phase (ThreadLoopOptions::
/// blockCopies). A row is every dim of the space but the innermost,
/// linearised; its columns are the innermost dim's iterations, each split
/// into its `pieces` 16-byte copies. `threadCols` consecutive threads share
/// a row, thread t copying column t % threadCols + j·threadCols (j < cols /
/// threadCols) of rows t / threadCols + g·rowStep (g < rows / rowStep),
/// rowStep = threads / threadCols. Every thread visits the same columns of
/// every row it copies, so the row's address (page lookup, bounds check)
/// is computed once per row and each column is a constant offset from it
/// (also in a tile whose swizzle repeats every 8 rows, when rowStep is a
/// multiple of 8); and one copy instruction of a warp reads whole 32-byte
/// sectors (consecutive threads, consecutive 16 bytes). Measured on an
/// H100 against the linear mapping (`idx = tid + k·threads`, a division and
/// a lookup per 32 bytes): docs/Performance.md, "Copies".
struct BlockedCopy {
  int64_t rows, cols, threadCols, rowStep;
  int64_t pieces = 1;
};

/// The async copies of `par`'s body when they are `asyncCopyPieces`'s:
/// equal sizes, their innermost indices a common one plus consecutive
/// multiples of that size, their tokens unused; empty otherwise.
SmallVector<nvgpu::DeviceAsyncCopyOp> consecutivePieces(scf::ParallelOp par) {
  SmallVector<nvgpu::DeviceAsyncCopyOp> copies;
  for (Operation &op : par.getBody()->without_terminator())
    if (auto c = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op))
      copies.push_back(c);
  auto offsetOf = [](Value idx, Value &base) -> std::optional<int64_t> {
    auto add = idx.getDefiningOp<arith::AddIOp>();
    if (!add)
      return std::nullopt;
    base = add.getLhs();
    return getConstantIntValue(add.getRhs());
  };
  Value src0, dst0;
  for (auto [k, c] : llvm::enumerate(copies)) {
    if (c.getSrcIndices().empty() || c.getDstIndices().empty())
      return {};
    Value src, dst;
    std::optional<int64_t> so = offsetOf(c.getSrcIndices().back(), src),
                           dO = offsetOf(c.getDstIndices().back(), dst);
    int64_t n = c.getDstElements().getSExtValue();
    if (k == 0) {
      src0 = src;
      dst0 = dst;
    }
    if (!so || !dO || *so != int64_t(k) * n || *dO != *so || src != src0 ||
        dst != dst0 || !c.getAsyncToken().use_empty() ||
        n != copies.front().getDstElements().getSExtValue())
      return {};
  }
  return copies;
}

/// The blocked mapping of `par` over `threads`, or nullopt (the reason
/// under -debug-only=mla-distribute): a space of constant bounds and at
/// least two dims whose rows divide into whole passes of the threads, with
/// at least 128 contiguous bytes copied by the threads of one row (or whole
/// rows), and at most kMaxBlockedIterations per thread. An iteration's
/// copies are split among threads where they are `consecutivePieces` and
/// the threads of a row take whole iterations' worth of them.
std::optional<BlockedCopy> blockedCopyMapping(scf::ParallelOp par,
                                              int64_t threads) {
  auto fail = [&](const char *why) -> std::optional<BlockedCopy> {
    LLVM_DEBUG(llvm::dbgs() << "mla-distribute: linear copy: " << why << "\n");
    return std::nullopt;
  };
  if (par.getNumLoops() < 2)
    return fail("one dim");
  BlockedCopy m{1, 0, 0, 0};
  for (auto [i, lb, ub, step] : llvm::enumerate(
           par.getLowerBound(), par.getUpperBound(), par.getStep())) {
    std::optional<int64_t> l = getConstantIntValue(lb),
                           u = getConstantIntValue(ub),
                           st = getConstantIntValue(step);
    if (!l || !u || !st || *st <= 0 || *u <= *l)
      return fail("bounds not constant");
    std::optional<int64_t> span = llvm::checkedSub(*u, *l);
    const int64_t n =
        span ? static_cast<int64_t>(llvm::divideCeil(*span, *st)) : 0;
    std::optional<int64_t> product =
        span ? llvm::checkedMul(m.rows, n) : std::nullopt;
    if (!product || *product > kMaxBlockedIterations * threads)
      return fail("too many iterations");
    if (i + 1 == par.getNumLoops())
      m.cols = n;
    else
      m.rows = *product;
  }
  int64_t bytes = 0;
  par.getBody()->walk([&](nvgpu::DeviceAsyncCopyOp c) {
    bytes += c.getDstElements().getZExtValue() *
             c.getDst().getType().getElementTypeBitWidth() / 8;
  });
  const int64_t pieces = consecutivePieces(par).size();
  if (pieces > 1 && threads % pieces == 0 &&
      std::gcd(m.cols * pieces, threads) % pieces == 0) {
    m.pieces = pieces;
    m.cols *= pieces;
    bytes /= pieces;
  }
  m.threadCols = std::gcd(m.cols, threads);
  m.rowStep = threads / m.threadCols;
  if (m.rows % m.rowStep != 0)
    return fail("rows not whole passes of the threads");
  if (m.threadCols != m.cols && m.threadCols * bytes < 128)
    return fail("fewer than 128 contiguous bytes a row");
  if (m.rows * m.cols / threads > kMaxBlockedIterations)
    return fail("too many iterations");
  return m;
}

/// Clones [begin, end) for `n` iterations, `mapIteration(k, map)` mapping
/// the induction variables of iteration k: every iteration's ops before
/// `firstWrite`, then every iteration's rest (the iterations of an
/// scf.parallel are independent, and LLVM would not move a later
/// iteration's reads, e.g. of a page number in shared memory, above an
/// earlier one's write).
void writeOut(ImplicitLocOpBuilder &b, Block::iterator begin,
              Block::iterator firstWrite, Block::iterator end, int64_t n,
              llvm::function_ref<void(int64_t, IRMapping &)> mapIteration) {
  SmallVector<IRMapping> maps(n);
  for (int64_t k = 0; k < n; ++k) {
    mapIteration(k, maps[k]);
    for (Operation &op : llvm::make_range(begin, firstWrite))
      b.clone(op, maps[k]);
  }
  for (IRMapping &map : maps)
    for (Operation &op : llvm::make_range(firstWrite, end))
      b.clone(op, map);
}

/// Writes out `par`'s iterations of each thread in the blocked mapping `m`.
void writeOutBlocked(ImplicitLocOpBuilder &b, scf::ParallelOp par,
                     const ThreadInfo &ti, const BlockedCopy &m) {
  int64_t total = 0;
  std::optional<Space> space = constSpace(b, par, total);
  Value tc = indexConst(b, m.threadCols);
  Value r0 = arith::DivUIOp::create(b, ti.tid, tc);
  Value c0 = arith::RemUIOp::create(b, ti.tid, tc);
  const int64_t colSteps = m.cols / m.threadCols;
  if (m.pieces > 1) {
    // One piece an iteration: the first, moved to this thread's piece.
    SmallVector<nvgpu::DeviceAsyncCopyOp> copies = consecutivePieces(par);
    Value piece = arith::MulIOp::create(
        b, arith::RemUIOp::create(b, ti.tid, indexConst(b, m.pieces)),
        indexConst(b, copies.front().getDstElements().getSExtValue()));
    nvgpu::DeviceAsyncCopyOp first = copies.front();
    ImplicitLocOpBuilder pb(first.getLoc(), first);
    auto shift = [&](MutableOperandRange range) {
      Value last = range[range.size() - 1].get();
      range[range.size() - 1].set(arith::AddIOp::create(pb, last, piece));
    };
    shift(first.getSrcIndicesMutable());
    shift(first.getDstIndicesMutable());
    for (nvgpu::DeviceAsyncCopyOp c : llvm::drop_begin(copies))
      c.erase();
    c0 = arith::DivUIOp::create(b, c0, indexConst(b, m.pieces));
  }
  const int64_t colStride = m.threadCols / m.pieces;
  auto ops = par.getBody()->without_terminator();
  writeOut(b, ops.begin(),
           llvm::find_if(ops, [](Operation &op) { return writesMemory(&op); }),
           ops.end(), m.rows / m.rowStep * colSteps,
           [&](int64_t k, IRMapping &map) {
             Value row = arith::AddIOp::create(
                 b, r0, indexConst(b, k / colSteps * m.rowStep));
             Value col = arith::AddIOp::create(
                 b, c0, indexConst(b, k % colSteps * colStride));
             mapRowCol(b, par, *space, row, col, map);
           });
}

/// Where a thread's iterations of a phase are: `whole` of them for every
/// thread, then one more for the threads below `total`.
struct Iterations {
  int64_t whole, perThread, total;
  bool partial(int64_t k) const { return k >= whole; }
};

/// The linear iteration `k` of this thread.
Value iterationIndex(ImplicitLocOpBuilder &b, const ThreadInfo &ti, int64_t k) {
  return arith::AddIOp::create(b, ti.tid, indexConst(b, k * ti.threads));
}

/// The reads of this thread's iterations for the key loop's iteration at
/// `iv`: the carried values, every thread iteration's in turn. Before the
/// loop (no `current`) they are guarded by `iv` < the loop's bound (zeros
/// otherwise); inside it, where `iv` is past the bound, they are the
/// reads of iteration `current` (legal again). A partial last thread
/// iteration reads iteration `total` - 1 on the threads that have none.
/// Neither needs a branch, which would make s_waitcnt at the writes wait
/// for every load the branch may have skipped.
SmallVector<Value> emitEarlyReads(ImplicitLocOpBuilder &b, scf::ParallelOp par,
                                  Rotation &rot, const ThreadInfo &ti,
                                  const Iterations &its, Value iv,
                                  Value current) {
  Value inRange = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, iv,
                                        rot.loop.getUpperBound());
  if (current)
    iv = arith::SelectOp::create(b, inRange, iv, current);
  auto reads = [&](ImplicitLocOpBuilder &tb) {
    IRMapping sliceMap;
    sliceMap.map(rot.loop.getInductionVar(), iv);
    for (Operation *op : rot.slice)
      tb.clone(*op, sliceMap);
    int64_t total = 0;
    std::optional<Space> space = constSpace(tb, par, total);
    SmallVector<Value> results;
    for (int64_t k = 0; k < its.perThread; ++k) {
      Value idx = iterationIndex(tb, ti, k);
      if (its.partial(k))
        idx = arith::MinUIOp::create(tb, idx, indexConst(tb, its.total - 1));
      IRMapping map = sliceMap;
      mapIvs(tb, par, *space, idx, map);
      for (Operation *op : rot.reads)
        tb.clone(*op, map);
      for (Value v : rot.carried)
        results.push_back(map.lookup(v));
    }
    return results;
  };
  if (current)
    return reads(b);
  SmallVector<Type> types;
  for (int64_t k = 0; k < its.perThread; ++k)
    for (Value v : rot.carried)
      types.push_back(v.getType());
  auto ifOp = scf::IfOp::create(b, types, inRange, /*withElseRegion=*/true);
  ImplicitLocOpBuilder tb =
      ImplicitLocOpBuilder::atBlockBegin(b.getLoc(), ifOp.thenBlock());
  scf::YieldOp::create(tb, reads(tb));
  ImplicitLocOpBuilder eb =
      ImplicitLocOpBuilder::atBlockBegin(b.getLoc(), ifOp.elseBlock());
  SmallVector<Value> zeros;
  for (Type t : types)
    zeros.push_back(
        arith::ConstantOp::create(eb, cast<TypedAttr>(eb.getZeroAttr(t))));
  scf::YieldOp::create(eb, zeros);
  return SmallVector<Value>(ifOp.getResults());
}

/// Writes out `par`'s iterations of each thread rotated across its key loop
/// (the file comment); false, with nothing changed, when that is not legal.
bool writeOutRotated(scf::ParallelOp par, const ThreadInfo &ti,
                     const Iterations &its, Block::iterator firstWrite) {
  FailureOr<Rotation> planned = planRotation(par, firstWrite);
  if (failed(planned))
    return false;
  Rotation &rot = *planned;
  // Before the loop: the first iteration's reads.
  ImplicitLocOpBuilder pb(rot.loop.getLoc(), rot.loop);
  SmallVector<Value> first =
      emitEarlyReads(pb, par, rot, ti, its, rot.loop.getLowerBound(), Value());
  // After the phase (and its barrier): the next iteration's reads.
  ImplicitLocOpBuilder nb(par.getLoc(), par->getBlock(),
                          std::next(par->getIterator()));
  Value next =
      arith::AddIOp::create(nb, rot.loop.getInductionVar(), rot.loop.getStep());
  SmallVector<Value> ahead =
      emitEarlyReads(nb, par, rot, ti, its, next, rot.loop.getInductionVar());
  IRRewriter rewriter(par.getContext());
  FailureOr<LoopLikeOpInterface> newLoop = rot.loop.replaceWithAdditionalYields(
      rewriter, first, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &, Location, ArrayRef<BlockArgument>) { return ahead; });
  if (failed(newLoop))
    return false;
  ValueRange carriedIn = cast<scf::ForOp>(newLoop->getOperation())
                             .getRegionIterArgs()
                             .take_back(first.size());
  // At the phase: this iteration's writes of what the previous one read.
  ImplicitLocOpBuilder b(par.getLoc(), par);
  int64_t total = 0;
  std::optional<Space> space = constSpace(b, par, total);
  const int64_t n = rot.carried.size();
  for (int64_t k = 0; k < its.perThread; ++k) {
    auto writes = [&](ImplicitLocOpBuilder &wb) {
      IRMapping map;
      mapIvs(wb, par, *space, iterationIndex(wb, ti, k), map);
      for (Operation *op : rot.reads)
        if (!rot.loaded.contains(op))
          wb.clone(*op, map);
      for (auto [j, v] : llvm::enumerate(rot.carried))
        map.map(v, carriedIn[k * n + j]);
      for (Operation *op : rot.writes)
        wb.clone(*op, map);
    };
    if (!its.partial(k)) {
      writes(b);
      continue;
    }
    auto last =
        scf::IfOp::create(b,
                          arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                                iterationIndex(b, ti, k),
                                                indexConst(b, its.total)),
                          /*withElseRegion=*/false);
    ImplicitLocOpBuilder wb(par.getLoc(), last.thenBlock()->getTerminator());
    writes(wb);
  }
  return true;
}

} // namespace

void mla::distributeParallel(scf::ParallelOp par, const ThreadInfo &ti,
                             const ThreadLoopOptions &options) {
  ImplicitLocOpBuilder b(par.getLoc(), par);
  // Extent of each dim: (ub - lb) / step.
  Space space;
  Value total = indexConst(b, 1);
  for (auto [lb, ub, step] :
       llvm::zip(par.getLowerBound(), par.getUpperBound(), par.getStep())) {
    Value n =
        arith::CeilDivSIOp::create(b, arith::SubIOp::create(b, ub, lb), step);
    space.lbs.push_back(lb);
    space.steps.push_back(step);
    space.extents.push_back(n);
    total = arith::MulIOp::create(b, total, n);
  }
  int64_t constTotal = 0;
  std::optional<Space> fixed;
  if (options.unroll)
    fixed = constSpace(b, par, constTotal);
  auto ops = par.getBody()->without_terminator();
  auto body = [&](ImplicitLocOpBuilder &lb, Value idx) {
    IRMapping map;
    mapIvs(lb, par, space, idx, map);
    for (Operation &op : ops)
      lb.clone(op, map);
  };
  const int64_t perThread =
      fixed ? llvm::divideCeil(constTotal, ti.threads) : 0;
  std::optional<BlockedCopy> blocked;
  if (options.blockCopies)
    blocked = blockedCopyMapping(par, ti.threads);
  if (blocked) {
    writeOutBlocked(b, par, ti, *blocked);
  } else if (fixed && perThread <= kMaxUnrolledIterations) {
    // Every whole iteration's reads first (writeOut).
    Block::iterator firstWrite =
        llvm::find_if(ops, [](Operation &op) { return writesMemory(&op); });
    const int64_t whole = constTotal / ti.threads;
    // The reads a key-loop iteration early, where that is legal.
    if (options.prefetch &&
        writeOutRotated(par, ti, {whole, perThread, constTotal}, firstWrite)) {
      // The rotation moved `par` into a new loop.
      b.setInsertionPoint(par);
    } else {
      writeOut(b, ops.begin(), firstWrite, ops.end(), whole,
               [&](int64_t k, IRMapping &map) {
                 mapIvs(b, par, *fixed, iterationIndex(b, ti, k), map);
               });
      if (whole < perThread) {
        Value idx = iterationIndex(b, ti, whole);
        auto last = scf::IfOp::create(
            b,
            arith::CmpIOp::create(b, arith::CmpIPredicate::ult, idx,
                                  indexConst(b, constTotal)),
            /*withElseRegion=*/false);
        ImplicitLocOpBuilder lb(par.getLoc(),
                                last.thenBlock()->getTerminator());
        body(lb, idx);
      }
    }
  } else {
    forLoop(b, ti.tid, total, indexConst(b, ti.threads), body);
  }
  if (options.waitAsyncCopies) {
    // One group of all this thread's copies; wait until at most `pending`
    // groups are in flight (0: this one has landed) before the barrier.
    Value group = nvgpu::DeviceAsyncCreateGroupOp::create(
        b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), ValueRange{});
    nvgpu::DeviceAsyncWaitOp::create(b, group,
                                     b.getI32IntegerAttr(options.pending));
  }
  // A phase whose writes later barriers order (mla.unsynchronized) needs
  // none of its own.
  if (!par->hasAttr(MLADialect::kUnsynchronizedAttrName))
    gpu::BarrierOp::create(b);
  par.erase();
}
