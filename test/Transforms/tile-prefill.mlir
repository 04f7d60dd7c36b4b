// RUN: mla-opt %s -split-input-file --mla-tile | FileCheck %s

// Causal prefill: a (query tile, head, request) grid; grid x counts query
// tiles of the whole batch, z the requests (len(cu_seqlens) - 1). Causal
// tiles run last-first; a workgroup past its request's queries does nothing.
// CHECK-LABEL: func @prefill
// CHECK-SAME: {mla.role = "q"}
// CHECK-SAME: {mla.role = "k"}
// CHECK-SAME: {mla.role = "v"}
// CHECK-SAME: {mla.role = "cu_seqlens_q"}
// CHECK-SAME: {mla.role = "cu_seqlens_k"}
// CHECK-SAME: {mla.role = "scale"}
// CHECK-SAME: {mla.role = "o"}
// CHECK-SAME: {mla.role = "lse"}
// CHECK-SAME: mla.kernel_info = {causal = 1 : i64, config = "tile_q=16 tile_kv=16 warps=1 stages=1", dtype = "bf16", heads = 2 : i64, kernel = "prefill", qk_dim = 48 : i64, v_dim = 32 : i64}
// CHECK: %[[T:.*]] = memref.dim %arg0, %c0
// CHECK: %[[NQ:.*]] = arith.ceildivsi %[[T]], %c16
// CHECK: %[[CU:.*]] = memref.dim %arg3, %c0
// CHECK: %[[B:.*]] = arith.subi %[[CU]], %c1
// CHECK: mla.grid in (%[[NQ]], %c2, %[[B]])
// CHECK: ^bb0(%[[X:.*]]: index, %[[H:.*]]: index, %[[REQ:.*]]: index):
//   Last tile first.
// CHECK: %[[LASTX:.*]] = arith.subi %{{.*}}, %c1
// CHECK: %[[QT:.*]] = arith.subi %[[LASTX]], %[[X]]
// CHECK: %[[NEXT:.*]] = arith.addi %[[REQ]], %c1
// CHECK: memref.load %arg3[%[[REQ]]]
// CHECK: memref.load %arg3[%[[NEXT]]]
// CHECK: memref.load %arg4[%[[REQ]]]
// CHECK: %[[Q0:.*]] = arith.muli %[[QT]], %c16
//   Separate key and value tiles (rows padded by 16 bytes).
// CHECK: memref.alloca() : memref<16x56xbf16>
// CHECK: memref.alloca() : memref<16x56xbf16>
// CHECK: %[[VB:.*]] = memref.alloca() : memref<16x40xbf16>
// CHECK: %[[ACTIVE:.*]] = arith.cmpi slt, %[[Q0]]
// CHECK: scf.if %[[ACTIVE]] {
//   Staging copies: `row < limit ? load : 0`, the async-copy idiom.
// CHECK: scf.parallel
// CHECK: scf.if %{{.*}} -> (vector<16xbf16>)
// CHECK: vector.load %arg0
// CHECK: } else {
// CHECK: vector.store
//   The key loop stops at the tile's last visible key.
// CHECK: scf.for %[[T0:.*]] = %c0{{.*}} to %[[END:.*]] step %c16
// CHECK: vector.load %arg1
// CHECK: vector.load %arg2
//   Tiles that end at or before the first row's causal limit have every
//   element visible.
// CHECK: %[[ALL:.*]] = arith.cmpi sle
// CHECK: mla.attention_step %{{.*}}, %{{.*}}, %{{.*}} -> %{{.*}} state(%{{.*}}, %{{.*}}) stages 1 all_visible(%[[ALL]]) : memref<16x48xbf16, strided<[56, 1]>>, memref<16x48xbf16, strided<[56, 1]>>, memref<16x32xbf16, strided<[40, 1]>>, memref<16x32xf32, strided<[36, 1]>>, memref<16xf32>, memref<16xf32>
// CHECK: mla.yield %{{.*}}, %{{.*}} : f32, i1
//   Epilogue: the finish; its regions store o in its dtype and lse at
//   [head, token] for the rows of the tile that are queries.
// CHECK: mla.attention_finish %{{.*}} state(%{{.*}}, %{{.*}}) width 4
// CHECK: arith.cmpi slt
// CHECK: arith.truncf %{{.*}} : vector<4xf32> to vector<4xbf16>
// CHECK: vector.store %{{.*}}, %arg6[%{{.*}}, %[[H]], %{{.*}}]
// CHECK: } lse {
// CHECK: memref.store %{{.*}}, %arg7[%[[H]], %{{.*}}] : memref<2x?xf32>
// CHECK-NOT: mla.prefill
func.func @prefill(%q: memref<?x2x48xbf16>, %k: memref<?x2x48xbf16>, %v: memref<?x2x32xbf16>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x2x32xbf16>, %lse: memref<2x?xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal, config = #mla.config<tile_kv = 16, kv_splits = 1, head_group = 1, warps = 1, stages = 1, tile_q = 16>} : memref<?x2x48xbf16>, memref<?x2x48xbf16>, memref<?x2x32xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x2x32xbf16>, memref<2x?xf32>
  return
}

// -----

// Without the mask every key is visible, tiles run in order and the key
// loop covers the request's keys.
// CHECK-LABEL: func @full
// CHECK: mla.grid in
// CHECK: ^bb0(%[[X:.*]]: index, %{{.*}}: index, %{{.*}}: index):
// CHECK-NOT: arith.subi %{{.*}}, %[[X]]
// CHECK: %[[Q0:.*]] = arith.muli %[[X]], %c16
// CHECK: scf.for
// CHECK-NOT: mla.prefill
func.func @full(%q: memref<?x1x32xf32>, %k: memref<?x1x32xf32>, %v: memref<?x1x32xf32>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x1x32xf32>, %lse: memref<1x?xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {config = #mla.config<tile_kv = 16, kv_splits = 1, head_group = 1, warps = 1, stages = 1, tile_q = 16>} : memref<?x1x32xf32>, memref<?x1x32xf32>, memref<?x1x32xf32>, memref<?xi32>, memref<?xi32>, f32, memref<?x1x32xf32>, memref<1x?xf32>
  return
}

// -----

// Chunked-prefill merge on transposed views: the kernel is described as a
// merge, roles go to the viewed arguments, grid sizes are the arguments'
// dims.
// CHECK-LABEL: func @merge_views
// CHECK-SAME: {mla.role = "o_parts"}
// CHECK-SAME: {mla.role = "lse_parts"}
// CHECK-SAME: {mla.role = "o"}
// CHECK-SAME: {mla.role = "lse"}
// CHECK-SAME: mla.kernel_info = {dtype = "bf16", heads = 16 : i64, kernel = "merge", parts = 2 : i64, v_dim = 128 : i64}
// CHECK: %[[T:.*]] = memref.dim %arg3, %c1
// CHECK: mla.grid in (%[[T]], %c16, %c1{{.*}})
func.func @merge_views(%op: memref<2x?x16x128xf32>, %lp: memref<2x16x?xf32>, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  %opv = memref.transpose %op (n, t, h, d) -> (t, h, n, d) : memref<2x?x16x128xf32> to memref<?x16x2x128xf32, strided<[2048, 128, ?, 1]>>
  %lpv = memref.transpose %lp (n, h, t) -> (t, h, n) : memref<2x16x?xf32> to memref<?x16x2xf32, strided<[1, ?, ?]>>
  %lsev = memref.transpose %lse (h, t) -> (t, h) : memref<16x?xf32> to memref<?x16xf32, strided<[1, ?]>>
  mla.merge %opv, %lpv, %o, %lsev : memref<?x16x2x128xf32, strided<[2048, 128, ?, 1]>>, memref<?x16x2xf32, strided<[1, ?, ?]>>, memref<?x16x128xbf16>, memref<?x16xf32, strided<[1, ?]>>
  return
}

// -----

// Variant regions are inlined into the softmax phases: the score region
// rewrites scale · q·k (tanh as exp2), the mask joins the visible range and
// skips key tiles no row sees, the sink adds its logit to each row's
// denominator after the key loop.
// CHECK-LABEL: func @variants
// CHECK: %[[ANY:.*]] = memref.alloca() : memref<1xf32>
//   A key tile no row sees is skipped: the mask over (row, key) first.
// CHECK: scf.for
// CHECK: scf.parallel
// CHECK: arith.cmpi slt
// CHECK: scf.parallel
// CHECK: memref.store %{{.*}}, %[[ANY]]
// CHECK: %[[FLAG:.*]] = memref.load %[[ANY]]
// CHECK: %[[SEEN:.*]] = arith.cmpf ogt, %[[FLAG]]
// CHECK: scf.if %[[SEEN]] {
// CHECK: vector.load %arg1
//   The element function: causal/length limit, score region (tanh as
//   exp2), mask region.
// CHECK: mla.attention_step {{.*}} stages 1
// CHECK: arith.cmpi slt
// CHECK: arith.mulf %{{.*}}, %arg5 : f32
//   The region's own division stays IEEE; tanh's may use a reciprocal.
// CHECK: arith.divf %{{.*}}, %{{.*}} : f32
// CHECK: math.exp2
// CHECK: arith.divf %{{.*}}, %{{.*}} fastmath<afn> : f32
// CHECK: arith.andi
// CHECK: mla.yield
// CHECK: }
// CHECK: memref.load %arg8
// CHECK: arith.maximumf
// CHECK: math.exp2
//   The sink's correction is the finish's scale.
// CHECK: mla.attention_finish %{{.*}} state(%{{.*}}, %{{.*}}) scale %{{.*}} width 4
// CHECK-NOT: math.tanh
func.func @variants(%q: memref<?x1x32xf32>, %k: memref<?x1x32xf32>, %v: memref<?x1x32xf32>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x1x32xf32>, %lse: memref<1x?xf32>, %sinks: memref<1xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal, config = #mla.config<tile_kv = 16, kv_splits = 1, head_group = 1, warps = 1, stages = 1, tile_q = 16>} : memref<?x1x32xf32>, memref<?x1x32xf32>, memref<?x1x32xf32>, memref<?xi32>, memref<?xi32>, f32, memref<?x1x32xf32>, memref<1x?xf32> score {
  ^bb0(%s: f32, %b: index, %h: index, %qp: index, %kp: index):
    %c = arith.constant 30.0 : f32
    %x = arith.divf %s, %c : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %t, %c : f32
    mla.yield %r : f32
  } mask {
  ^bb0(%b: index, %h: index, %qp: index, %kp: index):
    %w = arith.constant 128 : index
    %d = arith.subi %qp, %kp : index
    %in = arith.cmpi slt, %d, %w : index
    mla.yield %in : i1
  } sink {
  ^bb0(%b: index, %h: index, %qp: index):
    %z = memref.load %sinks[%h] : memref<1xf32>
    mla.yield %z : f32
  }
  return
}

// -----

// math.exp and math.log in a region become exp2/log2 forms (every target
// lowers those without a device library).
// CHECK-LABEL: func @exp_log
// CHECK: math.exp2
// CHECK: math.log2
// CHECK-NOT: math.exp %
// CHECK-NOT: math.log %
func.func @exp_log(%q: memref<?x1x32xf32>, %k: memref<?x1x32xf32>, %v: memref<?x1x32xf32>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x1x32xf32>, %lse: memref<1x?xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {config = #mla.config<tile_kv = 16, kv_splits = 1, head_group = 1, warps = 1, stages = 1, tile_q = 16>} : memref<?x1x32xf32>, memref<?x1x32xf32>, memref<?x1x32xf32>, memref<?xi32>, memref<?xi32>, f32, memref<?x1x32xf32>, memref<1x?xf32> score {
  ^bb0(%s: f32, %b: index, %h: index, %qp: index, %kp: index):
    %e = math.exp %s : f32
    %one = arith.constant 1.0 : f32
    %a = arith.addf %e, %one : f32
    %l = math.log %a : f32
    mla.yield %l : f32
  }
  return
}

// -----

// On AMD (ArchInfo::readsQueriesInPlace) the step reads the query
// tile in place: the view q[first row .. + tile_q, head, :], no copy of
// it (the query tile, unused, is erased by mla-distribute); the key and
// value copies stay.
// CHECK-LABEL: func @queries_in_place
// CHECK: scf.if
// CHECK-NOT: vector.load %arg0
// CHECK: %[[QV:.*]] = memref.subview %arg0[%{{.*}}, %{{.*}}, 0] [128, 1, 192] [1, 1, 1] : memref<?x16x192xbf16> to memref<128x192xbf16, strided<[3072, 1], offset: ?>>
// CHECK: vector.load %arg1
// CHECK: vector.load %arg2
// CHECK: mla.attention_step %[[QV]],
module attributes {mla.target = #mla.target<"gfx942">} {
func.func @queries_in_place(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal, config = #mla.config<tile_kv = 32, kv_splits = 1, head_group = 1, warps = 4, stages = 1, tile_q = 128>} : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x16x128xbf16>, memref<16x?xf32>
  return
}
}

// -----

// Other targets (here sm_90a) stage it, rows masked.
// CHECK-LABEL: func @queries_staged
// CHECK: scf.if
// CHECK: vector.load %arg0
// CHECK: mla.attention_step %{{.*}} : memref<128x192xbf16, strided<[200, 1]>>,
module attributes {mla.target = #mla.target<"sm_90a">} {
func.func @queries_staged(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal, config = #mla.config<tile_kv = 32, kv_splits = 1, head_group = 1, warps = 4, stages = 1, tile_q = 128>} : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x16x128xbf16>, memref<16x?xf32>
  return
}
}
