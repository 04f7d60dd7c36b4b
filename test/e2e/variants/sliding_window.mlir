// Prefill (MHA form, DeepSeek 192/128, 16 heads, causal, bf16) with a variant: a query sees only the 128 most recent keys up to its causal limit.
//   mla-compile sliding_window.mlir --target=host -o prefill-sliding_window.mlapkg
//   mla-run prefill-sliding_window.mlapkg --inputs IN --outputs OUT --scale X
// Inputs (IN/*.npy): q k v cu_seqlens_q cu_seqlens_k. Outputs: o.npy, lse.npy. See docs/Variants.md.
func.func @prefill_sliding_window(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>, %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>, %scale: f32, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  mla.prefill %q, %k, %v, %cu_seqlens_q, %cu_seqlens_k, %scale, %o, %lse {causal}
      : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>,
        memref<?xi32>, memref<?xi32>, f32, memref<?x16x128xbf16>, memref<16x?xf32>
    mask {
    ^bb0(%b: index, %h: index, %qpos: index, %kpos: index):
      // Visible: qpos - kpos < 128 (the causal limit kpos <= qpos is the op's).
      %w = arith.constant 128 : index
      %d = arith.subi %qpos, %kpos : index
      %in = arith.cmpi slt, %d, %w : index
      mla.yield %in : i1
    }
  return
}
