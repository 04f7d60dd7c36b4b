//===- mla-fuzz-ir.cpp - libFuzzer target: IR text -> the pipelines -------===//
//
// One input is MLIR text. It is parsed (which verifies it) with every dialect
// mla-compile registers; an input that parses is compiled, a copy each, for
// the host, sm_90a and gfx942: the kernel pipeline, then the pipeline down
// to the LLVM dialect (lib/Pipelines), without code generation (LLVM's
// backends, lld and ptxas are not ours).
//
// Diagnostics are the expected answer to a bad input and are dropped
// (MLA_FUZZ_VERBOSE=1 prints them). The bugs are what the sanitizers and
// assertions catch, and one more: the pass manager's verifier is off and
// every pass that succeeds is followed by a verification of what it ran on;
// a pass that succeeds with invalid IR aborts, naming the pass.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLA.h"
#include "mla/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>

using namespace mlir;

namespace {

/// Larger inputs are refused: the seeds (test/ functions) are at most a few
/// KB, and big inputs only slow the search down.
constexpr size_t kMaxInputBytes = 16 * 1024;

const DialectRegistry &registry() {
  static const DialectRegistry *r = [] {
    auto *reg = new DialectRegistry;
    registerAllDialects(*reg);
    registerAllExtensions(*reg);
    reg->insert<mla::MLADialect>();
    return reg;
  }();
  return *r;
}

bool verbose() {
  static const bool v = [] {
    const char *env = std::getenv("MLA_FUZZ_VERBOSE");
    return env && *env && *env != '0';
  }();
  return v;
}

/// Verifies the IR after each pass that succeeded (the pass manager's own
/// verifier is off): a successful pass must leave valid IR.
struct VerifyAfterPass : public PassInstrumentation {
  void runAfterPass(Pass *pass, Operation *op) override {
    if (succeeded(verify(op)))
      return;
    llvm::errs() << "mla-fuzz-ir: pass '" << pass->getArgument()
                 << "' succeeded with invalid IR\n";
    std::abort();
  }
};

/// One target: a copy of `module` through the kernel pipeline, then (when
/// that succeeds) down to LLVM.
void compileFor(ModuleOp module, const char *target) {
  OwningOpRef<ModuleOp> copy = module.clone();
  mla::PipelineOptions options;
  options.target = target;
  bool host = options.target == "host";
  MLIRContext *context = module.getContext();

  PassManager kernels(context);
  kernels.enableVerifier(false);
  kernels.addInstrumentation(std::make_unique<VerifyAfterPass>());
  if (host)
    mla::buildHostKernelPipeline(kernels, options);
  else
    mla::buildGPUKernelPipeline(kernels, options);
  if (failed(kernels.run(*copy)))
    return;

  PassManager lower(context);
  lower.enableVerifier(false);
  lower.addInstrumentation(std::make_unique<VerifyAfterPass>());
  if (host)
    mla::buildHostToLLVMPipeline(lower);
  else
    mla::buildGPUToLLVMPipeline(lower, options);
  (void)lower.run(*copy);
}

} // namespace

/// llvm::BumpPtrAllocator poisons its slabs under ASan and unpoisons what it
/// hands out, in inline header code: a slab our (instrumented) code
/// allocated and libMLIR's (uninstrumented) code carves up reads as
/// use-after-poison. The user-poisoning interface is off; ASAN_OPTIONS
/// still overrides.
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxInputBytes)
    return -1; // Not added to the corpus.
  MLIRContext context(registry(), MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler drop(&context, [](Diagnostic &diag) {
    if (verbose())
      llvm::errs() << diag.getLocation() << ": " << diag << "\n";
    return success();
  });

  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size),
          "fuzz-input"),
      llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 0;
  for (const char *target : {"host", "sm_90a", "gfx942"})
    compileFor(*module, target);
  return 0;
}
