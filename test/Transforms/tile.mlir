// RUN: mla-opt %s -split-input-file --mla-tile | FileCheck %s

// Split-KV decode: workspace for 2 splits, a (request, head group, split)
// grid with the online softmax over 16-key tiles, then the merge grid.
// CHECK-LABEL: func @small
// CHECK-SAME: {mla.role = "q"}
// CHECK-SAME: {mla.role = "scale"}
// CHECK-SAME: mla.kernel_info = {config = "tile_kv=16 kv_splits=2 head_group=2 warps=1 stages=1", dtype = "bf16", heads = 2 : i64, kernel = "decode", latent_dim = 32 : i64, page_size = 3 : i64, q_len = 2 : i64, rope_dim = 16 : i64}
// CHECK: %[[B:.*]] = memref.dim %arg0, %c0
// CHECK: %[[WSO:.*]] = memref.alloc(%[[B]]) : memref<?x2x2x2x32xf32>
// CHECK: %[[WSL:.*]] = memref.alloc(%[[B]]) : memref<?x2x2x2xf32>
// CHECK: mla.grid in (%[[B]], %{{.*}}, %{{.*}}) attributes {config = #mla.config<tile_kv = 16, kv_splits = 2, head_group = 2, warps = 1, stages = 1>} {
// CHECK: ^bb0(%[[REQ:.*]]: index, %{{.*}}: index, %[[SPLIT:.*]]: index):
//   The split's key range: chunk = ceil(ceil(len / 16) / 2) * 16.
// CHECK: memref.load %arg3[%[[REQ]]]
// CHECK: %[[LEN:.*]] = arith.maxsi
// CHECK: arith.ceildivsi
// CHECK: arith.ceildivsi
// CHECK: %[[START:.*]] = arith.muli %[[SPLIT]]
// CHECK: %[[END:.*]] = arith.minsi
//   Matrix tiles: rows padded by 16 bytes, used through subviews.
// CHECK: %[[QB:.*]] = memref.alloca() : memref<4x56xbf16>
// CHECK: %[[QT:.*]] = memref.subview %[[QB]][0, 0] [4, 48] [1, 1] : memref<4x56xbf16> to memref<4x48xbf16, strided<[56, 1]>>
// CHECK: %[[KB:.*]] = memref.alloca() : memref<16x56xbf16>
// CHECK: %[[KT:.*]] = memref.subview %[[KB]]
//   (The step's score and probability tiles are its lowering's scratch.)
// CHECK-NOT: memref<4x20xf32>
// CHECK: %[[AB:.*]] = memref.alloca() : memref<4x36xf32>
// CHECK: %[[ACC:.*]] = memref.subview %[[AB]]
//   log2(e) is folded into the scale once.
// CHECK: %[[SL2:.*]] = arith.mulf %arg4, %{{.*}} : f32
// CHECK: scf.for %[[T0:.*]] = %[[START]] to %[[END]] step %c16
// CHECK: %[[V:.*]] = memref.subview %[[KT]][0, 0] [16, 32] [1, 1]
// CHECK: mla.load_kv_tile %arg1[%arg2, %[[REQ]], %[[T0]], %[[END]]] into %[[KT]]
//   The attention step; its element function holds the causal limit for
//   query i (keys < len - Sq + i + 1) and the scale.
//   Every element of the tile is visible where it ends at or before row
//   0's limit (the smallest): the step's all_visible.
// CHECK: %[[LIM0:.*]] = arith.minsi %[[END]], %{{.*}} : index
// CHECK: %[[TEND:.*]] = arith.addi %[[T0]], %c16{{.*}} : index
// CHECK: %[[ALL:.*]] = arith.cmpi sle, %[[TEND]], %[[LIM0]] : index
// CHECK: mla.attention_step %[[QT]], %[[KT]], %[[V]] -> %[[ACC]] state(%{{.*}}, %{{.*}}) stages 1 all_visible(%[[ALL]]) : memref<4x48xbf16, strided<[56, 1]>>, memref<16x48xbf16, strided<[56, 1]>>, memref<16x32xbf16, strided<[56, 1]>>, memref<4x32xf32, strided<[36, 1]>>, memref<4xf32>, memref<4xf32>
// CHECK: ^bb0(%[[ROW:.*]]: index, %[[COL:.*]]: index, %[[S:.*]]: f32):
// CHECK: arith.subi %[[LEN]], %c2{{.*}}
// CHECK: %[[X:.*]] = arith.mulf %[[S]], %[[SL2]] : f32
// CHECK: mla.yield %[[X]], %{{.*}} : f32, i1
// CHECK-NOT: mla.matmul
//   Epilogue: the finish of the tiles' state; its regions store a row's
//   normalised values and LSE into the split's workspace slots.
// CHECK: mla.attention_finish %[[ACC]] state(%{{.*}}, %{{.*}}) width 4 : memref<4x32xf32, strided<[36, 1]>>, memref<4xf32>, memref<4xf32> output {
// CHECK: vector.store %{{.*}}, %[[WSO]][%[[REQ]], %{{.*}}, %{{.*}}, %[[SPLIT]], %{{.*}}] : memref<?x2x2x2x32xf32>, vector<4xf32>
// CHECK: } lse {
// CHECK: memref.store %{{.*}}, %[[WSL]][%[[REQ]], %{{.*}}, %{{.*}}, %[[SPLIT]]]
// CHECK: mla.grid in
// CHECK: memref.load %[[WSL]]
// CHECK: vector.fma
// CHECK: vector.store %{{.*}}, %arg5
// CHECK: memref.store %{{.*}}, %arg6
// CHECK: memref.dealloc %[[WSO]]
// CHECK-NOT: mla.decode
// CHECK-NOT: mla.merge
func.func @small(%q: memref<?x2x2x48xbf16>, %kv: memref<?x3x48xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x2x2x32xbf16>, %lse: memref<?x2x2xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse {config = #mla.config<tile_kv = 16, kv_splits = 2, head_group = 2, warps = 1, stages = 1>} : memref<?x2x2x48xbf16>, memref<?x3x48xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x2x2x32xbf16>, memref<?x2x2xf32>
  return
}

// -----

// A standalone merge (chunked prefill style) becomes one grid over its two
// leading dims.
// CHECK-LABEL: func @merge
// CHECK: mla.grid in (%c7, %c3, %c1)
// CHECK: ^bb0(%[[X:.*]]: index, %[[Y:.*]]: index, %{{.*}}: index):
// CHECK: memref.load %arg1[%[[X]], %[[Y]], %{{.*}}] : memref<7x3x2xf32>
// CHECK: vector.load %arg0[%[[X]], %[[Y]], %{{.*}}, %{{.*}}] : memref<7x3x2x24xf32>, vector<8xf32>
// CHECK: vector.store %{{.*}}, %arg2[%[[X]], %[[Y]], %{{.*}}] : memref<7x3x24xf32>, vector<8xf32>
func.func @merge(%op: memref<7x3x2x24xf32>, %lp: memref<7x3x2xf32>, %o: memref<7x3x24xf32>, %lse: memref<7x3xf32>) {
  mla.merge %op, %lp, %o, %lse : memref<7x3x2x24xf32>, memref<7x3x2xf32>, memref<7x3x24xf32>, memref<7x3xf32>
  return
}


// -----

// Balanced split-KV: with min_workgroups, a request uses
// clamp(ceil(256 / (batch * head groups)), 1, 8) of its 8 splits. Two head
// groups: they vary fastest (grid dim 0), the requests along dim 1.
// CHECK-LABEL: func @balanced
// CHECK: %[[B:.*]] = memref.dim %arg0, %c0
// CHECK: mla.grid in (%{{.*}}, %[[B]], %{{.*}})
// CHECK:   %[[N:.*]] = memref.dim %arg0, %c0
// CHECK:   %[[PER:.*]] = arith.muli %[[N]], %c2
// CHECK:   %[[WANT:.*]] = arith.ceildivsi %c256, %[[PER]]
// CHECK:   %[[ATLEAST:.*]] = arith.maxsi %[[WANT]], %c1
// CHECK:   %[[USED:.*]] = arith.minsi %[[ATLEAST]], %c8
// CHECK:   arith.ceildivsi %{{.*}}, %[[USED]]
// The merge reads only the parts that hold keys.
// CHECK: mla.grid in
// CHECK:   arith.cmpf ogt, %{{.*}}, %cst
// CHECK:   scf.if
// CHECK:     vector.load
func.func @balanced(%q: memref<?x1x4x48xbf16>, %kv: memref<?x3x48xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x4x32xbf16>, %lse: memref<?x1x4xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse {config = #mla.config<tile_kv = 16, kv_splits = 8, head_group = 2, warps = 1, stages = 1, min_workgroups = 256>} : memref<?x1x4x48xbf16>, memref<?x3x48xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x4x32xbf16>, memref<?x1x4xf32>
  return
}

// -----

// stages = 3: the key buffer holds three tiles; two are copied before the
// loop, each iteration starts the copy of tile i + 2 into slot (i + 2) % 3
// and computes tile i from slot i % 3 (an attention step of 3 stages: the
// copies before it in the loop may stay in flight).
// CHECK-LABEL: func @pipelined
// CHECK: %[[KB:.*]] = memref.alloca() : memref<48x56xbf16>
// CHECK: %[[KT:.*]] = memref.subview %[[KB]][0, 0] [48, 48] [1, 1]
// CHECK: %[[S0:.*]] = memref.subview %[[KT]][0, 0] [16, 48] [1, 1]
// CHECK: mla.load_kv_tile %arg1[%arg2, %{{.*}}, %{{.*}}, %{{.*}}] into %[[S0]]
// CHECK: %[[S1:.*]] = memref.subview %[[KT]][16, 0] [16, 48] [1, 1]
// CHECK: mla.load_kv_tile %arg1[%arg2, %{{.*}}, %{{.*}}, %{{.*}}] into %[[S1]]
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c16
// CHECK: %[[I:.*]] = arith.divui
// CHECK: %[[SLOT:.*]] = arith.remui %[[I]], %c3
// CHECK: %[[NEXT:.*]] = arith.remui %{{.*}}, %c3
// CHECK: %[[ROW:.*]] = arith.muli %[[NEXT]], %c16
// CHECK: %[[KN:.*]] = memref.subview %[[KT]][%[[ROW]], 0] [16, 48] [1, 1]
// CHECK: mla.load_kv_tile %arg1[{{.*}}] into %[[KN]] :
// CHECK: %[[ROWC:.*]] = arith.muli %[[SLOT]], %c16
// CHECK: %[[KC:.*]] = memref.subview %[[KT]][%[[ROWC]], 0] [16, 48] [1, 1]
// CHECK: memref.subview %[[KT]][%{{.*}}, 0] [16, 32] [1, 1]
// CHECK: mla.attention_step %{{.*}}, %[[KC]], %{{.*}} -> %{{.*}} state(%{{.*}}, %{{.*}}) stages 3
func.func @pipelined(%q: memref<?x1x4x48xbf16>, %kv: memref<?x3x48xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x4x32xbf16>, %lse: memref<?x1x4xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse {config = #mla.config<tile_kv = 16, kv_splits = 1, head_group = 4, warps = 1, stages = 3>} : memref<?x1x4x48xbf16>, memref<?x3x48xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x4x32xbf16>, memref<?x1x4xf32>
  return
}

// -----

// MTP on AMD (ArchInfo::readsQueriesInPlace) with one head group of all
// heads: the step reads its Sq x H rows i * H + h in place, q[b] collapsed
// to one contiguous 2-D view (AttentionLayout's decodeQueriesInPlace); no
// copy of the queries.
// CHECK-LABEL: func @mtp_in_place
// CHECK-NOT: vector.load %arg0
// CHECK: %[[SV:.*]] = memref.subview %arg0[%{{.*}}, 0, %{{.*}}, 0] [1, 2, 4, 48] [1, 1, 1, 1] : memref<?x2x4x48xbf16> to memref<2x4x48xbf16, strided<[192, 48, 1], offset: ?>>
// CHECK: %[[QV:.*]] = memref.collapse_shape %[[SV]] {{\[\[}}0, 1], [2]] : memref<2x4x48xbf16, strided<[192, 48, 1], offset: ?>> into memref<8x48xbf16, strided<[48, 1], offset: ?>>
// CHECK: mla.attention_step %[[QV]],
module attributes {mla.target = #mla.target<"gfx942">} {
func.func @mtp_in_place(%q: memref<?x2x4x48xbf16>, %kv: memref<?x3x48xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x2x4x32xbf16>, %lse: memref<?x2x4xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse {config = #mla.config<tile_kv = 16, kv_splits = 2, head_group = 4, warps = 1, stages = 1>} : memref<?x2x4x48xbf16>, memref<?x3x48xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x2x4x32xbf16>, memref<?x2x4xf32>
  return
}
}

// -----

// A head group of some heads: its rows of different positions are H rows
// apart in the collapsed view, which the step reads from the group's first
// head on (2 x 2 rows of a 6-row view) with query_groups = [2, 4].
// CHECK-LABEL: func @mtp_group_in_place
// CHECK-NOT: vector.load %arg0
// CHECK: %[[ALL:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : memref<2x4x48xbf16, strided<[192, 48, 1], offset: ?>> into memref<8x48xbf16, strided<[48, 1], offset: ?>>
// CHECK: %[[QV:.*]] = memref.subview %[[ALL]][%{{.*}}, 0] [6, 48] [1, 1]
// CHECK: mla.attention_step %[[QV]], {{.*}} {query_groups = array<i64: 2, 4>} : memref<6x48xbf16, strided<[48, 1], offset: ?>>,
// Other targets (here sm_90a) stage the MTP queries.
// CHECK-LABEL: func @mtp_sm90_staged
// CHECK: vector.load %arg0
// CHECK-NOT: memref.collapse_shape
// CHECK: mla.attention_step %{{.*}} : memref<8x48xbf16, strided<[56, 1]>>,
module attributes {mla.target = #mla.target<"gfx942">} {
func.func @mtp_group_in_place(%q: memref<?x2x4x48xbf16>, %kv: memref<?x3x48xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x2x4x32xbf16>, %lse: memref<?x2x4xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse {config = #mla.config<tile_kv = 16, kv_splits = 2, head_group = 2, warps = 1, stages = 1>} : memref<?x2x4x48xbf16>, memref<?x3x48xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x2x4x32xbf16>, memref<?x2x4xf32>
  return
}
}

// -----

module attributes {mla.target = #mla.target<"sm_90a">} {
func.func @mtp_sm90_staged(%q: memref<?x2x4x48xbf16>, %kv: memref<?x3x48xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x2x4x32xbf16>, %lse: memref<?x2x4xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse {config = #mla.config<tile_kv = 16, kv_splits = 2, head_group = 4, warps = 1, stages = 1>} : memref<?x2x4x48xbf16>, memref<?x3x48xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x2x4x32xbf16>, memref<?x2x4xf32>
  return
}
}
