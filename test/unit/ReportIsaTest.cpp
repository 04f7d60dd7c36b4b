//===- ReportIsaTest.cpp - mla-compile --report's PTX readers -------------===//
//
// The PTX side of tools/mla-compile/ReportIsa.cpp on hand-written PTX:
// inline asm whose braces close at column 0, guarded and unguarded
// branches, a loop nested in the key loop, a branch inside a loop (one
// iteration's shortest and longest path), and a module-scope shared
// variable that the body names only after an inline asm block.
//
//===----------------------------------------------------------------------===//
#include "Report.h"

#include <gtest/gtest.h>

using namespace mla::report;

namespace {

constexpr const char *kPtx = R"(//
.version 8.0
.target sm_90a
.address_size 64
.shared .align 16 .b8 late[512];

.visible .entry k(
	.param .u64 k_param_0
)
.maxntid 128, 1, 1
{
	.reg .b32 %r<10>;
	.reg .pred %p<4>;
	mov.b32 %r1, 0;
$L__BB0_1:
	// begin inline asm
	{
.reg .pred p;
setp.ne.b32 p, %r1, 0;
wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%r2, %r3}, %rd1, %rd2, p, 1, 1, 0, 0;
}
	// end inline asm
	cp.async.cg.shared.global [%rd3], [%rd4], 16;
$L__BB0_2:
	cp.async.cg.shared.global [%rd3+16], [%rd4+16], 16;
	add.s32 %r1, %r1, 1;
	setp.lt.u32 %p1, %r1, 4;
	@%p1 bra $L__BB0_2;
	cp.async.commit_group;
	cp.async.wait_group 0;
	bar.sync 0;
	setp.lt.u32 %p2, %r1, 8;
	@%p2 bra $L__BB0_1;
	st.shared.b32 [late], %r1;
	ret;
}

.visible .entry branchy(
	.param .u64 branchy_param_0
)
{
	mov.b32 %r1, 0;
$L__BB2_1:
	add.s32 %r3, %r1, 7;
	setp.lt.u32 %p1, %r1, 3;
	@%p1 bra $L__BB2_3;
	mul.lo.s32 %r2, %r1, 3;
	add.s32 %r2, %r2, 1;
	bra.uni $L__BB2_4;
$L__BB2_3:
	add.s32 %r2, %r1, 1;
$L__BB2_4:
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%r4, %r5, %r6, %r7}, {%r1, %r2, %r3, %r3}, {%r1, %r2}, {%r4, %r5, %r6, %r7};
	add.s32 %r1, %r1, 1;
	setp.lt.u32 %p2, %r1, 8;
	@%p2 bra $L__BB2_1;
	ret;
}

.visible .entry straight(
	.param .u64 straight_param_0
)
{
	ld.global.b32 %r1, [%rd1];
	bra.uni $L__BB1_1;
$L__BB1_1:
	ret;
}
)";

TEST(ReportPtx, KeyLoopIsTheOuterLoopWithTheMatrixInstructions) {
  std::optional<PtxLoop> loop = findPtxKeyLoop(kPtx, "k");
  ASSERT_TRUE(loop);
  EXPECT_EQ(loop->label, "$L__BB0_1");
  EXPECT_EQ(loop->chosenBy, "mma");
  // setp and wgmma of the inline asm, a cp.async, the inner loop's four
  // (once), commit, wait, bar.sync, setp and the guarded branch back.
  EXPECT_EQ(loop->counts.instructions, 12);
  EXPECT_EQ(loop->counts.wgmma, 1);
  EXPECT_EQ(loop->counts.mma, 0);
  EXPECT_EQ(loop->counts.cpAsync, 2);
  EXPECT_EQ(loop->counts.waits, 1);
  EXPECT_EQ(loop->counts.barriers, 1);
  EXPECT_EQ(loop->counts.stShared, 0);
  ASSERT_EQ(loop->inner.size(), 1u);
  EXPECT_EQ(loop->inner[0].first, "$L__BB0_2");
  EXPECT_EQ(loop->inner[0].second.instructions, 4);
  EXPECT_EQ(loop->inner[0].second.cpAsync, 1);
  // 1-based lines of the PTX text: the label line to the branch back.
  EXPECT_EQ(loop->firstLine, 15);
  EXPECT_EQ(loop->lastLine, 33);
}

TEST(ReportPtx, IterationPathsThroughABranch) {
  // Head 3, one side 3 (its bra.uni included), the other 1, tail 4: an
  // iteration runs 8 or 10 of the loop's 11 instructions.
  std::optional<PtxLoop> loop = findPtxKeyLoop(kPtx, "branchy");
  ASSERT_TRUE(loop);
  EXPECT_EQ(loop->label, "$L__BB2_1");
  EXPECT_EQ(loop->counts.instructions, 11);
  EXPECT_EQ(loop->counts.mma, 1);
  ASSERT_TRUE(loop->paths);
  EXPECT_EQ(loop->paths->shortest, 8);
  EXPECT_EQ(loop->paths->longest, 10);
}

TEST(ReportPtx, NoPathsAroundAnInnerLoop) {
  std::optional<PtxLoop> loop = findPtxKeyLoop(kPtx, "k");
  ASSERT_TRUE(loop);
  EXPECT_FALSE(loop->paths);
}

TEST(ReportPtx, NoLoopNoEntry) {
  // A forward unconditional branch closes no cycle.
  EXPECT_FALSE(findPtxKeyLoop(kPtx, "straight"));
  EXPECT_FALSE(findPtxKeyLoop(kPtx, "missing"));
}

TEST(ReportPtx, KernelBodyRunsPastInlineAsm) {
  // `late` is named only after the inline asm block, whose closing brace
  // is at column 0: the body (and so its static shared bytes) goes on to
  // the brace that closes the entry.
  llvm::Expected<PtxKernel> k = readPtxKernel(kPtx, "k");
  ASSERT_TRUE(static_cast<bool>(k)) << llvm::toString(k.takeError());
  EXPECT_EQ(k->staticShared, 512);
  ASSERT_TRUE(k->maxntid);
  EXPECT_EQ((*k->maxntid)[0], 128);
  llvm::Expected<PtxKernel> none = readPtxKernel(kPtx, "missing");
  ASSERT_FALSE(static_cast<bool>(none));
  EXPECT_NE(llvm::toString(none.takeError()).find("no .entry missing"),
            std::string::npos);
}

} // namespace
