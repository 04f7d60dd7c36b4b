//===- Wgmma.cpp - warpgroup MMA: swizzled operand tiles and wgmma -------===//
#include "Wgmma.h"
#include "../Utils.h"
#include "NVIDIA.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;
using namespace mla;

namespace mla::nvidia {
ViewInfo analyzeView(Value v) {
  ViewInfo info;
  auto multipleOf8 = [](OpFoldResult r) {
    if (std::optional<int64_t> c = getConstantIntValue(r))
      return *c % 8 == 0;
    auto mul = cast<Value>(r).getDefiningOp<arith::MulIOp>();
    if (!mul)
      return false;
    for (Value operand : mul->getOperands())
      if (std::optional<int64_t> c = getConstantIntValue(operand))
        if (*c % 8 == 0)
          return true;
    return false;
  };
  while (auto sub = v.getDefiningOp<memref::SubViewOp>()) {
    SmallVector<OpFoldResult> offs = sub.getMixedOffsets();
    std::optional<int64_t> c =
        offs.size() == 2 ? getConstantIntValue(offs[1]) : std::nullopt;
    if (!sub.hasUnitStride() || !c)
      return {};
    info.col0 += *c;
    info.rowsAligned &= multipleOf8(offs[0]);
    v = sub.getSource();
  }
  info.root = v.getDefiningOp<memref::AllocaOp>();
  if (info.root && info.root.getType().getRank() != 2)
    info.root = nullptr;
  return info;
}

/// The row offset of a view in its root buffer, built at `b`.
Value viewRow(ImplicitLocOpBuilder &b, Value v) {
  Value row = indexConst(b, 0);
  while (auto sub = v.getDefiningOp<memref::SubViewOp>()) {
    row = arith::AddIOp::create(b, row,
                                getValueOrCreateConstantIndexOp(
                                    b, b.getLoc(), sub.getMixedOffsets()[0]));
    v = sub.getSource();
  }
  return row;
}

/// Columns of a (padded) tile buffer that the swizzled layout keeps: the
/// largest multiple of 64 (mla-tile pads rows by 16 bytes).
int64_t swizzledCols(memref::AllocaOp root) {
  return root.getType().getDimSize(1) / 64 * 64;
}

/// Whether `root` can move to the swizzled layout: 16-bit elements, rows a
/// multiple of 8, every view within the kept columns, and no users but
/// views, the matmuls in `fused` and 16-byte-multiple vector stores (the
/// copies mla-tile emits, at columns that are multiples of their width).
bool canSwizzle(memref::AllocaOp root, ArrayRef<Operation *> fused) {
  MemRefType t = root.getType();
  int64_t rows = t.getDimSize(0), cols = swizzledCols(root);
  if (t.getElementTypeBitWidth() != 16 || rows % 8 || cols == 0 ||
      rows * 128 / 16 >= (1 << 14))
    return false;
  SmallVector<Operation *> views, users;
  collectViews(root.getResult(), views, users);
  for (Operation *view : views) {
    auto sub = cast<memref::SubViewOp>(view);
    ViewInfo info = analyzeView(sub.getResult());
    if (info.root != root || info.col0 + sub.getType().getDimSize(1) > cols)
      return false;
  }
  return llvm::all_of(users, [&](Operation *user) {
    auto st = dyn_cast<vector::StoreOp>(user);
    return llvm::is_contained(fused, user) ||
           (st && st.getVectorType().getNumElements() % 8 == 0);
  });
}

/// The swizzled column position (block, row, column in the block) of
/// element (r, c) of a swizzled tile.
SmallVector<Value> swizzledIndex(ImplicitLocOpBuilder &b, Value r, Value c) {
  Value c8 = indexConst(b, 8), c64 = indexConst(b, 64);
  Value block = arith::DivUIOp::create(b, c, c64);
  Value inBlock = arith::RemUIOp::create(b, c, c64);
  Value chunk = arith::XOrIOp::create(b, arith::DivUIOp::create(b, inBlock, c8),
                                      arith::RemUIOp::create(b, r, c8));
  Value col = arith::AddIOp::create(b, arith::MulIOp::create(b, chunk, c8),
                                    arith::RemUIOp::create(b, c, c8));
  return {block, r, col};
}

bool canUseSwizzledOperands(AttentionStepOp op,
                            SmallVectorImpl<memref::AllocaOp> &roots) {
  for (Value v : {op.getQ(), op.getK(), op.getV()}) {
    ViewInfo info = analyzeView(v);
    if (!info.root || !info.rowsAligned || info.col0 % 64 != 0)
      return false;
    if (!llvm::is_contained(roots, info.root))
      roots.push_back(info.root);
  }
  SmallVector<Operation *> fused = {op};
  return llvm::all_of(
      roots, [&](memref::AllocaOp root) { return canSwizzle(root, fused); });
}

DenseMap<Operation *, Value> swizzleOperands(scf::ForOp loop,
                                             ArrayRef<memref::AllocaOp> roots) {
  DenseMap<Operation *, Value> swizzled;
  ImplicitLocOpBuilder top = builderAtGridTop(loop.getLoc(), loop->getBlock());
  int64_t id = 0;
  top.getBlock()->walk([&](memref::AllocaOp a) {
    if (a->hasAttr(MLADialect::kSwizzleDstAttrName))
      ++id;
  });
  for (memref::AllocaOp root : roots) {
    MemRefType t = root.getType();
    auto a = memref::AllocaOp::create(
        top, MemRefType::get({swizzledCols(root) / 64, t.getDimSize(0), 64},
                             t.getElementType()));
    a->setAttr(a.getAlignmentAttrName(), top.getI64IntegerAttr(kSwizzleAlign));
    a->setAttr(MLADialect::kSwizzleDstAttrName, top.getI64IntegerAttr(id));
    root->setAttr(MLADialect::kSwizzleSrcAttrName, top.getI64IntegerAttr(id));
    swizzled[root] = a.getResult();
    ++id;
  }
  return swizzled;
}

/// After distribution: the copies into each tile marked `mla.swizzle_src`
/// (cp.async or vector stores of its views) write the buffer marked with
/// the same `mla.swizzle_dst` id instead, at swizzled positions; the old
/// buffer goes. Every thread fences its generic-proxy writes of shared
/// memory before each barrier (`fence.proxy.async.shared::cta`), so that
/// wgmma, which reads through the async proxy, sees them.
LogicalResult applySwizzle(GridOp grid) {
  DenseMap<int64_t, Value> dst;
  SmallVector<memref::AllocaOp> srcs;
  for (auto a : grid.getBody().front().getOps<memref::AllocaOp>()) {
    if (auto id =
            a->getAttrOfType<IntegerAttr>(MLADialect::kSwizzleDstAttrName))
      dst[id.getInt()] = a.getResult();
    if (a->hasAttr(MLADialect::kSwizzleSrcAttrName))
      srcs.push_back(a);
  }
  if (srcs.empty())
    return success();
  for (memref::AllocaOp src : srcs) {
    Value to = dst.lookup(
        src->getAttrOfType<IntegerAttr>(MLADialect::kSwizzleSrcAttrName)
            .getInt());
    SmallVector<Operation *> users, views;
    collectViews(src.getResult(), views, users);
    for (Operation *user : users) {
      ImplicitLocOpBuilder b(user->getLoc(), user);
      auto position = [&](Value view, ValueRange idx, int64_t extra) {
        ViewInfo info = analyzeView(view);
        Value r = arith::AddIOp::create(b, viewRow(b, view), idx[0]);
        Value c =
            arith::AddIOp::create(b, idx[1], indexConst(b, info.col0 + extra));
        return swizzledIndex(b, r, c);
      };
      if (auto cp = dyn_cast<nvgpu::DeviceAsyncCopyOp>(user)) {
        SmallVector<Value> idx = position(cp.getDst(), cp.getDstIndices(), 0);
        cp.getDstMutable().assign(to);
        cp.getDstIndicesMutable().assign(idx);
        continue;
      }
      if (auto st = dyn_cast<vector::StoreOp>(user)) {
        VectorType vt = st.getVectorType();
        for (int64_t piece = 0; piece < vt.getNumElements() / 8; ++piece) {
          SmallVector<int64_t> mask;
          for (int64_t i = 0; i < 8; ++i)
            mask.push_back(piece * 8 + i);
          Value part = vector::ShuffleOp::create(b, st.getValueToStore(),
                                                 st.getValueToStore(), mask);
          vector::StoreOp::create(
              b, part, to, position(st.getBase(), st.getIndices(), piece * 8));
        }
        st.erase();
        continue;
      }
      return user->emitOpError()
             << "mla-distribute: unexpected access to a tile that the "
                "warpgroup MMA lowering stores swizzled";
    }
    for (Operation *view : llvm::reverse(views))
      view->erase();
    src.erase();
  }
  SmallVector<gpu::BarrierOp> barriers;
  grid.walk([&](gpu::BarrierOp bar) { barriers.push_back(bar); });
  for (gpu::BarrierOp bar : barriers) {
    ImplicitLocOpBuilder b(bar.getLoc(), bar);
    NVVM::FenceProxyOp::create(
        b,
        NVVM::ProxyKindAttr::get(b.getContext(), NVVM::ProxyKind::async_shared),
        NVVM::SharedSpaceAttr::get(b.getContext(),
                                   NVVM::SharedSpace::shared_cta));
  }
  return success();
}

/// A wgmma shared-memory matrix descriptor for an operand whose first
/// element is at shared byte address `addr` (i64), 128-byte swizzle:
/// start address >> 4 (14 bits), leading byte offset >> 4 at bit 16,
/// stride byte offset >> 4 at bit 32, swizzle mode 1 at bit 62.
Value wgmmaDescriptor(ImplicitLocOpBuilder &b, Value addr, int64_t lbo,
                      int64_t sbo) {
  Type i64 = b.getI64Type();
  auto c = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, i64, v).getResult();
  };
  Value start = arith::AndIOp::create(b, arith::ShRUIOp::create(b, addr, c(4)),
                                      c(0x3FFF));
  return arith::OrIOp::create(
      b, start, c(((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (1LL << 62)));
}

Value swizzledRowBytes(ImplicitLocOpBuilder &b, Value view, Value extraRows) {
  Value r = arith::AddIOp::create(b, viewRow(b, view), extraRows);
  return arith::IndexCastUIOp::create(
      b, b.getI64Type(), arith::MulIOp::create(b, r, indexConst(b, 128)));
}

Value swizzledAddress(ImplicitLocOpBuilder &b, Value swizzledRoot,
                      ViewInfo info, Value rowBytes, int64_t col) {
  int64_t c = info.col0 + col;
  int64_t off = c / 64 * swizzledBlockBytes(info.root.getType().getDimSize(0)) +
                c % 64 * 2;
  return arith::AddIOp::create(
      b, sharedAddress(b, swizzledRoot),
      arith::AddIOp::create(
          b, rowBytes, arith::ConstantIntOp::create(b, b.getI64Type(), off)));
}

/// The shared-memory byte address of a buffer, as i64.
Value sharedAddress(ImplicitLocOpBuilder &b, Value mem) {
  Value p = memref::ExtractAlignedPointerAsIndexOp::create(b, mem);
  return arith::IndexCastUIOp::create(b, b.getI64Type(), p);
}

/// An i32 register holding two 16-bit floats (the mma.sync operand form).
Value asI32(ImplicitLocOpBuilder &b, Value reg) {
  if (reg.getType().isInteger(32))
    return reg;
  Value asInt =
      vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()), reg);
  return vector::ExtractOp::create(b, asInt, ArrayRef<int64_t>{0});
}

/// Values through an empty side-effecting inline asm that claims to
/// rewrite them: the compiler may not move their computation past the asm
/// (before a wgmma.fence) nor their uses before it (after a
/// wgmma.wait_group) — CUTLASS's warpgroup_fence_operand.
SmallVector<Value> registerFence(ImplicitLocOpBuilder &b,
                                 ArrayRef<Value> vals) {
  if (vals.empty())
    return {};
  std::string constraints;
  SmallVector<Type> types;
  for (auto [i, v] : llvm::enumerate(vals)) {
    types.push_back(v.getType());
    constraints += (i ? ",=" : "=");
    constraints += v.getType().isF32() ? "f" : "r";
  }
  for (size_t i = 0; i < vals.size(); ++i)
    constraints += "," + std::to_string(i);
  Type resType = types.size() == 1
                     ? types[0]
                     : LLVM::LLVMStructType::getLiteral(b.getContext(), types);
  auto asmOp = LLVM::InlineAsmOp::create(
      b, resType, vals, b.getStringAttr(""), b.getStringAttr(constraints),
      b.getUnitAttr(), UnitAttr(), LLVM::TailCallKindAttr(),
      LLVM::AsmDialectAttr(), ArrayAttr());
  if (types.size() == 1)
    return {asmOp.getResult(0)};
  SmallVector<Value> out;
  for (size_t i = 0; i < vals.size(); ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, asmOp.getResult(0), i));
  return out;
}

/// One `wgmma.mma_async.sync.aligned.m64n<N>k16.f32.<t>.<t>` as inline PTX:
/// D (N/2 f32 per thread, the mma.sync m16n8 accumulator layout per warp
/// and 8 columns) += A·B with A from a descriptor (`aDesc`) or from four
/// 32-bit registers (`aRegs`, the mma.sync m16n8k16 A fragment of the
/// warp's 16 rows) and B from a descriptor (`transB`: MN-major). With an
/// empty `acc`, D is not read (scale-d = 0).
SmallVector<Value> wgmma(ImplicitLocOpBuilder &b, Type elem, int64_t n,
                         ArrayRef<Value> acc, Value aDesc,
                         ArrayRef<Value> aRegs, Value bDesc, bool transB,
                         bool transA) {
  const int64_t nd = n / 2;
  std::string text;
  llvm::raw_string_ostream os(text);
  StringRef t = elem.isF16() ? "f16" : "bf16";
  int64_t next = nd + (acc.empty() ? 0 : nd);
  std::string constraints;
  for (int64_t i = 0; i < nd; ++i)
    constraints += i ? ",=f" : "=f";
  for (int64_t i = 0; i < (int64_t)acc.size(); ++i)
    constraints += "," + std::to_string(i);
  std::string aText;
  if (aDesc) {
    aText = "$" + std::to_string(next++);
    constraints += ",l";
  } else {
    aText = "{";
    for (int64_t i = 0; i < 4; ++i) {
      aText += (i ? ", $" : "$") + std::to_string(next++);
      constraints += ",r";
    }
    aText += "}";
  }
  int64_t bIdx = next++, scaleIdx = next++;
  constraints += ",l,r,~{memory}";
  os << "{\n.reg .pred p;\nsetp.ne.b32 p, $" << scaleIdx << ", 0;\n"
     << "wgmma.mma_async.sync.aligned.m64n" << n << "k16.f32." << t << "." << t
     << " {";
  for (int64_t i = 0; i < nd; ++i)
    os << (i ? ", $" : "$") << i;
  os << "}, " << aText << ", $" << bIdx << ", p, 1, 1"
     << (aDesc ? (transA ? ", 1" : ", 0") : "") << ", " << (transB ? 1 : 0)
     << ";\n}";
  SmallVector<Value> operands(acc.begin(), acc.end());
  if (aDesc)
    operands.push_back(aDesc);
  else
    for (Value r : aRegs)
      operands.push_back(asI32(b, r));
  operands.push_back(bDesc);
  operands.push_back(
      arith::ConstantIntOp::create(b, b.getI32Type(), acc.empty() ? 0 : 1));
  Type f32 = b.getF32Type();
  auto resType = LLVM::LLVMStructType::getLiteral(b.getContext(),
                                                  SmallVector<Type>(nd, f32));
  auto asmOp = LLVM::InlineAsmOp::create(
      b, resType, operands, b.getStringAttr(text), b.getStringAttr(constraints),
      b.getUnitAttr(), UnitAttr(), LLVM::TailCallKindAttr(),
      LLVM::AsmDialectAttr(), ArrayAttr());
  SmallVector<Value> out;
  for (int64_t i = 0; i < nd; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, asmOp.getResult(0), i));
  return out;
}

namespace {
/// Warpgroup MMA through the emitter interface: the products are
/// asynchronous (fence, commit, wait) and read B, and A unless it comes
/// from registers, through 128-byte-swizzle descriptors.
class WgmmaEmitter : public MatrixEmitter {
public:
  WgmmaEmitter(const MatrixInstr &mi, const ThreadInfo &ti)
      : MatrixEmitter(mi, ti) {
    MLIRContext *ctx = ti.tid.getContext();
    elem = mi.type == MatrixType::F16 ? Type(Float16Type::get(ctx))
                                      : Type(BFloat16Type::get(ctx));
  }

  /// mla.matmul never picks warpgroup MMA (matmulInstr).
  SmallVector<Value> step(ImplicitLocOpBuilder &, MatmulOp, const AccTile &,
                          Value, ValueRange acc) override {
    assert(false && "warpgroup MMA lowers no mla.matmul");
    return SmallVector<Value>(acc);
  }

  bool multipliesAsync() const override { return true; }
  Value descriptor(ImplicitLocOpBuilder &b, Value addr, int64_t lbo,
                   int64_t sbo) override {
    return wgmmaDescriptor(b, addr, lbo, sbo);
  }
  SmallVector<Value> multiplyAsync(ImplicitLocOpBuilder &b, int64_t n,
                                   ArrayRef<Value> acc, Value aDesc,
                                   ArrayRef<Value> aRegs, Value bDesc,
                                   bool bMNMajor) override {
    return wgmma(b, elem, n, acc, aDesc, aRegs, bDesc, bMNMajor);
  }
  void fence(ImplicitLocOpBuilder &b) override {
    NVVM::WgmmaFenceAlignedOp::create(b);
  }
  void commit(ImplicitLocOpBuilder &b) override {
    NVVM::WgmmaGroupSyncAlignedOp::create(b);
  }
  void wait(ImplicitLocOpBuilder &b, int64_t pending) override {
    NVVM::WgmmaWaitGroupSyncOp::create(b, pending);
  }
  SmallVector<Value> fenceRegisters(ImplicitLocOpBuilder &b,
                                    ArrayRef<Value> regs) override {
    return registerFence(b, regs);
  }

private:
  Type elem;
};
} // namespace

std::unique_ptr<MatrixEmitter> createWgmmaEmitter(const MatrixInstr &mi,
                                                  const ThreadInfo &ti) {
  return std::make_unique<WgmmaEmitter>(mi, ti);
}
} // namespace mla::nvidia
