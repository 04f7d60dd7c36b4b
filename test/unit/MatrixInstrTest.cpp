//===- MatrixInstrTest.cpp - the matrix instruction table -----------------===//
//
// Every fragment layout of MatrixInstrs.def covers its tile exactly once
// (for warpgroup MMA: its 64 x 8 C block), the mma.sync accumulator layout
// of two adjacent 8-column blocks is its A layout (the fused step hands P
// to P·V in registers), and the chips list the instructions passes expect.
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

TEST(MatrixInstr, MmaSyncAccumulatorsAreTheNextAOperand) {
  const MatrixInstr &mi = matrixInstr(MatrixInstrId::MmaSyncM16N8K16BF16);
  for (int64_t l = 0; l < mi.lanes; ++l)
    for (int64_t e = 0; e < mi.a.elems; ++e) {
      // A element e: C block e / 4 (columns +8), C element e % 4.
      int64_t blk = e / 4, ce = e % 4;
      EXPECT_EQ(mi.a.rowOf(l, e), mi.c.rowOf(l, ce));
      EXPECT_EQ(mi.a.colOf(l, e), mi.c.colOf(l, ce) + 8 * blk);
    }
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
