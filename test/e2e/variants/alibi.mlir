// Prefill (MHA form, DeepSeek 192/128, 16 heads, causal, bf16) with a variant: score <- score - slope_h * (q_pos - k_pos), slope_h = 2^(-8 (h+1) / H).
//   mla-compile alibi.mlir --target=host -o prefill-alibi.mlapkg
//   mla-run prefill-alibi.mlapkg --inputs IN --outputs OUT --scale X
// Inputs (IN/*.npy): q k v cu_seqlens_q cu_seqlens_k. Outputs: o.npy, lse.npy. See docs/Variants.md.
func.func @prefill_alibi(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>, %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>, %scale: f32, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  mla.prefill %q, %k, %v, %cu_seqlens_q, %cu_seqlens_k, %scale, %o, %lse {causal}
      : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>,
        memref<?xi32>, memref<?xi32>, f32, memref<?x16x128xbf16>, memref<16x?xf32>
    score {
    ^bb0(%s: f32, %b: index, %h: index, %qpos: index, %kpos: index):
      // slope_h = 2^(-8 (h + 1) / H), H = 16.
      %c1 = arith.constant 1 : index
      %h1 = arith.addi %h, %c1 : index
      %hi = arith.index_cast %h1 : index to i32
      %hf = arith.sitofp %hi : i32 to f32
      %neg = arith.constant -0.5 : f32
      %e = arith.mulf %hf, %neg : f32
      %slope = math.exp2 %e : f32
      %di = arith.subi %qpos, %kpos : index
      %dii = arith.index_cast %di : index to i32
      %df = arith.sitofp %dii : i32 to f32
      %bias = arith.mulf %slope, %df : f32
      %r = arith.subf %s, %bias : f32
      mla.yield %r : f32
    }
  return
}
