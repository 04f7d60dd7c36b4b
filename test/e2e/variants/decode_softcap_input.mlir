// Decode (absorbed, 512+64, 16 heads, page 64, bf16) with a variant whose constant is an input: score <- cap * tanh(score / cap), cap read from a rank-0 memref (one f32).
//   mla-compile decode_softcap_input.mlir --target=host -o decode-softcap-input.mlapkg
//   mla-run decode-softcap-input.mlapkg --inputs IN --outputs OUT --scale X
// Inputs (IN/*.npy): q kv block_table seq_lens cap (shape (), float32). Outputs: o.npy, lse.npy. See docs/Variants.md.
func.func @decode_softcap_input(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %block_table: memref<?x?xi32>, %seq_lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>, %cap: memref<f32> {mla.role = "cap"}) {
  mla.decode %q, %kv, %block_table, %seq_lens, %scale, %o, %lse
      : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>,
        memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
    score {
    ^bb0(%s: f32, %b: index, %h: index, %qpos: index, %kpos: index):
      %c = memref.load %cap[] : memref<f32>
      %x = arith.divf %s, %c fastmath<afn> : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %t, %c : f32
      mla.yield %r : f32
    }
  return
}
