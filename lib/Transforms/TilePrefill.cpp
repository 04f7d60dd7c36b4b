//===- TilePrefill.cpp - mla-tile for mla.prefill -------------------------===//
#include "AttentionLayout.h"
#include "KindRoles.h"
#include "TileCore.h"
#include "Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mla;
using namespace mla::tiling;

namespace mla::tiling {
//===----------------------------------------------------------------------===//
// mla.prefill
//===----------------------------------------------------------------------===//

void recordPrefillInfo(PrefillOp op) {
  auto func = op->getParentOfType<func::FuncOp>();
  if (!func)
    return;
  Builder b(op.getContext());
  ConfigAttr cfg = op.getConfigAttr();
  std::string config =
      llvm::formatv("tile_q={0} tile_kv={1} warps={2} stages={3}{4}{5}{6}",
                    cfg.getTileQ(), cfg.getTileKv(), cfg.getWarps(),
                    cfg.getStages(), cfg.getWgmma() ? "" : " wgmma=0",
                    cfg.getBlockedCopies() ? "" : " blocked_copies=0",
                    cfg.getOverlap() ? " overlap=1" : "")
          .str();
  NamedAttrList info;
  info.append("kernel", b.getStringAttr(rt::kernels::kPrefill));
  info.append("dtype",
              b.getStringAttr(typeName(op.getQ().getType().getElementType())));
  info.append("heads", b.getI64IntegerAttr(op.getNumHeads()));
  info.append("qk_dim", b.getI64IntegerAttr(op.getQkDim()));
  info.append("v_dim", b.getI64IntegerAttr(op.getVDim()));
  info.append("causal", b.getI64IntegerAttr(op.getCausal() ? 1 : 0));
  info.append("config", b.getStringAttr(config));
  func->setAttr(MLADialect::kKernelInfoAttrName,
                info.getDictionary(op.getContext()));
  tagKindRoles(rt::KernelKind::Prefill,
               {op.getQ(), op.getK(), op.getV(), op.getCuSeqlensQ(),
                op.getCuSeqlensK(), op.getScale(), op.getO(), op.getLse()});
}

/// One workgroup per (query tile, head, request): grid (ceil(T / tile_q), H,
/// B). A request's queries are split into tiles of tile_q rows; workgroups
/// past a request's last tile exit at once. With `causal`, the key loop
/// stops at the tile's last visible key (tiles above the diagonal are never
/// loaded) and tiles are visited last-first, so the heaviest start first.
LogicalResult tilePrefill(PrefillOp op, const ArchInfo *arch) {
  ConfigAttr cfg = op.getConfigAttr();
  if (!cfg)
    return op.emitOpError()
           << "has no #mla.config; run mla-select-config before mla-tile";
  recordPrefillInfo(op);
  ImplicitLocOpBuilder b(op.getLoc(), op);
  const int64_t heads = op.getNumHeads(), dim = op.getQkDim(),
                dv = op.getVDim();
  const int64_t tileQ = cfg.getTileQ(), tile = cfg.getTileKv();
  const bool causal = op.getCausal();
  Type elem = op.getQ().getType().getElementType();
  Type outElem = op.getO().getType().getElementType();

  Value c1 = indexConst(b, 1);
  // Folded where the extents are static: the launch plan takes constants
  // or formulas of dynamic dims, not arithmetic on constants.
  Value numQTiles = b.createOrFold<arith::CeilDivSIOp>(
      dimValue(b, op.getQ(), 0), indexConst(b, tileQ));
  Value batch =
      b.createOrFold<arith::SubIOp>(dimValue(b, op.getCuSeqlensQ(), 0), c1);
  auto [grid, ids] = createGrid(b, numQTiles, indexConst(b, heads), batch);
  grid.setConfigAttr(cfg);
  {
    ImplicitLocOpBuilder g = ImplicitLocOpBuilder::atBlockBegin(
        op.getLoc(), &grid.getBody().front());
    Value head = ids[1], req = ids[2];
    Value c0 = indexConst(g, 0), g1 = indexConst(g, 1);
    Value cTileQ = indexConst(g, tileQ);
    // Heaviest tiles first when causal.
    Value qTileIdx = ids[0];
    if (causal) {
      Value n =
          arith::CeilDivSIOp::create(g, dimValue(g, op.getQ(), 0), cTileQ);
      qTileIdx =
          arith::SubIOp::create(g, arith::SubIOp::create(g, n, g1), ids[0]);
    }
    auto loadIndex = [&](Value cu, Value i) -> Value {
      Value v = memref::LoadOp::create(g, cu, ValueRange{i});
      return arith::IndexCastOp::create(g, g.getIndexType(), v);
    };
    Value reqNext = arith::AddIOp::create(g, req, g1);
    Value qStart = loadIndex(op.getCuSeqlensQ(), req);
    Value qLen = maxIdx(g,
                        arith::SubIOp::create(
                            g, loadIndex(op.getCuSeqlensQ(), reqNext), qStart),
                        c0);
    Value kStart = loadIndex(op.getCuSeqlensK(), req);
    Value kLen = maxIdx(g,
                        arith::SubIOp::create(
                            g, loadIndex(op.getCuSeqlensK(), reqNext), kStart),
                        c0);
    Value q0 = arith::MulIOp::create(g, qTileIdx, cTileQ);
    // Query i of the request sees keys j < i + 1 + (kLen - qLen).
    Value shift = arith::SubIOp::create(g, kLen, qLen);

    AttentionTiles t =
        allocateTiles(g, tileQ, tile, dim, dv, elem, /*separateValues=*/true,
                      op.getMask().empty() ? cfg.getStages() : 1);

    auto activeIf = scf::IfOp::create(
        g, arith::CmpIOp::create(g, arith::CmpIPredicate::slt, q0, qLen),
        /*withElseRegion=*/false);
    g.setInsertionPoint(activeIf.thenBlock()->getTerminator());
    Value rowsValid = minIdx(g, cTileQ, arith::SubIOp::create(g, qLen, q0));
    Value firstRow = arith::AddIOp::create(g, qStart, q0);
    // Keys this tile sees at all: up to its last row's causal limit.
    Value end = kLen;
    if (causal)
      end = minIdx(g, kLen,
                   maxIdx(g,
                          arith::AddIOp::create(
                              g, arith::AddIOp::create(g, q0, cTileQ), shift),
                          c0));
    t.overlap = cfg.getOverlap() != 0;
    initSoftmaxState(g, t);
    if (prefillQueriesInPlace(arch, !op.getMask().empty())) {
      // The step reads q[firstRow + r, head, :] itself (AttentionLayout.h).
      t.qTile = queryView(g, op.getQ(), {firstRow, head, g.getIndexAttr(0)},
                          {tileQ, 1, dim}, tileQ, dim);
    } else {
      maskedRowCopy(g, t.qTile, tileQ, dim, rowsValid, op.getQ(),
                    [&](ImplicitLocOpBuilder &ib, Value r, Value d) {
                      return SmallVector<Value>{
                          arith::AddIOp::create(ib, firstRow, r), head, d};
                    });
    }
    // Row r: request req, head `head`, query position q0 + r + Lk - Lq.
    Variants variants = variantsOf(op.getScore(), op.getMask(), op.getSink());
    variants.position = [&](ImplicitLocOpBuilder &rb,
                            Value row) -> std::array<Value, 3> {
      return {
          req, head,
          arith::AddIOp::create(rb, arith::AddIOp::create(rb, q0, row), shift)};
    };
    emitOnlineSoftmax(
        g, t, c0, end, op.getScale(), variants,
        [&](ImplicitLocOpBuilder &tb, Value t0, Value kTile, Value vTile) {
          Value limit = arith::SubIOp::create(tb, end, t0);
          Value keyRow = arith::AddIOp::create(tb, kStart, t0);
          auto at = [&](ImplicitLocOpBuilder &ib, Value r, Value d) {
            return SmallVector<Value>{arith::AddIOp::create(ib, keyRow, r),
                                      head, d};
          };
          if (kTile)
            maskedRowCopy(tb, kTile, tile, dim, limit, op.getK(), at);
          if (vTile)
            maskedRowCopy(tb, vTile, tile, dv, limit, op.getV(), at);
        },
        [&](ImplicitLocOpBuilder &rb, Value row) -> Value {
          if (!causal)
            return kLen;
          return arith::AddIOp::create(
              rb,
              arith::AddIOp::create(rb, arith::AddIOp::create(rb, q0, row),
                                    shift),
              indexConst(rb, 1));
        });

    if (variants.sink)
      applySink(g, t, variants);

    // Epilogue: rows of this tile that are queries write o and lse.
    auto ifQuery = [&](ImplicitLocOpBuilder &rb, Value row,
                       function_ref<void(ImplicitLocOpBuilder &, Value)> body) {
      Value isQuery =
          arith::CmpIOp::create(rb, arith::CmpIPredicate::slt, row, rowsValid);
      scf::IfOp::create(rb, isQuery, [&](OpBuilder &nb, Location loc) {
        ImplicitLocOpBuilder ib(loc, nb);
        body(ib, arith::AddIOp::create(ib, firstRow, row));
        scf::YieldOp::create(ib);
      });
    };
    emitFinish(
        g, t, variants.sink != nullptr,
        [&](ImplicitLocOpBuilder &rb, Value row, Value col, Value o) {
          ifQuery(rb, row, [&](ImplicitLocOpBuilder &ib, Value token) {
            vector::StoreOp::create(ib, castFloat(ib, o, outElem), op.getO(),
                                    ValueRange{token, head, col});
          });
        },
        [&](ImplicitLocOpBuilder &rb, Value row, Value lse) {
          ifQuery(rb, row, [&](ImplicitLocOpBuilder &ib, Value token) {
            memref::StoreOp::create(ib, lse, op.getLse(),
                                    ValueRange{head, token});
          });
        });
  }
  op.erase();
  return success();
}

} // namespace mla::tiling
