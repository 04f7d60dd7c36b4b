// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=tile_q=128,tile_kv=32,warps=8,stages=2,overlap=1" --mla-tile --mla-distribute | FileCheck %s
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=tile_q=128,tile_kv=32,warps=8,stages=2" --mla-tile --mla-distribute | FileCheck %s --check-prefix=SEQ

// overlap = 1 on sm_90a: the fused warpgroup-MMA step with each tile's
// P·V lagged by one iteration (FusedStepOverlap.cpp); shapes as in
// distribute-wgmma.mlir (two warpgroups of 64 rows, 32-key tiles).
//   * The loop carries, beside 32 accumulators and m, l of two rows, the
//     previous tile's P as 8 A registers (i32, zero at first) and its value
//     tile's byte offset (i64).
//   * Copies: the next key tile, then this tile's values; the step's
//     groups were committed one iteration earlier (wait 1, then 2).
//   * The scores are issued (4 x m64n32k16) and committed; then, except in
//     the first iteration, the previous tile's P·V (2 x m64n64k16, A from
//     the carried registers) as a second group, and wgmma.wait_group 1
//     waits for the scores only; the first iteration waits for all (0).
//   * The ping-pong arrive follows both issues; the softmax (shuffles,
//     ex2) runs while P·V is in flight; wait_group 0 only after it.
//   * After the loop: every copy waited for, a barrier, and the last
//     tile's P·V where the loop ran, before the accumulators are stored.
// CHECK-LABEL: func @prefill
// CHECK: %[[LOOP:.*]]:45 = scf.for %[[T0:.*]] = %[[LB:.*]] to %[[UB:.*]] step %{{.*}} iter_args({{.*}}%{{.*}} = %c0_i32, {{.*}}%{{.*}} = %c0_i64) -> ({{.*}}i32, i32, i32, i32, i32, i32, i32, i32, i64) {
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK: gpu.barrier
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 2 : i32}
// CHECK: gpu.barrier
// CHECK: %[[HAVE:.*]] = arith.cmpi ne, %[[T0]], %[[LB]] : index
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT: wgmma.wait
// CHECK: scf.if %[[HAVE]] -> (f32,
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, {$64, $65, $66, $67}, $68, p, 1, 1, 1;
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, {$64, $65, $66, $67}, $68, p, 1, 1, 1;
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } else {
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: scf.yield
// CHECK: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CHECK-NOT: wgmma.wait
// CHECK: gpu.shuffle  xor
// CHECK-NOT: wgmma.wait
// CHECK: llvm.nvvm.ex2.approx.ftz.f
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT: wgmma.mma_async
// CHECK: gpu.barrier
// CHECK-NEXT: scf.yield
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK: gpu.barrier
// CHECK: %[[ACC:.*]]:32 = scf.if %{{.*}} -> (f32,
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-COUNT-2: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: memref.store %[[ACC]]#0, %{{.*}} : memref<128x64xf32, strided<[68, 1]>, #gpu.address_space<workgroup>>

// Without overlap the step stays in sequence: no carried P, both groups
// waited for in the iteration that issues them.
// SEQ-LABEL: func @prefill
// SEQ: scf.for {{.*}} -> ({{.*}}f32) {
// SEQ-NOT: wgmma.wait.group.sync.aligned 1
// SEQ: nvvm.wgmma.wait.group.sync.aligned 0
// SEQ-NOT: wgmma.wait.group.sync.aligned 1
func.func @prefill(%q: memref<?x2x64xbf16>, %k: memref<?x2x64xbf16>, %v: memref<?x2x64xbf16>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x2x64xbf16>, %lse: memref<2x?xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal} : memref<?x2x64xbf16>, memref<?x2x64xbf16>, memref<?x2x64xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x2x64xbf16>, memref<2x?xf32>
  return
}
