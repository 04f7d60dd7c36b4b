// Prefill (MHA form, DeepSeek 192/128, 16 heads, causal, bf16) with a variant: a learned per-head sink logit (input sinks.npy, f32 [16]) joins the softmax denominator.
//   mla-compile sink.mlir --target=host -o prefill-sink.mlapkg
//   mla-run prefill-sink.mlapkg --inputs IN --outputs OUT --scale X
// Inputs (IN/*.npy): q k v cu_seqlens_q cu_seqlens_k sinks. Outputs: o.npy, lse.npy. See docs/Variants.md.
func.func @prefill_sink(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>, %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>, %scale: f32, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>, %sinks: memref<16xf32> {mla.role = "sinks"}) {
  mla.prefill %q, %k, %v, %cu_seqlens_q, %cu_seqlens_k, %scale, %o, %lse {causal}
      : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>,
        memref<?xi32>, memref<?xi32>, f32, memref<?x16x128xbf16>, memref<16x?xf32>
    sink {
    ^bb0(%b: index, %h: index, %qpos: index):
      %z = memref.load %sinks[%h] : memref<16xf32>
      mla.yield %z : f32
    }
  return
}
