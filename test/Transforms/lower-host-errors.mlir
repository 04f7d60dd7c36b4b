// RUN: mla-opt %s --mla-lower-host -verify-diagnostics

// A strided innermost dim is rejected (it was lowered to vector.load, which
// needs a unit stride: invalid IR; found by mla-fuzz-ir).
func.func @strided_rows(%p: memref<8x16xf16>, %v: memref<16x32xf16, strided<[48, 0]>>, %acc: memref<8x32xf32>, %corr: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%bx: index, %by: index, %bz: index):
    // expected-error @+1 {{'mla.matmul' op operand B needs a unit stride in its last dim on the host (rows are loaded and stored as vectors)}}
    mla.matmul %p, %v, %acc scale %corr {accumulate} : memref<8x16xf16>, memref<16x32xf16, strided<[48, 0]>>, memref<8x32xf32>, memref<8xf32>
  }
  return
}
