// RUN: mla-opt %s --mla-select-config="target=sm_90a" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=warps=4,tile_kv=64,stages=2" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s --check-prefix=STAGES2
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=head_group=8" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s --check-prefix=ROWS8
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=warps=2,tile_kv=64,stages=1" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s --check-prefix=SYNC

// Decode, 16 rows on sm_90a: the transposed step (the default config: one
// warpgroup, 64-key tiles, one stage). The probability tile (16 rows x 64
// keys, swizzled) and the warps' exchange buffer (4 x 16) at the top; the
// query and key tiles move to the swizzled layout. In the key loop: S^T
// = K.Q^T as 36 wgmma m64n16k16 from descriptors (A K-major: trans-a 0),
// the column maxima over the lane bits of the key rows (three XOR
// shuffles for each of a lane's four query rows), through the exchange buffer and a barrier; P stored as bf16
// to the swizzled tile, a barrier, then O^T += V^T.P^T as 8 x 4 wgmma
// with A MN-major (trans-a 1); a barrier ends the iteration. After the
// loop every copy is waited for (the accumulator tile shares the operand
// tiles' bytes) and the sums meet through the exchange buffer again.
// CHECK-LABEL: func @decode
// CHECK: memref.alloca() {alignment = 1024 : i64} : memref<1x16x64xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.alloca() : memref<4x16xf32, #gpu.address_space<workgroup>>
// CHECK: memref.alloca() {alignment = 1024 : i64, mla.swizzle_dst = 0 : i64} : memref<9x16x64xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.alloca() {alignment = 1024 : i64, mla.swizzle_dst = 1 : i64} : memref<9x64x64xbf16, #gpu.address_space<workgroup>>
// The queries' copy: cp.async left in flight (no wait, no barrier of its
// own; the key tile's wait takes its group).
// CHECK: nvgpu.device_async_copy %arg0{{.*}} to memref<9x16x64xbf16, #gpu.address_space<workgroup>>
// CHECK-NOT: nvgpu.device_async_wait
// CHECK-NOT: gpu.barrier
// CHECK: scf.for {{.*}} iter_args(
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-36: wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-12: gpu.shuffle  xor %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-NOT: gpu.shuffle
// CHECK: memref.store %{{.*}} : memref<4x16xf32, #gpu.address_space<workgroup>>
// CHECK: nvvm.fence.proxy
// CHECK-NEXT: gpu.barrier
// CHECK: memref.load %{{.*}} : memref<4x16xf32, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}} : memref<1x16x64xbf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.fence.proxy
// CHECK-NEXT: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-32: wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1, 0;
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: gpu.barrier
// CHECK: scf.yield
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK: gpu.barrier
// CHECK-COUNT-64: memref.store %{{.*}} : memref<16x512xf32, strided<[516, 1]>, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}} : memref<4x16xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}} : memref<16xf32, #gpu.address_space<workgroup>>
// CHECK-NOT: nvvm.mma.sync

// Two stages: the key ring holds two 64-key tiles.
// STAGES2: memref.alloca() {alignment = 1024 : i64, mla.swizzle_dst = 1 : i64} : memref<9x128x64xbf16, #gpu.address_space<workgroup>>
// STAGES2: wgmma.mma_async.sync.aligned.m64n16k16

// Eight rows (head_group=8): N = 8.
// ROWS8: memref.alloca() {alignment = 1024 : i64} : memref<1x8x64xbf16, #gpu.address_space<workgroup>>
// ROWS8: wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// ROWS8: wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1, 0;

// Two warps (not one warpgroup): the mma.sync step, split scores.
// SYNC-NOT: wgmma.mma_async
// SYNC: nvvm.mma.sync
func.func @decode(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}
