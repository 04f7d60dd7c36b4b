// RUN: mla-opt %s -split-input-file --mla-select-config="target=sm_90a" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s
// RUN: mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=warps=4,tile_kv=64,stages=2" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s --check-prefix=STAGES2

// NVIDIA stages a key loop's page numbers a tile ahead where the loop has
// one stage and its tiles may span several pages (page 1 here: 64 pages a
// tile). The first tile's numbers are staged before the loop when it runs a
// tile (the block table is no bounds-checked buffer: a table without
// columns must not be read), with a barrier; in the loop the next tile's,
// into the other of two slots, by a 4-byte cp.async (through L1) that
// lands with the tile's copies: no wait and no barrier of its own.
// CHECK-LABEL: func @page1
// CHECK: nvgpu.device_async_copy %arg0{{.*}} to memref<9x16x64xbf16, #gpu.address_space<workgroup>>
// CHECK-NOT: gpu.barrier
// CHECK: scf.if
// CHECK: memref.store %{{.*}} : memref<2x64xi32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: scf.for {{.*}} iter_args(
// CHECK: nvgpu.device_async_copy %arg2[{{.*}}], %{{.*}}[{{.*}}], 1 : memref<?x?xi32> to memref<2x64xi32, #gpu.address_space<workgroup>>
// CHECK-NOT: nvgpu.device_async_wait
// CHECK-NOT: gpu.barrier
// CHECK: nvgpu.device_async_copy %arg1
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// Two stages (a pipelined loop): one slot, staged per tile by a phase of
// its own with its barrier, whose block-table reads run an iteration early
// (ArchInfo::prefetchesPageLookups): the first before the loop when it
// runs a tile (threads 64.. of 128 read row 63 again), each next one right
// after the phase's barrier, into an i32 the loop carries; the phase
// stores what the previous iteration read, so its barrier waits for no
// global load.
// STAGES2-LABEL: func @page1
// STAGES2-NOT: memref<2x64xi32
// STAGES2: memref<64xi32, #gpu.address_space<workgroup>>
// STAGES2-NOT: memref<2x64xi32
// STAGES2: %[[PG0:.*]] = scf.if %{{.*}} -> (i32) {
// STAGES2: arith.minui %{{.*}}, %c63
// STAGES2: memref.load %arg2
// STAGES2: scf.yield %c0_i32 : i32
// STAGES2: scf.for {{.*}} iter_args({{.*}}, %[[PG:.*]] = %[[PG0]]) -> ({{.*}}, i32) {
// STAGES2: memref.store %[[PG]], %{{.*}} : memref<64xi32, #gpu.address_space<workgroup>>
// STAGES2-NEXT: }
// STAGES2-NEXT: nvvm.fence.proxy
// STAGES2-NEXT: gpu.barrier
// STAGES2: %[[PG1:.*]] = memref.load %arg2
// STAGES2: nvgpu.device_async_copy %arg1
// STAGES2: scf.yield {{.*}}, %[[PG1]] : {{.*}}, i32
func.func @page1(%q: memref<?x1x16x576xbf16>, %kv: memref<?x1x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16>, memref<?x1x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

// Page 64: one page a tile, its number staged per tile (one slot).
// CHECK-LABEL: func @page64
// CHECK-NOT: memref<2x64xi32
// CHECK: memref<64xi32, #gpu.address_space<workgroup>>
// CHECK-NOT: memref<2x64xi32
func.func @page64(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}
