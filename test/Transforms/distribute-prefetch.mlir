// RUN: mla-opt %s -split-input-file --mla-distribute="default-warps=2" | FileCheck %s

// On AMD (ArchInfo::prefetchesThroughRegisters) the KV copy of a key loop
// and the phase staging the next tile's page numbers (mla.next_tile) read
// one iteration early: the first tile's reads before the loop (guarded by
// its bound), each next tile's right after the copy's barrier, into values
// the loop carries; each iteration writes what the previous one read.
// Here 128 threads copy a 32 x 64 tile in 16-byte pieces (two per thread)
// and stage 32 page numbers (a partial iteration: threads 32.. read row 31
// again instead of branching).

// CHECK-LABEL: func @prefetch
// The first tile's copy reads, then the staging's for tile 1.
// CHECK: %[[FIRST:.*]]:2 = scf.if %{{.*}} -> (vector<8xbf16>, vector<8xbf16>) {
// CHECK:   memref.load %[[PAGES:.*]][%{{.*}}, %{{.*}}] : memref<2x32xi32, #gpu.address_space<workgroup>>
// CHECK:   vector.load %arg3
// CHECK: } else {
// CHECK:   scf.yield %cst{{.*}}, %cst{{.*}} : vector<8xbf16>, vector<8xbf16>
// CHECK: %[[PAGE0:.*]] = scf.if %{{.*}} -> (i32) {
// CHECK:   arith.minui %{{.*}}, %c31
// CHECK:   memref.load %arg2
// CHECK: scf.for %[[T:.*]] = %c0 to %arg0 step %c32 iter_args({{.*}}, %[[K0:.*]] = %[[FIRST]]#0, %[[K1:.*]] = %[[FIRST]]#1, %[[PG:.*]] = %[[PAGE0]]) -> (vector<4xf32>, vector<4xf32>, f32, f32, vector<8xbf16>, vector<8xbf16>, i32) {
// The staging: the page numbers read last iteration, then the next ones
// (of the tile after the next, the current one's past the last tile).
// CHECK:   memref.store %[[PG]], %[[PAGES]]
// CHECK:   %[[NEXT:.*]] = arith.addi %[[T]], %c32
// CHECK:   %[[MORE:.*]] = arith.cmpi slt, %[[NEXT]], %arg0
// CHECK:   arith.select %[[MORE]], %[[NEXT]], %[[T]]
// CHECK:   %[[PG1:.*]] = memref.load %arg2
// The copy: this tile's rows, read last iteration, into LDS.
// CHECK:   vector.store %[[K0]], %[[K:.*]][
// CHECK:   vector.store %[[K1]], %[[K]][
// CHECK-NEXT: gpu.barrier
// The next tile's rows, in flight while this tile's MFMAs run.
// CHECK:   memref.load %[[PAGES]]
// CHECK:   %[[N0:.*]] = vector.load %arg3
// CHECK:   memref.load %[[PAGES]]
// CHECK:   %[[N1:.*]] = vector.load %arg3
// CHECK:   amdgpu.mfma
// CHECK:   scf.yield {{.*}}, %[[N0]], %[[N1]], %[[PG1]] : {{.*}}, vector<8xbf16>, vector<8xbf16>, i32
module attributes {mla.target = #mla.target<"gfx942">} {
func.func @prefetch(%n: index, %scale: f32, %bt: memref<?xi32>, %kv: memref<?x64xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %q = memref.alloca() : memref<16x64xbf16>
    %k = memref.alloca() : memref<32x64xbf16>
    %v = memref.subview %k[0, 0] [32, 32] [1, 1] : memref<32x64xbf16> to memref<32x32xbf16, strided<[64, 1]>>
    %accb = memref.alloca() : memref<16x36xf32>
    %acc = memref.subview %accb[0, 0] [16, 32] [1, 1] : memref<16x36xf32> to memref<16x32xf32, strided<[36, 1]>>
    %m = memref.alloca() : memref<16xf32>
    %l = memref.alloca() : memref<16xf32>
    %pages = memref.alloca() : memref<2x32xi32>
    scf.parallel (%r) = (%c0) to (%c32) step (%c1) {
      %pg = memref.load %bt[%r] : memref<?xi32>
      memref.store %pg, %pages[%c0, %r] : memref<2x32xi32>
      scf.reduce
    }
    scf.for %t = %c0 to %n step %c32 {
      %i = arith.divui %t, %c32 : index
      %slot = arith.remui %i, %c2 : index
      %next = arith.subi %c1, %slot : index
      %t1 = arith.addi %t, %c32 : index
      scf.parallel (%r) = (%c0) to (%c32) step (%c1) {
        %row = arith.addi %t1, %r : index
        %pg = memref.load %bt[%row] : memref<?xi32>
        memref.store %pg, %pages[%next, %r] : memref<2x32xi32>
        scf.reduce
      } {mla.next_tile, mla.unsynchronized}
      scf.parallel (%r, %c) = (%c0, %c0) to (%c32, %c8) step (%c1, %c1) {
        %col = arith.muli %c, %c8 : index
        %pg = memref.load %pages[%slot, %r] : memref<2x32xi32>
        %pi = arith.index_cast %pg : i32 to index
        %val = vector.load %kv[%pi, %col] : memref<?x64xbf16>, vector<8xbf16>
        vector.store %val, %k[%r, %col] : memref<32x64xbf16>, vector<8xbf16>
        scf.reduce
      }
      mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16, strided<[64, 1]>>, memref<16x32xf32, strided<[36, 1]>>, memref<16xf32>, memref<16xf32> {
      ^bb0(%r: index, %c: index, %s: f32):
        %sx = arith.mulf %s, %scale : f32
        %key = arith.addi %t, %c : index
        %vis = arith.cmpi ult, %key, %n : index
        mla.yield %sx, %vis : f32, i1
      }
    }
  }
  return
}

}

// -----

// Without mla.next_tile the loop writes the page buffer the copy reads (in
// a phase that may stage anything): nothing is read early.

// CHECK-LABEL: func @not_next_tile
// CHECK-NOT: vector<8xbf16>, vector<8xbf16>) {
// CHECK: scf.for {{.*}} -> (vector<4xf32>, vector<4xf32>, f32, f32) {
// CHECK:   memref.load %arg2
// CHECK:   vector.load %arg3
// CHECK:   vector.store
// CHECK:   gpu.barrier
// CHECK:   amdgpu.mfma
module attributes {mla.target = #mla.target<"gfx942">} {
func.func @not_next_tile(%n: index, %scale: f32, %bt: memref<?xi32>, %kv: memref<?x64xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %q = memref.alloca() : memref<16x64xbf16>
    %k = memref.alloca() : memref<32x64xbf16>
    %v = memref.subview %k[0, 0] [32, 32] [1, 1] : memref<32x64xbf16> to memref<32x32xbf16, strided<[64, 1]>>
    %accb = memref.alloca() : memref<16x36xf32>
    %acc = memref.subview %accb[0, 0] [16, 32] [1, 1] : memref<16x36xf32> to memref<16x32xf32, strided<[36, 1]>>
    %m = memref.alloca() : memref<16xf32>
    %l = memref.alloca() : memref<16xf32>
    %pages = memref.alloca() : memref<2x32xi32>
    scf.parallel (%r) = (%c0) to (%c32) step (%c1) {
      %pg = memref.load %bt[%r] : memref<?xi32>
      memref.store %pg, %pages[%c0, %r] : memref<2x32xi32>
      scf.reduce
    }
    scf.for %t = %c0 to %n step %c32 {
      %i = arith.divui %t, %c32 : index
      %slot = arith.remui %i, %c2 : index
      %next = arith.subi %c1, %slot : index
      %t1 = arith.addi %t, %c32 : index
      scf.parallel (%r) = (%c0) to (%c32) step (%c1) {
        %row = arith.addi %t1, %r : index
        %pg = memref.load %bt[%row] : memref<?xi32>
        memref.store %pg, %pages[%next, %r] : memref<2x32xi32>
        scf.reduce
      } {mla.unsynchronized}
      scf.parallel (%r, %c) = (%c0, %c0) to (%c32, %c8) step (%c1, %c1) {
        %col = arith.muli %c, %c8 : index
        %pg = memref.load %pages[%slot, %r] : memref<2x32xi32>
        %pi = arith.index_cast %pg : i32 to index
        %val = vector.load %kv[%pi, %col] : memref<?x64xbf16>, vector<8xbf16>
        vector.store %val, %k[%r, %col] : memref<32x64xbf16>, vector<8xbf16>
        scf.reduce
      }
      mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16, strided<[64, 1]>>, memref<16x32xf32, strided<[36, 1]>>, memref<16xf32>, memref<16xf32> {
      ^bb0(%r: index, %c: index, %s: f32):
        %sx = arith.mulf %s, %scale : f32
        %key = arith.addi %t, %c : index
        %vis = arith.cmpi ult, %key, %n : index
        mla.yield %sx, %vis : f32, i1
      }
    }
  }
  return
}

}
