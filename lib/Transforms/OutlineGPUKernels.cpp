//===- OutlineGPUKernels.cpp - mla-outline-gpu-kernels ---------------------===//
//
// Turns each function that holds (distributed) mla.grid ops into GPU kernels
// plus a launch plan:
//   * every mla.grid becomes `gpu.func @<f>_k<i>(captures...) kernel` in
//     `gpu.module @mla_kernels`, its coordinates read from gpu.block_id;
//   * the grid's top-level memref.allocas (its tiles) become views into the
//     kernel's dynamic shared memory (16-byte aligned offsets);
//   * the launch plan records each launch's block size (`mla.block_size` set
//     by mla-distribute) and dynamic shared-memory bytes.
//
//===----------------------------------------------------------------------===//
#include "mla/Target/Arch.h"
#include "mla/Transforms/LaunchPlan.h"
#include "mla/Transforms/Passes.h"
#include "mla/Transforms/Utils.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#define DEBUG_TYPE "mla-outline-gpu-kernels"

namespace mla {
#define GEN_PASS_DEF_MLAOUTLINEGPUKERNELS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {

/// Moves the kernel's top-level allocas into dynamic shared memory; returns
/// the bytes used.
FailureOr<int64_t> promoteToShared(gpu::GPUFuncOp kernel, int64_t limit) {
  SmallVector<memref::AllocaOp> allocas;
  for (Operation &op : kernel.getBody().front())
    if (auto a = dyn_cast<memref::AllocaOp>(op))
      allocas.push_back(a);
  if (allocas.empty())
    return 0;
  MLIRContext *ctx = kernel.getContext();
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  ImplicitLocOpBuilder b = ImplicitLocOpBuilder::atBlockBegin(
      kernel.getLoc(), &kernel.getBody().front());
  auto bytesType = MemRefType::get({ShapedType::kDynamic},
                                   IntegerType::get(ctx, 8), nullptr, wg);
  Value smem = gpu::DynamicSharedMemoryOp::create(b, bytesType);
  int64_t offset = 0;
  for (memref::AllocaOp a : allocas) {
    MemRefType t = a.getType();
    if (!t.hasStaticShape())
      return a.emitError() << "a GPU tile must have a static shape";
    int64_t bytes = t.getNumElements() * t.getElementTypeBitWidth() / 8;
    auto shared = MemRefType::get(t.getShape(), t.getElementType(), nullptr,
                                  wg);
    b.setInsertionPoint(a);
    Value view = memref::ViewOp::create(b, shared, smem,
                                        indexConst(b, offset), ValueRange{});
    replaceMemRefUses(a.getResult(), view);
    a.erase();
    offset += (bytes + 15) / 16 * 16;
  }
  if (offset > limit)
    return kernel.emitError()
           << "kernel needs " << offset
           << " bytes of shared memory, more than the target's " << limit
           << "; choose a smaller tile_kv or head_group";
  return offset;
}

LogicalResult outlineFunction(func::FuncOp func, gpu::GPUModuleOp gpuModule,
                              const ArchInfo &arch,
                              SmallVectorImpl<Attribute> &plans) {
  LaunchPlanBuilder plan(func);
  if (failed(plan.addArgsAndWorkspaces()))
    return failure();
  SmallVector<GridOp> grids(func.getOps<GridOp>());
  for (auto [gi, grid] : llvm::enumerate(grids)) {
    auto blockAttr = grid->getAttrOfType<IntegerAttr>("mla.block_size");
    if (!blockAttr)
      return grid.emitError()
             << "grid has no mla.block_size; run mla-distribute first";
    int64_t block = blockAttr.getInt();
    FailureOr<std::string> sizes = plan.gridSizes(grid);
    FailureOr<LaunchPlanBuilder::Captures> caps = plan.captures(grid);
    if (failed(sizes) || failed(caps))
      return failure();
    SmallVector<Type> types;
    for (Value p : caps->params)
      types.push_back(p.getType());
    std::string name = (func.getSymName() + "_k" + Twine(gi)).str();
    OpBuilder mb = OpBuilder::atBlockEnd(gpuModule.getBody());
    auto kernel = gpu::GPUFuncOp::create(
        mb, grid.getLoc(), name, FunctionType::get(func.getContext(), types, {}));
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                    mb.getUnitAttr());
    kernel.setKnownBlockSizeAttr(
        mb.getDenseI32ArrayAttr({int32_t(block), 1, 1}));
    Block &entry = kernel.getBody().front();
    ImplicitLocOpBuilder kb =
        ImplicitLocOpBuilder::atBlockBegin(grid.getLoc(), &entry);
    SmallVector<Value> coords = {
        gpu::BlockIdOp::create(kb, gpu::Dimension::x),
        gpu::BlockIdOp::create(kb, gpu::Dimension::y),
        gpu::BlockIdOp::create(kb, gpu::Dimension::z)};
    LaunchPlanBuilder::cloneBody(grid, *caps, entry.getArguments(), coords, kb);
    gpu::ReturnOp::create(kb);
    FailureOr<int64_t> shared = promoteToShared(kernel, arch.sharedBytes);
    if (failed(shared))
      return failure();
    plan.addLaunch(name, caps->params, *sizes,
                   (" block " + Twine(block) + ",1,1 shared " + Twine(*shared))
                       .str());
  }
  plans.push_back(plan.finish());
  func.erase();
  return success();
}

struct OutlineGPUKernelsPass
    : public mla::impl::MLAOutlineGPUKernelsBase<OutlineGPUKernelsPass> {
  using MLAOutlineGPUKernelsBase::MLAOutlineGPUKernelsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const ArchInfo *arch = lookupArch(target);
    if (!arch || arch->kind == TargetKind::Host) {
      module.emitError() << "mla-outline-gpu-kernels: '" << target
                         << "' is not a GPU target";
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> funcs = functionsWithGrids(module);
    if (funcs.empty())
      return;
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto gpuModule = gpu::GPUModuleOp::create(b, module.getLoc(), "mla_kernels");
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    SmallVector<Attribute> plans;
    for (func::FuncOp f : funcs)
      if (failed(outlineFunction(f, gpuModule, *arch, plans)))
        return signalPassFailure();
    module->setAttr("mla.launch_plans",
                    ArrayAttr::get(module.getContext(), plans));
  }
};
} // namespace
