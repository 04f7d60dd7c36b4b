//===- WorkgroupTiles.h - the tiles of a configured attention op -*- C++ -*-===//
//
// Library-private: the tile model (AttentionLayout.h, WorkgroupTiles) of
// the workgroup of one mla.decode or mla.prefill under a config on a
// target, with the step lowering mla-distribute will choose for it. The one
// place that turns (op, config, arch) into bytes: mla-select-config asks it
// whether a config fits the chip.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_WORKGROUPTILES_H
#define MLA_LIB_TRANSFORMS_WORKGROUPTILES_H

#include "AttentionLayout.h"
#include "GPU/RegisterStep.h"

namespace mla {

/// The key tiles whose page numbers a paged key loop of `stages` keeps on
/// `arch` when one key tile's rows come from `pagesPerTile` pages (0: the
/// page size is known at run time only; WorkgroupTiles::pageSlots;
/// mla-expand-paging).
int64_t keyPageSlots(int64_t stages, int64_t pagesPerTile,
                     const ArchInfo &arch);

/// How many pages one key tile of `tileRows` rows comes from in a pool of
/// type `kvType` (`[pages, page_size, dim]`); 0 where the page size is
/// dynamic.
int64_t pagesPerKeyTile(mlir::MemRefType kvType, int64_t tileRows);

/// The tiles of a one-stage register step on `plan` (`plan.shape`), with a
/// query tile where `queryTile` (the queries not read in place) and the
/// page numbers of `pageSlots` key tiles.
WorkgroupTiles registerStepTiles(const RegisterStepPlan &plan, bool queryTile,
                                 int64_t pageSlots);

/// The tiles of one workgroup of `op` (mla.decode or mla.prefill) under
/// `config` on `arch`. The step's lowering is the one mla-distribute picks:
/// on the host the phases; on NVIDIA the fused step of
/// nvidia::planFusedStep (warpgroup MMA where the chip has it and `config`
/// does not turn it off), on AMD the register step of planRegisterStep
/// (with a mask too: both carry their state through the mask's tile skip);
/// else the phases. Failure for another op.
mlir::FailureOr<WorkgroupTiles>
workgroupTiles(mlir::Operation *op, ConfigAttr config, const ArchInfo &arch);

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_WORKGROUPTILES_H
