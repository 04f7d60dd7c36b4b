// RUN: mla-opt %s -split-input-file --mla-select-config=target=sm_90a --mla-distribute | FileCheck %s
// RUN: mla-opt %s -split-input-file --mla-select-config=target=gfx942 --mla-distribute | FileCheck %s --check-prefix=AMD

// NVIDIA spreads a cp.async copy's rows over the threads with each thread's
// 16-byte pieces fixed: 64 rows of 36 32-byte columns (two pieces each) over
// 128 threads are 8 threads a row (128 consecutive bytes: whole sectors),
// 16 rows a pass, 4 passes of 9 pieces, written out. The page number is
// read once per row from the tile's row of page numbers in shared memory
// (in bounds for every row: no branch), only the page index is selected
// for masked rows (the row and column indices are within the cache's
// shape), and the copies of one row are constant column offsets apart.
// CHECK-LABEL: func @paged
// CHECK-NOT: scf.for
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[R0:.*]] = arith.divui %[[TID]], %c8
// CHECK: %[[C0:.*]] = arith.remui %[[TID]], %c8
// CHECK: %[[P:.*]] = arith.remui %[[TID]], %c2
// CHECK: %[[PIECE:.*]] = arith.muli %[[P]], %c8
// CHECK-NOT: scf.if
// CHECK: %[[PAGE:.*]] = memref.load %{{.*}} : memref<64xi32, #gpu.address_space<workgroup>>
// CHECK: %[[IDX:.*]] = arith.index_cast %[[PAGE]]
// CHECK: %[[SEL:.*]] = arith.select %{{.*}}, %[[IDX]], %c0{{.*}} : index
// CHECK: %[[N:.*]] = arith.select %{{.*}}, %c8{{.*}}, %c0{{.*}} : index
// CHECK: nvgpu.device_async_copy %arg0[%[[SEL]], %{{.*}}, %{{.*}}], %{{.*}}, 8, %[[N]] {bypassL1}
// CHECK-COUNT-35: nvgpu.device_async_copy %arg0
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_create_group
// CHECK: gpu.barrier
// AMD (no cp.async) keeps the linear mapping: a thread's iterations 256
// apart (4 waves of 64), written out.
// AMD-LABEL: func @paged
// AMD-NOT: nvgpu.device_async_copy
// AMD: %[[TID:.*]] = gpu.thread_id x
// AMD: arith.addi %[[TID]], %c256
func.func @paged(%kv: memref<?x64x576xbf16>, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c36 = arith.constant 36 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0.0> : vector<16xbf16>
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %pages = memref.alloca() : memref<64xi32>
    %tile = memref.alloca() : memref<64x576xbf16>
    scf.parallel (%r, %ch) = (%c0, %c0) to (%c64, %c36) step (%c1, %c1) {
      %d = arith.muli %ch, %c16 : index
      %in = arith.cmpi slt, %r, %end : index
      %v = scf.if %in -> (vector<16xbf16>) {
        %slot = arith.remui %r, %c64 : index
        %e = memref.load %pages[%r] : memref<64xi32>
        %page = arith.index_cast %e : i32 to index
        %l = vector.load %kv[%page, %slot, %d] : memref<?x64x576xbf16>, vector<16xbf16>
        scf.yield %l : vector<16xbf16>
      } else {
        scf.yield %zero : vector<16xbf16>
      }
      vector.store %v, %tile[%r, %d] : memref<64x576xbf16>, vector<16xbf16>
      scf.reduce
    }
  }
  return
}

// -----

// A page lookup in the block table (global memory, not safe for masked
// rows) stays under the row's condition; the mapping is still blocked,
// every iteration's reads before the copies.
// CHECK-LABEL: func @table
// CHECK-NOT: scf.for
// CHECK: scf.if %{{.*}} -> (index, index, index) {
// CHECK-NEXT: arith.remui
// CHECK-NEXT: memref.load %arg1
// CHECK-NOT: nvgpu.device_async_copy
// CHECK-COUNT-35: scf.if %{{.*}} -> (index, index, index) {
// CHECK-COUNT-36: nvgpu.device_async_copy %arg0
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: gpu.barrier
func.func @table(%kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c36 = arith.constant 36 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0.0> : vector<16xbf16>
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %tile = memref.alloca() : memref<64x576xbf16>
    scf.parallel (%r, %ch) = (%c0, %c0) to (%c64, %c36) step (%c1, %c1) {
      %d = arith.muli %ch, %c16 : index
      %in = arith.cmpi slt, %r, %end : index
      %v = scf.if %in -> (vector<16xbf16>) {
        %slot = arith.remui %r, %c64 : index
        %e = memref.load %bt[%x, %c0] : memref<?x?xi32>
        %page = arith.index_cast %e : i32 to index
        %l = vector.load %kv[%page, %slot, %d] : memref<?x64x576xbf16>, vector<16xbf16>
        scf.yield %l : vector<16xbf16>
      } else {
        scf.yield %zero : vector<16xbf16>
      }
      vector.store %v, %tile[%r, %d] : memref<64x576xbf16>, vector<16xbf16>
      scf.reduce
    }
  }
  return
}

// -----

// Rows that are no whole passes of the threads (3 rows, 16 a pass): the
// linear mapping, a loop.
// CHECK-LABEL: func @linear
// CHECK: scf.for
// CHECK: nvgpu.device_async_copy
func.func @linear(%src: memref<3x576xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c16 = arith.constant 16 : index
  %c36 = arith.constant 36 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %tile = memref.alloca() : memref<3x576xbf16>
    scf.parallel (%r, %ch) = (%c0, %c0) to (%c3, %c36) step (%c1, %c1) {
      %d = arith.muli %ch, %c16 : index
      %l = vector.load %src[%r, %d] : memref<3x576xbf16>, vector<16xbf16>
      vector.store %l, %tile[%r, %d] : memref<3x576xbf16>, vector<16xbf16>
      scf.reduce
    }
  }
  return
}

// -----

// The config's blocked_copies = 0 keeps the linear mapping for comparison
// (the shape of @paged, whose copy is blocked by default): a loop over
// `tid + 128·k`, both 16-byte pieces of an iteration's 32 bytes in it.
// CHECK-LABEL: func @linear_asked
// CHECK: scf.for %{{.*}} = %thread_id_x to %{{.*}} step %c128
// CHECK: arith.divui %arg{{[0-9]+}}, %{{.*}} : index
// CHECK: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_copy
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_create_group
func.func @linear_asked(%kv: memref<?x64x576xbf16>, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c36 = arith.constant 36 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0.0> : vector<16xbf16>
  mla.grid in (%c1, %c1, %c1) attributes {config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 16, warps = 4, stages = 1, blocked_copies = 0>} {
  ^bb0(%x: index, %y: index, %z: index):
    %pages = memref.alloca() : memref<64xi32>
    %tile = memref.alloca() : memref<64x576xbf16>
    scf.parallel (%r, %ch) = (%c0, %c0) to (%c64, %c36) step (%c1, %c1) {
      %d = arith.muli %ch, %c16 : index
      %in = arith.cmpi slt, %r, %end : index
      %v = scf.if %in -> (vector<16xbf16>) {
        %slot = arith.remui %r, %c64 : index
        %e = memref.load %pages[%r] : memref<64xi32>
        %page = arith.index_cast %e : i32 to index
        %l = vector.load %kv[%page, %slot, %d] : memref<?x64x576xbf16>, vector<16xbf16>
        scf.yield %l : vector<16xbf16>
      } else {
        scf.yield %zero : vector<16xbf16>
      }
      vector.store %v, %tile[%r, %d] : memref<64x576xbf16>, vector<16xbf16>
      scf.reduce
    }
  }
  return
}
