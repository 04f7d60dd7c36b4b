//===- MatrixInstrTest.cpp - the matrix instruction table -----------------===//
//
// Every fragment layout of MatrixInstrs.def covers its tile exactly once
// (for warpgroup MMA: its 64 x 8 C block), accumulatorsAsA finds that the
// mma.sync and wgmma accumulators of two adjacent 8-column blocks are their
// A fragment (the fused step hands P to P·V in registers) and that MFMA's
// are not, and the chips list the instructions passes expect.
//
//===----------------------------------------------------------------------===//
#include "mla/Target/MatrixInstr.h"
#include "mla/Target/Arch.h"

#include <gtest/gtest.h>

#include <vector>

using namespace mla;

namespace {

/// Counts how often each (row, col) of a rows x cols tile is covered.
void expectCoversOnce(const MatrixInstr &mi, const FragLayout &f, int64_t rows,
                      int64_t cols, const char *which) {
  SCOPED_TRACE(std::string(mi.mnemonic.str()) + " " + which);
  std::vector<int> seen(rows * cols, 0);
  for (int64_t l = 0; l < mi.lanes; ++l)
    for (int64_t e = 0; e < f.elems; ++e) {
      int64_t r = f.rowOf(l, e), c = f.colOf(l, e);
      ASSERT_GE(r, 0);
      ASSERT_LT(r, rows) << "lane " << l << " element " << e;
      ASSERT_GE(c, 0);
      ASSERT_LT(c, cols) << "lane " << l << " element " << e;
      ++seen[r * cols + c];
    }
  for (int64_t i = 0; i < rows * cols; ++i)
    EXPECT_EQ(seen[i], 1) << "element (" << i / cols << ", " << i % cols << ")";
}

TEST(MatrixInstr, LayoutsCoverTheirTilesOnce) {
  for (const MatrixInstr &mi : allMatrixInstrs()) {
    EXPECT_EQ(&matrixInstr(mi.id), &mi);
    expectCoversOnce(mi, mi.c, mi.m, mi.n, "C");
    if (mi.a.elems)
      expectCoversOnce(mi, mi.a, mi.m, mi.k, "A");
    if (mi.b.elems)
      expectCoversOnce(mi, mi.b, mi.k, mi.n, "B");
  }
}

// accumulatorsAsA, which the fused step plans from: mma.sync's and
// warpgroup MMA's accumulators of two n8 tiles are the next A fragment
// (element e: tile e / 4, element e % 4); MFMA's are not (a lane's C
// column is its B column, the register step's transposed form).
TEST(MatrixInstr, AccumulatorsAsA) {
  llvm::SmallVector<AccElement> where;
  for (MatrixInstrId id :
       {MatrixInstrId::MmaSyncM16N8K16BF16, MatrixInstrId::MmaSyncM16N8K16F16,
        MatrixInstrId::WgmmaM64N8K16BF16}) {
    const MatrixInstr &mi = matrixInstr(id);
    ASSERT_TRUE(accumulatorsAsA(mi, mi, where)) << mi.mnemonic.str();
    ASSERT_EQ(where.size(), 8u);
    for (int64_t e = 0; e < 8; ++e) {
      EXPECT_EQ(where[e].tile, e / 4) << mi.mnemonic.str() << " e" << e;
      EXPECT_EQ(where[e].elem, e % 4) << mi.mnemonic.str() << " e" << e;
    }
  }
  for (MatrixInstrId id : {MatrixInstrId::MfmaF32M16N16K16BF16,
                           MatrixInstrId::MfmaF32M32N32K8BF16})
    EXPECT_FALSE(accumulatorsAsA(matrixInstr(id), matrixInstr(id), where))
        << matrixInstr(id).mnemonic.str();
  // Different lanes per instruction: no register hand-over.
  EXPECT_FALSE(accumulatorsAsA(matrixInstr(MatrixInstrId::WgmmaM64N8K16BF16),
                               matrixInstr(MatrixInstrId::MmaSyncM16N8K16BF16),
                               where));
}

TEST(MatrixInstr, ChipsListTheirInstructions) {
  const ArchInfo *sm80 = lookupArch("sm_80"), *sm90 = lookupArch("sm_90a");
  const ArchInfo *gfx942 = lookupArch("gfx942"), *host = lookupArch("host");
  ASSERT_TRUE(sm80 && sm90 && gfx942 && host);
  EXPECT_FALSE(sm80->hasWarpgroupMma());
  EXPECT_TRUE(sm90->hasWarpgroupMma());
  EXPECT_EQ(sm90->matmulInstr(MatrixType::BF16)->id,
            MatrixInstrId::MmaSyncM16N8K16BF16);
  EXPECT_EQ(gfx942->matmulInstr(MatrixType::F16)->id,
            MatrixInstrId::MfmaF32M16N16K16F16);
  EXPECT_EQ(host->matmulInstr(MatrixType::BF16), nullptr);
  for (const ArchInfo &arch : allArchs())
    for (MatrixInstrId id : arch.matrixInstrs) {
      const MatrixInstr &mi = matrixInstr(id);
      MatrixVendor vendor = arch.kind == TargetKind::NVIDIA
                                ? MatrixVendor::NVIDIA
                                : MatrixVendor::AMD;
      EXPECT_EQ(mi.vendor, vendor)
          << arch.name.str() << " lists " << mi.mnemonic.str();
      if (mi.scope != MatrixScope::Warpgroup) {
        EXPECT_EQ(mi.lanes, arch.warpSize) << mi.mnemonic.str();
      }
    }
}

} // namespace
