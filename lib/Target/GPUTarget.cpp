//===- GPUTarget.cpp - gpu.module -> PTX ----------------------------------===//
#include "mla/Target/GPUTarget.h"
#include "mla/Target/HostTarget.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/ROCDL/ROCDLToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Triple.h"

#include <mutex>

using namespace mlir;

namespace mla {

FailureOr<std::string> compileGPU(ModuleOp module, const ArchInfo &arch,
                                  GPUEmit emit) {
  static std::once_flag initOnce;
  std::call_once(initOnce, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmPrinter();
  });
  gpu::GPUModuleOp gpuModule;
  module.walk([&](gpu::GPUModuleOp m) { gpuModule = m; });
  if (!gpuModule)
    return module.emitError("no gpu.module to compile");

  // Translation works on a builtin module: copy the kernels into one.
  MLIRContext *ctx = module.getContext();
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  registerROCDLDialectTranslation(registry);
  ctx->appendDialectRegistry(registry);
  OwningOpRef<ModuleOp> kernels = ModuleOp::create(gpuModule.getLoc());
  OpBuilder b = OpBuilder::atBlockEnd(kernels->getBody());
  IRMapping map;
  for (Operation &op : gpuModule.getBody()->getOperations())
    b.clone(op, map);

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*kernels, llvmContext, "mla-kernels");
  if (!llvmModule)
    return module.emitError("translation of the GPU kernels to LLVM IR failed");
  // Dynamic shared memory is a zero-sized addrspace(3) array that must stay
  // an external declaration (`.extern .shared ... []`); with internal
  // linkage NVPTX would demote it to a one-byte static variable. On NVIDIA
  // its base is 1024-byte aligned: mla-outline-gpu-kernels places the
  // swizzled operand tiles of warpgroup MMA at 1024-byte offsets from it.
  for (llvm::GlobalVariable &g : llvmModule->globals()) {
    auto *arr = llvm::dyn_cast<llvm::ArrayType>(g.getValueType());
    if (g.getAddressSpace() == 3 && arr && arr->getNumElements() == 0) {
      g.setInitializer(nullptr);
      g.setLinkage(llvm::GlobalValue::ExternalLinkage);
      if (arch.kind == TargetKind::NVIDIA)
        g.setAlignment(llvm::Align(1024));
    }
  }
  for (llvm::Function &f : llvmModule->functions())
    if (f.isDeclaration() && !f.isIntrinsic() && !f.use_empty())
      return module.emitError() << "GPU kernels call '" << f.getName().str()
                                << "', which no code object provides";

  llvm::Triple triple(arch.triple);
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return module.emitError()
           << "no " << arch.triple << " target in this LLVM: " << error;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, arch.cpu, arch.features, llvm::TargetOptions(), std::nullopt,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(tm->createDataLayout());
  if (llvm::Error err =
          makeOptimizingTransformer(3, 0, tm.get())(llvmModule.get())) {
    std::string msg = llvm::toString(std::move(err));
    return module.emitError() << "LLVM optimisation failed: " << msg;
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  if (emit == GPUEmit::LLVMIR) {
    llvmModule->print(os, nullptr);
    return out;
  }
  // PTX is both the assembly and the code object; AMD code objects are the
  // relocatable object linked into an HSA shared object.
  bool object = emit == GPUEmit::CodeObject && arch.kind == TargetKind::AMD;
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream bos(buffer);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, bos, nullptr,
                              object ? llvm::CodeGenFileType::ObjectFile
                                     : llvm::CodeGenFileType::AssemblyFile))
    return module.emitError() << arch.name << " cannot emit this file type";
  pm.run(*llvmModule);
  if (!object)
    return std::string(buffer.begin(), buffer.end());
  FailureOr<std::vector<uint8_t>> linked = linkSharedObject(
      module,
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(buffer.data()),
                              buffer.size()),
      /*noUndefined=*/true);
  if (failed(linked))
    return failure();
  return std::string(linked->begin(), linked->end());
}

} // namespace mla
