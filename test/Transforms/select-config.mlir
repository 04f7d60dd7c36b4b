// RUN: mla-opt %s -split-input-file --mla-select-config | FileCheck %s
// RUN: mla-opt %s -split-input-file --mla-select-config="perf-config=tile_kv=32,kv_chunks=0,kv_splits=2" | FileCheck %s --check-prefix=OVERRIDE
// RUN: not mla-opt %s -split-input-file --mla-select-config="perf-config=kv_splits=2" 2>&1 | FileCheck %s --check-prefix=SPLITS
// RUN: mla-opt %s -split-input-file --mla-select-config="perf-config=kv_chunks=7,workgroups=3,kv_splits=1" | FileCheck %s --check-prefix=CHUNKS
// RUN: not mla-opt %s -split-input-file --mla-select-config="perf-config=kv_chunks=0,workgroups=3" 2>&1 | FileCheck %s --check-prefix=WGONLY
// RUN: mla-opt %s -split-input-file --mla-select-config="perf-config=chunk_balance=64" | FileCheck %s --check-prefix=BALANCE
// RUN: not mla-opt %s -split-input-file --mla-select-config="perf-config=chunk_balance=0" 2>&1 | FileCheck %s --check-prefix=BALANCE0
// RUN: not mla-opt %s -split-input-file --mla-select-config="perf-config=tile_kv=48" 2>&1 | FileCheck %s --check-prefix=BADTILE
// RUN: not mla-opt %s -split-input-file --mla-select-config="perf-config=tiles=4" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not mla-opt %s -split-input-file --mla-select-config="perf-config=tile_kv=32,,stages=2" 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not mla-opt %s -split-input-file --mla-select-config="perf-config=tile_kv=32,tile_kv=64" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=gfx1200" 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not mla-opt %s -split-input-file --mla-select-config="perf-config=warps=3" 2>&1 | FileCheck %s --check-prefix=HOSTWARPS
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=warps=17" 2>&1 | FileCheck %s --check-prefix=WARPS17
// RUN: mla-opt %s -split-input-file --mla-select-config="target=sm_90a" | FileCheck %s --check-prefix=SM90
// RUN: mla-opt %s -split-input-file --mla-select-config="target=sm_80" | FileCheck %s --check-prefix=SM80
// RUN: mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=wgmma=0" | FileCheck %s --check-prefix=SM90SYNC
// RUN: mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=kv_chunks=0,kv_splits=8" | FileCheck %s --check-prefix=SM90FIXED
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=chunk_balance=64" 2>&1 | FileCheck %s --check-prefix=SM90BALANCE
// RUN: mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=chunk_windows=0,chunk_balance=64" | FileCheck %s --check-prefix=SM90BALANCE0
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=overlap=1" 2>&1 | FileCheck %s --check-prefix=OVERLAP
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=fused_merge=1" 2>/dev/null | FileCheck %s --check-prefix=SM90FUSED
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=fused_merge=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=SM90FUSEDERR
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=fused_merge=1,merge_groups=4" 2>&1 | FileCheck %s --check-prefix=SM90FUSEDGROUPS
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=lead_scores=1" 2>/dev/null | FileCheck %s --check-prefix=SM90LEAD
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=lead_scores=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=SM90LEADERR
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=gfx942 perf-config=lead_scores=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=AMDLEAD
// RUN: mla-opt %s -split-input-file --mla-select-config="perf-config=lead_scores=1" | FileCheck %s --check-prefix=HOSTLEAD
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=lead_scores=3" 2>/dev/null | FileCheck %s --check-prefix=SM90LAG
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=lead_scores=3,stages=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=LAGSTAGES
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=lead_scores=4,stages=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=CUTSTAGES
// RUN: mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=warps=4" | FileCheck %s --check-prefix=SM90W4

// Host heuristics: 64-key tiles, 4 splits, up to 64 query rows per workgroup.
// CHECK-LABEL: func @deepseek_tp8
// sm_90a, 16 rows: the transposed step (keys as warpgroup MMA's M), one
// warpgroup, 64-key tiles, one stage; one head group, so the merge's part
// groups (merge_groups = 4). Without warpgroup MMA (wgmma=0): the
// register-fused mma.sync step (two warps per 16-row block), 32-key tiles,
// two pipeline stages.
// SM90-LABEL: func @deepseek_tp8
// SM90: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 16, warps = 4, stages = 1, kv_chunks = 256, merge_groups = 4, chunk_windows = 2>
// SM90SYNC-LABEL: func @deepseek_tp8
// SM90SYNC: config = #mla.config<tile_kv = 32, kv_splits = 1, head_group = 16, warps = 2, stages = 2, wgmma = 0, kv_chunks = 256, merge_groups = 4, chunk_windows = 2>
// Fixed splits (kv_chunks = 0) have no chunk merge: the part groups'
// default goes with the length-aware schedule.
// SM90FIXED-LABEL: func @deepseek_tp8
// SM90FIXED: config = #mla.config<tile_kv = 64, kv_splits = 8, head_group = 16, warps = 4, stages = 1>}
// So has the fused merge (fused_merge = 1): the default part groups go;
// asked for with it, they are an error naming both fields.
// SM90FUSED-LABEL: func @deepseek_tp8
// SM90FUSED: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 16, warps = 4, stages = 1, kv_chunks = 256, chunk_windows = 2, fused_merge = 1>}
// lead_scores = 1 (one warpgroup computes each tile's scores for both)
// needs the split scores of two warpgroups sharing 64 rows: 16 rows take
// the transposed step, an error naming the config; the host ignores it.
// SM90LEADERR: error: config lead_scores = 1 needs NVIDIA's fused warpgroup-MMA step with two warpgroups sharing 64 query rows (sm_90a with wgmma = 1, 8 warps: decode's 64-row head groups), which this config (16 rows, 64-key tiles, 4 warps) on target sm_90a does not take
// AMDLEAD: error: config lead_scores = 1 needs NVIDIA's fused warpgroup-MMA step {{.*}} on target gfx942 does not take
// HOSTLEAD-LABEL: func @deepseek_tp8
// HOSTLEAD: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 16, warps = 1, stages = 1, kv_chunks = 32, lead_scores = 1>
// lead_scores = 3 (the second warpgroup's P·V one tile behind) needs a
// two-stage key loop: with stages = 1 an error naming both.
// LAGSTAGES: error: config lead_scores = 3 lags the second warpgroup's P·V one key tile behind the first's, which needs a two-stage key loop (stages = 2), not stages = 1
// CUTSTAGES: error: config lead_scores = 4 lags the second warpgroup's P·V one key tile behind the first's, which needs a two-stage key loop (stages = 2), not stages = 1
// SM90FUSEDGROUPS: error: perf-config: merge_groups applies to the merge launch; fused_merge = 1 merges in the chunks kernel (merge_groups must be 1, got 4)
// GPU targets take the adaptive plan (chunk_windows = 2), which bounds its
// chunks by the merge: chunk_balance with it is an error naming the field;
// with chunk_windows = 0 it is the square root's balance as before.
// SM90BALANCE: error: perf-config: chunk_balance applies to chunk_windows 0 and 1
// SM90BALANCE0-LABEL: func @deepseek_tp8
// SM90BALANCE0: config = #mla.config<{{.*}}kv_chunks = 256, chunk_balance = 64, merge_groups = 4>}
// With wgmma=0 the heuristics keep the mma.sync shapes (32-key tiles).
// SM90SYNC-LABEL: func @heads128_mtp4
// SM90SYNC: config = #mla.config<tile_kv = 32, kv_splits = 1, head_group = 16, warps = 8, stages = 2, wgmma = 0, kv_chunks = 132, chunk_windows = 2>
// On sm_80 the same shapes take more than half of the shared memory: one
// workgroup per SM, so as many chunks as SMs (108), one wave.
// SM80-LABEL: func @heads128_mtp4
// SM80: config = #mla.config<tile_kv = 32, kv_splits = 1, head_group = 16, warps = 8, stages = 2, kv_chunks = 108, chunk_windows = 2>
// CHECK: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 16, warps = 1, stages = 1, kv_chunks = 32>
// OVERRIDE-LABEL: func @deepseek_tp8
// OVERRIDE: config = #mla.config<tile_kv = 32, kv_splits = 2, head_group = 16, warps = 1, stages = 1>
// SPLITS: error: perf-config: kv_chunks (the length-aware schedule) needs kv_splits = 1 and min_workgroups = 0, got kv_splits = 2, min_workgroups = 0 (kv_chunks = 0 selects the fixed split-KV schedule)
// CHUNKS: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 16, warps = 1, stages = 1, kv_chunks = 7, workgroups = 3>
// WGONLY: error: perf-config: workgroups applies to the length-aware schedule only (kv_chunks > 0)
// BALANCE: config = #mla.config<{{.*}}kv_chunks = {{[0-9]+}}, chunk_balance = 64>
// BALANCE0: error: perf-config: chunk_balance must be in [1, 2^20], got 0
// BADTILE: error: perf-config: tile_kv must be a power of two in [8, 256], got 48
// EMPTY: error: perf-config: empty field in 'tile_kv=32,,stages=2'
// TWICE: error: perf-config: field 'tile_kv' is given twice
// overlap = 1 (the lagged P·V) is prefill's: a decode's values are its
// keys' columns.
// OVERLAP: error: config overlap = 1 applies to prefill only (a decode's values are its keys' first columns: there is no value tile to copy behind the keys)
// UNKNOWN: error: perf-config: unknown field 'tiles' (fields: tile_kv, kv_splits, head_group, warps, stages, min_workgroups, tile_q, wgmma, kv_chunks, workgroups, chunk_balance, merge_groups, chunk_windows, blocked_copies, overlap, fused_merge, lead_scores)
// HOSTWARPS: error: config warps = 3 is not supported on target host: a host workgroup runs on one thread (allowed: warps = 1)
// WARPS17: error: perf-config: warps must be in [1, 16], got 17
// TARGET: error: mla-select-config: unknown target 'gfx1200' (known: host, sm_80, sm_90a, gfx90a, gfx942, gfx950, gfx90a-emu, gfx942-emu, gfx950-emu)
func.func @deepseek_tp8(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

// 128 heads with MTP 4: head groups shrink so Sq x group stays <= 64 rows.
// CHECK-LABEL: func @heads128_mtp4
// sm_90a: 64 rows = one warpgroup per value half (warpgroup MMA): 64-key
// tiles, the first warpgroup computing the scores and the second issuing
// the next key tile's copy (lead_scores = 2, the default there); eight
// head groups: one merge part group (the default, not printed).
// SM90-LABEL: func @heads128_mtp4
// SM90: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 16, warps = 8, stages = 2, kv_chunks = 132, chunk_windows = 2, lead_scores = 2>
// Four warps (one warpgroup, whole scores): the default lead scores go,
// not asked for, so no error.
// SM90W4-LABEL: func @heads128_mtp4
// SM90W4: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 16, warps = 4, stages = 2, kv_chunks = 132, chunk_windows = 2>}
// SM90LEAD-LABEL: func @heads128_mtp4
// SM90LEAD: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 16, warps = 8, stages = 2, kv_chunks = 132, chunk_windows = 2, lead_scores = 1>
// SM90LAG-LABEL: func @heads128_mtp4
// SM90LAG: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 16, warps = 8, stages = 2, kv_chunks = 132, chunk_windows = 2, lead_scores = 3>
// CHECK: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 16, warps = 1, stages = 1, kv_chunks = 32>
func.func @heads128_mtp4(%q: memref<?x4x128x576xbf16>, %kv: memref<?x1x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x4x128x512xbf16>, %lse: memref<?x4x128xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x4x128x576xbf16>, memref<?x1x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x4x128x512xbf16>, memref<?x4x128xf32>
  return
}

// -----

// An odd head count: the group is the largest divisor that fits.
// CHECK-LABEL: func @heads7
// f32 (no fused step): 4 warps, one stage, up to 16 rows.
// SM90-LABEL: func @heads7
// SM90: config = #mla.config<tile_kv = 32, kv_splits = 1, head_group = 7, warps = 4, stages = 1, kv_chunks = 256, merge_groups = 4, chunk_windows = 2>
// CHECK: config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 7, warps = 1, stages = 1, kv_chunks = 32>
func.func @heads7(%q: memref<?x1x7x288xf32>, %kv: memref<?x3x288xf32>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x7x256xf32>, %lse: memref<?x1x7xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x7x288xf32>, memref<?x3x288xf32>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x7x256xf32>, memref<?x1x7xf32>
  return
}

// -----

// An explicit config is kept.
// CHECK-LABEL: func @explicit
// (An explicit config of fixed splits with fused_merge from the
// perf-config is an error, as merge_groups would be.)
// SM90FUSEDERR: error: perf-config: fused_merge applies to the length-aware schedule only (kv_chunks > 0)
// CHECK: config = #mla.config<tile_kv = 16, kv_splits = 8, head_group = 2, warps = 1, stages = 3>
func.func @explicit(%q: memref<?x1x4x576xbf16>, %kv: memref<?x16x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x4x512xbf16>, %lse: memref<?x1x4xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse {config = #mla.config<tile_kv = 16, kv_splits = 8, head_group = 2, warps = 1, stages = 3>} : memref<?x1x4x576xbf16>, memref<?x16x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x4x512xbf16>, memref<?x1x4xf32>
  return
}
