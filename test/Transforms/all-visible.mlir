// RUN: mla-opt %s --mla-select-config=target=sm_80 --mla-distribute="default-warps=1" --canonicalize | FileCheck %s --check-prefix=NV
// RUN: mla-opt %s --mla-select-config=target=gfx942 --mla-distribute="default-warps=2" --canonicalize | FileCheck %s --check-prefix=AMD
// RUN: mla-opt %s --mla-expand-softmax | FileCheck %s --check-prefix=HOST

// mla.attention_step's `all_visible`: where it is true every element of
// the tile is visible, whatever the element region yields. The fused
// NVIDIA step and AMD's register step branch on it to a softmax without
// the per-element check (no compare and no select of the visibility in
// the first branch); the host's decomposition folds it into the region's
// visibility.

// NV-LABEL: func @all_visible
// NV: scf.for {{.*}} iter_args(
// NV: %[[ALL:.*]] = arith.cmpi sle
// NV: nvvm.mma.sync
// NV: scf.if %[[ALL]] -> (f32
//   The visible branch: no key compared with the sequence end.
// NV-NOT: arith.cmpi ult
// NV: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// NV: } else {
//   The general one: each key compared, its score and P selected.
// NV: arith.cmpi ult
// NV: arith.select
// NV: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// NV: }
// NV: nvvm.mma.sync

// AMD-LABEL: func @all_visible
// AMD: scf.for {{.*}} iter_args(
// AMD: %[[ALL:.*]] = arith.cmpi sle
// AMD: amdgpu.mfma
// AMD: scf.if %[[ALL]] -> (f32
// AMD-NOT: arith.cmpi ult
// AMD: llvm.call_intrinsic "llvm.amdgcn.exp2.f32"
// AMD: } else {
// AMD: arith.cmpi ult
// AMD: arith.select
// AMD: llvm.call_intrinsic "llvm.amdgcn.exp2.f32"
// AMD: }
// AMD: amdgpu.mfma

//   Host: visible = all_visible or the region's.
// HOST-LABEL: func @all_visible
// HOST: %[[ALL:.*]] = arith.cmpi sle
// HOST-NOT: mla.attention_step
// HOST: scf.parallel
// HOST: %[[VIS:.*]] = arith.cmpi ult, %{{.*}}, %arg0
// HOST: %[[OR:.*]] = arith.ori %[[ALL]], %[[VIS]] : i1
// HOST: arith.select %[[OR]]
func.func @all_visible(%n: index, %scale: f32) {
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
      %te = arith.addi %t, %c32 : index
      %all = arith.cmpi sle, %te, %n : index
      mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 all_visible(%all) : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16, strided<[64, 1]>>, memref<16x32xf32, strided<[36, 1]>>, memref<16xf32>, memref<16xf32> {
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
