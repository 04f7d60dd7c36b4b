//===- Pipelines.h - per-target pass pipelines ------------------*- C++ -*-===//
#ifndef MLA_PIPELINES_PIPELINES_H
#define MLA_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include <string>

namespace mla {

/// Knobs of a pipeline; read once, when the pipeline is built.
struct PipelineOptions {
  /// Target name from the arch table: host, sm_80, sm_90a, gfx90a, gfx942,
  /// gfx950.
  std::string target = "host";
  /// `field=value,...` overrides of the selected #mla.config.
  std::string perfConfig;
  /// Emulation targets only: remove this gpu.barrier (testing the race
  /// checker; -1: none). --mla-emulate-amdgpu="drop-barrier=N".
  int emuDropBarrier = -1;
};

/// Semantic ops -> the tiled program: the config selected for the target
/// (--mla-select-config) and the semantic ops tiled into mla.grid
/// workgroups of blockwise ops (--mla-tile), before paging is expanded and
/// the target's lowering starts. The first passes of both kernel pipelines
/// below; what `mla-compile --emit=tiled` prints.
void buildTilePipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Semantic ops -> blockwise host program with outlined kernel entry points
/// and an `mla.launch_plans` module attribute (still in MLIR dialects).
void buildHostKernelPipeline(mlir::OpPassManager &pm,
                             const PipelineOptions &options);

/// The result of buildHostKernelPipeline -> LLVM dialect.
void buildHostToLLVMPipeline(mlir::OpPassManager &pm);

/// Semantic ops -> gpu.module of distributed kernels (NVIDIA and AMD
/// targets) with the `mla.launch_plans` module attribute.
void buildGPUKernelPipeline(mlir::OpPassManager &pm,
                            const PipelineOptions &options);

/// The result of buildGPUKernelPipeline -> LLVM + NVVM/ROCDL dialects inside
/// the gpu.module, ready for serialization.
void buildGPUToLLVMPipeline(mlir::OpPassManager &pm,
                            const PipelineOptions &options);

/// Registers `mla-host-pipeline` and `mla-gpu-pipeline` for mla-opt.
void registerPipelines();

} // namespace mla

#endif // MLA_PIPELINES_PIPELINES_H
