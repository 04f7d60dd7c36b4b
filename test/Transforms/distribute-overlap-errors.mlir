// RUN: mla-opt %s -split-input-file --mla-tile --mla-distribute -verify-diagnostics

// A step with `overlap` (its values copied one tile behind its keys) that
// no lowering can lag: on sm_80 (mma.sync) and on AMD, mla-distribute
// refuses it rather than read values still in flight. (mla-select-config
// refuses such configs; this is IR that names its own target and config.)
module attributes {mla.target = #mla.target<"sm_80">} {
func.func @prefill_sm80(%q: memref<?x2x64xbf16>, %k: memref<?x2x64xbf16>, %v: memref<?x2x64xbf16>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x2x64xbf16>, %lse: memref<2x?xf32>) {
  // expected-error @below {{'mla.attention_step' op has overlap (values copied one tile behind the keys), which only NVIDIA's fused warpgroup-MMA step with whole scores lowers; target sm_80 cannot take this step}}
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal, config = #mla.config<tile_kv = 32, kv_splits = 1, head_group = 1, warps = 8, stages = 2, tile_q = 128, overlap = 1>} : memref<?x2x64xbf16>, memref<?x2x64xbf16>, memref<?x2x64xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x2x64xbf16>, memref<2x?xf32>
  return
}
}

// -----

module attributes {mla.target = #mla.target<"gfx942">} {
func.func @prefill_amd(%q: memref<?x2x64xbf16>, %k: memref<?x2x64xbf16>, %v: memref<?x2x64xbf16>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x2x64xbf16>, %lse: memref<2x?xf32>) {
  // expected-error @below {{'mla.attention_step' op has overlap (values copied one tile behind the keys), which only NVIDIA's fused warpgroup-MMA step with whole scores lowers; target gfx942 cannot take this step}}
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal, config = #mla.config<tile_kv = 32, kv_splits = 1, head_group = 1, warps = 4, stages = 2, tile_q = 64, overlap = 1>} : memref<?x2x64xbf16>, memref<?x2x64xbf16>, memref<?x2x64xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x2x64xbf16>, memref<2x?xf32>
  return
}
}
