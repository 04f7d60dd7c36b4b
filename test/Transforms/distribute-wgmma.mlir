// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=tile_q=128,tile_kv=32,warps=8,stages=2" --mla-tile --mla-distribute | FileCheck %s
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=tile_q=128,tile_kv=32,warps=8,stages=2,wgmma=0" --mla-tile --mla-distribute | FileCheck %s --check-prefix=SYNC
// RUN: mla-opt %s --mla-select-config="target=sm_80 perf-config=tile_q=128,tile_kv=32,warps=8,stages=2" --mla-tile --mla-distribute | FileCheck %s --check-prefix=SYNC
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=tile_q=32,tile_kv=32,warps=2" --mla-tile --mla-distribute | FileCheck %s --check-prefix=SYNC

// sm_90a: the fused attention step on warpgroup MMA. 8 warps = two
// warpgroups of 64 query rows each, one warp per 16-row block.
//   * Q [128 x 64], K and V [2 stages x 32 keys x 64] move to unpadded,
//     1024-byte aligned buffers in the 128-byte swizzle layout
//     (column blocks of 64 x rows x 64);
//   * their cp.async copies write 16-byte chunk (c / 8) xor (row % 8);
//   * every barrier is preceded by fence.proxy.async (cp.async writes are
//     generic-proxy, wgmma reads are async-proxy);
//   * warpgroup 1 waits on named barrier 1 for warpgroup 0's scores to be
//     issued (ping-pong), warpgroup 0 arrives after issuing;
//   * S = Q·Kᵀ: 4 wgmma m64n32k16 (K = 64 / 16) from two K-major
//     descriptors (LBO 16, SBO 1024, swizzle 128B: 0x4000004000010000),
//     the first without reading D (scale-d 0);
//   * P·V: 2 wgmma m64n64k16 (32 keys / 16), P as four 32-bit A registers,
//     V an MN-major descriptor (LBO = 64 rows x 128 B, SBO 1024), B
//     transposed;
//   * registers fenced around each group (empty side-effecting asm).
// CHECK-LABEL: func @prefill
// CHECK-DAG: memref.alloca() {alignment = 1024 : i64, mla.swizzle_dst = 0 : i64} : memref<1x128x64xbf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.alloca() {alignment = 1024 : i64, mla.swizzle_dst = 1 : i64} : memref<1x64x64xbf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.alloca() {alignment = 1024 : i64, mla.swizzle_dst = 2 : i64} : memref<1x64x64xbf16, #gpu.address_space<workgroup>>
// CHECK-NOT: mla.swizzle_src
// CHECK: arith.xori
// CHECK: nvgpu.device_async_copy {{.*}} : memref<?x2x64xbf16> to memref<1x128x64xbf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_wait
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK: scf.for
// CHECK: nvgpu.device_async_copy {{.*}} : memref<?x2x64xbf16> to memref<1x64x64xbf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: arith.constant 4611686293305360384 : i64
// CHECK: llvm.inline_asm has_side_effects "{{.*}}wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {{.*}}, $16, $17, p, 1, 1, 0, 0;{{.*}}", "=f,{{.*}},=f,l,l,r,~{memory}"
// CHECK-COUNT-3: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {{.*}}, $32, $33, p, 1, 1, 0, 0;
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: llvm.inline_asm has_side_effects "", "=f,
// CHECK: gpu.shuffle  xor
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK: llvm.inline_asm has_side_effects "", "=f,{{.*}},=r,=r,=r,=r,
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: arith.constant 4611686293338849280 : i64
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, {$64, $65, $66, $67}, $68, p, 1, 1, 1;
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, {$64, $65, $66, $67}, $68, p, 1, 1, 1;
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: gpu.barrier
// CHECK: scf.yield
// CHECK-NOT: nvgpu.ldmatrix
// CHECK-NOT: nvvm.mma.sync

// `wgmma=0`, sm_80, or a shape that is not whole warpgroups (2 warps)
// keep the warp-level lowering on padded tiles.
// SYNC-LABEL: func @prefill
// SYNC-NOT: mla.swizzle
// SYNC-NOT: alignment = 1024
// SYNC: nvgpu.ldmatrix
// SYNC: nvvm.mma.sync
// SYNC-NOT: nvvm.wgmma
// SYNC-NOT: fence.proxy
func.func @prefill(%q: memref<?x2x64xbf16>, %k: memref<?x2x64xbf16>, %v: memref<?x2x64xbf16>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x2x64xbf16>, %lse: memref<2x?xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal} : memref<?x2x64xbf16>, memref<?x2x64xbf16>, memref<?x2x64xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x2x64xbf16>, memref<2x?xf32>
  return
}
