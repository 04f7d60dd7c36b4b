//===- Pipelines.cpp - the whole compiler pipeline, per target -------------===//
//
// The one place where pass order is decided. Each stage names the mla-opt
// flags that run it by hand; `mla-opt --mla-host-pipeline` runs all of them.
//
//===----------------------------------------------------------------------===//
#include "mla/Pipelines/Pipelines.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace mla {

void buildHostKernelPipeline(OpPassManager &pm,
                             const PipelineOptions &options) {
  // Layer 2 -- config: --mla-select-config="target=host perf-config=..."
  MLASelectConfigOptions cfg;
  cfg.target = options.target;
  cfg.perfConfig = options.perfConfig;
  pm.addPass(createMLASelectConfig(cfg));
  // Layer 3 -- gridwise: --mla-tile. Needs the config from above.
  pm.addPass(createMLATile());
  // Paging made explicit: --mla-expand-paging. After tiling, which is what
  // creates the mla.load_kv_tile ops it expands.
  pm.addPass(createMLAExpandPaging());
  // Layer 4 -- host leaves the GPU path: --mla-lower-host (mla.matmul ->
  // vector loops).
  pm.addPass(createMLALowerHost());
  // Layer 5/6 -- kernels and launch plan: --mla-outline-host-kernels. Last
  // among the mla passes: it needs grids whose bodies hold no mla ops.
  pm.addPass(createMLAOutlineHostKernels());
  // --canonicalize --cse
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildHostToLLVMPipeline(OpPassManager &pm) {
  // --arith-expand="include-bf16=true": f32 <-> bf16 conversions as integer
  // arithmetic (round to nearest even), so code objects need no compiler-rt.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  // --convert-scf-to-cf: loops to branches before LLVM conversion.
  pm.addPass(createSCFToControlFlowPass());
  // --convert-vector-to-llvm: vector ops must be lowered before memrefs
  // lose their types.
  pm.addPass(createConvertVectorToLLVMPass());
  // --expand-strided-metadata --lower-affine: subview offsets to arithmetic.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // --finalize-memref-to-llvm --convert-math-to-llvm --convert-arith-to-llvm
  // --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts.
  // The casts that the kernel entry points build from descriptor structs
  // fold away in the last step.
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

namespace {
struct HostPipelineOptions
    : public PassPipelineOptions<HostPipelineOptions> {
  Option<std::string> perfConfig{
      *this, "perf-config",
      llvm::cl::desc("field=value,... overrides of the #mla.config"),
      llvm::cl::init("")};
  Option<bool> toLLVM{*this, "to-llvm",
                      llvm::cl::desc("Continue down to the LLVM dialect"),
                      llvm::cl::init(true)};
};
} // namespace

void registerPipelines() {
  PassPipelineRegistration<HostPipelineOptions>(
      "mla-host-pipeline",
      "Compile mla ops for the host CPU (what mla-compile --target=host runs)",
      [](OpPassManager &pm, const HostPipelineOptions &opts) {
        PipelineOptions options;
        options.target = "host";
        options.perfConfig = opts.perfConfig;
        buildHostKernelPipeline(pm, options);
        if (opts.toLLVM)
          buildHostToLLVMPipeline(pm);
      });
}

} // namespace mla
