// A prefill with static shapes: 5 queries, 9 keys, 2 requests, 1 head.
func.func @prefill(%q2: memref<5x1x32xf32>, %k2: memref<9x1x32xf32>, %v2: memref<9x1x16xf32>, %cu2: memref<3xi32>, %cuk: memref<3xi32>, %scale: f32, %o2: memref<5x1x16xf32>, %lse2: memref<1x5xf32>) {
  mla.prefill %q2, %k2, %v2, %cu2, %cuk, %scale, %o2, %lse2 : memref<5x1x32xf32>, memref<9x1x32xf32>, memref<9x1x16xf32>, memref<3xi32>, memref<3xi32>, f32, memref<5x1x16xf32>, memref<1x5xf32>
  return
}
