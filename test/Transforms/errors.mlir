// RUN: mla-opt %s -split-input-file --mla-tile --mla-outline-host-kernels -verify-diagnostics

func.func @unconfigured(%q: memref<?x1x2x48xbf16>, %kv: memref<?x3x48xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x2x32xbf16>, %lse: memref<?x1x2xf32>) {
  // expected-error @+1 {{'mla.decode' op has no #mla.config; run mla-select-config before mla-tile}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x2x48xbf16>, memref<?x3x48xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x2x32xbf16>, memref<?x1x2xf32>
  return
}

// -----

// The launcher computes grid sizes from argument shapes only.
func.func @bad_size(%o: memref<?xf32>, %lens: memref<2xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %l = memref.load %lens[%c0] : memref<2xi32>
  %n = arith.index_cast %l : i32 to index
  // expected-error @+1 {{size must be a constant >= 0 or memref.dim of a function argument with a constant dim (optionally plus or minus a constant, then ceil-divided by a constant), so that the launcher can compute it}}
  mla.grid in (%n, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %v = arith.constant 1.0 : f32
    memref.store %v, %o[%x] : memref<?xf32>
  }
  return
}

// -----

// A grid size from a dim the argument does not have (found by mla-fuzz-ir:
// it used to reach the launch plan's verifier as an assertion).
func.func @dim_out_of_range(%q: memref<?x16xbf16>, %o: memref<?x16xf32>) {
  %c5 = arith.constant 5 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{dim 5 of argument 0, which has 2 dims (a size of the launch plan)}}
  %b = memref.dim %q, %c5 : memref<?x16xbf16>
  mla.grid in (%b, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %v = arith.constant 1.0 : f32
    memref.store %v, %o[%x, %c1] : memref<?x16xf32>
  }
  return
}

// -----

// expected-error @+1 {{argument 0 of type 'index' is not supported by the launcher}}
func.func @bad_arg(%n: index, %o: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
  }
  return
}
