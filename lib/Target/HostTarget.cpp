//===- HostTarget.cpp - LLVM dialect -> x86-64 shared object --------------===//
#include "mla/Target/HostTarget.h"

#include "lld/Common/Driver.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Triple.h"

#include <mutex>

LLD_HAS_DRIVER(elf)

using namespace mlir;

namespace mla {
namespace {
constexpr const char *kTriple = "x86_64-unknown-linux-gnu";
// AVX2, FMA and F16C (hardware f16 <-> f32 conversion, no compiler-rt).
constexpr const char *kCpu = "x86-64-v3";

/// Symbols a host code object may import: libm, resolved by the process that
/// loads it.
bool isAllowedImport(StringRef name) {
  return llvm::is_contained(
      {"exp2f", "log2f", "expf", "logf", "memcpy", "memset", "memmove"}, name);
}

/// Removes a temporary file when it goes out of scope.
struct TempFile {
  llvm::SmallString<128> path;
  ~TempFile() {
    if (!path.empty())
      llvm::sys::fs::remove(path);
  }
};

} // namespace

FailureOr<std::vector<uint8_t>>
linkSharedObject(ModuleOp module, ArrayRef<uint8_t> object, bool noUndefined) {
  TempFile in, out;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("mla-host", "o", fd, in.path) ||
      llvm::sys::fs::createTemporaryFile("mla-host", "so", out.path))
    return module.emitError("cannot create temporary files for linking");
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os.write(reinterpret_cast<const char *>(object.data()), object.size());
  }
  std::string log;
  llvm::raw_string_ostream logOs(log);
  SmallVector<const char *> args = {"ld.lld",          "-shared",
                                    "--build-id=none", "-o",
                                    out.path.c_str(),  in.path.c_str()};
  if (noUndefined)
    args.push_back("--no-undefined");
  lld::Result result;
  {
    // lld keeps global state; one link at a time.
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    result = lld::lldMain(args, logOs, logOs, {{lld::Gnu, &lld::elf::link}});
  }
  if (result.retCode != 0)
    return module.emitError() << "lld failed: " << log;
  auto buffer = llvm::MemoryBuffer::getFile(out.path);
  if (!buffer)
    return module.emitError("cannot read the linked shared object");
  std::vector<uint8_t> bytes((*buffer)->getBufferStart(),
                             (*buffer)->getBufferEnd());
  // Reject imports other than libm's.
  auto obj =
      llvm::object::ObjectFile::createObjectFile((*buffer)->getMemBufferRef());
  if (!obj) {
    llvm::consumeError(obj.takeError());
    return module.emitError("the linked shared object is not a valid ELF");
  }
  for (const llvm::object::SymbolRef &sym : (*obj)->symbols()) {
    auto flags = sym.getFlags();
    auto name = sym.getName();
    if (!flags || !name) {
      if (!flags)
        llvm::consumeError(flags.takeError());
      if (!name)
        llvm::consumeError(name.takeError());
      continue;
    }
    if ((*flags & llvm::object::SymbolRef::SF_Undefined) && !name->empty() &&
        (noUndefined || !isAllowedImport(*name)))
      return module.emitError()
             << "host code object needs undefined symbol '" << *name << "'";
  }
  return bytes;
}

FailureOr<std::vector<uint8_t>> compileHost(ModuleOp module, HostEmit emit) {
  static std::once_flag initOnce;
  std::call_once(initOnce, [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
  });
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  module.getContext()->appendDialectRegistry(registry);

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "mla-host");
  if (!llvmModule)
    return module.emitError("translation to LLVM IR failed");

  llvm::Triple triple(kTriple);
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return module.emitError() << "no x86-64 target in this LLVM: " << error;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, kCpu, "", llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(tm->createDataLayout());
  if (llvm::Error err =
          makeOptimizingTransformer(3, 0, tm.get())(llvmModule.get())) {
    std::string msg = llvm::toString(std::move(err));
    return module.emitError() << "LLVM optimisation failed: " << msg;
  }

  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  if (emit == HostEmit::LLVMIR) {
    llvmModule->print(os, nullptr);
  } else {
    llvm::legacy::PassManager pm;
    auto fileType = emit == HostEmit::Assembly
                        ? llvm::CodeGenFileType::AssemblyFile
                        : llvm::CodeGenFileType::ObjectFile;
    if (tm->addPassesToEmitFile(pm, os, nullptr, fileType))
      return module.emitError("the x86-64 target cannot emit this file type");
    pm.run(*llvmModule);
  }
  std::vector<uint8_t> bytes(buffer.begin(), buffer.end());
  if (emit != HostEmit::SharedObject)
    return bytes;
  return linkSharedObject(module, bytes, /*noUndefined=*/false);
}

} // namespace mla
