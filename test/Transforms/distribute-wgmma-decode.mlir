// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=tile_kv=32,lead_scores=0" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=tile_kv=32,wgmma=0" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s --check-prefix=SYNC

// Absorbed decode, 64 heads = 64 rows, 8 warps: split scores on warpgroup
// MMA (lead_scores = 0; the default, lead scores, in
// distribute-wgmma-lead.mlir). Warpgroup g (warps 4g..4g+3, rows 16·(w % 4)) computes the scores
// of key half g for all 64 rows (wgmma m64n16k16, K = 192 / 16 = 12
// steps, the key descriptor 16 rows = 2048 bytes in for g = 1), row maxima
// and P meet in shared memory, then P·V for value half g: P from the
// probability tile by ldmatrix into A registers, V = the first 128
// columns of the same swizzled key buffer, MN-major, 64 columns per
// warpgroup (m64n64k16, 32 keys = 2 steps). No ping-pong barrier (the
// warpgroups already meet at the block barriers of split scores).
// CHECK-LABEL: func @decode
// CHECK-DAG: memref.alloca() {alignment = 1024 : i64, mla.swizzle_dst = 0 : i64} : memref<3x64x64xbf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.alloca() {alignment = 1024 : i64, mla.swizzle_dst = 1 : i64} : memref<3x64x64xbf16, #gpu.address_space<workgroup>>
// CHECK: scf.for
// CHECK-NOT: nvvm.barrier id
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-12: wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: gpu.shuffle  xor
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// CHECK: nvgpu.ldmatrix
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-2: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: scf.yield
// SYNC-LABEL: func @decode
// SYNC: nvvm.mma.sync
// SYNC-NOT: nvvm.wgmma
// SYNC-NOT: wgmma.mma_async
func.func @decode(%q: memref<?x1x64x192xbf16>, %kv: memref<?x64x192xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x64x128xbf16>, %lse: memref<?x1x64xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x64x192xbf16>, memref<?x64x192xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x64x128xbf16>, memref<?x1x64xf32>
  return
}
