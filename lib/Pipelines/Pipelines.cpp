//===- Pipelines.cpp - the whole compiler pipeline, per target ------------===//
//
// The one place where pass order is decided. Each stage names the mla-opt
// flags that run it by hand; `mla-opt --mla-host-pipeline` runs all of them.
//
//===----------------------------------------------------------------------===//
#include "mla/Pipelines/Pipelines.h"
#include "mla/Target/Arch.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace mla {

/// The chip the kernel passes see: the emulated chip for an emulation target,
/// so that gfx942 and gfx942-emu build the same module up to ROCDL.
static std::string kernelChip(const std::string &target) {
  const ArchInfo *arch = compiledArch(lookupArch(target));
  return arch ? arch->name.str() : target;
}

void buildTilePipeline(OpPassManager &pm, const PipelineOptions &options) {
  // Layer 2 -- config: --mla-select-config="target=T perf-config=..." (sets
  // the module's #mla.target, which the later passes read).
  MLASelectConfigOptions cfg;
  cfg.target = kernelChip(options.target);
  cfg.perfConfig = options.perfConfig;
  pm.addPass(createMLASelectConfig(cfg));
  // Layer 3 -- gridwise: --mla-tile. Needs the config from above.
  pm.addPass(createMLATile());
}

void buildHostKernelPipeline(OpPassManager &pm,
                             const PipelineOptions &options) {
  // --mla-select-config="target=host perf-config=..." --mla-tile
  buildTilePipeline(pm, options);
  // Paging made explicit: --mla-expand-paging. After tiling, which is what
  // creates the mla.load_kv_tile ops it expands.
  pm.addPass(createMLAExpandPaging());
  // The online-softmax steps as parallel phases: --mla-expand-softmax
  // (mla-distribute does this itself on GPUs, fusing what it can).
  pm.addPass(createMLAExpandSoftmax());
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

void buildGPUKernelPipeline(OpPassManager &pm,
                            const PipelineOptions &requested) {
  PipelineOptions options = requested;
  options.target = kernelChip(requested.target);
  // Layers 2 and 3, the same as on the host:
  // --mla-select-config="target=sm_90a perf-config=..." --mla-tile
  // --mla-expand-paging
  buildTilePipeline(pm, options);
  pm.addPass(createMLAExpandPaging());
  // Layer 4: --mla-distribute: threads, barriers, mma.sync / MFMA, for the
  // module's mla.target (set above). After paging expansion, whose row
  // copies it spreads over the threads.
  pm.addPass(createMLADistribute());
  // Layer 5/6: --mla-outline-gpu-kernels: gpu.func kernels, tiles in
  // dynamic shared memory, launch plan. Needs the block size that
  // mla-distribute recorded.
  pm.addPass(createMLAOutlineGPUKernels());
  // AMD only: --mla-amdgpu-buffer-ops. After outlining, which makes the
  // global memrefs kernel arguments (wave-uniform buffer bases), and after
  // the launch plan exists (it adds the 32-bit byte limits to it).
  const ArchInfo *arch = lookupArch(options.target);
  if (arch && arch->hasBufferOps())
    pm.addPass(createMLAAMDGPUBufferOps());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildGPUToLLVMPipeline(OpPassManager &pm, const PipelineOptions &options) {
  // NVIDIA, inside gpu.module: --convert-scf-to-cf --expand-strided-metadata
  // --lower-affine --convert-nvgpu-to-nvvm (cp.async)
  // --convert-gpu-to-nvvm (which also lowers the vector ops)
  // --convert-nvvm-to-llvm --reconcile-unrealized-casts --canonicalize.
  //
  // AMD: --convert-scf-to-cf --expand-strided-metadata --lower-affine
  // --convert-amdgpu-to-rocdl="chipset=gfx942" (buffer casts, MFMA; before
  // the GPU conversion, which lowers the memrefs they use)
  // --convert-gpu-to-rocdl="chipset=gfx942 index-bitwidth=64"
  // --reconcile-unrealized-casts --canonicalize.
  const ArchInfo *arch = lookupArch(options.target);
  // The fork point of the emulation targets (gfx942-emu, ...): the module
  // the real chip converts to ROCDL becomes host lanes instead:
  // --mla-emulate-amdgpu[="drop-barrier=N"], the host conversion to LLVM (as
  // --mla-host-pipeline's), --mla-emulate-amdgpu-finalize.
  if (arch && arch->isEmulation()) {
    MLAEmulateAMDGPUOptions emu;
    emu.dropBarrier = options.emuDropBarrier;
    pm.addPass(createMLAEmulateAMDGPU(emu));
    buildHostToLLVMPipeline(pm);
    pm.addPass(createMLAEmulateAMDGPUFinalize());
    return;
  }
  OpPassManager &gm = pm.nest<gpu::GPUModuleOp>();
  gm.addPass(createSCFToControlFlowPass());
  gm.addPass(memref::createExpandStridedMetadataPass());
  gm.addPass(createLowerAffinePass());
  if (arch && arch->kind == TargetKind::AMD) {
    ConvertAMDGPUToROCDLPassOptions amd;
    amd.chipset = options.target;
    gm.addPass(createConvertAMDGPUToROCDLPass(amd));
    ConvertGpuOpsToROCDLOpsOptions rocdl;
    rocdl.chipset = options.target;
    rocdl.indexBitwidth = 64;
    gm.addPass(createConvertGpuOpsToROCDLOps(rocdl));
  } else {
    gm.addPass(createConvertNVGPUToNVVMPass());
    ConvertGpuOpsToNVVMOpsOptions nvvm;
    nvvm.indexBitwidth = 64;
    gm.addPass(createConvertGpuOpsToNVVMOps(nvvm));
    gm.addPass(createConvertNVVMToLLVMPass());
  }
  gm.addPass(createReconcileUnrealizedCastsPass());
  gm.addPass(createCanonicalizerPass());
}

namespace {
struct HostPipelineOptions : public PassPipelineOptions<HostPipelineOptions> {
  Option<std::string> perfConfig{
      *this, "perf-config",
      llvm::cl::desc("field=value,... overrides of the #mla.config"),
      llvm::cl::init("")};
  Option<bool> toLLVM{*this, "to-llvm",
                      llvm::cl::desc("Continue down to the LLVM dialect"),
                      llvm::cl::init(true)};
};
} // namespace

struct GPUPipelineOptions : public PassPipelineOptions<GPUPipelineOptions> {
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("GPU target: sm_80, sm_90a, gfx90a, gfx942, gfx950, "
                     "or an AMD emulation target "
                     "gfx90a-emu, gfx942-emu, gfx950-emu "
                     "(host code for the runtime's emulator)"),
      llvm::cl::init("sm_90a")};
  Option<std::string> perfConfig{
      *this, "perf-config",
      llvm::cl::desc("field=value,... overrides of the #mla.config"),
      llvm::cl::init("")};
  Option<bool> toLLVM{*this, "to-llvm",
                      llvm::cl::desc("Continue down to LLVM + NVVM"),
                      llvm::cl::init(true)};
};

void registerPipelines() {
  PassPipelineRegistration<GPUPipelineOptions>(
      "mla-gpu-pipeline",
      "Compile mla ops for a GPU (what mla-compile --target=sm_90a|gfx942|... "
      "runs before serialization)",
      [](OpPassManager &pm, const GPUPipelineOptions &opts) {
        PipelineOptions options;
        options.target = opts.target;
        options.perfConfig = opts.perfConfig;
        buildGPUKernelPipeline(pm, options);
        if (opts.toLLVM)
          buildGPUToLLVMPipeline(pm, options);
      });
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
