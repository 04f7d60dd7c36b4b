// RUN: mla-opt %s -split-input-file --mla-lower-host | FileCheck %s

// Q·Kᵀ: per (m, n) a 16-wide FMA dot product along k, then a reduction.
// CHECK-LABEL: func @qk
// CHECK-NOT: mla.matmul
// CHECK: scf.for %[[M:.*]] = %c0 to %c4 step %c1
// CHECK:   scf.for %[[N:.*]] = %c0 to %c16 step %c1
// CHECK:     %[[DOT:.*]] = scf.for %[[K:.*]] = %c0 to %c48 step %{{.*}} iter_args(%[[ACC:.*]] = %cst) -> (vector<16xf32>)
// CHECK:       %[[A:.*]] = vector.load %arg0[%[[M]], %[[K]]] : memref<4x48xbf16>, vector<16xbf16>
// CHECK:       arith.extf %[[A]] : vector<16xbf16> to vector<16xf32>
// CHECK:       %[[B:.*]] = vector.load %arg1[%[[N]], %[[K]]] : memref<16x48xbf16>, vector<16xbf16>
// CHECK:       vector.fma
// CHECK:     %[[S:.*]] = vector.reduction <add>, %[[DOT]] : vector<16xf32> into f32
// CHECK:     memref.store %[[S]], %arg2[%[[M]], %[[N]]]
func.func @qk(%a: memref<4x48xbf16>, %b: memref<16x48xbf16>, %c: memref<4x16xf32>) {
  mla.matmul %a, %b, %c {transpose_b} : memref<4x48xbf16>, memref<16x48xbf16>, memref<4x16xf32>
  return
}

// -----

// P·V with accumulation: broadcast P[m, k] times row V[k, :], added to C.
// CHECK-LABEL: func @pv
// CHECK: scf.for %[[M:.*]] = %c0 to %c4 step %c1
// CHECK:   scf.for %[[K:.*]] = %c0 to %c16 step %c1
// CHECK:     %[[P:.*]] = memref.load %arg0[%[[M]], %[[K]]] : memref<4x16xbf16>
// CHECK:     %[[PF:.*]] = arith.extf %[[P]] : bf16 to f32
// CHECK:     %[[PB:.*]] = vector.broadcast %[[PF]] : f32 to vector<16xf32>
// CHECK:     scf.for %[[N:.*]] = %c0 to %c32 step %c16
// CHECK:       vector.load %arg1[%[[K]], %[[N]]] : memref<16x32xbf16, strided<[48, 1]>>, vector<16xbf16>
// CHECK:       %[[C:.*]] = vector.load %arg2[%[[M]], %[[N]]] : memref<4x32xf32>, vector<16xf32>
// CHECK:       %[[R:.*]] = vector.fma %[[PB]], %{{.*}}, %[[C]] : vector<16xf32>
// CHECK:       vector.store %[[R]], %arg2[%[[M]], %[[N]]]
func.func @pv(%a: memref<4x16xbf16>, %b: memref<16x32xbf16, strided<[48, 1]>>, %c: memref<4x32xf32>) {
  mla.matmul %a, %b, %c {accumulate} : memref<4x16xbf16>, memref<16x32xbf16, strided<[48, 1]>>, memref<4x32xf32>
  return
}

// -----

// Without `accumulate` C is cleared first.
// CHECK-LABEL: func @overwrite
// CHECK: scf.parallel
// CHECK:   vector.store %cst, %arg2
// CHECK: vector.fma
func.func @overwrite(%a: memref<2x8xf32>, %b: memref<8x24xf32>, %c: memref<2x24xf32>) {
  mla.matmul %a, %b, %c : memref<2x8xf32>, memref<8x24xf32>, memref<2x24xf32>
  return
}

// -----

// With a row scale (the online-softmax correction), each C row is rescaled
// before the products are added.
// CHECK-LABEL: func @pv_scaled
// CHECK: scf.for %[[M:.*]] = %c0 to %c4 step %c1
// CHECK:   %[[S:.*]] = memref.load %arg3[%[[M]]] : memref<4xf32>
// CHECK:   %[[SV:.*]] = vector.broadcast %[[S]] : f32 to vector<16xf32>
// CHECK:   scf.for %[[N:.*]] = %c0 to %c32 step %c16
// CHECK:     %[[C:.*]] = vector.load %arg2[%[[M]], %[[N]]]
// CHECK:     %[[R:.*]] = arith.mulf %[[C]], %[[SV]] : vector<16xf32>
// CHECK:     vector.store %[[R]], %arg2[%[[M]], %[[N]]]
// CHECK:   scf.for
// CHECK:     vector.fma
func.func @pv_scaled(%a: memref<4x16xbf16>, %b: memref<16x32xbf16>, %c: memref<4x32xf32>, %s: memref<4xf32>) {
  mla.matmul %a, %b, %c scale %s {accumulate} : memref<4x16xbf16>, memref<16x32xbf16>, memref<4x32xf32>, memref<4xf32>
  return
}

// -----

// The masked-copy idiom on 16-bit floats: zeros stored first, the load and
// its store only in the branch (no bf16 value crosses control flow).
// CHECK-LABEL: func @masked_copy
// CHECK: arith.constant dense<0.000000e+00> : vector<8xbf16>
// CHECK: %[[Z:.*]] = arith.constant dense<0.000000e+00> : vector<8xbf16>
// CHECK-NEXT: vector.store %[[Z]], %arg1[%arg3, %c0] : memref<4x8xbf16>, vector<8xbf16>
// CHECK-NEXT: scf.if %arg2 {
// CHECK-NEXT: %[[V:.*]] = vector.load %arg0[%arg3, %c0] : memref<4x8xbf16>, vector<8xbf16>
// CHECK-NEXT: vector.store %[[V]], %arg1[%arg3, %c0] : memref<4x8xbf16>, vector<8xbf16>
// CHECK-NEXT: }
// CHECK-NOT: scf.yield
func.func @masked_copy(%src: memref<4x8xbf16>, %dst: memref<4x8xbf16>, %cond: i1, %r: index) {
  %c0 = arith.constant 0 : index
  %zeros = arith.constant dense<0.0> : vector<8xbf16>
  %v = scf.if %cond -> (vector<8xbf16>) {
    %l = vector.load %src[%r, %c0] : memref<4x8xbf16>, vector<8xbf16>
    scf.yield %l : vector<8xbf16>
  } else {
    scf.yield %zeros : vector<8xbf16>
  }
  vector.store %v, %dst[%r, %c0] : memref<4x8xbf16>, vector<8xbf16>
  return
}
