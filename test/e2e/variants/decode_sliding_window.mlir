// Decode (absorbed, 512+64, 16 heads, page 64, bf16) with a variant: a query sees only the 128 most recent keys up to its causal limit.
//   mla-compile decode_sliding_window.mlir --target=host -o decode-sliding_window.mlapkg
//   mla-run decode-sliding_window.mlapkg --inputs IN --outputs OUT --scale X
// Inputs (IN/*.npy): q kv block_table seq_lens. Outputs: o.npy, lse.npy. See docs/Variants.md.
func.func @decode_sliding_window(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %block_table: memref<?x?xi32>, %seq_lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  mla.decode %q, %kv, %block_table, %seq_lens, %scale, %o, %lse
      : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>,
        memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
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
