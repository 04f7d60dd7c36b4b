// A variant input with the role of another argument (test/tools/variants.test).
func.func @decode_sink(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %block_table: memref<?x?xi32>, %seq_lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>, %sinks: memref<16xf32> {mla.role = "seq_lens"}) {
  mla.decode %q, %kv, %block_table, %seq_lens, %scale, %o, %lse
      : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>,
        memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
    sink {
    ^bb0(%b: index, %h: index, %qpos: index):
      %z = memref.load %sinks[%h] : memref<16xf32>
      mla.yield %z : f32
    }
  return
}
