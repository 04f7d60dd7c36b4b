//===- EmulateAMDGPUFinalize.cpp - mla-emulate-amdgpu-finalize ------------===//
//
// The last step of the AMD emulation lowering, on the LLVM dialect (after
// mla-emulate-amdgpu and the host conversion to LLVM):
//   * every load and store through an LDS pointer (address space 3) or a
//     buffer pointer (7) becomes a call of the emulator's LDS or buffer hook,
//     through a stack slot of the value's type: the emulator checks bounds,
//     applies the buffer range check and records the LDS shadow state;
//   * any other memory operation on such a pointer is an error;
//   * each hook gets a body that calls through the code object's hook table
//     (`__mla_emu_hooks`, filled by the runtime after loading);
//   * every hook call's site operand becomes the index of its source
//     location in `__mla_emu_sites`, which the object exports with its count
//     and the ABI version (`__mla_emu_site_count`, `__mla_emu_abi`);
//   * the object defines compiler-rt's __truncsfbf2, which x86's
//     legalization of bf16 selects calls.
//
//===----------------------------------------------------------------------===//
#include "EmuHooks.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "mla-emulate-amdgpu-finalize"

namespace mla {
#define GEN_PASS_DEF_MLAEMULATEAMDGPUFINALIZE
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;
using emu::Hook;

namespace {
/// 3 (LDS), 7 (buffer) or 0 for other pointers and non-pointers.
unsigned emulatedSpace(Value v) {
  auto pt = dyn_cast<LLVM::LLVMPointerType>(v.getType());
  if (!pt || (pt.getAddressSpace() != 3 && pt.getAddressSpace() != 7))
    return 0;
  return pt.getAddressSpace();
}

/// Ops that may carry an LDS or buffer pointer without accessing memory.
bool isAddressArithmetic(Operation *op) {
  return isa<LLVM::GEPOp, LLVM::AddrSpaceCastOp, LLVM::PtrToIntOp,
             LLVM::IntToPtrOp, LLVM::SelectOp, LLVM::InsertValueOp,
             LLVM::ExtractValueOp, LLVM::BrOp, LLVM::CondBrOp, LLVM::ICmpOp,
             LLVM::ReturnOp, LLVM::PoisonOp, LLVM::UndefOp, LLVM::ZeroOp,
             LLVM::SwitchOp>(op);
}

/// "file:line:col: what".
std::string siteText(Location loc, StringRef what) {
  std::string where = "<unknown>";
  loc->walk([&](Location l) {
    if (auto f = dyn_cast<FileLineColLoc>(l)) {
      where = (f.getFilename().str() + ":" + std::to_string(f.getLine()) + ":" +
               std::to_string(f.getColumn()));
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return where + ": " + what.str();
}

/// x86's legalization of some bf16 operations (selects of bf16 constants)
/// calls compiler-rt's __truncsfbf2, which code objects cannot import: the
/// object gets its own (hidden), rounding to nearest even, NaN to 0x7FC0.
void defineTruncSFBF2(ModuleOp module) {
  constexpr llvm::StringLiteral name = "__truncsfbf2";
  if (module.lookupSymbol(name))
    return;
  MLIRContext *ctx = module.getContext();
  Location loc = module.getLoc();
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  Type f32 = Float32Type::get(ctx), bf16 = BFloat16Type::get(ctx);
  Type i32 = IntegerType::get(ctx, 32), i16 = IntegerType::get(ctx, 16);
  auto f = LLVM::LLVMFuncOp::create(mb, loc, name,
                                    LLVM::LLVMFunctionType::get(bf16, {f32}));
  f.setVisibility_(LLVM::Visibility::Hidden);
  OpBuilder fb(f);
  Block *body = f.addEntryBlock(fb);
  OpBuilder b = OpBuilder::atBlockBegin(body);
  auto c = [&](int64_t v) {
    return LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(v))
        .getResult();
  };
  Value x = body->getArgument(0);
  Value bits = LLVM::BitcastOp::create(b, loc, i32, x);
  Value lsb = LLVM::AndOp::create(
      b, loc, LLVM::LShrOp::create(b, loc, bits, c(16)), c(1));
  Value rounded = LLVM::AddOp::create(
      b, loc, bits, LLVM::AddOp::create(b, loc, lsb, c(0x7FFF)));
  Value high = LLVM::LShrOp::create(b, loc, rounded, c(16));
  Value isNan = LLVM::FCmpOp::create(b, loc, LLVM::FCmpPredicate::uno, x, x);
  Value r = LLVM::SelectOp::create(b, loc, isNan, c(0x7FC0), high);
  Value h = LLVM::TruncOp::create(b, loc, i16, r);
  LLVM::ReturnOp::create(b, loc,
                         LLVM::BitcastOp::create(b, loc, bf16, h).getResult());
}

struct Finalizer {
  ModuleOp module;
  std::vector<std::string> sites;
  llvm::StringMap<int32_t> siteIndex;

  int32_t site(Location loc, StringRef what) {
    std::string text = siteText(loc, what);
    auto [it, inserted] = siteIndex.try_emplace(text, (int32_t)sites.size());
    if (inserted)
      sites.push_back(text);
    return it->second;
  }

  LLVM::LLVMFuncOp hookFunc(Hook hook) {
    StringRef name = emu::hookSymbol(hook);
    if (auto f = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
      return f;
    MLIRContext *ctx = module.getContext();
    FunctionType ft = emu::hookType(ctx, hook);
    Type ret =
        ft.getNumResults() ? ft.getResult(0) : LLVM::LLVMVoidType::get(ctx);
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    return LLVM::LLVMFuncOp::create(
        mb, module.getLoc(), name,
        LLVM::LLVMFunctionType::get(ret, ft.getInputs()));
  }

  Value slot(Block &entry, Location loc, Type type) {
    OpBuilder b = OpBuilder::atBlockBegin(&entry);
    Value one = LLVM::ConstantOp::create(b, loc, b.getI64Type(),
                                         b.getI64IntegerAttr(1));
    return LLVM::AllocaOp::create(b, loc,
                                  LLVM::LLVMPointerType::get(b.getContext()),
                                  type, one, /*alignment=*/64);
  }

  void access(Operation *op, Value ptr, Type type, Value stored, Block &entry,
              const DataLayout &layout) {
    bool lds = emulatedSpace(ptr) == 3;
    bool load = !stored;
    Hook hook = lds ? (load ? Hook::LdsLoad : Hook::LdsStore)
                    : (load ? Hook::BufferLoad : Hook::BufferStore);
    StringRef what = lds ? (load ? "LDS load" : "LDS store")
                         : (load ? "buffer load" : "buffer store");
    OpBuilder b(op);
    Location loc = op->getLoc();
    Value tmp = slot(entry, loc, type);
    if (stored)
      LLVM::StoreOp::create(b, loc, stored, tmp);
    int64_t bytes = layout.getTypeSize(type).getFixedValue();
    Value n = LLVM::ConstantOp::create(b, loc, b.getI64Type(),
                                       b.getI64IntegerAttr(bytes));
    Value s = LLVM::ConstantOp::create(b, loc, b.getI32Type(),
                                       b.getI32IntegerAttr(site(loc, what)));
    LLVM::CallOp::create(b, loc, hookFunc(hook), ValueRange{ptr, n, tmp, s});
    if (load)
      op->getResult(0).replaceAllUsesWith(
          LLVM::LoadOp::create(b, loc, type, tmp).getResult());
    op->erase();
  }

  /// An i32 atomic add through a buffer pointer: the emulator's atomic
  /// (workgroups run on several host threads at once).
  void atomicAdd(LLVM::AtomicRMWOp rmw) {
    OpBuilder b(rmw);
    Location loc = rmw.getLoc();
    Value s = LLVM::ConstantOp::create(
        b, loc, b.getI32Type(),
        b.getI32IntegerAttr(site(loc, "buffer atomic")));
    auto call = LLVM::CallOp::create(b, loc, hookFunc(Hook::BufferAtomicAdd),
                                     ValueRange{rmw.getPtr(), rmw.getVal(), s});
    rmw.getResult().replaceAllUsesWith(call.getResult());
    rmw.erase();
  }

  LogicalResult rewriteAccesses(LLVM::LLVMFuncOp f) {
    if (f.isExternal())
      return success();
    Block &entry = f.getBody().front();
    DataLayout layout = DataLayout::closest(f);
    SmallVector<Operation *> ops;
    f.walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops) {
      if (auto load = dyn_cast<LLVM::LoadOp>(op)) {
        if (emulatedSpace(load.getAddr()))
          access(op, load.getAddr(), load.getType(), Value(), entry, layout);
        continue;
      }
      if (auto store = dyn_cast<LLVM::StoreOp>(op)) {
        if (emulatedSpace(store.getValue()))
          return op->emitOpError("stores an LDS or buffer pointer to memory, "
                                 "which the emulator does not support");
        if (emulatedSpace(store.getAddr()))
          access(op, store.getAddr(), store.getValue().getType(),
                 store.getValue(), entry, layout);
        continue;
      }
      if (auto rmw = dyn_cast<LLVM::AtomicRMWOp>(op)) {
        if (emulatedSpace(rmw.getPtr()) == 7 &&
            rmw.getBinOp() == LLVM::AtomicBinOp::add &&
            rmw.getVal().getType().isInteger(32)) {
          atomicAdd(rmw);
          continue;
        }
      }
      if (auto call = dyn_cast<LLVM::CallOp>(op))
        if (call.getCallee() && emu::hookBySymbol(*call.getCallee()))
          continue;
      if (isAddressArithmetic(op))
        continue;
      for (Value v : op->getOperands())
        if (emulatedSpace(v))
          return op->emitOpError("accesses LDS or buffer memory in a way the "
                                 "AMD emulator does not implement");
    }
    return success();
  }

  /// Replaces the placeholder site of every hook call by its site index.
  void numberHookSites() {
    module.walk([&](LLVM::CallOp call) {
      if (!call.getCallee())
        return;
      std::optional<Hook> hook = emu::hookBySymbol(*call.getCallee());
      if (!hook || !emu::hookHasSite(*hook) ||
          call.getArgOperands().size() !=
              emu::hookType(module.getContext(), *hook).getNumInputs())
        return;
      // Memory hooks were numbered when they were created.
      if (*hook == Hook::LdsLoad || *hook == Hook::LdsStore ||
          *hook == Hook::BufferLoad || *hook == Hook::BufferStore ||
          *hook == Hook::BufferAtomicAdd)
        return;
      StringRef what = emu::hookSymbol(*hook).drop_front(strlen("__mla_emu_"));
      OpBuilder b(call);
      unsigned last = call.getArgOperands().size() - 1;
      Value s = LLVM::ConstantOp::create(
          b, call.getLoc(), b.getI32Type(),
          b.getI32IntegerAttr(site(call.getLoc(), what)));
      call->setOperand(last, s);
    });
  }

  LLVM::GlobalOp global(Type type, StringRef name, bool constant,
                        LLVM::Linkage linkage,
                        llvm::function_ref<Value(OpBuilder &)> init) {
    OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
    auto g = LLVM::GlobalOp::create(mb, module.getLoc(), type, constant,
                                    linkage, name, Attribute());
    Block *block = new Block();
    g.getInitializerRegion().push_back(block);
    OpBuilder b = OpBuilder::atBlockBegin(block);
    LLVM::ReturnOp::create(b, module.getLoc(), init(b));
    return g;
  }

  /// Hook bodies, the hook table, the site table and the ABI version.
  void emitTables() {
    MLIRContext *ctx = module.getContext();
    Location loc = module.getLoc();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    int64_t count = static_cast<int64_t>(Hook::Count);
    auto tableType = LLVM::LLVMArrayType::get(ptr, count);
    global(tableType, emu::kEmuHookTable, false, LLVM::Linkage::External,
           [&](OpBuilder &b) {
             return LLVM::ZeroOp::create(b, loc, tableType).getResult();
           });
    for (int i = 0; i < count; ++i) {
      auto hook = static_cast<Hook>(i);
      auto f = module.lookupSymbol<LLVM::LLVMFuncOp>(emu::hookSymbol(hook));
      if (!f || !f.isExternal())
        continue;
      f.setLinkage(LLVM::Linkage::Internal);
      LLVM::LLVMFunctionType ft = f.getFunctionType();
      OpBuilder fb(f);
      Block *body = f.addEntryBlock(fb);
      OpBuilder b = OpBuilder::atBlockBegin(body);
      Value table = LLVM::AddressOfOp::create(b, loc, ptr, emu::kEmuHookTable);
      Value slotPtr = LLVM::GEPOp::create(b, loc, ptr, tableType, table,
                                          ArrayRef<LLVM::GEPArg>{0, i});
      Value fn = LLVM::LoadOp::create(b, loc, ptr, slotPtr);
      SmallVector<Value> operands = {fn};
      operands.append(body->args_begin(), body->args_end());
      auto call = LLVM::CallOp::create(b, loc, ft, operands);
      if (isa<LLVM::LLVMVoidType>(ft.getReturnType()))
        LLVM::ReturnOp::create(b, loc, ValueRange{});
      else
        LLVM::ReturnOp::create(b, loc, call.getResult());
    }
    auto i8 = IntegerType::get(ctx, 8);
    auto i32 = IntegerType::get(ctx, 32);
    SmallVector<std::string> names;
    for (auto [i, text] : llvm::enumerate(sites)) {
      std::string name = "__mla_emu_site_" + std::to_string(i);
      std::string value = text + '\0';
      OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
      LLVM::GlobalOp::create(
          mb, loc, LLVM::LLVMArrayType::get(i8, value.size()), true,
          LLVM::Linkage::Internal, name, mb.getStringAttr(value));
      names.push_back(name);
    }
    auto sitesType =
        LLVM::LLVMArrayType::get(ptr, std::max<size_t>(1, sites.size()));
    global(sitesType, emu::kEmuSiteTable, true, LLVM::Linkage::External,
           [&](OpBuilder &b) {
             Value arr = LLVM::ZeroOp::create(b, loc, sitesType);
             for (auto [i, name] : llvm::enumerate(names)) {
               Value a = LLVM::AddressOfOp::create(b, loc, ptr, name);
               arr = LLVM::InsertValueOp::create(b, loc, arr, a,
                                                 ArrayRef<int64_t>{(int64_t)i});
             }
             return arr;
           });
    global(i32, emu::kEmuSiteCount, true, LLVM::Linkage::External,
           [&](OpBuilder &b) {
             return LLVM::ConstantOp::create(b, loc, i32,
                                             b.getI32IntegerAttr(sites.size()))
                 .getResult();
           });
    global(i32, emu::kEmuAbiSymbol, true, LLVM::Linkage::External,
           [&](OpBuilder &b) {
             return LLVM::ConstantOp::create(
                        b, loc, i32, b.getI32IntegerAttr(emu::kEmuAbiVersion))
                 .getResult();
           });
  }
};

struct EmulateAMDGPUFinalizePass
    : public mla::impl::MLAEmulateAMDGPUFinalizeBase<
          EmulateAMDGPUFinalizePass> {
  void runOnOperation() override {
    Finalizer fin{getOperation(), {}, {}};
    SmallVector<LLVM::LLVMFuncOp> funcs(
        getOperation().getOps<LLVM::LLVMFuncOp>());
    for (LLVM::LLVMFuncOp f : funcs)
      if (failed(fin.rewriteAccesses(f)))
        return signalPassFailure();
    fin.numberHookSites();
    defineTruncSFBF2(getOperation());
    fin.emitTables();
    LLVM_DEBUG(llvm::dbgs() << fin.sites.size() << " emulator sites\n");
  }
};
} // namespace
