// Decode (absorbed, 512+64, 16 heads, page 64, bf16) with a variant: score <- score - slope_h * (q_pos - k_pos), slope_h = 2^(-8 (h+1) / H).
//   mla-compile decode_alibi.mlir --target=host -o decode-alibi.mlapkg
//   mla-run decode-alibi.mlapkg --inputs IN --outputs OUT --scale X
// Inputs (IN/*.npy): q kv block_table seq_lens. Outputs: o.npy, lse.npy. See docs/Variants.md.
func.func @decode_alibi(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %block_table: memref<?x?xi32>, %seq_lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  mla.decode %q, %kv, %block_table, %seq_lens, %scale, %o, %lse
      : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>,
        memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
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
