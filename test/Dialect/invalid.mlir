// RUN: mla-opt %s -split-input-file -verify-diagnostics

func.func @bad_rope(%q: memref<?x1x16x520xbf16>, %kv: memref<?x64x520xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{rope dim (q dim 3 - o dim 3 = 520 - 512) must be a non-negative multiple of 16}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x520xbf16>, memref<?x64x520xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @bad_latent(%q: memref<?x1x16x40xbf16>, %kv: memref<?x64x40xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x8xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{latent dim (o dim 3) must be a positive multiple of 16, got 8}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x40xbf16>, memref<?x64x40xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x8xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @kv_dtype(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{kv element type 'f16' differs from q element type 'bf16'}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16>, memref<?x64x576xf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @o_dtype(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{o element type must be the q element type ('bf16') or f32, got 'f16'}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @row_width(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x512xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{operand 'kv' dim 2 (row width) is 512, expected 576}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16>, memref<?x64x512xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @heads_mismatch(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x8x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{operand 'o' dim 2 (heads) is 8, expected 16}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x8x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @lse_qlen(%q: memref<?x2x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x2x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{operand 'lse' dim 1 (query length) is 1, expected 2}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x2x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x2x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @batch_mismatch(%q: memref<4x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<4x?xi32>, %lens: memref<3xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{operand 'seq_lens' dim 0 (batch) is 3, expected 4}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<4x1x16x576xbf16>, memref<?x64x576xbf16>, memref<4x?xi32>, memref<3xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @dynamic_heads(%q: memref<?x1x?x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{operand 'q' dim 2 must be static}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x?x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @zero_page(%q: memref<?x1x16x576xbf16>, %kv: memref<?x0x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{page size (kv dim 1) must be >= 1}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16>, memref<?x0x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @strided(%q: memref<?x1x16x576xbf16, strided<[?, ?, ?, 2]>>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{operand 'q' must have an identity (row-major) layout}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16, strided<[?, ?, ?, 2]>>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @i64_lens(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi64>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{operand #3 must be 1D memref of 32-bit signless integer values}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi64>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @group_divides(%q: memref<?x1x12x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x12x512xbf16>, %lse: memref<?x1x12xf32>) {
  // expected-error @+1 {{config head_group 8 does not divide the head count 12}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse {config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 8, warps = 4, stages = 1>} : memref<?x1x12x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x12x512xbf16>, memref<?x1x12xf32>
  return
}

// -----

// expected-error @+1 {{tile_kv must be a power of two in [8, 256], got 48}}
func.func private @bad_tile() attributes {cfg = #mla.config<tile_kv = 48, kv_splits = 1, head_group = 1, warps = 1, stages = 1>}

// -----

// expected-error @+1 {{kv_splits must be in [1, 64], got 0}}
func.func private @bad_splits() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 0, head_group = 1, warps = 1, stages = 1>}

// -----

// expected-error @+1 {{stages must be in [1, 4], got 9}}
func.func private @bad_stages() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 1, stages = 9>}

// -----

func.func @merge_rank(%op: memref<4x512xf32>, %lp: memref<4xf32>, %o: memref<512xf32>, %lse: memref<f32>) {
  // expected-error @+1 {{expected 1 to 3 leading dims (the rank of 'lse'), got 0}}
  mla.merge %op, %lp, %o, %lse : memref<4x512xf32>, memref<4xf32>, memref<512xf32>, memref<f32>
  return
}

// -----

func.func @merge_parts(%op: memref<7x3x128xf32>, %lp: memref<7x4xf32>, %o: memref<7x128xf32>, %lse: memref<7xf32>) {
  // expected-error @+1 {{operand 'o_parts' dim 1 (parts) is 3, expected 4}}
  mla.merge %op, %lp, %o, %lse : memref<7x3x128xf32>, memref<7x4xf32>, memref<7x128xf32>, memref<7xf32>
  return
}

// -----

func.func @merge_leading(%op: memref<7x3x128xf32>, %lp: memref<7x3xf32>, %o: memref<6x128xf32>, %lse: memref<7xf32>) {
  // expected-error @+1 {{operand 'o' dim 0 (leading) is 6, expected 7}}
  mla.merge %op, %lp, %o, %lse : memref<7x3x128xf32>, memref<7x3xf32>, memref<6x128xf32>, memref<7xf32>
  return
}

// -----

func.func @merge_value_dim(%op: memref<7x3x64xf32>, %lp: memref<7x3xf32>, %o: memref<7x128xf32>, %lse: memref<7xf32>) {
  // expected-error @+1 {{operand 'o_parts' dim 2 (value dim) is 64, expected 128}}
  mla.merge %op, %lp, %o, %lse : memref<7x3x64xf32>, memref<7x3xf32>, memref<7x128xf32>, memref<7xf32>
  return
}

// -----

func.func @merge_dynamic_parts(%op: memref<7x?x128xf32>, %lp: memref<7x?xf32>, %o: memref<7x128xf32>, %lse: memref<7xf32>) {
  // expected-error @+1 {{the part count (dim 1 of lse_parts and o_parts) must be static}}
  mla.merge %op, %lp, %o, %lse : memref<7x?x128xf32>, memref<7x?xf32>, memref<7x128xf32>, memref<7xf32>
  return
}

// -----

func.func @grid_args(%n: index) {
  // expected-error @+1 {{body must take three 'index' arguments (the workgroup coordinates)}}
  mla.grid in (%n, %n, %n) {
  ^bb0(%x: index, %y: index):
  }
  return
}

// -----

func.func @tile_type(%kv: memref<?x3x576xbf16>, %bt: memref<?x?xi32>, %n: index, %k: memref<64x576xf16>) {
  // expected-error @+1 {{tile element type 'f16' differs from kv element type 'bf16'}}
  mla.load_kv_tile %kv[%bt, %n, %n, %n] into %k : memref<?x3x576xbf16>, memref<?x?xi32>, memref<64x576xf16>
  return
}

// -----

func.func @tile_width(%kv: memref<?x3x576xbf16>, %bt: memref<?x?xi32>, %n: index, %k: memref<64x512xbf16>) {
  // expected-error @+1 {{tile row width 512 differs from kv row width 576}}
  mla.load_kv_tile %kv[%bt, %n, %n, %n] into %k : memref<?x3x576xbf16>, memref<?x?xi32>, memref<64x512xbf16>
  return
}

// -----

func.func @mm_k(%a: memref<16x64xbf16>, %b: memref<32x48xbf16>, %c: memref<16x32xf32>) {
  // expected-error @+1 {{reduction extents differ: A has 64, B has 48}}
  mla.matmul %a, %b, %c {transpose_b} : memref<16x64xbf16>, memref<32x48xbf16>, memref<16x32xf32>
  return
}

// -----

func.func @mm_c(%a: memref<16x64xbf16>, %b: memref<64x32xbf16>, %c: memref<16x16xf32>) {
  // expected-error @+1 {{C is 16x16, expected 16x32}}
  mla.matmul %a, %b, %c : memref<16x64xbf16>, memref<64x32xbf16>, memref<16x16xf32>
  return
}

// -----

func.func @mm_types(%a: memref<16x64xf16>, %b: memref<64x32xbf16>, %c: memref<16x32xf32>) {
  // expected-error @+1 {{only an f32 A may be combined with another B type}}
  mla.matmul %a, %b, %c : memref<16x64xf16>, memref<64x32xbf16>, memref<16x32xf32>
  return
}

// -----

func.func @mm_dynamic(%a: memref<?x64xbf16>, %b: memref<64x32xbf16>, %c: memref<16x32xf32>) {
  // expected-error @+1 {{operands must have static shapes}}
  mla.matmul %a, %b, %c : memref<?x64xbf16>, memref<64x32xbf16>, memref<16x32xf32>
  return
}

// -----

func.func @mm_scale_no_acc(%a: memref<16x64xbf16>, %b: memref<64x32xbf16>, %c: memref<16x32xf32>, %s: memref<16xf32>) {
  // expected-error @+1 {{c_scale needs 'accumulate'}}
  mla.matmul %a, %b, %c scale %s : memref<16x64xbf16>, memref<64x32xbf16>, memref<16x32xf32>, memref<16xf32>
  return
}

// -----

func.func @mm_scale_size(%a: memref<16x64xbf16>, %b: memref<64x32xbf16>, %c: memref<16x32xf32>, %s: memref<8xf32>) {
  // expected-error @+1 {{c_scale must have 16 elements (the rows of C)}}
  mla.matmul %a, %b, %c scale %s {accumulate} : memref<16x64xbf16>, memref<64x32xbf16>, memref<16x32xf32>, memref<8xf32>
  return
}

// -----

// expected-error @+1 {{min_workgroups must be >= 0, got -1}}
func.func private @bad_min_workgroups() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 1, stages = 1, min_workgroups = -1>}
