// RUN: mla-opt %s -split-input-file --mla-expand-softmax | FileCheck %s

// mla.online_softmax as four parallel phases; the element function is
// inlined where a phase reads a score (chunk maxima, then exponentials).
// Scratch buffers (per (row, 8-column chunk) partials, per-row references)
// go to the top of the grid.
// CHECK-LABEL: func @step
// CHECK: mla.grid
// CHECK-DAG: %[[PART:.*]] = memref.alloca() : memref<4x2xf32>
// CHECK-DAG: %[[REF:.*]] = memref.alloca() : memref<4xf32>
// CHECK-NOT: mla.online_softmax
//   1. chunk maxima of the visible logits
// CHECK: scf.parallel
// CHECK: memref.load %{{.*}} : memref<4x16xf32>
// CHECK: arith.mulf %{{.*}}, %arg1 : f32
// CHECK: arith.cmpi ult, %{{.*}}, %arg2 : index
// CHECK: arith.select %{{.*}}, %{{.*}}, %cst{{.*}} : f32
// CHECK: arith.maximumf
// CHECK: memref.store %{{.*}}, %[[PART]]
//   2. row maxima, reference (0 while nothing was seen), correction
// CHECK: scf.parallel
// CHECK: arith.cmpf oeq
// CHECK: math.exp2
// CHECK: memref.store %{{.*}}, %arg5
// CHECK: memref.store %{{.*}}, %arg3
// CHECK: memref.store %{{.*}}, %[[REF]]
//   3. exponentials stored to P (bf16), chunk sums
// CHECK: scf.parallel
// CHECK: math.exp2
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: memref.store %{{.*}}, %[[PART]]
//   4. l = l * corr + sum
// CHECK: scf.parallel
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}, %arg4
func.func @step(%s: memref<4x16xf32>, %scale: f32, %n: index, %m: memref<4xf32>, %l: memref<4xf32>, %corr: memref<4xf32>, %p: memref<4x16xbf16>) {
  %c1 = arith.constant 1 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    mla.online_softmax %s -> %p state(%m, %l, %corr) : memref<4x16xf32>, memref<4x16xbf16>, memref<4xf32>, memref<4xf32>, memref<4xf32> {
    ^bb0(%row: index, %col: index, %score: f32):
      %v = arith.mulf %score, %scale : f32
      %vis = arith.cmpi ult, %col, %n : index
      mla.yield %v, %vis : f32, i1
    }
  }
  return
}

// -----

// 12 columns: the second 8-column chunk overhangs the tile; its columns
// past 12 are invisible and not stored.
// CHECK-LABEL: func @ragged_chunk
// CHECK: memref.alloca() : memref<2x2xf32>
// CHECK: scf.parallel
// CHECK: arith.cmpi ult, %{{.*}}, %c12
// CHECK: arith.andi
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK: scf.if
// CHECK: memref.store %{{.*}} : memref<2x12xf16>
func.func @ragged_chunk(%s: memref<2x12xf32>, %m: memref<2xf32>, %l: memref<2xf32>, %corr: memref<2xf32>, %p: memref<2x12xf16>) {
  %c1 = arith.constant 1 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    mla.online_softmax %s -> %p state(%m, %l, %corr) : memref<2x12xf32>, memref<2x12xf16>, memref<2xf32>, memref<2xf32>, memref<2xf32> {
    ^bb0(%row: index, %col: index, %score: f32):
      %t = arith.constant true
      mla.yield %score, %t : f32, i1
    }
  }
  return
}

// -----

// mla.attention_step: decomposed into Q·Kᵀ into a score tile, the online
// softmax (then its phases) and the accumulating P·V, over scratch tiles
// placed in front of the accumulator (scores, probabilities) and after the
// running sum (correction).
// CHECK-LABEL: func @step
// CHECK: %[[Q:.*]] = memref.alloca() : memref<4x32xbf16>
// CHECK: %[[K:.*]] = memref.alloca() : memref<16x32xbf16>
// CHECK: %[[SB:.*]] = memref.alloca() : memref<4x20xf32>
// CHECK: %[[S:.*]] = memref.subview %[[SB]][0, 0] [4, 16] [1, 1]
// CHECK: %[[PB:.*]] = memref.alloca() : memref<4x24xbf16>
// CHECK: %[[P:.*]] = memref.subview %[[PB]][0, 0] [4, 16] [1, 1]
// CHECK: %[[ACC:.*]] = memref.alloca() : memref<4x16xf32>
// CHECK: memref.alloca() : memref<4xf32>
// CHECK: memref.alloca() : memref<4xf32>
// CHECK: %[[CORR:.*]] = memref.alloca() : memref<4xf32>
// CHECK: mla.matmul %[[Q]], %[[K]], %[[S]] {transpose_b}
// CHECK-NOT: mla.online_softmax
// CHECK: scf.parallel
// CHECK: mla.matmul %[[P]], %{{.*}}, %[[ACC]] scale %[[CORR]] {accumulate}
func.func @step(%n: index) {
  %q = memref.alloca() : memref<4x32xbf16>
  %k = memref.alloca() : memref<16x32xbf16>
  %v = memref.subview %k[0, 0] [16, 16] [1, 1] : memref<16x32xbf16> to memref<16x16xbf16, strided<[32, 1]>>
  %acc = memref.alloca() : memref<4x16xf32>
  %m = memref.alloca() : memref<4xf32>
  %l = memref.alloca() : memref<4xf32>
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<4x32xbf16>, memref<16x32xbf16>, memref<16x16xbf16, strided<[32, 1]>>, memref<4x16xf32>, memref<4xf32>, memref<4xf32> {
  ^bb0(%r: index, %c: index, %s: f32):
    %vis = arith.cmpi ult, %c, %n : index
    mla.yield %s, %vis : f32, i1
  }
  return
}

// -----

// mla.attention_finish: one parallel loop over rows and 16-column chunks of
// the accumulator (the widest vector that divides it), scaled by scale / l
// (0 for an empty row), the output region on each 4-column block of the
// chunk, the lse region on each row's first chunk.
// CHECK-LABEL: func @finish
// CHECK-NOT: mla.attention_finish
// CHECK: scf.parallel (%[[R:.*]], %[[J:.*]]) = ({{.*}}) to (%c8, %c2)
// CHECK: memref.load %{{.*}}[%[[R]]] : memref<8xf32>
// CHECK: arith.cmpf oeq
// CHECK: arith.divf
// CHECK: math.log2
// CHECK: vector.load %{{.*}} : memref<8x32xf32>, vector<16xf32>
// CHECK: arith.mulf %{{.*}} : vector<16xf32>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3] : vector<16xf32>, vector<16xf32>
// CHECK: vector.store %{{.*}} : memref<8x32xf32>, vector<4xf32>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [12, 13, 14, 15]
// CHECK: vector.store
// CHECK: scf.if
// CHECK: memref.store %{{.*}} : memref<8xf32>
func.func @finish(%acc: memref<8x32xf32>, %m: memref<8xf32>, %l: memref<8xf32>, %s: memref<8xf32>, %o: memref<8x32xf32>, %lse: memref<8xf32>) {
  mla.attention_finish %acc state(%m, %l) scale %s width 4 : memref<8x32xf32>, memref<8xf32>, memref<8xf32>, memref<8xf32> output {
  ^bb0(%r: index, %c: index, %v: vector<4xf32>):
    vector.store %v, %o[%r, %c] : memref<8x32xf32>, vector<4xf32>
    mla.yield
  } lse {
  ^bb0(%r: index, %x: f32):
    memref.store %x, %lse[%r] : memref<8xf32>
    mla.yield
  }
  return
}
