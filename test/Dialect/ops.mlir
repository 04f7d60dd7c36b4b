// RUN: mla-opt %s | FileCheck %s
// RUN: mla-opt %s | mla-opt | FileCheck %s
// RUN: mla-opt %s --mlir-print-op-generic | mla-opt | FileCheck %s

// CHECK-LABEL: func @decode_deepseek
// CHECK: mla.decode %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
func.func @decode_deepseek(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// 256+32 dims, MTP (Sq = 4), one head, a run-time page size, f32 output of
// an f16 kernel, and an explicit config.
// CHECK-LABEL: func @decode_small_mtp
// CHECK: mla.decode {{.*}} {config = #mla.config<tile_kv = 32, kv_splits = 2, head_group = 1, warps = 4, stages = 2, min_workgroups = 64>} : memref<?x4x1x288xf16>, memref<?x?x288xf16>
func.func @decode_small_mtp(%q: memref<?x4x1x288xf16>, %kv: memref<?x?x288xf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x4x1x256xf16>, %lse: memref<?x4x1xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse {config = #mla.config<tile_kv = 32, kv_splits = 2, head_group = 1, warps = 4, stages = 2, min_workgroups = 64>} : memref<?x4x1x288xf16>, memref<?x?x288xf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x4x1x256xf16>, memref<?x4x1xf32>
  return
}

// Page size 1 and static shapes everywhere.
// CHECK-LABEL: func @decode_page1
// CHECK: mla.decode {{.*}} : memref<2x2x128x576xf32>, memref<1000x1x576xf32>
func.func @decode_page1(%q: memref<2x2x128x576xf32>, %kv: memref<1000x1x576xf32>, %bt: memref<2x500xi32>, %lens: memref<2xi32>, %scale: f32, %o: memref<2x2x128x512xf32>, %lse: memref<2x2x128xf32>) {
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<2x2x128x576xf32>, memref<1000x1x576xf32>, memref<2x500xi32>, memref<2xi32>, f32, memref<2x2x128x512xf32>, memref<2x2x128xf32>
  return
}

// KV append: DeepSeek rows into 64-token pages; f32 rows into a run-time
// page size with the latent part recorded; f16 with static shapes.
// CHECK-LABEL: func @append_kv
// CHECK: mla.append_kv %{{.*}}, %{{.*}}, %{{.*}} : memref<?x576xbf16>, memref<?xi32>, memref<?x64x576xbf16>
// CHECK: mla.append_kv %{{.*}}, %{{.*}}, %{{.*}} {latent_dim = 512 : i64} : memref<?x576xf32>, memref<?xi32>, memref<?x?x576xf32>
// CHECK: mla.append_kv %{{.*}}, %{{.*}}, %{{.*}} : memref<7x288xf16>, memref<7xi32>, memref<10x1x288xf16>
func.func @append_kv(%new: memref<?x576xbf16>, %slots: memref<?xi32>, %kv: memref<?x64x576xbf16>, %new32: memref<?x576xf32>, %kv32: memref<?x?x576xf32>, %new16: memref<7x288xf16>, %slots7: memref<7xi32>, %kv16: memref<10x1x288xf16>) {
  mla.append_kv %new, %slots, %kv : memref<?x576xbf16>, memref<?xi32>, memref<?x64x576xbf16>
  mla.append_kv %new32, %slots, %kv32 {latent_dim = 512 : i64} : memref<?x576xf32>, memref<?xi32>, memref<?x?x576xf32>
  mla.append_kv %new16, %slots7, %kv16 : memref<7x288xf16>, memref<7xi32>, memref<10x1x288xf16>
  return
}

// CHECK-LABEL: func @merge
// CHECK: mla.merge %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<?x1x16x4x512xf32>, memref<?x1x16x4xf32>, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
// CHECK: mla.merge {{.*}} : memref<7x3x128xf32>, memref<7x3xf32>, memref<7x128xf32>, memref<7xf32>
func.func @merge(%op: memref<?x1x16x4x512xf32>, %lp: memref<?x1x16x4xf32>, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>, %op2: memref<7x3x128xf32>, %lp2: memref<7x3xf32>, %o2: memref<7x128xf32>, %lse2: memref<7xf32>) {
  mla.merge %op, %lp, %o, %lse : memref<?x1x16x4x512xf32>, memref<?x1x16x4xf32>, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  mla.merge %op2, %lp2, %o2, %lse2 : memref<7x3x128xf32>, memref<7x3xf32>, memref<7x128xf32>, memref<7xf32>
  return
}

// CHECK-LABEL: func @prefill
// CHECK: mla.prefill %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal} : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x16x128xbf16>, memref<16x?xf32>
// CHECK: mla.prefill {{.*}} {config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 4, stages = 1, tile_q = 64>} : memref<5x1x32xf32>, memref<9x1x32xf32>, memref<9x1x16xf32>, memref<3xi32>, memref<3xi32>, f32, memref<5x1x16xf32>, memref<1x5xf32>
// CHECK-NOT: causal
func.func @prefill(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>, %q2: memref<5x1x32xf32>, %k2: memref<9x1x32xf32>, %v2: memref<9x1x16xf32>, %cu2: memref<3xi32>, %o2: memref<5x1x16xf32>, %lse2: memref<1x5xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal} : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x16x128xbf16>, memref<16x?xf32>
  mla.prefill %q2, %k2, %v2, %cu2, %cu2, %scale, %o2, %lse2 {config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 4, stages = 1, tile_q = 64>} : memref<5x1x32xf32>, memref<9x1x32xf32>, memref<9x1x16xf32>, memref<3xi32>, memref<3xi32>, f32, memref<5x1x16xf32>, memref<1x5xf32>
  return
}

// Chunked prefill: N stacked chunk results [N, T, H, Dv] and LSEs [N, H, T]
// merged through transposed views.
// CHECK-LABEL: func @merge_views
// CHECK: mla.merge {{.*}} : memref<?x16x2x128xf32, strided<[2048, 128, ?, 1]>>, memref<?x16x2xf32, strided<[1, ?, ?]>>, memref<?x16x128xbf16>, memref<?x16xf32, strided<[1, ?]>>
func.func @merge_views(%op: memref<2x?x16x128xf32>, %lp: memref<2x16x?xf32>, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  %opv = memref.transpose %op (n, t, h, d) -> (t, h, n, d) : memref<2x?x16x128xf32> to memref<?x16x2x128xf32, strided<[2048, 128, ?, 1]>>
  %lpv = memref.transpose %lp (n, h, t) -> (t, h, n) : memref<2x16x?xf32> to memref<?x16x2xf32, strided<[1, ?, ?]>>
  %lsev = memref.transpose %lse (h, t) -> (t, h) : memref<16x?xf32> to memref<?x16xf32, strided<[1, ?]>>
  mla.merge %opv, %lpv, %o, %lsev : memref<?x16x2x128xf32, strided<[2048, 128, ?, 1]>>, memref<?x16x2xf32, strided<[1, ?, ?]>>, memref<?x16x128xbf16>, memref<?x16xf32, strided<[1, ?]>>
  return
}

// Variant regions print and parse (custom and generic forms).
// CHECK-LABEL: func @variants
// CHECK: mla.prefill {{.*}} {causal} : {{.*}} score {
// CHECK-NEXT: ^bb0(%[[S:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index):
// CHECK: math.tanh
// CHECK: mla.yield %{{.*}} : f32
// CHECK-NEXT: } mask {
// CHECK: mla.yield %{{.*}} : i1
// CHECK-NEXT: } sink {
// CHECK: memref.load %arg8[%{{.*}}] : memref<16xf32>
// CHECK: mla.yield %{{.*}} : f32
// CHECK: mla.decode {{.*}} mask {
// CHECK: arith.cmpi
// CHECK-NOT: score
func.func @variants(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>, %sinks: memref<16xf32>, %dq: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %do: memref<?x1x16x512xbf16>, %dlse: memref<?x1x16xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal} : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x16x128xbf16>, memref<16x?xf32> score {
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
    %z = memref.load %sinks[%h] : memref<16xf32>
    mla.yield %z : f32
  }
  "mla.decode"(%dq, %kv, %bt, %lens, %scale, %do, %dlse) ({
  }, {
  ^bb0(%b: index, %h: index, %qp: index, %kp: index):
    %z = arith.constant 0 : index
    %in = arith.cmpi sge, %kp, %z : index
    "mla.yield"(%in) : (i1) -> ()
  }, {
  }) : (memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>) -> ()
  return
}

// CHECK-LABEL: func @blockwise
// CHECK: mla.grid in (%{{.*}}, %{{.*}}, %{{.*}}) {
// CHECK: ^bb0(%[[X:.*]]: index, %{{.*}}: index, %{{.*}}: index):
// CHECK: mla.load_kv_tile %{{.*}}[%{{.*}}, %[[X]], %{{.*}}, %{{.*}}] into %{{.*}} : memref<?x3x576xbf16>, memref<?x?xi32>, memref<64x576xbf16>
// CHECK: mla.matmul %{{.*}}, %{{.*}}, %{{.*}} {transpose_b} : memref<16x576xbf16>, memref<64x576xbf16>, memref<16x64xf32>
// CHECK: mla.matmul %{{.*}}, %{{.*}}, %{{.*}} scale %{{.*}} {accumulate} : memref<16x64xbf16>, memref<64x512xbf16, strided<[576, 1]>>, memref<16x512xf32>, memref<16xf32>
func.func @blockwise(%kv: memref<?x3x576xbf16>, %bt: memref<?x?xi32>, %n: index, %q: memref<16x576xbf16>, %p: memref<16x64xbf16>, %corr: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  mla.grid in (%n, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %k = memref.alloca() : memref<64x576xbf16>
    %s = memref.alloca() : memref<16x64xf32>
    %acc = memref.alloca() : memref<16x512xf32>
    mla.load_kv_tile %kv[%bt, %x, %c0, %n] into %k : memref<?x3x576xbf16>, memref<?x?xi32>, memref<64x576xbf16>
    mla.matmul %q, %k, %s {transpose_b} : memref<16x576xbf16>, memref<64x576xbf16>, memref<16x64xf32>
    %v = memref.subview %k[0, 0] [64, 512] [1, 1] : memref<64x576xbf16> to memref<64x512xbf16, strided<[576, 1]>>
    mla.matmul %p, %v, %acc scale %corr {accumulate} : memref<16x64xbf16>, memref<64x512xbf16, strided<[576, 1]>>, memref<16x512xf32>, memref<16xf32>
  }
  return
}

// CHECK-LABEL: func @attention_step
// CHECK: mla.attention_step %{{.*}}, %{{.*}}, %{{.*}} -> %{{.*}} state(%{{.*}}, %{{.*}}) stages 2 : memref<16x576xbf16>, memref<32x576xbf16>, memref<32x512xbf16, strided<[576, 1]>>, memref<16x512xf32>, memref<16xf32>, memref<16xf32> {
// CHECK: ^bb0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: f32):
// CHECK: mla.yield %{{.*}}, %{{.*}} : f32, i1
func.func @attention_step(%q: memref<16x576xbf16>, %k: memref<32x576xbf16>, %acc: memref<16x512xf32>, %m: memref<16xf32>, %l: memref<16xf32>, %scale: f32, %n: index) {
  %v = memref.subview %k[0, 0] [32, 512] [1, 1] : memref<32x576xbf16> to memref<32x512xbf16, strided<[576, 1]>>
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 2 : memref<16x576xbf16>, memref<32x576xbf16>, memref<32x512xbf16, strided<[576, 1]>>, memref<16x512xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %y = arith.mulf %x, %scale : f32
    %vis = arith.cmpi ult, %c, %n : index
    mla.yield %y, %vis : f32, i1
  }
  return
}

// Grouped query rows: 2 x 8 rows of a 2 x 16 view (row r is row
// (r / 8) * 16 + r % 8 of %q).
// CHECK-LABEL: func @attention_step_groups
// CHECK: mla.attention_step {{.*}} stages 1 {query_groups = array<i64: 8, 16>} : memref<24x64xbf16>,
func.func @attention_step_groups(%q: memref<24x64xbf16>, %k: memref<32x64xbf16>, %v: memref<32x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 {query_groups = array<i64: 8, 16>} : memref<24x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// Every element of the tile visible where %all holds.
// CHECK-LABEL: func @attention_step_all_visible
// CHECK: mla.attention_step {{.*}} stages 1 all_visible(%{{.*}}) : memref<16x64xbf16>,
func.func @attention_step_all_visible(%q: memref<16x64xbf16>, %k: memref<32x64xbf16>, %v: memref<32x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>, %all: i1) {
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 all_visible(%all) : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant false
    mla.yield %x, %t : f32, i1
  }
  return
}

// CHECK-LABEL: func @attention_finish
// CHECK: mla.attention_finish %{{.*}} state(%{{.*}}, %{{.*}}) scale %{{.*}} width 4 : memref<16x512xf32>, memref<16xf32>, memref<16xf32>, memref<16xf32> output {
// CHECK: ^bb0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: vector<4xf32>):
// CHECK: vector.store
// CHECK: mla.yield
// CHECK: } lse {
// CHECK: ^bb0(%{{.*}}: index, %{{.*}}: f32):
// CHECK: memref.store
// CHECK-LABEL: func @attention_finish_unscaled
// CHECK: mla.attention_finish %{{.*}} state(%{{.*}}, %{{.*}}) width 2 : memref<8x6xf32>, memref<8xf32>, memref<8xf32> output {
func.func @attention_finish(%acc: memref<16x512xf32>, %m: memref<16xf32>, %l: memref<16xf32>, %s: memref<16xf32>, %o: memref<16x512xf32>, %lse: memref<16xf32>) {
  mla.attention_finish %acc state(%m, %l) scale %s width 4 : memref<16x512xf32>, memref<16xf32>, memref<16xf32>, memref<16xf32> output {
  ^bb0(%r: index, %c: index, %v: vector<4xf32>):
    vector.store %v, %o[%r, %c] : memref<16x512xf32>, vector<4xf32>
    mla.yield
  } lse {
  ^bb0(%r: index, %x: f32):
    memref.store %x, %lse[%r] : memref<16xf32>
    mla.yield
  }
  return
}

func.func @attention_finish_unscaled(%acc: memref<8x6xf32>, %m: memref<8xf32>, %l: memref<8xf32>) {
  mla.attention_finish %acc state(%m, %l) width 2 : memref<8x6xf32>, memref<8xf32>, memref<8xf32> output {
  ^bb0(%r: index, %c: index, %v: vector<2xf32>):
    mla.yield
  } lse {
  ^bb0(%r: index, %x: f32):
    mla.yield
  }
  return
}

// CHECK-LABEL: func @online_softmax
// CHECK: mla.online_softmax %{{.*}} -> %{{.*}} state(%{{.*}}, %{{.*}}, %{{.*}}) : memref<16x64xf32>, memref<16x64xbf16>, memref<16xf32>, memref<16xf32>, memref<16xf32> {
// CHECK: ^bb0(%[[R:.*]]: index, %[[C:.*]]: index, %[[S:.*]]: f32):
// CHECK: mla.yield %{{.*}}, %{{.*}} : f32, i1
func.func @online_softmax(%s: memref<16x64xf32>, %p: memref<16x64xbf16>, %m: memref<16xf32>, %l: memref<16xf32>, %corr: memref<16xf32>, %scale: f32, %n: index) {
  mla.online_softmax %s -> %p state(%m, %l, %corr) : memref<16x64xf32>, memref<16x64xbf16>, memref<16xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %y = arith.mulf %x, %scale : f32
    %vis = arith.cmpi ult, %c, %n : index
    mla.yield %y, %vis : f32, i1
  }
  return
}

// The plan and merge of decode's length-aware schedule.
// CHECK-LABEL: func @chunk_schedule
// CHECK: mla.chunk_plan %{{.*}}, %{{.*}} {balance = 16 : i64, chunks = 256 : i64, tile_kv = 64 : i64} : memref<?xi32>, memref<3x?xi32>
// CHECK: mla.chunk_plan %{{.*}}, %{{.*}} {balance = 16 : i64, chunks = 256 : i64, refine = 4 : i64, tile_kv = 64 : i64} : memref<?xi32>, memref<3x?xi32>
// CHECK: mla.chunk_merge %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<?x1x16x512xf32>, memref<?x1x16xf32>, memref<3x?xi32>, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
// CHECK: mla.chunk_merge %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {groups = 4 : i64} : memref<?x1x16x512xf32>
func.func @chunk_schedule(%lens: memref<?xi32>, %plan: memref<3x?xi32>, %op: memref<?x1x16x512xf32>, %lp: memref<?x1x16xf32>, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  mla.chunk_plan %lens, %plan {tile_kv = 64, chunks = 256, balance = 16} : memref<?xi32>, memref<3x?xi32>
  mla.chunk_plan %lens, %plan {tile_kv = 64, chunks = 256, balance = 16, refine = 4} : memref<?xi32>, memref<3x?xi32>
  mla.chunk_merge %op, %lp, %plan, %o, %lse : memref<?x1x16x512xf32>, memref<?x1x16xf32>, memref<3x?xi32>, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  mla.chunk_merge %op, %lp, %plan, %o, %lse {groups = 4} : memref<?x1x16x512xf32>, memref<?x1x16xf32>, memref<3x?xi32>, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}
