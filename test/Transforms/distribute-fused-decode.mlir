// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=warps=2,tile_kv=32,stages=2" --mla-tile --mla-expand-paging --mla-distribute | FileCheck %s --check-prefix=SPLIT

// Decode, 16 rows, 2 warps (the mma.sync step, sm_90a's default before the
// transposed step: distribute-transposed-step.mlir): the two warps of the row block split the key
// columns (16 each): row maxima meet in a 2 x 16 buffer, each half of P is
// stored and both warps read all of P as the A operand; after the loop the
// second half's row sums join the first's.
// Two stages: the prologue copy waits for everything, the copy of the
// next tile inside the loop (its page lookup first) leaves its group in
// flight.
// SPLIT-LABEL: func @decode
// SPLIT: memref.alloca() : memref<2x16xf32, #gpu.address_space<workgroup>>
// SPLIT: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// SPLIT: scf.for
// SPLIT: memref.load %arg2[%{{.*}}, %{{.*}}] : memref<?x?xi32>
// SPLIT: nvgpu.device_async_copy
// SPLIT: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// SPLIT: nvvm.mma.sync
// SPLIT: gpu.shuffle  xor
// SPLIT: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<2x16xf32, #gpu.address_space<workgroup>>
// SPLIT: gpu.barrier
// SPLIT: memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<2x16xf32, #gpu.address_space<workgroup>>
// SPLIT: vector.store %{{.*}} : memref<16x32xbf16, strided<[40, 1]>, #gpu.address_space<workgroup>>, vector<2xbf16>
// SPLIT: gpu.barrier
// SPLIT: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<16x32xbf16, strided<[40, 1]>, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// SPLIT: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = true}
// SPLIT: nvvm.mma.sync
// SPLIT: scf.yield
// SPLIT: gpu.barrier
// SPLIT: memref.load
func.func @decode(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}
