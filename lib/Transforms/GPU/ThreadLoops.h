//===- ThreadLoops.h - scf.parallel -> the threads of a workgroup -*- C++ -*-===//
//
// Library-private: how mla-distribute spreads one parallel phase over the
// threads of a workgroup (GPU/ThreadLoops.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_GPU_THREADLOOPS_H
#define MLA_LIB_TRANSFORMS_GPU_THREADLOOPS_H

#include "GPUCommon.h"

namespace mla {

/// How distributeParallel lowers one phase.
struct ThreadLoopOptions {
  /// NVIDIA: the phase's cp.async copies form one group, and the thread
  /// waits until at most `pending` groups are in flight before the barrier.
  bool waitAsyncCopies = false;
  int64_t pending = 0;
  /// Write out at most kMaxUnrolledIterations iterations per thread of a
  /// constant trip count instead of looping (ArchInfo::unrollsThreadLoops).
  bool unroll = false;
  /// Issue the reads of the next iteration of the enclosing key loop one
  /// iteration early, into registers carried by the loop, where that is
  /// legal (ArchInfo::prefetchesThroughRegisters: the KV copy of a key
  /// loop and its next tile's pages; ArchInfo::prefetchesPageLookups: a
  /// pipelined key loop's page lookup). Needs `unroll`.
  bool prefetch = false;
  /// A copy phase of constant trip count whose rows may be spread with the
  /// columns fixed per thread (`blockedCopyMapping`): each thread copies
  /// the same columns of every row it visits, its iterations written out
  /// (ArchInfo::blocksCopyThreads; NVIDIA's cp.async copies).
  bool blockCopies = false;
};

/// Whether `op` or an op nested in it may write memory (an op that does not
/// say counts as writing).
bool writesMemory(mlir::Operation *op);

/// scf.parallel -> its iterations spread over the workgroup's threads,
/// followed by a gpu.barrier (none after an mla.unsynchronized phase);
/// `par` is erased. With `prefetch` the enclosing scf.for may be replaced.
void distributeParallel(mlir::scf::ParallelOp par, const ThreadInfo &ti,
                        const ThreadLoopOptions &options);

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_GPU_THREADLOOPS_H
