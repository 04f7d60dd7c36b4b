// Prefill (MHA form, DeepSeek 192/128, 16 heads, causal, bf16) with a variant: score <- 30 * tanh(score / 30) (logit soft-capping).
//   mla-compile softcap.mlir --target=host -o prefill-softcap.mlapkg
//   mla-run prefill-softcap.mlapkg --inputs IN --outputs OUT --scale X
// Inputs (IN/*.npy): q k v cu_seqlens_q cu_seqlens_k. Outputs: o.npy, lse.npy. See docs/Variants.md.
func.func @prefill_softcap(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>, %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>, %scale: f32, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  mla.prefill %q, %k, %v, %cu_seqlens_q, %cu_seqlens_k, %scale, %o, %lse {causal}
      : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>,
        memref<?xi32>, memref<?xi32>, f32, memref<?x16x128xbf16>, memref<16x?xf32>
    score {
    ^bb0(%s: f32, %b: index, %h: index, %qpos: index, %kpos: index):
      %cap = arith.constant 30.0 : f32
      %x = arith.divf %s, %cap fastmath<afn> : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %t, %cap : f32
      mla.yield %r : f32
    }
  return
}
