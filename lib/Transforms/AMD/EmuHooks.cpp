//===- EmuHooks.cpp - The emulator's hooks as MLIR functions --------------===//
#include "EmuHooks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/ADT/StringRef.h"

using namespace mlir;

namespace mla::emu {
namespace {
struct HookSpec {
  const char *symbol;
  const char *signature;
};

const HookSpec kHooks[] = {
#define MLA_EMU_SPEC(e, sym, ret, params, sig) {sym, sig},
    MLA_EMU_HOOKS(MLA_EMU_SPEC)
#undef MLA_EMU_SPEC
};

Type typeOf(MLIRContext *ctx, llvm::StringRef code) {
  if (code == "i32" || code == "s")
    return IntegerType::get(ctx, 32);
  if (code == "i64")
    return IntegerType::get(ctx, 64);
  if (code == "p")
    return LLVM::LLVMPointerType::get(ctx);
  if (code == "p3")
    return LLVM::LLVMPointerType::get(ctx, 3);
  if (code == "p7")
    return LLVM::LLVMPointerType::get(ctx, 7);
  llvm_unreachable("EmuAbi.h: unknown type code in a hook signature");
}

const HookSpec &spec(Hook hook) { return kHooks[static_cast<int>(hook)]; }
} // namespace

llvm::StringRef hookSymbol(Hook hook) { return spec(hook).symbol; }

std::optional<Hook> hookBySymbol(llvm::StringRef symbol) {
  for (int i = 0; i < static_cast<int>(Hook::Count); ++i)
    if (symbol == kHooks[i].symbol)
      return static_cast<Hook>(i);
  return std::nullopt;
}

FunctionType hookType(MLIRContext *ctx, Hook hook) {
  llvm::StringRef sig = spec(hook).signature;
  auto [ret, rest] = sig.split('(');
  rest = rest.drop_back(); // ')'
  SmallVector<llvm::StringRef> params;
  rest.split(params, ',', -1, false);
  SmallVector<Type> inputs;
  for (llvm::StringRef p : params)
    inputs.push_back(typeOf(ctx, p));
  SmallVector<Type> results;
  if (ret != "v")
    results.push_back(typeOf(ctx, ret));
  return FunctionType::get(ctx, inputs, results);
}

bool hookHasSite(Hook hook) {
  return llvm::StringRef(spec(hook).signature).ends_with(",s)") ||
         llvm::StringRef(spec(hook).signature).ends_with("(s)");
}

ValueRange callHook(ImplicitLocOpBuilder &b, ModuleOp module, Hook hook,
                    ValueRange args) {
  llvm::StringRef name = hookSymbol(hook);
  auto decl = module.lookupSymbol<func::FuncOp>(name);
  if (!decl) {
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    decl = func::FuncOp::create(mb, module.getLoc(), name,
                                hookType(b.getContext(), hook));
    decl.setPrivate();
  }
  SmallVector<Value> operands(args.begin(), args.end());
  if (hookHasSite(hook))
    operands.push_back(arith::ConstantIntOp::create(b, 0, 32));
  return func::CallOp::create(b, decl, operands).getResults();
}

} // namespace mla::emu
