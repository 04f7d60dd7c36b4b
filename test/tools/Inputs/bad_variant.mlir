// A score region using an op the targets cannot lower (mla-compile must
// point at it, not crash).
func.func @bad(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal} : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x16x128xbf16>, memref<16x?xf32> score {
  ^bb0(%s: f32, %b: index, %h: index, %qp: index, %kp: index):
    %r = math.sin %s : f32
    mla.yield %r : f32
  }
  return
}
