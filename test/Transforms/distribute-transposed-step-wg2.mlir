// RUN: mla-opt %s --mla-select-config="target=sm_90a" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=wgmma=0" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s --check-prefix=SYNC

// Decode, 32 rows on sm_90a (Sq = 2 at 16 heads): the transposed step on
// two warpgroups (the default config: warps=8, 64-key tiles, two stages).
// Each warpgroup computes all of S^T = K.Q^T (36 wgmma m64n32k16), reduces
// its rows' maxima over its own four warps (eight rows a lane, three XOR
// shuffles each, then four of the eight exchange slots), writes its own
// copy of P (column block = warpgroup of a 2 x 32 x 64 swizzled tile) and
// computes O^T += V^T.P^T for its half of the value columns: 4 blocks x 4
// wgmma with A MN-major. After the loop each lane writes 4 x 4 fragments
// of four accumulators.
// CHECK-LABEL: func @decode
// CHECK: memref.alloca() {alignment = 1024 : i64} : memref<2x32x64xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.alloca() : memref<8x32xf32, #gpu.address_space<workgroup>>
// CHECK: memref.alloca() {alignment = 1024 : i64, mla.swizzle_dst = 1 : i64} : memref<9x128x64xbf16, #gpu.address_space<workgroup>>
// The warpgroup and the warp in it.
// CHECK: arith.divui %{{.*}}, %c4
// CHECK: arith.remui %{{.*}}, %c4
// CHECK: scf.for {{.*}} iter_args(
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-36: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-24: gpu.shuffle  xor %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-NOT: gpu.shuffle
// CHECK: memref.store %{{.*}} : memref<8x32xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK-COUNT-32: memref.load %{{.*}} : memref<8x32xf32, #gpu.address_space<workgroup>>
// CHECK-COUNT-16: memref.store %{{.*}} : memref<2x32x64xbf16, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-16: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1, 0;
// CHECK-NOT: wgmma.mma_async
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: gpu.barrier
// CHECK: scf.yield
// CHECK-COUNT-64: memref.store %{{.*}} : memref<32x512xf32, strided<[516, 1]>, #gpu.address_space<workgroup>>
// CHECK-NOT: nvvm.mma.sync

// Without warpgroup MMA: the mma.sync step (the default before).
// SYNC-NOT: wgmma.mma_async
// SYNC: nvvm.mma.sync
func.func @decode(%q: memref<?x2x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x2x16x512xbf16>, %lse: memref<?x2x16xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x2x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x2x16x512xbf16>, memref<?x2x16xf32>
  return
}
