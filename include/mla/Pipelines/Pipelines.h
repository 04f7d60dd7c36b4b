//===- Pipelines.h - per-target pass pipelines ------------------*- C++ -*-===//
#ifndef MLA_PIPELINES_PIPELINES_H
#define MLA_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include <string>

namespace mla {

/// Knobs of a pipeline; read once, when the pipeline is built.
struct PipelineOptions {
  /// Target name: host (more targets come with their backends).
  std::string target = "host";
  /// `field=value,...` overrides of the selected #mla.config.
  std::string perfConfig;
};

/// Semantic ops -> blockwise host program with outlined kernel entry points
/// and an `mla.launch_plans` module attribute (still in MLIR dialects).
void buildHostKernelPipeline(mlir::OpPassManager &pm,
                             const PipelineOptions &options);

/// The result of buildHostKernelPipeline -> LLVM dialect.
void buildHostToLLVMPipeline(mlir::OpPassManager &pm);

/// Registers `mla-host-pipeline` (both stages) for mla-opt.
void registerPipelines();

} // namespace mla

#endif // MLA_PIPELINES_PIPELINES_H
