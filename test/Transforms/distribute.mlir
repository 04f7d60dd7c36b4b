// RUN: mla-opt %s -split-input-file --mla-select-config=target=sm_90a --mla-distribute | FileCheck %s
// RUN: not mla-opt %s -split-input-file --mla-select-config=target=host --mla-distribute 2>&1 | FileCheck %s --check-prefix=HOST

// HOST: error: mla-distribute: the module's target 'host' is not a GPU target

// scf.parallel -> a loop over the linearised space strided by the thread
// count (2 warps x 32), then a barrier; exp2 -> ex2.approx.
// CHECK-LABEL: func @parallel
// CHECK: mla.grid in {{.*}} attributes {{{.*}}block_size = 64 : i64{{.*}}}
// CHECK:   %[[TID:.*]] = gpu.thread_id x
// CHECK:   scf.for %[[I:.*]] = %[[TID]] to %{{.*}} step %c64
// CHECK:     %[[C:.*]] = arith.remui %[[I]], %{{.*}}
// CHECK:     %[[R:.*]] = arith.divui %[[I]], %{{.*}}
// CHECK:     llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK:     memref.store
// CHECK:   gpu.barrier
// CHECK-NOT: scf.parallel
func.func @parallel(%buf: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  mla.grid in (%c1, %c1, %c1) attributes {config = #mla.config<tile_kv = 16, kv_splits = 1, head_group = 1, warps = 2, stages = 1>} {
  ^bb0(%x: index, %y: index, %z: index):
    scf.parallel (%r, %c) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
      %v = memref.load %buf[%r, %c] : memref<4x8xf32>
      %e = math.exp2 %v : f32
      memref.store %e, %buf[%r, %c] : memref<4x8xf32>
      scf.reduce
    }
  }
  return
}

// -----

// A phase marked mla.unsynchronized (the next tile's pages, staged by
// mla-expand-paging) gets no barrier of its own; the next phase's orders it.
// CHECK-LABEL: func @unsynchronized
// CHECK: scf.for
// CHECK:   memref.store
// CHECK-NOT: gpu.barrier
// CHECK: scf.for
// CHECK:   memref.store
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: return
func.func @unsynchronized(%a: memref<64xf32>, %b: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  mla.grid in (%c1, %c1, %c1) attributes {config = #mla.config<tile_kv = 16, kv_splits = 1, head_group = 1, warps = 2, stages = 1>} {
  ^bb0(%x: index, %y: index, %z: index):
    scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
      memref.store %one, %a[%i] : memref<64xf32>
      scf.reduce
    } {mla.unsynchronized}
    scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
      memref.store %one, %b[%i] : memref<64xf32>
      scf.reduce
    }
  }
  return
}

// -----

// bf16 Q·Kᵀ on tensor cores: 16x8 C tiles over the warps (4 warps by
// default), K in steps of 16, packed bf16 pairs, rows past M = 4 masked.
// CHECK-LABEL: func @qk
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[WARP:.*]] = arith.divui %[[TID]], %c32
// CHECK: scf.for %[[T:.*]] = %[[WARP]] to %c8{{.*}} step %c4
// CHECK:   arith.cmpi ult, %{{.*}}, %c4
// CHECK:   scf.for %{{.*}} = %c0{{.*}} to %c48{{.*}} step %c16{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32, f32, f32)
// CHECK:     vector.load %arg0[{{.*}}] : memref<4x48xbf16>, vector<2xbf16>
// CHECK:     vector.bitcast %{{.*}} : vector<2xbf16> to vector<1xi32>
// CHECK:     vector.load %arg1[{{.*}}] : memref<64x48xbf16>, vector<2xbf16>
// CHECK:     nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK:   memref.store %{{.*}}, %arg2
// CHECK: gpu.barrier
func.func @qk(%q: memref<4x48xbf16>, %k: memref<64x48xbf16>, %s: memref<4x64xf32>) {
  %c1 = arith.constant 1 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    mla.matmul %q, %k, %s {transpose_b} : memref<4x48xbf16>, memref<64x48xbf16>, memref<4x64xf32>
  }
  return
}

// -----

// P·V accumulates into C scaled by the row correction; B is [K, N] so its
// pairs are gathered from two rows.
// CHECK-LABEL: func @pv
// CHECK: memref.load %arg2[{{.*}}] : memref<16x32xf32>
// CHECK: memref.load %arg3[{{.*}}] : memref<16xf32>
// CHECK: arith.mulf
// CHECK: memref.load %arg1[{{.*}}] : memref<16x32xf16>
// CHECK: vector.from_elements {{.*}} : vector<2xf16>
// CHECK: nvvm.mma.sync {{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32)
// CHECK: gpu.barrier
func.func @pv(%p: memref<16x16xf16>, %v: memref<16x32xf16>, %acc: memref<16x32xf32>, %corr: memref<16xf32>) {
  %c1 = arith.constant 1 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    mla.matmul %p, %v, %acc scale %corr {accumulate} : memref<16x16xf16>, memref<16x32xf16>, memref<16x32xf32>, memref<16xf32>
  }
  return
}

// -----

// f32 operands: one thread per C element with scalar FMAs.
// CHECK-LABEL: func @f32
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %c48{{.*}} step %c128
// CHECK:   llvm.intr.fma
// CHECK: gpu.barrier
// CHECK-NOT: nvvm.mma.sync
func.func @f32(%a: memref<4x8xf32>, %b: memref<12x8xf32>, %c: memref<4x12xf32>) {
  %c1 = arith.constant 1 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    mla.matmul %a, %b, %c {transpose_b} : memref<4x8xf32>, memref<12x8xf32>, memref<4x12xf32>
  }
  return
}

// -----

// A masked parallel copy from global memory into a tile: cp.async 16-byte
// pieces, 0 source bytes (zero-fill) when masked, the page lookup still under
// the condition; one commit group and a wait before the barrier.
// CHECK-LABEL: func @async_copy
// CHECK: memref.alloca() : memref<4x32xbf16, #gpu.address_space<workgroup>>
// CHECK: scf.for
// CHECK:   %[[IDX:.*]]:3 = scf.if %{{.*}} -> (index, index, index) {
// CHECK:     memref.load %arg1
// CHECK:   %[[N:.*]] = arith.select %{{.*}}, %c8{{.*}}, %c0{{.*}} : index
// CHECK:   nvgpu.device_async_copy %arg0[%[[IDX]]#0, %[[IDX]]#1, %{{.*}}], %{{.*}}[%{{.*}}, %{{.*}}], 8, %[[N]] {bypassL1}
// CHECK:   nvgpu.device_async_copy
// CHECK: %[[G:.*]] = nvgpu.device_async_create_group
// CHECK: nvgpu.device_async_wait %[[G]] {numGroups = 0 : i32}
// CHECK: gpu.barrier
func.func @async_copy(%kv: memref<?x3x32xbf16>, %bt: memref<?x?xi32>, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant dense<0.0> : vector<16xbf16>
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %tile = memref.alloca() : memref<4x32xbf16>
    scf.parallel (%r, %ch) = (%c0, %c0) to (%c4, %c2) step (%c1, %c1) {
      %d = arith.muli %ch, %c16 : index
      %in = arith.cmpi slt, %r, %end : index
      %v = scf.if %in -> (vector<16xbf16>) {
        %pi = arith.divui %r, %c3 : index
        %slot = arith.remui %r, %c3 : index
        %e = memref.load %bt[%x, %pi] : memref<?x?xi32>
        %page = arith.index_cast %e : i32 to index
        %l = vector.load %kv[%page, %slot, %d] : memref<?x3x32xbf16>, vector<16xbf16>
        scf.yield %l : vector<16xbf16>
      } else {
        scf.yield %zero : vector<16xbf16>
      }
      vector.store %v, %tile[%r, %d] : memref<4x32xbf16>, vector<16xbf16>
      scf.reduce
    }
  }
  return
}

// -----

// Full 16-row tiles in shared memory: fragments through ldmatrix (x4 for A;
// x2 for B, transposed when B is [K, N]).
// CHECK-LABEL: func @ldmatrix
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<16x32xbf16, strided<[40, 1]>, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 2 : i32, transpose = false} : memref<16x32xbf16, strided<[40, 1]>, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
// CHECK: nvvm.mma.sync
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 2 : i32, transpose = true} : memref<16x32xbf16, strided<[40, 1]>, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
func.func @ldmatrix() {
  %c1 = arith.constant 1 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %qb = memref.alloca() : memref<16x40xbf16>
    %q = memref.subview %qb[0, 0] [16, 32] [1, 1] : memref<16x40xbf16> to memref<16x32xbf16, strided<[40, 1]>>
    %kb = memref.alloca() : memref<16x40xbf16>
    %k = memref.subview %kb[0, 0] [16, 32] [1, 1] : memref<16x40xbf16> to memref<16x32xbf16, strided<[40, 1]>>
    %s = memref.alloca() : memref<16x16xf32>
    %acc = memref.alloca() : memref<16x32xf32>
    mla.matmul %q, %k, %s {transpose_b} : memref<16x32xbf16, strided<[40, 1]>>, memref<16x32xbf16, strided<[40, 1]>>, memref<16x16xf32>
    %p = memref.subview %qb[0, 0] [16, 16] [1, 1] : memref<16x40xbf16> to memref<16x16xbf16, strided<[40, 1]>>
    mla.matmul %p, %k, %acc {accumulate} : memref<16x16xbf16, strided<[40, 1]>>, memref<16x32xbf16, strided<[40, 1]>>, memref<16x32xf32>
  }
  return
}

// -----

// An accumulating product that is the last op of a loop and the loop's only
// user of C: the accumulators stay in registers across iterations (one
// vector<8xf32> per thread: 8 tiles of 16x8 over 4 warps, 4 values each),
// rescaled in place, loaded once before and stored once after the loop.
// CHECK-LABEL: func @hoisted
// CHECK: %[[INIT:.*]] = vector.from_elements {{.*}} : vector<8xf32>
// CHECK: %[[R:.*]] = scf.for %{{.*}} iter_args(%[[F:.*]] = %[[INIT]]) -> (vector<8xf32>)
// CHECK-NOT: memref.store {{.*}}memref<16x64xf32
// CHECK:   vector.extract %[[F]][0]
// CHECK:   memref.load %{{.*}} : memref<16xf32, #gpu.address_space<workgroup>>
// CHECK:   nvvm.mma.sync
// CHECK:   vector.insert
// CHECK:   gpu.barrier
// CHECK:   scf.yield %{{.*}} : vector<8xf32>
// CHECK: vector.extract %[[R]][0]
// CHECK: memref.store {{.*}}memref<16x64xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
func.func @hoisted(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %p = memref.alloca() : memref<16x16xbf16>
    %v = memref.alloca() : memref<16x64xbf16>
    %acc = memref.alloca() : memref<16x64xf32>
    %corr = memref.alloca() : memref<16xf32>
    scf.for %t = %c0 to %n step %c1 {
      mla.matmul %p, %v, %acc scale %corr {accumulate} : memref<16x16xbf16>, memref<16x64xbf16>, memref<16x64xf32>, memref<16xf32>
    }
  }
  return
}

// -----

// NVIDIA: global vector accesses at multiples of the vector width of rows
// that are multiples of 16 bytes are 16-byte aligned (one 16-byte access);
// an access at an arbitrary column is not marked.
// CHECK-LABEL: func @aligned_global
// CHECK: vector.load %arg0[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<?x576xbf16>, vector<8xbf16>
// CHECK: vector.store %{{.*}}, %arg1[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<?x576xbf16>, vector<8xbf16>
// CHECK: vector.load %arg0[%{{.*}}, %arg2] : memref<?x576xbf16>, vector<8xbf16>
func.func @aligned_global(%src: memref<?x576xbf16>, %dst: memref<?x576xbf16>, %col: index) {
  %c1 = arith.constant 1 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %c8 = arith.constant 8 : index
    %d = arith.muli %y, %c8 : index
    %v = vector.load %src[%x, %d] : memref<?x576xbf16>, vector<8xbf16>
    vector.store %v, %dst[%x, %d] : memref<?x576xbf16>, vector<8xbf16>
    %w = vector.load %src[%x, %col] : memref<?x576xbf16>, vector<8xbf16>
    vector.store %w, %dst[%z, %d] : memref<?x576xbf16>, vector<8xbf16>
  }
  return
}
