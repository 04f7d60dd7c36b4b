//===- DependentLaunch.h - where a dependent kernel waits -------*- C++ -*-===//
//
// Programmatic dependent launch (mla-outline-gpu-kernels on targets with
// ArchInfo::hasDependentLaunch): a dependent kernel waits for the launch
// before it (griddepcontrol.wait) before it touches what that launch may
// write; what it reads of other memory may come first.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_DEPENDENTLAUNCH_H
#define MLA_LIB_TRANSFORMS_DEPENDENTLAUNCH_H

#include "mla/Dialect/MLA/IR/MLA.h"

namespace mla {

/// The first top-level op of `grid`'s body that must follow the wait for
/// `previous`, the grid launched just before it: every op before it is free
/// of memory effects (and of regions) or a load from a memref that
/// `previous` does not write (any memref it passes to an op other than a
/// known read may be written). Null when the whole body may come first.
///
/// Sound only where `previous` is itself a dependent launch that always
/// runs before `grid` (not a plan launch the runtime may skip): `grid`'s
/// workgroups start once every workgroup of `previous` has passed its own
/// wait, so every launch before `previous` has completed, its writes
/// visible; only `previous` may still be writing.
mlir::Operation *dependencyWaitPoint(GridOp grid, GridOp previous);

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_DEPENDENTLAUNCH_H
