// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=tile_kv=32,lead_scores=1" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=tile_kv=32,lead_scores=0" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s --check-prefix=SPLIT
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=tile_kv=32,lead_scores=2" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s --check-prefix=HAND
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=tile_kv=32,lead_scores=3" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s --check-prefix=LAG
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=tile_kv=32,lead_scores=4" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s --check-prefix=CUT

// Absorbed decode, 64 heads = 64 rows, 8 warps, warpgroup MMA: lead
// scores (lead_scores = 1; the default where the scores would be split is
// 2, below; lead_scores = 0 splits them, distribute-wgmma-decode.mlir). Warpgroup 0 (colPart 0)
// alone computes all 32 keys' scores for the 64 rows (wgmma m64n32k16, K
// = 192 / 16 = 12 steps), their softmax (quad shuffles, no halves'
// exchange) and P, stores P to the probability tile and the rows'
// corrections to the correction buffer and packs its own P into A
// registers; the other warpgroup yields placeholders. After one barrier
// warpgroup 1 loads P (ldmatrix) and the corrections; both rescale and
// multiply by their value half (m64n64k16, 32 keys = 2 steps), then the
// end barrier before the next copies.
// CHECK-LABEL: func @decode
// CHECK: scf.for
// CHECK: %[[LEAD:[0-9]+]]:14 = scf.if
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-12: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: gpu.shuffle  xor
// CHECK-NOT: gpu.barrier
// CHECK: vector.store
// CHECK-NOT: gpu.barrier
// CHECK: } else {
// CHECK-NOT: wgmma
// CHECK: gpu.barrier
// CHECK-NEXT: scf.if {{.*}} -> (i32, i32, i32, i32, i32, i32, i32, i32, f32, f32)
// CHECK: scf.yield %[[LEAD]]#0
// CHECK: } else {
// CHECK: nvgpu.ldmatrix
// CHECK: memref.load
// CHECK: scf.yield
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-2: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: gpu.barrier
// CHECK-NEXT: scf.yield
// lead_scores = 2 (the default): the loop is pipelined (two stages), so warpgroup 1, idle
// until P is ready, also issues the next tile's copy. Each iteration
// stores its page lookup (read the iteration before) with no barrier of
// its own, waits for the tile in flight (every group of the thread) and
// runs one barrier; then warpgroup 1 spreads the next tile's copy over its
// 128 threads (tid - 128) in its branch, where with lead_scores = 1 all
// 256 issue it before the wait (whose group the next wait commits).
// HAND-LABEL: func @decode
// HAND: memref.store %arg{{[0-9]+}}, %{{.*}} : memref<32xi32, #gpu.address_space<workgroup>>
// HAND-NEXT: }
// HAND-NOT: gpu.barrier
// HAND-NOT: nvgpu.device_async_copy
// HAND: %[[G:.*]] = nvgpu.device_async_create_group
// HAND-NEXT: nvgpu.device_async_wait %[[G]] {numGroups = 0 : i32}
// HAND-NEXT: nvvm.fence.proxy
// HAND-NEXT: gpu.barrier
// HAND-NEXT: %[[LEAD:[0-9]+]]:14 = scf.if
// HAND: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// HAND: %c128{{.*}} = arith.constant 128 : index
// HAND-NEXT: arith.subi %thread_id_x, %c128
// HAND-NOT: wgmma
// HAND-COUNT-6: nvgpu.device_async_copy %arg1
// HAND-NOT: nvgpu.device_async_wait
// HAND: scf.yield
// HAND-NEXT: }
// HAND-NEXT: nvvm.fence.proxy
// HAND-NEXT: gpu.barrier
// HAND: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// HAND: nvvm.wgmma.wait.group.sync.aligned 0
// The barrier opening the next iteration ends this one's products: none
// before the yield; after the loop, the copies' wait and one barrier.
// HAND-NOT: gpu.barrier
// HAND: scf.yield
// HAND-NEXT: }
// HAND-NEXT: nvgpu.device_async_create_group
// HAND-NEXT: nvgpu.device_async_wait
// HAND-NEXT: nvvm.fence.proxy
// HAND-NEXT: gpu.barrier
// lead_scores = 3: warpgroup 1's P·V one tile behind. After the tile's
// wait and barrier the next tile's page lookup is stored; the lead arrives
// on named barrier 2 (lookup stored), computes the scores and softmax,
// waits on named barrier 1 (warpgroup 1 has read the last P) and stores
// P; warpgroup 1 reads the last tile's P and corrections (zeros and ones
// in the first iteration), arrives on barrier 1 and takes the last tile's
// value offset (this tile's in the first iteration). Both multiply (each
// its own P and value tile), then warpgroup 1 waits on barrier 2 and
// issues the next tile's copy. No barrier between the P stores and the
// products; after the loop, warpgroup 1's product of the last tile.
// LAG-LABEL: func @decode
// LAG: %[[G:.*]] = nvgpu.device_async_create_group
// LAG-NEXT: nvgpu.device_async_wait %[[G]] {numGroups = 0 : i32}
// LAG-NEXT: nvvm.fence.proxy
// LAG-NEXT: gpu.barrier
// LAG: memref.store %arg{{[0-9]+}}, %{{.*}} : memref<32xi32, #gpu.address_space<workgroup>>
// LAG: %[[ONE:.*]] = arith.constant 1 : i32
// LAG-NEXT: %[[TWO:.*]] = arith.constant 2 : i32
// LAG: scf.if {{.*}} -> ({{.*}}, i64) {
// LAG: nvvm.barrier.arrive id = %[[TWO]] number_of_threads = %c256_i32
// LAG-COUNT-12: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// LAG-NOT: gpu.barrier
// LAG: nvvm.barrier id = %[[ONE]] number_of_threads = %c256_i32
// LAG-NOT: gpu.barrier
// LAG: vector.store
// LAG: } else {
// LAG-NOT: wgmma
// LAG: scf.if {{.*}} -> (i32, i32, i32, i32, i32, i32, i32, i32, f32, f32) {
// LAG: nvgpu.ldmatrix
// LAG: } else {
// LAG-NEXT: %[[Z:.*]] = arith.constant 0 : i32
// LAG-NEXT: %[[U:.*]] = arith.constant 1.000000e+00 : f32
// LAG-NEXT: scf.yield %[[Z]], %[[Z]], %[[Z]], %[[Z]], %[[Z]], %[[Z]], %[[Z]], %[[Z]], %[[U]], %[[U]]
// LAG: nvvm.barrier.arrive id = %[[ONE]] number_of_threads = %c256_i32
// LAG: %[[PREV:.*]] = arith.select %{{.*}}, %arg{{[0-9]+}}, %{{.*}} : i64
// LAG-NOT: gpu.barrier
// LAG-COUNT-2: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// LAG: nvvm.wgmma.wait.group.sync.aligned 0
// LAG-NOT: gpu.barrier
// LAG: nvvm.barrier id = %[[TWO]] number_of_threads = %c256_i32
// LAG-NEXT: %c128{{.*}} = arith.constant 128 : index
// LAG-NEXT: arith.subi %thread_id_x, %c128
// LAG-COUNT-6: nvgpu.device_async_copy %arg1
// LAG-NOT: gpu.barrier
// LAG: scf.yield
// LAG-NEXT: }
// LAG-NEXT: nvgpu.device_async_create_group
// LAG-NEXT: nvgpu.device_async_wait
// LAG-NEXT: nvvm.fence.proxy
// LAG-NEXT: gpu.barrier
// LAG: scf.if
// LAG: nvgpu.ldmatrix
// LAG-COUNT-2: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// LAG: nvvm.wgmma.wait.group.sync.aligned 0
// LAG: gpu.barrier
// lead_scores = 4: the same lagged step with its copy split by columns.
// Warpgroup 1 waits on barrier 2 at the top of its branch and copies the
// next tile's columns before its value half (0-63 of the 192: 32 rows of
// 8 pieces over 128 threads, 2 each), then takes the last P and arrives on
// barrier 1; after its product the rest (columns 64-191, 4 pieces each),
// with no second wait on barrier 2.
// CUT-LABEL: func @decode
// CUT: %[[G:.*]] = nvgpu.device_async_create_group
// CUT-NEXT: nvgpu.device_async_wait %[[G]] {numGroups = 0 : i32}
// CUT-NEXT: nvvm.fence.proxy
// CUT-NEXT: gpu.barrier
// CUT: memref.store %arg{{[0-9]+}}, %{{.*}} : memref<32xi32, #gpu.address_space<workgroup>>
// CUT: %[[ONE:.*]] = arith.constant 1 : i32
// CUT-NEXT: %[[TWO:.*]] = arith.constant 2 : i32
// CUT: nvvm.barrier.arrive id = %[[TWO]] number_of_threads = %c256_i32
// CUT-COUNT-12: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// CUT: nvvm.barrier id = %[[ONE]] number_of_threads = %c256_i32
// CUT: } else {
// CUT-NOT: wgmma
// CUT: nvvm.barrier id = %[[TWO]] number_of_threads = %c256_i32
// CUT-NEXT: %c128{{.*}} = arith.constant 128 : index
// CUT-NEXT: arith.subi %thread_id_x, %c128
// CUT-COUNT-2: nvgpu.device_async_copy %arg1
// CUT-NOT: nvgpu.device_async_copy
// CUT: nvgpu.ldmatrix
// CUT: nvvm.barrier.arrive id = %[[ONE]] number_of_threads = %c256_i32
// CUT-NOT: gpu.barrier
// CUT-COUNT-2: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// CUT: nvvm.wgmma.wait.group.sync.aligned 0
// CUT-NOT: nvvm.barrier id
// CUT: arith.subi %thread_id_x, %c128
// CUT-COUNT-4: nvgpu.device_async_copy %arg1
// CUT-NOT: nvgpu.device_async_copy
// CUT: nvgpu.device_async_create_group
// CUT-NEXT: nvgpu.device_async_wait
// CUT-NEXT: nvvm.fence.proxy
// CUT-NEXT: gpu.barrier
// SPLIT-LABEL: func @decode
// SPLIT-COUNT-12: wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16
// SPLIT-NOT: m64n32k16
func.func @decode(%q: memref<?x1x64x192xbf16>, %kv: memref<?x64x192xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x64x128xbf16>, %lse: memref<?x1x64xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x64x192xbf16>, memref<?x64x192xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x64x128xbf16>, memref<?x1x64xf32>
  return
}

// With pages smaller than the key tile (here 1) lead_scores = 4 keeps the
// whole copy of lead_scores = 3: warpgroup 1 takes the last P before any
// copy, and after its product waits on barrier 2 and issues all of it.
// CUT-LABEL: func @decode_page1
// CUT: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CUT-COUNT-12: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// CUT: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CUT: } else {
// CUT-NOT: wgmma
// CUT-NOT: nvgpu.device_async_copy
// CUT: nvgpu.ldmatrix
// CUT-NOT: nvgpu.device_async_copy
// CUT: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CUT: nvvm.wgmma.wait.group.sync.aligned 0
// CUT: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CUT-NEXT: %c128{{.*}} = arith.constant 128 : index
// CUT-NEXT: arith.subi %thread_id_x, %c128
// CUT-COUNT-6: nvgpu.device_async_copy %arg1
// CUT-NOT: nvgpu.device_async_copy
// CUT: nvgpu.device_async_create_group
func.func @decode_page1(%q: memref<?x1x64x192xbf16>, %kv: memref<?x1x192xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x64x128xbf16>, %lse: memref<?x1x64xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x64x192xbf16>, memref<?x1x192xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x64x128xbf16>, memref<?x1x64xf32>
  return
}
