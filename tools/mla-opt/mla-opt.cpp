//===- mla-opt.cpp - mlir-opt with the mla dialect and passes -------------===//
#include "mla/Dialect/MLA/IR/MLA.h"
#include "mla/Pipelines/Pipelines.h"
#include "mla/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"

// The version macros only (the runtime library is not linked).
#include "mla/runtime/mla_runtime.h"

int main(int argc, char **argv) {
  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "mla " << MLA_RUNTIME_VERSION_MAJOR << "."
       << MLA_RUNTIME_VERSION_MINOR << "." << MLA_RUNTIME_VERSION_PATCH << "\n";
  });
  mlir::registerAllPasses();
  mla::registerMLAPasses();
  mla::registerPipelines();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<mla::MLADialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "mla optimizer: the mla dialect, its passes and MLIR's\n",
      registry));
}
