// RUN: mla-opt %s --mla-tile | FileCheck %s
// RUN: mla-opt %s --mla-select-config="perf-config=kv_chunks=8,workgroups=3,kv_splits=1,tile_kv=16,head_group=2,warps=1,stages=1" --mla-tile | FileCheck %s --check-prefix=PERSIST
// RUN: mla-opt %s --mla-select-config="perf-config=kv_chunks=8,chunk_balance=64,kv_splits=1,tile_kv=16,head_group=2,warps=1,stages=1" --mla-tile | FileCheck %s --check-prefix=BALANCE
// RUN: mla-opt %s --mla-select-config="perf-config=kv_chunks=8,merge_groups=4,kv_splits=1,tile_kv=16,head_group=2,warps=1,stages=1" --mla-tile | FileCheck %s --check-prefix=GROUPS
// RUN: mla-opt %s --mla-tile | FileCheck %s --check-prefix=WIDE
// RUN: mla-opt %s --mla-select-config="perf-config=kv_chunks=8,chunk_windows=1,kv_splits=1,tile_kv=16,head_group=2,warps=1,stages=1" --mla-tile | FileCheck %s --check-prefix=WINDOWS
// RUN: mla-opt %s --mla-select-config="perf-config=kv_chunks=8,chunk_windows=2,kv_splits=1,tile_kv=16,head_group=2,warps=1,stages=1" --mla-tile | FileCheck %s --check-prefix=ADAPTIVE
// RUN: mla-opt %s --mla-select-config="perf-config=kv_chunks=8,fused_merge=1,kv_splits=1,tile_kv=16,head_group=1,warps=1,stages=1" --mla-tile | FileCheck %s --check-prefix=FUSED
// RUN: mla-opt %s --mla-select-config="target=sm_90a perf-config=kv_chunks=8,fused_merge=1,kv_splits=1,tile_kv=16,head_group=2,warps=1,stages=1" --mla-tile | FileCheck %s --check-prefix=FUSED-NV
// RUN: mla-opt %s --mla-select-config="target=gfx942 perf-config=kv_chunks=8,fused_merge=1,kv_splits=1,tile_kv=16,head_group=2,warps=1,stages=1" --mla-tile | FileCheck %s --check-prefix=FUSED-AMD

// Decode's length-aware schedule (kv_chunks): the plan of chunks from the
// lengths in one workgroup, the chunks' partial results in one workspace
// slot each (batch + 4 (kChunkRefine) * 8 / 1 head group slots), their
// merge per request.
// CHECK-LABEL: func @chunks
// CHECK-SAME: mla.kernel_info = {config = "tile_kv=16 kv_splits=1 head_group=2 warps=1 stages=1 kv_chunks=8"
// CHECK: %[[B:.*]] = memref.dim %arg0, %c0
// CHECK: %[[SLOTS:.*]] = arith.addi %[[B]], %c32
// CHECK: %[[COLS:.*]] = arith.addi %[[B]], %c34
// CHECK: %[[PLAN:.*]] = memref.alloc(%[[COLS]]) : memref<3x?xi32>
// CHECK: %[[WSO:.*]] = memref.alloc(%[[SLOTS]]) : memref<?x2x2x32xf32>
// CHECK: %[[WSL:.*]] = memref.alloc(%[[SLOTS]]) : memref<?x2x2xf32>
//   The plan: one workgroup; a scan of ceil(len / 16) in blocks of 256.
//   A batch of at most 256 requests reads its lengths once, before the
//   scans, into workgroup memory; the scans read the tiles from there.
// CHECK: mla.grid in (%c1, %c1, %c1) {
// CHECK: memref.alloca() : memref<256xi32>
// CHECK: memref.alloca() : memref<256xi32>
// CHECK: memref.alloca() : memref<3xi32>
// CHECK: %[[TILES:.*]] = memref.alloca() : memref<256xi32>
// CHECK-NOT: memref.alloca()
// CHECK: %[[CACHED:.*]] = arith.cmpi sle, %{{.*}}, %c256
// CHECK: scf.parallel
// CHECK: %[[FILL:.*]] = arith.andi %[[CACHED]]
// CHECK: scf.if %[[FILL]] {
// CHECK: memref.load %arg3
// CHECK: arith.ceildivsi %{{.*}}, %c16
// CHECK: memref.store %{{.*}}, %[[TILES]]
// CHECK: scf.if %[[CACHED]] -> (index) {
// CHECK: memref.load %[[TILES]]
// CHECK: } else {
// CHECK: memref.load %arg3
//   The scan's steps in pairs (d, 2d), a pair skipped where d reaches the
//   block's requests n = min(B - base, 256).
// CHECK: %[[N:.*]] = arith.minsi %{{.*}}, %c256
// CHECK: %[[P1:.*]] = arith.cmpi slt, %c1{{.*}}, %[[N]]
// CHECK: scf.if %[[P1]] {
// CHECK-COUNT-2: scf.parallel
// CHECK: %[[P4:.*]] = arith.cmpi slt, %c4{{.*}}, %[[N]]
// CHECK: scf.if %[[P4]] {
// CHECK: %[[P16:.*]] = arith.cmpi slt, %c16{{.*}}, %[[N]]
// CHECK: %[[P64:.*]] = arith.cmpi slt, %c64{{.*}}, %[[N]]
// CHECK-NOT: arith.cmpi slt, %c256{{.*}}, %[[N]]
// CHECK: memref.store %{{.*}}, %[[PLAN]]
//   The chunks: one workgroup per slot; the slot loop's iterations write
//   every tile before reading it.
// CHECK: mla.grid in (%[[SLOTS]], %{{.*}}, %{{.*}}) attributes {config = #mla.config<tile_kv = 16, kv_splits = 1, head_group = 2, warps = 1, stages = 1, kv_chunks = 8>} {
// CHECK: ^bb0(%[[X:.*]]: index, %{{.*}}: index, %{{.*}}: index):
// CHECK: %[[K:.*]] = memref.load %[[PLAN]][%c0{{.*}}, %c0{{.*}}]
// CHECK: scf.for %[[SLOT:.*]] = %[[X]] to %{{.*}} step %{{.*}} {
// CHECK: %[[REQ:.*]] = memref.load %[[PLAN]][%c1{{.*}}, %[[SLOT]]]
// CHECK: mla.load_kv_tile %arg1[%arg2, %{{.*}}, %{{.*}}, %{{.*}}]
// CHECK: mla.attention_step
// CHECK: memref.store %{{.*}}, %[[WSL]][%[[SLOT]], %{{.*}}, %{{.*}}]
// CHECK: } {mla.fresh_tiles}
//   The merge: request b's chunks [plan[0][2 + b], plan[0][3 + b]); one
//   part group (merge_groups = 1): each column's thread reads 8 chunks at
//   a time.
// CHECK: mla.grid in
// CHECK: %[[LO:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK: %[[HI:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK-NOT: memref.alloca
// CHECK: scf.parallel
// CHECK: scf.for %{{.*}} = %[[LO]] to %[[HI]] step %c8
// CHECK-COUNT-8: memref.load %[[WSL]]
// CHECK: vector.fma
// CHECK: vector.store %{{.*}}, %arg5
// CHECK: memref.dealloc %[[PLAN]]

// With workgroups = 3: a grid of 3 workgroups along x, each taking the
// slots x, x + 3, ...
// PERSIST: mla.grid in (%c3{{.*}}, %{{.*}}, %{{.*}}) attributes {config = #mla.config<{{.*}}kv_chunks = 8, workgroups = 3>}
// PERSIST: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c3
// chunk_windows = 1: the batch's tiles cut into at most 8 windows, so at
// most batch + 8 chunks (no refinement); the plan's 8 rows (P_b in row 2,
// each window's first chunk in row 3, windows past the last at K, that
// chunk's request, keys and length in rows 4-7, from the chunk that opens
// the window or, past the last, zeros); one workgroup per window, running
// the window's chunks [plan[3][w], plan[3][w + 1]) in turn, reading rows
// 3-7 at once (the loop's bound uses them all) and taking the first
// chunk from rows 4-7, the others from rows 1 and 2.
// WINDOWS-LABEL: func @chunks
// WINDOWS-SAME: kv_chunks=8 chunk_windows=1"
// WINDOWS: %[[B:.*]] = memref.dim %arg0, %c0
// WINDOWS: %[[SLOTS:.*]] = arith.addi %[[B]], %c8
// WINDOWS: %[[COLS:.*]] = arith.addi %[[B]], %c10
// WINDOWS: %[[PLAN:.*]] = memref.alloc(%[[COLS]]) : memref<9x?xi32>
// WINDOWS: mla.grid in (%c1, %c1, %c1) {
// WINDOWS: memref.store %{{.*}}, %[[PLAN]][%c2{{.*}}, %{{.*}}] : memref<9x?xi32>
// WINDOWS: memref.store %{{.*}}, %[[PLAN]][%c3{{.*}}, %[[OPENED:.*]]] : memref<9x?xi32>
// WINDOWS: memref.store %{{.*}}, %[[PLAN]][%c4{{.*}}, %[[OPENED]]] : memref<9x?xi32>
// WINDOWS: memref.store %{{.*}}, %[[PLAN]][%c5{{.*}}, %[[OPENED]]] : memref<9x?xi32>
// WINDOWS: memref.store %{{.*}}, %[[PLAN]][%c6{{.*}}, %[[OPENED]]] : memref<9x?xi32>
// WINDOWS: memref.store %{{.*}}, %[[PLAN]][%c7{{.*}}, %[[OPENED]]] : memref<9x?xi32>
// WINDOWS: %[[C9:.*]] = arith.constant 9 : index
// WINDOWS: scf.parallel (%[[W:.*]]) = (%{{.*}}) to (%[[C9]])
// WINDOWS: memref.store %{{.*}}, %[[PLAN]][%c3{{.*}}, %[[W]]]
// WINDOWS: memref.store %{{.*}}, %[[PLAN]][%c7{{.*}}, %[[W]]]
// WINDOWS: mla.grid in (%[[C8:.*]], %{{.*}}, %{{.*}}) attributes {config = #mla.config<{{.*}}kv_chunks = 8, chunk_windows = 1>} {
// WINDOWS: ^bb0(%[[X:.*]]: index, %{{.*}}: index, %{{.*}}: index):
// WINDOWS: scf.for %[[WIN:.*]] = %[[X]] to %{{.*}} step %{{.*}} {
// WINDOWS: %[[FIRST:.*]] = arith.index_cast %{{.*}} : i32 to index
// WINDOWS: %[[NEXT:.*]] = arith.addi %[[WIN]], %c1
// WINDOWS: memref.load %[[PLAN]][%c3{{.*}}, %[[NEXT]]]
// WINDOWS: memref.load %[[PLAN]][%c4{{.*}}, %[[WIN]]]
// WINDOWS: memref.load %[[PLAN]][%c5{{.*}}, %[[WIN]]]
// WINDOWS: memref.load %[[PLAN]][%c6{{.*}}, %[[WIN]]]
// WINDOWS: memref.load %[[PLAN]][%c7{{.*}}, %[[WIN]]]
// WINDOWS: %[[LAST:.*]] = arith.select
// WINDOWS: scf.for %[[SLOT:.*]] = %[[FIRST]] to %[[LAST]] step %c1{{.*}} {
// WINDOWS: %[[OPENING:.*]] = arith.cmpi eq, %[[SLOT]], %[[FIRST]]
// WINDOWS: scf.if %[[OPENING]] -> (index, index, index, index) {
// WINDOWS: } else {
// WINDOWS: memref.load %[[PLAN]][%c1{{.*}}, %[[SLOT]]]
// WINDOWS: mla.attention_step
// WINDOWS: } {mla.fresh_tiles}
// WINDOWS: mla.grid in
// WINDOWS: memref.dealloc %[[PLAN]]
// chunk_windows = 2: the windows' plan layout and grid; the least q is
// also bounded by the merge (T / (B · 64)); the plan sums the
// request-aligned chunks of its 4 candidates q + j (cells 4..7, a tree
// reduction over a 4 x 256 buffer; unsigned 32-bit divisions), takes the
// least that fits 8 chunks
// (the choice in cell 3: none fits takes windows), and where it keeps them
// rewrites row 2 as C_b·q and writes chunk k's request and keys as window
// k's in rows 4-7.
// ADAPTIVE-LABEL: func @chunks
// ADAPTIVE-SAME: kv_chunks=8 chunk_windows=2"
// ADAPTIVE: %[[PLAN:.*]] = memref.alloc(%{{.*}}) : memref<9x?xi32>
// ADAPTIVE: mla.grid in (%c1, %c1, %c1) {
// ADAPTIVE: %[[CELLS:.*]] = memref.alloca() : memref<8xi32>
// ADAPTIVE: arith.muli %{{.*}}, %c64
// ADAPTIVE: %[[SEARCH:.*]] = memref.alloca() : memref<4x256xi32>
// ADAPTIVE: memref.store %{{.*}}, %[[CELLS]][%c7
// ADAPTIVE: arith.divui %{{.*}} : i32
// ADAPTIVE: memref.store %{{.*}}, %[[SEARCH]][%c3
// ADAPTIVE: arith.cmpi sle, %{{.*}}, %c8
// ADAPTIVE: memref.store %{{.*}}, %[[CELLS]][%c3
// ADAPTIVE: arith.muli
// ADAPTIVE: memref.store %{{.*}}, %[[PLAN]][%c4{{.*}}, %[[K:.*]]] : memref<9x?xi32>
// ADAPTIVE: memref.store %{{.*}}, %[[PLAN]][%c7{{.*}}, %[[K]]] : memref<9x?xi32>
// ADAPTIVE: memref.store %{{.*}}, %[[PLAN]][%c2{{.*}}, %{{.*}}] : memref<9x?xi32>
// ADAPTIVE: mla.grid in (%c8{{.*}}, %{{.*}}, %{{.*}}) attributes {config = #mla.config<{{.*}}kv_chunks = 8, chunk_windows = 2>}
// fused_merge = 1: the plan zeroes the requests' counters (its last
// row); after each chunk's partial result, a phase (its barrier), then
// one thread counts the chunk (release fence, atomic add, acquire fence:
// the device's scope, "device" on NVIDIA, "agent" on AMD, the system's on
// the host) and, where it completes the request's count (its chunks times
// 2 head groups), flags it in a workgroup cell and zeroes the counter; the
// flagged workgroup merges the request for every query and head. No merge
// grid.
// FUSED-LABEL: func @chunks
// FUSED-SAME: kv_chunks=8 fused_merge=1
// FUSED: %[[PLAN:.*]] = memref.alloc(%{{.*}}) : memref<3x?xi32>
// FUSED: mla.grid in (%c1, %c1, %c1) {
// FUSED: scf.parallel (%[[R:.*]]) = (%{{.*}}) to (%{{.*}})
// FUSED: memref.store %{{.*}}, %[[PLAN]][%[[ROW:.*]], %[[R]]] : memref<3x?xi32>
// FUSED: mla.grid in
// FUSED: %[[FLAG:.*]] = memref.alloca() : memref<1xi32>
// FUSED: scf.for
// FUSED: mla.attention_finish
// FUSED: scf.parallel
// FUSED: memref.store %{{.*}}, %[[FLAG]]
// FUSED: scf.parallel
// FUSED: llvm.fence release
// FUSED-NEXT: %[[OLD:.*]] = memref.atomic_rmw addi %c1_i32, %[[PLAN]][%{{.*}}, %[[REQ:.*]]] : (i32, memref<3x?xi32>) -> i32
// FUSED-NEXT: llvm.fence acquire
// FUSED: arith.muli %{{.*}}, %c2{{(_[0-9]+)?}} :
// FUSED: %[[LAST:.*]] = arith.cmpi eq
// FUSED: memref.store %{{.*}}, %[[FLAG]]
// FUSED: scf.if %[[LAST]] {
// FUSED: memref.store %{{.*}}, %[[PLAN]][%{{.*}}, %[[REQ]]]
// FUSED: %[[F:.*]] = memref.load %[[FLAG]]
// FUSED: %[[MERGES:.*]] = arith.cmpi ne, %[[F]]
// FUSED: scf.if %[[MERGES]] {
// FUSED: scf.parallel
// FUSED: vector.store %{{.*}}, %arg5
// FUSED: } {mla.fresh_tiles}
// FUSED-NOT: mla.grid
// FUSED: memref.dealloc %[[PLAN]]
// FUSED-NV: llvm.fence syncscope("device") release
// FUSED-NV: llvm.fence syncscope("device") acquire
// FUSED-AMD: llvm.fence syncscope("agent") release
// FUSED-AMD: llvm.fence syncscope("agent") acquire
func.func @chunks(%q: memref<?x2x2x48xbf16>, %kv: memref<?x3x48xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %s: f32, %o: memref<?x2x2x32xbf16>, %lse: memref<?x2x2xf32>) {
  mla.decode %q, %kv, %bt, %lens, %s, %o, %lse {config = #mla.config<tile_kv = 16, kv_splits = 1, head_group = 2, warps = 1, stages = 1, kv_chunks = 8>} : memref<?x2x2x48xbf16>, memref<?x3x48xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x2x2x32xbf16>, memref<?x2x2xf32>
  return
}

// merge_groups = 4: request b's chunks split among 4 part groups (group
// p: chunks lo + p, lo + p + 4, ..., 4 at a time, so the loop steps by 16)
// whose sums meet in workgroup memory, then one pass that rescales them to
// their common max and stores the row. A request of at most 16 chunks
// (two rounds of loads for one group) takes the one-group path instead.
// GROUPS-LABEL: func @chunks
// GROUPS-SAME: kv_chunks=8 merge_groups=4"
// GROUPS: %[[WSL:.*]] = memref.alloc(%{{.*}}) : memref<?x2x2xf32>
// GROUPS: mla.grid in
// GROUPS: mla.grid in
// GROUPS: mla.grid in
// GROUPS: %[[LO:.*]] = arith.index_cast %{{.*}} : i32 to index
// GROUPS: %[[HI:.*]] = arith.index_cast %{{.*}} : i32 to index
// GROUPS: %[[MAXT:.*]] = memref.alloca() : memref<4xf32>
// GROUPS: %[[TOTALT:.*]] = memref.alloca() : memref<4xf32>
// GROUPS: %[[ACCT:.*]] = memref.alloca() : memref<4x32xf32>
// GROUPS: %[[PARTS:.*]] = arith.subi %[[HI]], %[[LO]]
// GROUPS: %[[FEW:.*]] = arith.cmpi sle, %[[PARTS]], %c16
// GROUPS: scf.if %[[FEW]] {
// GROUPS: scf.parallel (%{{.*}}) = ({{.*}}) to (%c2{{.*}})
// GROUPS: scf.for %{{.*}} = %[[LO]] to %[[HI]] step %c8
// GROUPS: vector.store %{{.*}}, %arg5
// GROUPS: } else {
// GROUPS: scf.parallel (%[[GRP:.*]], %{{.*}}) = ({{.*}}) to (%c4{{.*}}, %c2{{.*}})
// GROUPS: %[[FIRST:.*]] = arith.addi %[[LO]], %[[GRP]]
// GROUPS: scf.for %{{.*}} = %[[FIRST]] to %[[HI]] step %c16
// GROUPS-COUNT-4: memref.load %[[WSL]]
// GROUPS: vector.store %{{.*}}, %[[ACCT]][%[[GRP]], %{{.*}}]
// GROUPS: memref.store %{{.*}}, %[[MAXT]][%[[GRP]]]
// GROUPS: memref.store %{{.*}}, %[[TOTALT]][%[[GRP]]]
// GROUPS: scf.parallel
// GROUPS-COUNT-4: vector.fma
// GROUPS: vector.store %{{.*}}, %arg5

// chunk_balance reaches the chunks grid's config and the manifest.
// BALANCE: mla.kernel_info = {config = "tile_kv=16 kv_splits=1 head_group=2 warps=1 stages=1 kv_chunks=8 chunk_balance=64"
// BALANCE: mla.grid in {{.*}}kv_chunks = 8, chunk_balance = 64>

// A value dim too wide for the part groups' sums in workgroup memory
// (groups = 4, but 4 x 8192 x 4 bytes > 16 KiB): one group reads every
// part of its columns, 8 at a time, and stores the row with no exchange.
// WIDE-LABEL: func @wide_merge
// WIDE: mla.grid in
// WIDE-NOT: memref.alloca
// WIDE: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c512{{.*}})
// WIDE: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c8
// WIDE-COUNT-8: memref.load %arg1
// WIDE: vector.store %{{.*}}, %arg3
// WIDE-NOT: scf.parallel
// WIDE: return
func.func @wide_merge(%op: memref<?x1x1x8192xf32>, %lp: memref<?x1x1xf32>, %plan: memref<3x?xi32>, %o: memref<?x1x1x8192xbf16>, %lse: memref<?x1x1xf32>) {
  mla.chunk_merge %op, %lp, %plan, %o, %lse {groups = 4} : memref<?x1x1x8192xf32>, memref<?x1x1xf32>, memref<3x?xi32>, memref<?x1x1x8192xbf16>, memref<?x1x1xf32>
  return
}
