// RUN: mla-opt %s -split-input-file --mla-select-config=target=gfx942 --mla-distribute | FileCheck %s

// AMD, wave64: 4 waves = 256 threads; 16x16 C tiles over the waves; lane l
// reads A[m0 + l%16][k0 + 4*(l/16) .. +3] and B[n0 + l%16][k0 + 4*(l/16) ..
// +3] (B transposed) as 4-element vectors; MFMA 16x16x16 bf16; exp2 as
// v_exp_f32.
// CHECK-LABEL: func @qk
// CHECK: mla.grid in {{.*}} attributes {block_size = 256 : i64}
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[WAVE:.*]] = arith.divui %[[TID]], %c64
// CHECK: scf.for %{{.*}} = %[[WAVE]] to %c4{{.*}} step %c4
// CHECK:   scf.for %{{.*}} = %c0{{.*}} to %c48{{.*}} step %c16{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (vector<4xf32>)
// CHECK:     vector.load %arg0[{{.*}}] : memref<16x48xbf16>, vector<4xbf16>
// CHECK:     vector.load %arg1[{{.*}}] : memref<64x48xbf16>, vector<4xbf16>
// CHECK:     amdgpu.mfma 16x16x16 %{{.*}} * %{{.*}} + %{{.*}} blgp = none : vector<4xbf16>, vector<4xbf16>, vector<4xf32>
// CHECK:   vector.extract
// CHECK:   memref.store %{{.*}}, %arg2
// CHECK: gpu.barrier
// CHECK: llvm.call_intrinsic "llvm.amdgcn.exp2.f32"
func.func @qk(%q: memref<16x48xbf16>, %k: memref<64x48xbf16>, %s: memref<16x64xf32>, %x: f32, %out: memref<f32>) {
  %c1 = arith.constant 1 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%bx: index, %by: index, %bz: index):
    mla.matmul %q, %k, %s {transpose_b} : memref<16x48xbf16>, memref<64x48xbf16>, memref<16x64xf32>
    %e = math.exp2 %x : f32
    memref.store %e, %out[] : memref<f32>
  }
  return
}

// -----

// P·V: B is [K, N]: four scalar loads per fragment; C rows 4*(l/16) + j
// scaled by the row correction.
// CHECK-LABEL: func @pv
// CHECK: memref.load %arg3[{{.*}}] : memref<8xf32>
// CHECK: vector.from_elements {{.*}} : vector<4xf32>
// CHECK: vector.from_elements {{.*}} : vector<4xf16>
// CHECK: amdgpu.mfma 16x16x16 {{.*}} : vector<4xf16>, vector<4xf16>, vector<4xf32>
func.func @pv(%p: memref<8x16xf16>, %v: memref<16x32xf16, strided<[48, 1]>>, %acc: memref<8x32xf32>, %corr: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%bx: index, %by: index, %bz: index):
    mla.matmul %p, %v, %acc scale %corr {accumulate} : memref<8x16xf16>, memref<16x32xf16, strided<[48, 1]>>, memref<8x32xf32>, memref<8xf32>
  }
  return
}

// -----

// A parallel copy with a constant trip count of at most 16 iterations per
// thread is written out on AMD: 600 (row, chunk) iterations on 256 threads
// are two whole iterations, whose reads (the global load) come first and
// stores after, so both loads are in flight before either is waited for,
// then a third, guarded (tid + 512 < 600). No thread loop remains.
// CHECK-LABEL: func @copy
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK-NOT: scf.for
// CHECK: vector.load %arg0
// CHECK-NOT: vector.store
// CHECK: arith.addi %[[TID]], %c256
// CHECK-NOT: vector.store
// CHECK: vector.load %arg0
// CHECK: vector.store
// CHECK: vector.store
// CHECK: %[[I2:.*]] = arith.addi %[[TID]], %c512
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[I2]], %c600
// CHECK: scf.if %[[IN]] {
// CHECK:   vector.load %arg0
// CHECK:   vector.store
// CHECK: }
// CHECK-NEXT: gpu.barrier
func.func @copy(%src: memref<100x48xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %c100 = arith.constant 100 : index
  mla.grid in (%c1, %c1, %c1) attributes {config = #mla.config<tile_kv = 16, kv_splits = 1, head_group = 1, warps = 4, stages = 1>} {
  ^bb0(%bx: index, %by: index, %bz: index):
    %tile = memref.alloca() : memref<100x48xbf16>
    scf.parallel (%r, %c) = (%c0, %c0) to (%c100, %c6) step (%c1, %c1) {
      %d = arith.muli %c, %c8 : index
      %v = vector.load %src[%r, %d] : memref<100x48xbf16>, vector<8xbf16>
      vector.store %v, %tile[%r, %d] : memref<100x48xbf16>, vector<8xbf16>
      scf.reduce
    }
  }
  return
}

// -----

// Adjacent phases that touch disjoint tiles (prefill's K and V copies)
// share one barrier: the first is marked mla.unsynchronized. A third phase
// that reads the first's tile keeps the barrier before it.
// CHECK-LABEL: func @independent
// CHECK: vector.store %{{.*}}, %[[KT:.*]][
// CHECK-NOT: gpu.barrier
// CHECK: vector.store %{{.*}}, %[[VT:.*]][
// CHECK-NOT: vector.load %[[KT]]
// CHECK: gpu.barrier
// CHECK: vector.load %[[KT]]
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: return
func.func @independent(%src: memref<64x64xbf16>, %dst: memref<64x64xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  mla.grid in (%c1, %c1, %c1) attributes {config = #mla.config<tile_kv = 16, kv_splits = 1, head_group = 1, warps = 4, stages = 1>} {
  ^bb0(%bx: index, %by: index, %bz: index):
    %kt = memref.alloca() : memref<64x64xbf16>
    %vt = memref.alloca() : memref<64x64xbf16>
    scf.parallel (%r, %c) = (%c0, %c0) to (%c64, %c8) step (%c1, %c1) {
      %d = arith.muli %c, %c8 : index
      %v = vector.load %src[%r, %d] : memref<64x64xbf16>, vector<8xbf16>
      vector.store %v, %kt[%r, %d] : memref<64x64xbf16>, vector<8xbf16>
      scf.reduce
    }
    scf.parallel (%r, %c) = (%c0, %c0) to (%c64, %c8) step (%c1, %c1) {
      %d = arith.muli %c, %c8 : index
      %v = vector.load %src[%r, %d] : memref<64x64xbf16>, vector<8xbf16>
      vector.store %v, %vt[%r, %d] : memref<64x64xbf16>, vector<8xbf16>
      scf.reduce
    }
    scf.parallel (%r, %c) = (%c0, %c0) to (%c64, %c8) step (%c1, %c1) {
      %d = arith.muli %c, %c8 : index
      %v = vector.load %kt[%r, %d] : memref<64x64xbf16>, vector<8xbf16>
      vector.store %v, %dst[%r, %d] : memref<64x64xbf16>, vector<8xbf16>
      scf.reduce
    }
  }
  return
}
