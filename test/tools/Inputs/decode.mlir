// A decode kernel written by hand: 8 heads, 256+32 dims, page size 16, MTP 2.
func.func @my_decode(%q: memref<?x2x8x288xbf16>, %kv: memref<?x16x288xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x2x8x256xbf16>, %lse: memref<?x2x8xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x2x8x288xbf16>, memref<?x16x288xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x2x8x256xbf16>, memref<?x2x8xf32>
  return
}
