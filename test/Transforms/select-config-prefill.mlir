// RUN: mla-opt %s --mla-select-config | FileCheck %s --check-prefix=HOST
// RUN: mla-opt %s --mla-select-config="target=sm_90a" | FileCheck %s --check-prefix=SM90
// RUN: mla-opt %s --mla-select-config="target=sm_80" | FileCheck %s --check-prefix=SM80
// RUN: mla-opt %s --mla-select-config="target=gfx942" | FileCheck %s --check-prefix=GFX942
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=wgmma=0" | FileCheck %s --check-prefix=NOWGMMA
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=tile_q=32,tile_kv=32" | FileCheck %s --check-prefix=OVERRIDE
// RUN: not mla-opt %s --mla-select-config="perf-config=kv_splits=2" 2>&1 | FileCheck %s --check-prefix=SPLITS
// RUN: not mla-opt %s --mla-select-config="perf-config=tile_q=0" 2>&1 | FileCheck %s --check-prefix=TILEQ
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=overlap=1" | FileCheck %s --check-prefix=OVERLAP
// RUN: not mla-opt %s --mla-select-config="target=sm_80 perf-config=overlap=1" 2>&1 | FileCheck %s --check-prefix=OVERLAP-SM80
// RUN: not mla-opt %s --mla-select-config="target=sm_90a perf-config=overlap=1,wgmma=0" 2>&1 | FileCheck %s --check-prefix=OVERLAP-SYNC
// RUN: not mla-opt %s --mla-select-config="target=gfx942 perf-config=overlap=1" 2>&1 | FileCheck %s --check-prefix=OVERLAP-AMD
// RUN: not mla-opt %s --mla-select-config="target=sm_90a perf-config=overlap=1,stages=1" 2>&1 | FileCheck %s --check-prefix=OVERLAP-STAGES
// RUN: not mla-opt %s --mla-select-config="target=sm_90a perf-config=overlap=1,tile_q=64,tile_kv=64,warps=8" 2>&1 | FileCheck %s --check-prefix=OVERLAP-SPLIT

// Prefill: one head per workgroup, no split; tile_q query rows.
// HOST: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 1, stages = 1, tile_q = 32>
// sm_90a (warpgroup MMA): 128 x 128 tiles, two warpgroups, two stages.
// SM90: config = #mla.config<tile_kv = 128, kv_splits = 1, head_group = 1, warps = 8, stages = 2, tile_q = 128>
// sm_80, or wgmma=0: 64 x 64 tiles, four warps (mma.sync).
// SM80: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 4, stages = 1, tile_q = 64>
// NOWGMMA: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 4, stages = 1, tile_q = 64, wgmma = 0>
// gfx942 (the register step, GPU/RegisterStep.h, queries read in place):
// 128 x 32 tiles, four waves of 32 rows.
// GFX942: config = #mla.config<tile_kv = 32, kv_splits = 1, head_group = 1, warps = 4, stages = 1, tile_q = 128>
// OVERRIDE: config = #mla.config<tile_kv = 32, kv_splits = 1, head_group = 1, warps = 8, stages = 2, tile_q = 32>
// SPLITS: error: config for prefill needs kv_splits = 1, head_group = 1, kv_chunks = 0 and tile_q > 0, got #mla.config<tile_kv = 64, kv_splits = 2, head_group = 1, warps = 1, stages = 1, tile_q = 32>
// TILEQ: error: config for prefill needs kv_splits = 1, head_group = 1, kv_chunks = 0 and tile_q > 0

// overlap = 1 (the lagged P·V) on sm_90a's default prefill config (two
// warpgroups of whole scores); refused where no lowering lags P·V, or the
// key loop is not pipelined.
// OVERLAP: config = #mla.config<tile_kv = 128, kv_splits = 1, head_group = 1, warps = 8, stages = 2, tile_q = 128, overlap = 1>
// OVERLAP-SM80: error: config overlap = 1 needs the fused warpgroup-MMA step (sm_90a with wgmma = 1) or the host; target sm_80 has no lowering that lags P·V
// OVERLAP-SYNC: error: config overlap = 1 needs the fused warpgroup-MMA step (sm_90a with wgmma = 1) or the host; target sm_90a with wgmma = 0 has no lowering that lags P·V
// OVERLAP-AMD: error: config overlap = 1 needs the fused warpgroup-MMA step (sm_90a with wgmma = 1) or the host; target gfx942 has no lowering that lags P·V
// OVERLAP-STAGES: error: config overlap = 1 needs a pipelined key loop (stages >= 2, no mask variant), got stages = 1
// OVERLAP-SPLIT: error: config overlap = 1 needs the fused warpgroup-MMA step with one warp per 16-row block, which this config (64 rows, 64-key tiles, 8 warps) does not take
func.func @prefill(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal} : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x16x128xbf16>, memref<16x?xf32>
  return
}
