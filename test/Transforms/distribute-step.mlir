// RUN: mla-opt %s -split-input-file --mla-select-config=target=sm_80 --mla-distribute="default-warps=2" | FileCheck %s --check-prefix=SPLIT
// RUN: mla-opt %s -split-input-file --mla-select-config=target=sm_80 --mla-distribute="default-warps=1" | FileCheck %s --check-prefix=WHOLE
// RUN: mla-opt %s -split-input-file --mla-select-config=target=sm_80 --mla-distribute="default-warps=8" | FileCheck %s --check-prefix=PHASES
// RUN: mla-opt %s -split-input-file --mla-select-config=target=gfx942 --mla-distribute="default-warps=2" | FileCheck %s --check-prefix=AMD
// RUN: mla-opt %s -split-input-file --mla-select-config=target=sm_90a --mla-distribute="default-warps=8" | FileCheck %s --check-prefix=WGMMA

// The fused attention step, from hand-written blockwise IR: one
// mla.attention_step over grid tiles at the end of its key loop.

// Two warps share the 16-row block (split scores): each computes half of
// the 32 keys with mma.sync, the halves' row maxima meet in shared memory,
// P goes through a probability tile, both warps read it with ldmatrix.
// SPLIT-LABEL: func @step
// WGMMA-LABEL: func @step
// SPLIT-NOT: mla.attention_step
// SPLIT-NOT: mla.online_softmax
// SPLIT: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32
// SPLIT: nvvm.mma.sync
// SPLIT: gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : f32
// SPLIT: gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}} : f32
// SPLIT: memref.store %{{.*}} : memref<2x16xf32, #gpu.address_space<workgroup>>
// SPLIT: gpu.barrier
// SPLIT: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// SPLIT: vector.store %{{.*}} : memref<16x32xbf16, strided<[40, 1]>, #gpu.address_space<workgroup>>, vector<2xbf16>
// SPLIT: gpu.barrier
// SPLIT: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false}
// SPLIT: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = true}
// SPLIT: nvvm.mma.sync
// SPLIT: scf.yield
//   After the loop: the second half's row sums join the first's.
// SPLIT: gpu.shuffle  xor
// SPLIT: memref.store %{{.*}} : memref<16xf32, #gpu.address_space<workgroup>>
// SPLIT: gpu.barrier

// One warp owns the row block (whole scores): P stays in registers as the
// A operand of P·V; no probability tile exists.
// WHOLE-LABEL: func @step
// WHOLE-NOT: memref<16x40xbf16
// WHOLE: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32
// WHOLE: nvvm.mma.sync
// WHOLE: arith.truncf %{{.*}} : f32 to bf16
// WHOLE: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = true}
// WHOLE: nvvm.mma.sync
// WHOLE: scf.yield

// Eight warps on one row block: no fused strategy (at most two warps per
// block); the step is decomposed into its matmuls and the softmax phases.
// PHASES-LABEL: func @step
// PHASES-NOT: mla.attention_step
//   Its scratch: scores and probabilities in front of the accumulator.
// PHASES: memref.alloca() : memref<16x36xf32, #gpu.address_space<workgroup>>
// PHASES: memref.alloca() : memref<16x40xbf16, #gpu.address_space<workgroup>>
// PHASES: memref.alloca() : memref<16x36xf32, #gpu.address_space<workgroup>>
// PHASES: scf.for
// PHASES: nvvm.mma.sync
// PHASES: arith.maximumf
// PHASES: nvvm.mma.sync

// On AMD the step is decomposed; both products on MFMA.
// AMD-LABEL: func @step
// AMD-NOT: mla.attention_step
// AMD: scf.for
// AMD: amdgpu.mfma
// AMD: llvm.call_intrinsic "llvm.amdgcn.exp2.f32"
// AMD: amdgpu.mfma
func.func @step(%n: index, %scale: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %q = memref.alloca() : memref<16x64xbf16>
    %k = memref.alloca() : memref<32x64xbf16>
    %v = memref.subview %k[0, 0] [32, 32] [1, 1] : memref<32x64xbf16> to memref<32x32xbf16, strided<[64, 1]>>
    %accb = memref.alloca() : memref<16x36xf32>
    %acc = memref.subview %accb[0, 0] [16, 32] [1, 1] : memref<16x36xf32> to memref<16x32xf32, strided<[36, 1]>>
    %m = memref.alloca() : memref<16xf32>
    %l = memref.alloca() : memref<16xf32>
    scf.for %t = %c0 to %n step %c32 {
      mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16, strided<[64, 1]>>, memref<16x32xf32, strided<[36, 1]>>, memref<16xf32>, memref<16xf32> {
      ^bb0(%r: index, %c: index, %s: f32):
        %sx = arith.mulf %s, %scale : f32
        %key = arith.addi %t, %c : index
        %vis = arith.cmpi ult, %key, %n : index
        mla.yield %sx, %vis : f32, i1
      }
    }
  }
  return
}

// -----

// A step whose state another op of the loop reads cannot keep it in
// registers: decomposed (the P·V product then keeps no hoisted
// accumulators either).
// SPLIT-LABEL: func @shared_state
// SPLIT-NOT: mla.attention_step
// SPLIT: scf.for %{{.*}} = %c0{{.*}} to %arg0 step %c32{{.*}} {
// SPLIT: arith.maximumf
func.func @shared_state(%n: index, %scale: f32, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %q = memref.alloca() : memref<16x64xbf16>
    %k = memref.alloca() : memref<32x64xbf16>
    %v = memref.subview %k[0, 0] [32, 32] [1, 1] : memref<32x64xbf16> to memref<32x32xbf16, strided<[64, 1]>>
    %acc = memref.alloca() : memref<16x32xf32>
    %m = memref.alloca() : memref<16xf32>
    %l = memref.alloca() : memref<16xf32>
    scf.for %t = %c0 to %n step %c32 {
      mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16, strided<[64, 1]>>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
      ^bb0(%r: index, %c: index, %s: f32):
        %vis = arith.cmpi ult, %c, %n : index
        mla.yield %s, %vis : f32, i1
      }
      %mx = memref.load %m[%c0] : memref<16xf32>
      memref.store %mx, %out[%c0] : memref<16xf32>
    }
  }
  return
}

// -----

// sm_90a, 64 rows on 8 warps (two warpgroups split the 32 keys and the
// value columns): both products by wgmma from swizzled tiles; the query,
// key and value tiles move to 1024-byte aligned swizzled buffers.
// WGMMA-LABEL: func @warpgroup
// WGMMA: memref.alloca() {alignment = 1024 : i64, {{.*}}} : memref<1x64x64xbf16, #gpu.address_space<workgroup>>
// WGMMA: memref.alloca() {alignment = 1024 : i64, {{.*}}} : memref<1x32x64xbf16, #gpu.address_space<workgroup>>
// WGMMA: memref.alloca() {alignment = 1024 : i64, {{.*}}} : memref<2x32x64xbf16, #gpu.address_space<workgroup>>
// WGMMA: scf.for
// WGMMA: nvvm.wgmma.fence.aligned
// WGMMA: wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16
// WGMMA: nvvm.wgmma.commit.group.sync.aligned
// WGMMA: nvvm.wgmma.wait.group.sync.aligned 0
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// WGMMA: scf.yield
// PHASES-LABEL: func @warpgroup
// WHOLE-LABEL: func @warpgroup
// SPLIT-LABEL: func @warpgroup
// AMD-LABEL: func @warpgroup
func.func @warpgroup(%n: index, %scale: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %q = memref.alloca() : memref<64x64xbf16>
    %k = memref.alloca() : memref<32x64xbf16>
    %v = memref.alloca() : memref<32x128xbf16>
    %acc = memref.alloca() : memref<64x128xf32>
    %m = memref.alloca() : memref<64xf32>
    %l = memref.alloca() : memref<64xf32>
    scf.for %t = %c0 to %n step %c32 {
      mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<64x64xbf16>, memref<32x64xbf16>, memref<32x128xbf16>, memref<64x128xf32>, memref<64xf32>, memref<64xf32> {
      ^bb0(%r: index, %c: index, %s: f32):
        %sx = arith.mulf %s, %scale : f32
        %true = arith.constant true
        mla.yield %sx, %true : f32, i1
      }
    }
  }
  return
}
