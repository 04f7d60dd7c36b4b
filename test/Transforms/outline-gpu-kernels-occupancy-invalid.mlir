// RUN: mla-opt %s --mla-select-config=target=sm_90a --mla-outline-gpu-kernels -verify-diagnostics
// RUN: mla-opt %s --mla-select-config=target=gfx942 --mla-outline-gpu-kernels -verify-diagnostics

// An occupancy more than one compute unit holds (9 x 256 threads > 2048):
// an error at the grid.
func.func @too_many(%a: memref<?xf32> {mla.role = "q"}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %a, %c0 : memref<?xf32>
  // expected-error @+1 {{grid occupancy 9 asks for 9 workgroups of 256 threads on one compute unit of}}
  mla.grid in (%n, %c1, %c1) attributes {block_size = 256 : i64, occupancy = 9 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %v = memref.load %a[%x] : memref<?xf32>
    memref.store %v, %a[%x] : memref<?xf32>
  }
  return
}
