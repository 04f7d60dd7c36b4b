//===- EmulateAMDGPU.cpp - mla-emulate-amdgpu -----------------------------===//
//
// The fork point of the AMD emulation targets (gfx942-emu, ...): takes the
// AMD module exactly as the real target has it before ROCDL conversion and
// turns it into a host program of lanes (docs/AMD.md, "The emulator"):
//   * every gpu.func becomes a func.func; a kernel `K` gets an exported
//     entry `K(void **args)` that runs one lane (the host entry ABI);
//   * gpu ids, barriers and gpu.dynamic_shared_memory become calls of the
//     emulator's hooks (runtime/include/mla/runtime/EmuAbi.h);
//   * amdgpu.fat_raw_buffer_cast becomes a buffer resource made by the
//     emulator (num_records computed as the ROCDL lowering does), and
//     amdgpu.mfma, gpu.shuffle and the cross-lane ops (rocdl.readlane,
//     readfirstlane, ds_bpermute, amdgpu.swizzle_bitmode, amdgpu.dpp)
//     wave-collective hook calls;
//   * memory spaces become integers: LDS 3, fat raw buffers 7, the rest 0,
//     so that mla-emulate-amdgpu-finalize can route every LDS and buffer
//     access through the emulator after LLVM conversion;
//   * llvm.amdgcn.exp2/log become llvm.exp2/log2.
// Anything of the gpu, amdgpu or rocdl dialects it does not know is an error
// located at the op: nothing is silently approximated.
//
//===----------------------------------------------------------------------===//
#include "../LaunchPlan.h"
#include "EmuHooks.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "mla-emulate-amdgpu"

namespace mla {
#define GEN_PASS_DEF_MLAEMULATEAMDGPU
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;
using emu::Hook;

namespace {
/// LDS and buffer pointers keep their AMDGPU address-space numbers.
constexpr int64_t kLdsSpace = 3;
constexpr int64_t kBufferSpace = 7;

/// The host memory space of an AMD memory space: 3, 7 or none (host memory).
Attribute hostSpace(MLIRContext *ctx, Attribute space) {
  auto i64 = IntegerType::get(ctx, 64);
  if (auto gpuSpace = dyn_cast_or_null<gpu::AddressSpaceAttr>(space))
    return gpuSpace.getValue() == gpu::AddressSpace::Workgroup
               ? IntegerAttr::get(i64, kLdsSpace)
               : Attribute();
  if (auto amdSpace = dyn_cast_or_null<amdgpu::AddressSpaceAttr>(space))
    return amdSpace.getValue() == amdgpu::AddressSpace::FatRawBuffer
               ? IntegerAttr::get(i64, kBufferSpace)
               : Attribute();
  return space;
}

Value i32Const(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIntOp::create(b, v, 32);
}
Value i64Const(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIntOp::create(b, v, 64);
}
Value toI64(ImplicitLocOpBuilder &b, Value index) {
  return arith::IndexCastOp::create(b, b.getI64Type(), index);
}

/// An alloca of `type` at the start of the function's entry block.
Value entrySlot(Block &entry, Location loc, Type type) {
  ImplicitLocOpBuilder b = ImplicitLocOpBuilder::atBlockBegin(loc, &entry);
  Value one =
      LLVM::ConstantOp::create(b, b.getI64Type(), b.getI64IntegerAttr(1));
  return LLVM::AllocaOp::create(b, LLVM::LLVMPointerType::get(b.getContext()),
                                type, one, /*alignment=*/64);
}

/// A strided memref descriptor {ptr, ptr, offset, sizes, strides} built
/// from LLVM values, cast to `type` (resolved by the LLVM conversion).
Value makeMemRef(ImplicitLocOpBuilder &b, MemRefType type, Value ptr,
                 Value offset, ArrayRef<Value> sizes, ArrayRef<Value> strides) {
  MLIRContext *ctx = b.getContext();
  Type i64 = b.getI64Type();
  auto arr = LLVM::LLVMArrayType::get(i64, type.getRank());
  SmallVector<Type> fields = {ptr.getType(), ptr.getType(), i64};
  if (type.getRank() > 0)
    fields.append({arr, arr});
  auto structType = LLVM::LLVMStructType::getLiteral(ctx, fields);
  Value d = LLVM::PoisonOp::create(b, structType);
  d = LLVM::InsertValueOp::create(b, d, ptr, ArrayRef<int64_t>{0});
  d = LLVM::InsertValueOp::create(b, d, ptr, ArrayRef<int64_t>{1});
  d = LLVM::InsertValueOp::create(b, d, offset, ArrayRef<int64_t>{2});
  for (auto [i, s] : llvm::enumerate(sizes))
    d = LLVM::InsertValueOp::create(b, d, s, ArrayRef<int64_t>{3, (int64_t)i});
  for (auto [i, s] : llvm::enumerate(strides))
    d = LLVM::InsertValueOp::create(b, d, s, ArrayRef<int64_t>{4, (int64_t)i});
  return UnrealizedConversionCastOp::create(b, type, d).getResult(0);
}

struct Rewriter {
  ModuleOp module;
  Block &entry;

  Value dim(ImplicitLocOpBuilder &b, emu::DimKind kind, gpu::Dimension d) {
    Value code = i32Const(b, emu::dimCode(kind, static_cast<int32_t>(d)));
    Value v = emu::callHook(b, module, Hook::Dim, code)[0];
    return arith::IndexCastOp::create(b, b.getIndexType(), v);
  }

  LogicalResult bufferCast(amdgpu::FatRawBufferCastOp op) {
    if (op.getCacheSwizzleStride() || !op.getResetOffset())
      return op.emitOpError("is not emulated with a cache swizzle stride or "
                            "without resetOffset");
    ImplicitLocOpBuilder b(op.getLoc(), op);
    Value src = op.getSource();
    auto srcType = cast<MemRefType>(src.getType());
    int64_t bits = srcType.getElementTypeBitWidth();
    if (bits % 8)
      return op.emitOpError("is not emulated for sub-byte elements");
    int64_t elemBytes = bits / 8;
    Value aligned =
        toI64(b, memref::ExtractAlignedPointerAsIndexOp::create(b, src));
    auto md = memref::ExtractStridedMetadataOp::create(b, src);
    Value offset = toI64(b, md.getOffset());
    Value start = arith::AddIOp::create(
        b, aligned, arith::MulIOp::create(b, offset, i64Const(b, elemBytes)));
    Value base = LLVM::IntToPtrOp::create(
        b, LLVM::LLVMPointerType::get(b.getContext()), start);
    SmallVector<Value> sizes, strides;
    for (Value s : md.getSizes())
      sizes.push_back(toI64(b, s));
    for (Value s : md.getStrides())
      strides.push_back(toI64(b, s));
    // num_records as the ROCDL lowering computes it: validBytes, else the
    // largest size * stride over the dims (one element for rank 0), in
    // bytes, truncated to the descriptor's 32 bits; without bounds checks
    // every offset is in range.
    Value records;
    if (op.getValidBytes()) {
      records = op.getValidBytes();
    } else if (!op.getBoundsCheck()) {
      records = i32Const(b, -1);
    } else {
      Value extent = i64Const(b, 1);
      for (auto [i, s] : llvm::enumerate(sizes)) {
        Value e = arith::MulIOp::create(b, s, strides[i]);
        extent = i == 0 ? e : arith::MaxUIOp::create(b, extent, e).getResult();
      }
      Value bytes = arith::MulIOp::create(b, extent, i64Const(b, elemBytes));
      records = arith::TruncIOp::create(b, b.getI32Type(), bytes);
    }
    Value ptr = emu::callHook(b, module, Hook::MakeBuffer, {base, records})[0];
    Value result =
        makeMemRef(b, op.getType(), ptr, i64Const(b, 0), sizes, strides);
    op.getResult().replaceAllUsesWith(result);
    op.erase();
    return success();
  }

  LogicalResult mfma(amdgpu::MFMAOp op) {
    if (op.getBlocks() != 1 || op.getCbsz() || op.getAbid() ||
        op.getBlgp() != amdgpu::MFMAPermB::none || op.getNegateA() ||
        op.getNegateB() || op.getNegateC() || op.getReducePrecision())
      return op.emitOpError("is not emulated with blocks, broadcasts, "
                            "permutations, negation or reduced precision");
    emu::MfmaShape shape;
    uint32_t m = op.getM(), n = op.getN(), k = op.getK();
    if (m == 16 && n == 16 && k == 16)
      shape = emu::MfmaShape::M16N16K16;
    else if (m == 32 && n == 32 && k == 8)
      shape = emu::MfmaShape::M32N32K8;
    else if (m == 16 && n == 16 && k == 32)
      shape = emu::MfmaShape::M16N16K32;
    else
      return op.emitOpError("shape ")
             << m << "x" << n << "x" << k << " is not emulated";
    auto aType = dyn_cast<VectorType>(op.getSourceA().getType());
    auto cType = dyn_cast<VectorType>(op.getDestC().getType());
    if (!aType || !cType || !cType.getElementType().isF32() ||
        aType.getNumElements() != m * k / 64 ||
        cType.getNumElements() != m * n / 64)
      return op.emitOpError("operand types are not emulated");
    emu::MfmaType type;
    if (aType.getElementType().isBF16())
      type = emu::MfmaType::BF16;
    else if (aType.getElementType().isF16())
      type = emu::MfmaType::F16;
    else
      return op.emitOpError("source element type ")
             << aType.getElementType() << " is not emulated";
    ImplicitLocOpBuilder b(op.getLoc(), op);
    Value slots[4] = {entrySlot(entry, op.getLoc(), op.getSourceA().getType()),
                      entrySlot(entry, op.getLoc(), op.getSourceB().getType()),
                      entrySlot(entry, op.getLoc(), cType),
                      entrySlot(entry, op.getLoc(), cType)};
    LLVM::StoreOp::create(b, op.getSourceA(), slots[0]);
    LLVM::StoreOp::create(b, op.getSourceB(), slots[1]);
    LLVM::StoreOp::create(b, op.getDestC(), slots[2]);
    emu::callHook(b, module, Hook::Mfma,
                  {i32Const(b, static_cast<int32_t>(shape)),
                   i32Const(b, static_cast<int32_t>(type)), slots[0], slots[1],
                   slots[2], slots[3]});
    Value d = LLVM::LoadOp::create(b, cType, slots[3]);
    op.getResult().replaceAllUsesWith(d);
    op.erase();
    return success();
  }

  /// The lane's index in its wave (i32).
  Value laneId(ImplicitLocOpBuilder &b) {
    return arith::IndexCastOp::create(
        b, b.getI32Type(), dim(b, emu::DimKind::LaneId, gpu::Dimension::x));
  }

  /// `value` (32 bits) of lane `src` of the wave where `valid`, else
  /// `fallback`: one wave-collective Shuffle hook call.
  Value crossLane(ImplicitLocOpBuilder &b, Value value, Value src, Value valid,
                  Value fallback) {
    Type t = value.getType();
    auto bits = [&](Value v) {
      return t.isInteger(32)
                 ? v
                 : arith::BitcastOp::create(b, b.getI32Type(), v).getResult();
    };
    src = arith::SelectOp::create(b, valid, src, laneId(b));
    Value r = emu::callHook(b, module, Hook::Shuffle, {bits(value), src})[0];
    if (!t.isInteger(32))
      r = arith::BitcastOp::create(b, t, r);
    return arith::SelectOp::create(b, valid, r, fallback);
  }

  /// rocdl.readlane / readfirstlane / ds_bpermute, amdgpu.swizzle_bitmode and
  /// amdgpu.dpp (32-bit values) as cross-lane reads. Semantics: the CDNA3
  /// ISA's DS_BPERMUTE_B32 (byte address / 4, modulo 64), DS_SWIZZLE_B32
  /// bit mode (within 32 lanes), and DPP (docs/AMD.md).
  LogicalResult crossLaneOp(Operation *op) {
    ImplicitLocOpBuilder b(op->getLoc(), op);
    Value result = op->getResult(0);
    Type t = result.getType();
    if (!t.isIntOrFloat() || t.getIntOrFloatBitWidth() != 32)
      return op->emitOpError("is emulated for 32-bit values only");
    auto c = [&](int64_t v) { return i32Const(b, v); };
    Value lane = laneId(b);
    Value yes = arith::ConstantIntOp::create(b, 1, 1);
    Value out;
    if (auto o = dyn_cast<ROCDL::ReadlaneOp>(op)) {
      out = crossLane(b, o.getSrc0(),
                      arith::AndIOp::create(b, o.getSrc1(), c(63)), yes,
                      o.getSrc0());
    } else if (auto o = dyn_cast<ROCDL::ReadfirstlaneOp>(op)) {
      // Every lane of the wave is active at a wave-collective operation.
      out = crossLane(b, o.getSrc(), c(0), yes, o.getSrc());
    } else if (auto o = dyn_cast<ROCDL::DsBpermuteOp>(op)) {
      Value src = arith::AndIOp::create(
          b, arith::ShRUIOp::create(b, o.getIndex(), c(2)), c(63));
      out = crossLane(b, o.getSrc(), src, yes, o.getSrc());
    } else if (auto o = dyn_cast<amdgpu::SwizzleBitModeOp>(op)) {
      Value low = arith::AndIOp::create(b, lane, c(31));
      Value sel = arith::XOrIOp::create(
          b,
          arith::OrIOp::create(
              b, arith::AndIOp::create(b, low, c(o.getAndMask() & 31)),
              c(o.getOrMask() & 31)),
          c(o.getXorMask() & 31));
      Value src = arith::OrIOp::create(b, arith::AndIOp::create(b, lane, c(32)),
                                       arith::AndIOp::create(b, sel, c(31)));
      out = crossLane(b, o.getSrc(), src, yes, o.getSrc());
    } else if (auto o = dyn_cast<amdgpu::DPPOp>(op)) {
      FailureOr<std::pair<Value, Value>> src = dppSource(b, o, lane);
      if (failed(src))
        return failure();
      Value fallback =
          o.getBoundCtrl()
              ? arith::ConstantOp::create(b, b.getZeroAttr(t)).getResult()
              : o.getOld();
      out = crossLane(b, o.getSrc(), src->first, src->second, fallback);
    }
    result.replaceAllUsesWith(out);
    op->erase();
    return success();
  }

  /// The DPP source lane of `lane` and whether it is inside the row / wave.
  FailureOr<std::pair<Value, Value>> dppSource(ImplicitLocOpBuilder &b,
                                               amdgpu::DPPOp op, Value lane) {
    if (op.getRowMask() != 0xf || op.getBankMask() != 0xf)
      return op.emitOpError("is emulated with full row and bank masks only");
    auto c = [&](int64_t v) { return i32Const(b, v); };
    int64_t n = 1;
    if (auto a = dyn_cast_or_null<IntegerAttr>(
            op.getPermArgument().value_or(Attribute())))
      n = a.getInt();
    Value row = arith::AndIOp::create(b, lane, c(~15));
    Value inRow = arith::AndIOp::create(b, lane, c(15));
    Value yes = arith::ConstantIntOp::create(b, 1, 1);
    auto within = [&](Value idx, int64_t lo, int64_t hi) {
      return arith::AndIOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::sge, idx, c(lo)),
          arith::CmpIOp::create(b, arith::CmpIPredicate::slt, idx, c(hi)));
    };
    Value src, valid = yes;
    switch (op.getKind()) {
    case amdgpu::DPPPerm::quad_perm: {
      auto perm = dyn_cast_or_null<ArrayAttr>(
          op.getPermArgument().value_or(Attribute()));
      if (!perm || perm.size() != 4)
        return op.emitOpError("quad_perm needs four lanes");
      // src = (lane & ~3) | perm[lane & 3], as a select chain.
      Value q = arith::AndIOp::create(b, lane, c(3));
      Value pick = c(cast<IntegerAttr>(perm[3]).getInt());
      for (int i = 2; i >= 0; --i)
        pick = arith::SelectOp::create(
            b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, q, c(i)),
            c(cast<IntegerAttr>(perm[i]).getInt()), pick);
      src =
          arith::OrIOp::create(b, arith::AndIOp::create(b, lane, c(~3)), pick);
      break;
    }
    case amdgpu::DPPPerm::row_shl:
    case amdgpu::DPPPerm::row_shr: {
      Value idx = arith::AddIOp::create(
          b, inRow, c(op.getKind() == amdgpu::DPPPerm::row_shl ? n : -n));
      valid = within(idx, 0, 16);
      src = arith::AddIOp::create(b, row, idx);
      break;
    }
    case amdgpu::DPPPerm::row_ror:
      src = arith::AddIOp::create(
          b, row,
          arith::AndIOp::create(b, arith::AddIOp::create(b, inRow, c(16 - n)),
                                c(15)));
      break;
    case amdgpu::DPPPerm::wave_shl:
    case amdgpu::DPPPerm::wave_shr: {
      src = arith::AddIOp::create(
          b, lane, c(op.getKind() == amdgpu::DPPPerm::wave_shl ? 1 : -1));
      valid = within(src, 0, 64);
      break;
    }
    case amdgpu::DPPPerm::wave_rol:
    case amdgpu::DPPPerm::wave_ror:
      src = arith::AndIOp::create(
          b,
          arith::AddIOp::create(
              b, lane, c(op.getKind() == amdgpu::DPPPerm::wave_rol ? 1 : 63)),
          c(63));
      break;
    case amdgpu::DPPPerm::row_mirror:
      src =
          arith::OrIOp::create(b, row, arith::SubIOp::create(b, c(15), inRow));
      break;
    case amdgpu::DPPPerm::row_half_mirror:
      src = arith::OrIOp::create(
          b, arith::AndIOp::create(b, lane, c(~7)),
          arith::SubIOp::create(b, c(7), arith::AndIOp::create(b, lane, c(7))));
      break;
    default:
      return op.emitOpError("DPP ")
             << amdgpu::stringifyDPPPerm(op.getKind()) << " is not emulated";
    }
    return std::make_pair(src, valid);
  }

  LogicalResult shuffle(gpu::ShuffleOp op) {
    Type t = op.getValue().getType();
    if (t.getIntOrFloatBitWidth() != 32)
      return op.emitOpError("is emulated for 32-bit values only");
    ImplicitLocOpBuilder b(op.getLoc(), op);
    Value lane = arith::IndexCastOp::create(
        b, b.getI32Type(), dim(b, emu::DimKind::LaneId, gpu::Dimension::x));
    Value off = op.getOffset();
    Value src;
    switch (op.getMode()) {
    case gpu::ShuffleMode::XOR:
      src = arith::XOrIOp::create(b, lane, off);
      break;
    case gpu::ShuffleMode::UP:
      src = arith::SubIOp::create(b, lane, off);
      break;
    case gpu::ShuffleMode::DOWN:
      src = arith::AddIOp::create(b, lane, off);
      break;
    case gpu::ShuffleMode::IDX:
      src = off;
      break;
    }
    Value valid = arith::AndIOp::create(
        b,
        arith::CmpIOp::create(b, arith::CmpIPredicate::sge, src,
                              i32Const(b, 0)),
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, src,
                              op.getWidth()));
    src = arith::SelectOp::create(b, valid, src, lane);
    Value bits = t.isInteger(32) ? op.getValue()
                                 : arith::BitcastOp::create(b, b.getI32Type(),
                                                            op.getValue())
                                       .getResult();
    Value r = emu::callHook(b, module, Hook::Shuffle, {bits, src})[0];
    if (!t.isInteger(32))
      r = arith::BitcastOp::create(b, t, r);
    op.getShuffleResult().replaceAllUsesWith(r);
    op.getValid().replaceAllUsesWith(valid);
    op.erase();
    return success();
  }

  LogicalResult rewrite(Operation *op) {
    ImplicitLocOpBuilder b(op->getLoc(), op);
    auto replace = [&](Value v) {
      op->getResult(0).replaceAllUsesWith(v);
      op->erase();
      return success();
    };
    if (auto o = dyn_cast<gpu::ThreadIdOp>(op))
      return replace(dim(b, emu::DimKind::ThreadId, o.getDimension()));
    if (auto o = dyn_cast<gpu::BlockIdOp>(op))
      return replace(dim(b, emu::DimKind::BlockId, o.getDimension()));
    if (auto o = dyn_cast<gpu::BlockDimOp>(op))
      return replace(dim(b, emu::DimKind::BlockDim, o.getDimension()));
    if (auto o = dyn_cast<gpu::GridDimOp>(op))
      return replace(dim(b, emu::DimKind::GridDim, o.getDimension()));
    if (isa<gpu::LaneIdOp>(op))
      return replace(dim(b, emu::DimKind::LaneId, gpu::Dimension::x));
    if (isa<gpu::BarrierOp>(op)) {
      emu::callHook(b, module, Hook::Barrier, {});
      op->erase();
      return success();
    }
    if (auto o = dyn_cast<gpu::DynamicSharedMemoryOp>(op)) {
      Value base = emu::callHook(b, module, Hook::LdsBase, {})[0];
      Value bytes = emu::callHook(b, module, Hook::LdsBytes, {})[0];
      return replace(makeMemRef(b, o.getType(), base, i64Const(b, 0), {bytes},
                                {i64Const(b, 1)}));
    }
    if (auto o = dyn_cast<amdgpu::FatRawBufferCastOp>(op))
      return bufferCast(o);
    if (auto o = dyn_cast<amdgpu::MFMAOp>(op))
      return mfma(o);
    if (auto o = dyn_cast<gpu::ShuffleOp>(op))
      return shuffle(o);
    if (isa<ROCDL::ReadlaneOp, ROCDL::ReadfirstlaneOp, ROCDL::DsBpermuteOp,
            amdgpu::SwizzleBitModeOp, amdgpu::DPPOp>(op))
      return crossLaneOp(op);
    if (auto call = dyn_cast<LLVM::CallIntrinsicOp>(op)) {
      StringRef name = call.getIntrin();
      if (!name.starts_with("llvm.amdgcn."))
        return success();
      // v_exp_f32 / v_log_f32 are 2^x and log2(x) to about 1 ulp: the host's
      // libm is at least as accurate.
      StringRef host = llvm::StringSwitch<StringRef>(name)
                           .Case("llvm.amdgcn.exp2.f32", "llvm.exp2.f32")
                           .Case("llvm.amdgcn.log.f32", "llvm.log2.f32")
                           .Default("");
      if (host.empty())
        return op->emitOpError("intrinsic '") << name << "' is not emulated";
      call.setIntrin(b.getStringAttr(host));
      return success();
    }
    if (isa<gpu::GPUDialect, amdgpu::AMDGPUDialect>(op->getDialect()) ||
        op->getDialect()->getNamespace() == "rocdl")
      return op->emitOpError("is not emulated");
    return success();
  }
};

/// gpu.func -> func.func (`K_lane` for a kernel K); returns the kernels.
FailureOr<SmallVector<func::FuncOp>> moveFunctions(ModuleOp module,
                                                   gpu::GPUModuleOp gm) {
  SmallVector<func::FuncOp> kernels;
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  for (auto gf : llvm::make_early_inc_range(gm.getOps<gpu::GPUFuncOp>())) {
    if (!gf.getWorkgroupAttributions().empty() ||
        !gf.getPrivateAttributions().empty())
      return gf.emitOpError("memory attributions are not emulated "
                            "(mla-outline-gpu-kernels uses dynamic shared "
                            "memory)");
    std::string name = gf.getName().str();
    if (gf.isKernel())
      name += "_lane";
    auto f = func::FuncOp::create(mb, gf.getLoc(), name, gf.getFunctionType());
    f.getBody().takeBody(gf.getBody());
    f.walk([](gpu::ReturnOp ret) {
      OpBuilder rb(ret);
      func::ReturnOp::create(rb, ret.getLoc(), ret.getOperands());
      ret.erase();
    });
    if (gf.isKernel()) {
      f.setPrivate();
      kernels.push_back(f);
    }
  }
  return kernels;
}

struct EmulateAMDGPUPass
    : public mla::impl::MLAEmulateAMDGPUBase<EmulateAMDGPUPass> {
  using MLAEmulateAMDGPUBase::MLAEmulateAMDGPUBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SmallVector<gpu::GPUModuleOp> gpuModules(module.getOps<gpu::GPUModuleOp>());
    SmallVector<func::FuncOp> kernels;
    for (gpu::GPUModuleOp gm : gpuModules) {
      FailureOr<SmallVector<func::FuncOp>> moved = moveFunctions(module, gm);
      if (failed(moved))
        return signalPassFailure();
      kernels.append(moved->begin(), moved->end());
    }
    // The functions that came from the gpu.modules.
    SmallVector<func::FuncOp> funcs;
    for (auto f : module.getOps<func::FuncOp>())
      if (!f.isExternal())
        funcs.push_back(f);
    if (dropBarrier >= 0) {
      int index = 0;
      gpu::BarrierOp dropped;
      for (func::FuncOp f : funcs)
        f.walk([&](gpu::BarrierOp op) {
          if (index++ == dropBarrier)
            dropped = op;
        });
      if (!dropped) {
        module.emitError("drop-barrier=")
            << static_cast<int>(dropBarrier) << ": the module has " << index
            << " barriers";
        return signalPassFailure();
      }
      LLVM_DEBUG(llvm::dbgs() << "dropping " << dropped << "\n");
      dropped.erase();
    }
    for (func::FuncOp f : funcs) {
      Rewriter rw{module, f.getBody().front()};
      SmallVector<Operation *> ops;
      f.walk([&](Operation *op) { ops.push_back(op); });
      for (Operation *op : ops)
        if (failed(rw.rewrite(op)))
          return signalPassFailure();
    }
    for (gpu::GPUModuleOp gm : gpuModules)
      gm.erase();
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());

    AttrTypeReplacer replacer;
    replacer.addReplacement([ctx](MemRefType t) -> std::optional<Type> {
      Attribute space = hostSpace(ctx, t.getMemorySpace());
      if (space == t.getMemorySpace())
        return std::nullopt;
      return MemRefType::get(t.getShape(), t.getElementType(), t.getLayout(),
                             space);
    });
    replacer.recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true,
                                          /*replaceLocs=*/false,
                                          /*replaceTypes=*/true);

    // Entries: `K(void **args)` runs one lane of kernel K.
    OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    for (func::FuncOp lane : kernels) {
      StringRef name = lane.getSymName().drop_back(strlen("_lane"));
      auto entry = func::FuncOp::create(mb, lane.getLoc(), name,
                                        FunctionType::get(ctx, {ptrType}, {}));
      ImplicitLocOpBuilder b = ImplicitLocOpBuilder::atBlockBegin(
          lane.getLoc(), entry.addEntryBlock());
      SmallVector<Value> args =
          unpackEntryArgs(b, entry.getArgument(0), lane.getArgumentTypes());
      func::CallOp::create(b, lane, args);
      func::ReturnOp::create(b);
      LLVM_DEBUG(llvm::dbgs() << "emulated kernel " << name << "\n");
    }
  }
};
} // namespace
