//===- TileAppendKV.cpp - mla-tile for mla.append_kv ----------------------===//
//
// mla.append_kv -> mla.grid(token, 1, 1), one workgroup per new token (the
// layout of vLLM's concat_and_cache_mla). Each workgroup
//   * reads its token's slot once: slot = slot_mapping[t] (sign-extended),
//     valid = slot <u pages * P (one unsigned compare rejects -1 padding,
//     every other negative slot and every slot past the pool),
//     page = slot / P, offset = slot % P in 32-bit unsigned arithmetic
//     (shifts and masks for powers of two; a run-time P is clamped to
//     [1, 2^31] as divisor: P = 0 leaves no valid slot);
//   * copies the row in an scf.parallel over 16-byte chunks:
//     `scf.if valid { kv[page, offset, d:d+w] = kv_new[t, d:d+w] }`.
// On GPUs mla-distribute spreads the chunks over the workgroup's threads; on
// AMD mla-amdgpu-buffer-ops turns the guarded store into an unconditional
// buffer store sent out of bounds when the slot is invalid (no branch).
//
//===----------------------------------------------------------------------===//
#include "TileAppendKV.h"
#include "KindRoles.h"
#include "Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "mla-tile"

using namespace mlir;

namespace mla {
namespace {

/// Dim `d` of `memref` as an index value: a constant when static.
Value dimOrConst(ImplicitLocOpBuilder &b, Value memref, int64_t d) {
  auto type = cast<MemRefType>(memref.getType());
  if (!type.isDynamicDim(d))
    return indexConst(b, type.getDimSize(d));
  return memref::DimOp::create(b, memref, d);
}

/// Roles and `mla.kernel_info` for the package manifest.
LogicalResult recordAppendKVInfo(AppendKVOp op) {
  auto func = op->getParentOfType<func::FuncOp>();
  if (!func)
    return success();
  if (auto existing = func->getAttrOfType<DictionaryAttr>(
          MLADialect::kKernelInfoAttrName)) {
    auto kind = existing.getAs<StringAttr>("kernel");
    return op.emitOpError()
           << "shares function '" << func.getSymName()
           << "' with another kernel ('" << (kind ? kind.getValue() : "?")
           << "'); a package describes one kernel: put mla.append_kv in a "
              "function of its own";
  }
  Builder b(op.getContext());
  int64_t page = op.getPageSize();
  int64_t latent = op.getLatentDimOrRow();
  NamedAttrList info;
  info.append("kernel", b.getStringAttr(rt::kernels::kAppendKv));
  info.append("dtype", b.getStringAttr(
                           typeName(op.getKvNew().getType().getElementType())));
  info.append("latent_dim", b.getI64IntegerAttr(latent));
  info.append("rope_dim", b.getI64IntegerAttr(op.getRowWidth() - latent));
  info.append("page_size",
              b.getI64IntegerAttr(ShapedType::isDynamic(page) ? 0 : page));
  func->setAttr(MLADialect::kKernelInfoAttrName,
                info.getDictionary(op.getContext()));
  tagKindRoles(rt::KernelKind::AppendKv,
               {op.getKvNew(), op.getSlotMapping(), op.getKv()});
  return success();
}

} // namespace

LogicalResult tileAppendKV(AppendKVOp op) {
  if (failed(recordAppendKVInfo(op)))
    return failure();
  ImplicitLocOpBuilder b(op.getLoc(), op);
  Value kvNew = op.getKvNew(), slots = op.getSlotMapping(), kv = op.getKv();
  Type elem = op.getKvNew().getType().getElementType();
  const int64_t width = op.getRowWidth();
  // 16-byte chunks (one per GPU thread and iteration): 8 bf16/f16 or 4 f32
  // elements, fewer when the row width needs it.
  const int64_t vw = std::min(vectorWidthFor(width),
                              128 / int64_t(elem.getIntOrFloatBitWidth()));
  auto vecType = VectorType::get({vw}, elem);

  Value c1 = indexConst(b, 1);
  auto grid = GridOp::create(b, dimOrConst(b, kvNew, 0), c1, c1, ConfigAttr(),
                             IntegerAttr(), IntegerAttr());
  Block *body = new Block();
  grid.getBody().push_back(body);
  Value token = body->addArgument(b.getIndexType(), op.getLoc());
  body->addArgument(b.getIndexType(), op.getLoc());
  body->addArgument(b.getIndexType(), op.getLoc());

  ImplicitLocOpBuilder g =
      ImplicitLocOpBuilder::atBlockBegin(op.getLoc(), body);
  // The token's slot, once per workgroup.
  Value slot32 = memref::LoadOp::create(g, slots, ValueRange{token});
  Value slot = arith::IndexCastOp::create(g, g.getIndexType(), slot32);
  Value pageSize = dimOrConst(g, kv, 1);
  Value capacity = arith::MulIOp::create(g, dimOrConst(g, kv, 0), pageSize);
  // Unsigned: -1 (padding) and every other negative slot are huge.
  Value valid =
      arith::CmpIOp::create(g, arith::CmpIPredicate::ult, slot, capacity);
  // Page and offset in 32-bit unsigned arithmetic (a valid slot is in
  // [0, 2^31); a 64-bit division is a software routine on GPUs). The divisor
  // is P clamped to [1, 2^31]: a run-time P of 0 (an empty pool) leaves no
  // valid slot but must not divide by zero, and a P above every slot gives
  // page 0 and offset = slot, as the exact division does.
  constexpr int64_t kMaxDivisor = int64_t(1) << 31;
  Type i32 = g.getI32Type();
  Value divisor;
  if (int64_t p = op.getPageSize(); !ShapedType::isDynamic(p)) {
    divisor = arith::ConstantOp::create(
        g, g.getIntegerAttr(i32, std::min(p, kMaxDivisor)));
  } else {
    Value clamped = arith::MinUIOp::create(
        g, arith::MaxUIOp::create(g, pageSize, c1), indexConst(g, kMaxDivisor));
    divisor = arith::IndexCastUIOp::create(g, i32, clamped);
  }
  Value page = arith::IndexCastUIOp::create(
      g, g.getIndexType(), arith::DivUIOp::create(g, slot32, divisor));
  Value offset = arith::IndexCastUIOp::create(
      g, g.getIndexType(), arith::RemUIOp::create(g, slot32, divisor));

  Value cVw = indexConst(g, vw);
  parallelFor(
      g, {indexConst(g, width / vw)},
      [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
        Value d = arith::MulIOp::create(rb, iv[0], cVw);
        scf::IfOp::create(rb, valid, [&](OpBuilder &nb, Location loc) {
          ImplicitLocOpBuilder ib(loc, nb);
          Value row =
              vector::LoadOp::create(ib, vecType, kvNew, ValueRange{token, d});
          vector::StoreOp::create(ib, row, kv, ValueRange{page, offset, d});
          scf::YieldOp::create(ib);
        });
      });
  LLVM_DEBUG(llvm::dbgs() << "append_kv: " << width / vw << " chunks of " << vw
                          << " elements per token\n");
  op.erase();
  return success();
}

} // namespace mla
