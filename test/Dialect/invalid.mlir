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
  // expected-error @+1 {{operand 'o' element type must be the q element type ('bf16'), got 'f16'}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xf16>, memref<?x1x16xf32>
  return
}

// -----

// The runtime's decode kind takes o in the kernel's dtype only: an f32 o
// of f16 inputs cannot be packaged (prefill's o may be f32).
func.func @o_f32(%q: memref<?x4x1x288xf16>, %kv: memref<?x?x288xf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x4x1x256xf32>, %lse: memref<?x4x1xf32>) {
  // expected-error @+1 {{operand 'o' element type must be the q element type ('f16'), got 'f32'}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse : memref<?x4x1x288xf16>, memref<?x?x288xf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x4x1x256xf32>, memref<?x4x1xf32>
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

func.func @append_rank(%new: memref<?x1x576xbf16>, %slots: memref<?xi32>, %kv: memref<?x64x576xbf16>) {
  // expected-error @+1 {{operand 'kv_new' must have rank 2 [tokens, row width], got rank 3}}
  mla.append_kv %new, %slots, %kv : memref<?x1x576xbf16>, memref<?xi32>, memref<?x64x576xbf16>
  return
}

// -----

func.func @append_pool_rank(%new: memref<?x576xbf16>, %slots: memref<?xi32>, %kv: memref<?x576xbf16>) {
  // expected-error @+1 {{operand 'kv' must have rank 3 [pages, page size, row width], got rank 2}}
  mla.append_kv %new, %slots, %kv : memref<?x576xbf16>, memref<?xi32>, memref<?x576xbf16>
  return
}

// -----

func.func @append_slots_rank(%new: memref<?x576xbf16>, %slots: memref<?x1xi32>, %kv: memref<?x64x576xbf16>) {
  // expected-error @+1 {{operand 'slot_mapping' must have rank 1 [tokens], got rank 2}}
  mla.append_kv %new, %slots, %kv : memref<?x576xbf16>, memref<?x1xi32>, memref<?x64x576xbf16>
  return
}

// -----

func.func @append_layout(%new: memref<?x576xbf16>, %slots: memref<?xi32>, %kv: memref<?x64x576xbf16, strided<[?, 1152, 2]>>) {
  // expected-error @+1 {{operand 'kv' must have an identity (row-major) layout}}
  mla.append_kv %new, %slots, %kv : memref<?x576xbf16>, memref<?xi32>, memref<?x64x576xbf16, strided<[?, 1152, 2]>>
  return
}

// -----

func.func @append_dynamic_width(%new: memref<?x?xbf16>, %slots: memref<?xi32>, %kv: memref<?x64x576xbf16>) {
  // expected-error @+1 {{operand 'kv_new' dim 1 must be static}}
  mla.append_kv %new, %slots, %kv : memref<?x?xbf16>, memref<?xi32>, memref<?x64x576xbf16>
  return
}

// -----

func.func @append_pool_dynamic_width(%new: memref<?x576xbf16>, %slots: memref<?xi32>, %kv: memref<?x64x?xbf16>) {
  // expected-error @+1 {{operand 'kv' dim 2 must be static}}
  mla.append_kv %new, %slots, %kv : memref<?x576xbf16>, memref<?xi32>, memref<?x64x?xbf16>
  return
}

// -----

func.func @append_elem(%new: memref<?x576xi16>, %slots: memref<?xi32>, %kv: memref<?x64x576xi16>) {
  // expected-error @+1 {{operand 'kv_new' element type must be bf16, f16 or f32, got 'i16'}}
  mla.append_kv %new, %slots, %kv : memref<?x576xi16>, memref<?xi32>, memref<?x64x576xi16>
  return
}

// -----

func.func @append_pool_elem(%new: memref<?x576xbf16>, %slots: memref<?xi32>, %kv: memref<?x64x576xf16>) {
  // expected-error @+1 {{operand 'kv' element type 'f16' differs from kv_new element type 'bf16'}}
  mla.append_kv %new, %slots, %kv : memref<?x576xbf16>, memref<?xi32>, memref<?x64x576xf16>
  return
}

// -----

func.func @append_slots_i64(%new: memref<?x576xbf16>, %slots: memref<?xi64>, %kv: memref<?x64x576xbf16>) {
  // expected-error @+1 {{operand 'slot_mapping' element type must be i32, got 'i64'}}
  mla.append_kv %new, %slots, %kv : memref<?x576xbf16>, memref<?xi64>, memref<?x64x576xbf16>
  return
}

// -----

func.func @append_width(%new: memref<?x12xbf16>, %slots: memref<?xi32>, %kv: memref<?x64x12xbf16>) {
  // expected-error @+1 {{row width (kv_new dim 1) must be a positive multiple of 8, got 12}}
  mla.append_kv %new, %slots, %kv : memref<?x12xbf16>, memref<?xi32>, memref<?x64x12xbf16>
  return
}

// -----

func.func @append_pool_width(%new: memref<?x576xbf16>, %slots: memref<?xi32>, %kv: memref<?x64x512xbf16>) {
  // expected-error @+1 {{operand 'kv' dim 2 (row width) is 512, expected 576}}
  mla.append_kv %new, %slots, %kv : memref<?x576xbf16>, memref<?xi32>, memref<?x64x512xbf16>
  return
}

// -----

func.func @append_tokens(%new: memref<4x576xbf16>, %slots: memref<5xi32>, %kv: memref<?x64x576xbf16>) {
  // expected-error @+1 {{operand 'slot_mapping' dim 0 (tokens) is 5, expected 4}}
  mla.append_kv %new, %slots, %kv : memref<4x576xbf16>, memref<5xi32>, memref<?x64x576xbf16>
  return
}

// -----

func.func @append_zero_page(%new: memref<?x576xbf16>, %slots: memref<?xi32>, %kv: memref<?x0x576xbf16>) {
  // expected-error @+1 {{page size (kv dim 1) must be >= 1, got 0}}
  mla.append_kv %new, %slots, %kv : memref<?x576xbf16>, memref<?xi32>, memref<?x0x576xbf16>
  return
}

// -----

func.func @append_latent(%new: memref<?x576xbf16>, %slots: memref<?xi32>, %kv: memref<?x64x576xbf16>) {
  // expected-error @+1 {{latent_dim must be in [1, 576] (the row width), got 600}}
  mla.append_kv %new, %slots, %kv {latent_dim = 600 : i64} : memref<?x576xbf16>, memref<?xi32>, memref<?x64x576xbf16>
  return
}

// -----

func.func @append_latent_zero(%new: memref<?x576xbf16>, %slots: memref<?xi32>, %kv: memref<?x64x576xbf16>) {
  // expected-error @+1 {{latent_dim must be in [1, 576] (the row width), got 0}}
  mla.append_kv %new, %slots, %kv {latent_dim = 0 : i64} : memref<?x576xbf16>, memref<?xi32>, memref<?x64x576xbf16>
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

func.func @tile_page_size(%kv: memref<?x0x576xbf16>, %bt: memref<?x?xi32>, %n: index, %k: memref<64x576xbf16>) {
  // expected-error @+1 {{page size (kv dim 1) must be >= 1, got 0}}
  mla.load_kv_tile %kv[%bt, %n, %n, %n] into %k : memref<?x0x576xbf16>, memref<?x?xi32>, memref<64x576xbf16>
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

// -----

func.func @prefill_layout(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16, strided<[256, 32, 1]>>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{operand 'k' must have an identity (row-major) layout}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16, strided<[256, 32, 1]>>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32>
  return
}

// -----

func.func @prefill_dynamic_heads(%q: memref<?x?x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{operand 'q' dim 1 must be static}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x?x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32>
  return
}

// -----

func.func @prefill_qk_dim(%q: memref<?x4x24xbf16>, %k: memref<?x4x24xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{qk head dim (q dim 2) must be a positive multiple of 16, got 24}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x24xbf16>, memref<?x4x24xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32>
  return
}

// -----

func.func @prefill_v_dim(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x8xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x8xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{value head dim (v dim 2) must be a positive multiple of 16, got 8}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x8xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x8xbf16>, memref<4x?xf32>
  return
}

// -----

func.func @prefill_v_wider(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x48xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x48xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{value head dim (v dim 2 = 48) must not exceed the qk head dim (q dim 2 = 32)}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x48xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x48xbf16>, memref<4x?xf32>
  return
}

// -----

func.func @prefill_elem(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{v element type 'f16' differs from q element type 'bf16'}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32>
  return
}

// -----

func.func @prefill_o_elem(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{o element type must be the q element type ('bf16') or f32, got 'f16'}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xf16>, memref<4x?xf32>
  return
}

// -----

func.func @prefill_k_heads(%q: memref<?x4x32xbf16>, %k: memref<?x2x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{operand 'k' dim 1 (heads) is 2, expected 4}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x2x32xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32>
  return
}

// -----

func.func @prefill_tokens(%q: memref<?x4x32xbf16>, %k: memref<6x4x32xbf16>, %v: memref<5x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{operand 'v' dim 0 (key tokens) is 5, expected 6}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<6x4x32xbf16>, memref<5x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32>
  return
}

// -----

func.func @prefill_lse(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<3x?xf32>) {
  // expected-error @+1 {{operand 'lse' dim 0 (heads) is 3, expected 4}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<3x?xf32>
  return
}

// -----

func.func @prefill_cu(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<3xi32>, %ck: memref<4xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{operand 'cu_seqlens_k' dim 0 (batch + 1) is 4, expected 3}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<3xi32>, memref<4xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32>
  return
}

// -----

func.func @prefill_cu_short(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<1xi32>, %ck: memref<1xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{operand 'cu_seqlens_q' dim 0 (batch + 1) must be >= 2, got 1}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<1xi32>, memref<1xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32>
  return
}

// -----

func.func @prefill_config_split(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{config kv_splits and head_group must be 1 for prefill, got 2 and 1}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l {config = #mla.config<tile_kv = 64, kv_splits = 2, head_group = 1, warps = 4, stages = 1, tile_q = 64>} : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32>
  return
}

// -----

func.func @prefill_config_tile_q(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{config tile_q must be set for prefill}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l {config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 4, stages = 1>} : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32>
  return
}

// -----

// expected-error @+1 {{tile_q must be 0 or a power of two in [16, 256], got 48}}
func.func private @prefill_tile_q_value() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 4, stages = 1, tile_q = 48>}

// -----

// expected-error @+1 {{wgmma must be 0 or 1, got 2}}
func.func private @bad_wgmma() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 4, stages = 1, wgmma = 2>}

// -----

// expected-error @+1 {{blocked_copies must be 0 or 1, got -1}}
func.func private @bad_blocked_copies() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 4, stages = 1, blocked_copies = -1>}

// -----

// expected-error @+1 {{overlap must be 0 or 1, got 2}}
func.func private @bad_overlap() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 4, stages = 2, overlap = 2>}

// -----

func.func @decode_tile_q(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %s: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{config tile_q applies to prefill only, got 64}}
  mla.decode %q, %kv, %bt, %lens, %s, %o, %lse {config = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 4, stages = 1, tile_q = 64>} : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @merge_value_not_contiguous(%op: memref<7x3x128xf32, strided<[768, 256, 2]>>, %lp: memref<7x3xf32>, %o: memref<7x128xf32>, %lse: memref<7xf32>) {
  // expected-error @+1 {{operand 'o_parts' must be contiguous in its last (value) dim}}
  mla.merge %op, %lp, %o, %lse : memref<7x3x128xf32, strided<[768, 256, 2]>>, memref<7x3xf32>, memref<7x128xf32>, memref<7xf32>
  return
}

// -----

func.func @variant_score_type(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32> score {
  ^bb0(%x: f32, %b: index, %h: index, %qp: index, %kp: index):
    %i = arith.constant 1 : i32
    // expected-error @+1 {{the 'score' region must yield ('f32'), got ('i32')}}
    mla.yield %i : i32
  }
  return
}

// -----

func.func @variant_mask_args(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{'mask' region must take (request, head, query position, key position: index), got 2 arguments}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32> mask {
  ^bb0(%b: index, %h: index):
    %t = arith.constant true
    mla.yield %t : i1
  }
  return
}

// -----

// A variant region whose block is empty (found by mla-fuzz-ir: the verifier
// asked an empty block for its terminator).
func.func @variant_mask_empty(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{'mask' region must end in mla.yield}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32> mask {
  ^bb0(%b: index, %h: index, %qpos: index, %kpos: index):
  }
  return
}

// -----

// The right count of arguments, one of the wrong type: reported as a type.
func.func @variant_mask_arg_type(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  // expected-error @+1 {{'mask' region argument 2 has type 'i32', expected 'index' (the region takes request, head, query position, key position: index)}}
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32> mask {
  ^bb0(%b: index, %h: index, %qpos: i32, %kpos: index):
    %t = arith.constant true
    mla.yield %t : i1
  }
  return
}

// -----

func.func @variant_score_arg_type(%q: memref<?x1x4x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %s: f32, %o: memref<?x1x4x512xbf16>, %lse: memref<?x1x4xf32>) {
  // expected-error @+1 {{'score' region argument 0 has type 'f16', expected 'f32'}}
  mla.decode %q, %kv, %bt, %lens, %s, %o, %lse : memref<?x1x4x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x4x512xbf16>, memref<?x1x4xf32> score {
  ^bb0(%x: f16, %b: index, %h: index, %qpos: index, %kpos: index):
    %y = arith.extf %x : f16 to f32
    mla.yield %y : f32
  }
  return
}

// -----

func.func @variant_unsupported_op(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32> score {
  ^bb0(%x: f32, %b: index, %h: index, %qp: index, %kp: index):
    // expected-error @+1 {{'math.sqrt' is not supported in the 'score' region of mla.prefill (supported: arith ops, math.exp, math.exp2, math.log, math.log2, math.tanh, math.absf, math.fma, memref.load)}}
    %r = math.sqrt %x : f32
    mla.yield %r : f32
  }
  return
}

// -----

func.func @variant_sink_yield_count(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32> sink {
  ^bb0(%b: index, %h: index, %qp: index):
    %z = arith.constant 0.0 : f32
    // expected-error @+1 {{the 'sink' region must yield ('f32'), got ('f32', 'f32')}}
    mla.yield %z, %z : f32, f32
  }
  return
}

// -----

func.func @variant_vector_op(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xbf16>, %l: memref<4x?xf32>) {
  mla.prefill %q, %k, %v, %cq, %ck, %s, %o, %l : memref<?x4x32xbf16>, memref<?x4x32xbf16>, memref<?x4x16xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x4x16xbf16>, memref<4x?xf32> score {
  ^bb0(%x: f32, %b: index, %h: index, %qp: index, %kp: index):
    // expected-error @+1 {{variant regions compute scalars; this op yields 'vector<4xf32>'}}
    %vec = arith.constant dense<1.0> : vector<4xf32>
    mla.yield %x : f32
  }
  return
}

// -----

func.func @variant_yield_outside(%x: f32) {
  // expected-error @+1 {{'mla.yield' op expects parent op to be one of 'mla.decode, mla.prefill, mla.online_softmax, mla.attention_step, mla.attention_finish'}}
  mla.yield %x : f32
}

// -----

func.func @softmax_shape(%s: memref<16x32xf32>, %p: memref<16x16xbf16>, %m: memref<16xf32>, %l: memref<16xf32>, %c: memref<16xf32>) {
  // expected-error @+1 {{'mla.online_softmax' op probabilities (16x16) must have the shape of the scores (16x32)}}
  mla.online_softmax %s -> %p state(%m, %l, %c) : memref<16x32xf32>, memref<16x16xbf16>, memref<16xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %col: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @softmax_state(%s: memref<16x32xf32>, %p: memref<16x32xbf16>, %m: memref<8xf32>, %l: memref<16xf32>, %c: memref<16xf32>) {
  // expected-error @+1 {{'mla.online_softmax' op 'm' must have 16 elements (one per score row)}}
  mla.online_softmax %s -> %p state(%m, %l, %c) : memref<16x32xf32>, memref<16x32xbf16>, memref<8xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %col: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @softmax_args(%s: memref<16x32xf32>, %p: memref<16x32xbf16>, %m: memref<16xf32>, %l: memref<16xf32>, %c: memref<16xf32>) {
  // expected-error @+1 {{'mla.online_softmax' op 'body' region must take (row, column: index, score: f32), got 2 arguments}}
  mla.online_softmax %s -> %p state(%m, %l, %c) : memref<16x32xf32>, memref<16x32xbf16>, memref<16xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @softmax_yield(%s: memref<16x32xf32>, %p: memref<16x32xbf16>, %m: memref<16xf32>, %l: memref<16xf32>, %c: memref<16xf32>) {
  mla.online_softmax %s -> %p state(%m, %l, %c) : memref<16x32xf32>, memref<16x32xbf16>, memref<16xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %col: index, %x: f32):
    // expected-error @+1 {{the 'body' region must yield ('f32', 'i1'), got ('f32')}}
    mla.yield %x : f32
  }
  return
}

// -----

func.func @softmax_op(%s: memref<16x32xf32>, %p: memref<16x32xbf16>, %m: memref<16xf32>, %l: memref<16xf32>, %c: memref<16xf32>) {
  mla.online_softmax %s -> %p state(%m, %l, %c) : memref<16x32xf32>, memref<16x32xbf16>, memref<16xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %col: index, %x: f32):
    // expected-error @+1 {{'math.sin' is not supported in the 'body' region of mla.online_softmax}}
    %y = math.sin %x : f32
    %t = arith.constant true
    mla.yield %y, %t : f32, i1
  }
  return
}

// -----

func.func @step_elem(%q: memref<16x64xbf16>, %k: memref<32x64xf16>, %v: memref<32x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_step' op queries ('bf16'), keys ('f16') and values ('bf16') must have one element type}}
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<16x64xbf16>, memref<32x64xf16>, memref<32x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @step_overlap_stages(%q: memref<16x64xbf16>, %k: memref<32x64xbf16>, %v: memref<32x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_step' op overlap needs a pipelined key loop (stages >= 2), got stages 1}}
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 {overlap} : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @step_all_visible_type(%q: memref<16x64xbf16>, %k: memref<32x64xbf16>, %v: memref<32x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>, %all: index) {
  // expected-note @-1 {{prior use here}}
  // expected-error @+1 {{use of value '%all' expects different type than prior uses: 'i1' vs 'index'}}
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 all_visible(%all) : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @step_width(%q: memref<16x64xbf16>, %k: memref<32x48xbf16>, %v: memref<32x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_step' op keys are 48 wide, queries 64: Q·Kᵀ needs one width}}
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<16x64xbf16>, memref<32x48xbf16>, memref<32x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @step_values(%q: memref<16x64xbf16>, %k: memref<32x64xbf16>, %v: memref<16x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_step' op values have 16 rows, the key tile 32}}
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<16x64xbf16>, memref<32x64xbf16>, memref<16x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @step_acc(%q: memref<16x64xbf16>, %k: memref<32x64xbf16>, %v: memref<32x32xbf16>, %acc: memref<16x64xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_step' op accumulator is 64 wide, values 32: acc is query rows x value width}}
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16>, memref<16x64xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @step_rows(%q: memref<8x64xbf16>, %k: memref<32x64xbf16>, %v: memref<32x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_step' op queries have 8 rows, the accumulator 16 (one per query row)}}
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<8x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @step_groups(%q: memref<32x64xbf16>, %k: memref<32x64xbf16>, %v: memref<32x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_step' op query_groups must be [G, stride] with 1 <= G <= stride and G dividing the 16 query rows}}
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 {query_groups = array<i64: 8, 4>} : memref<32x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @step_group_rows(%q: memref<20x64xbf16>, %k: memref<32x64xbf16>, %v: memref<32x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_step' op queries have 20 rows; query_groups [8, 16] over 16 rows reads 24}}
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 {query_groups = array<i64: 8, 16>} : memref<20x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @step_state(%q: memref<16x64xbf16>, %k: memref<32x64xbf16>, %v: memref<32x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<8xf32>) {
  // expected-error @+1 {{'mla.attention_step' op 'l' must have 16 elements (one per query row)}}
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<8xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @step_dynamic(%q: memref<?x64xbf16>, %k: memref<32x64xbf16>, %v: memref<32x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_step' op operand 'q' must have a static shape}}
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<?x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @step_stages(%q: memref<16x64xbf16>, %k: memref<32x64xbf16>, %v: memref<32x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_step' op attribute 'stages' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1 whose maximum value is 4}}
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 5 : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    %t = arith.constant true
    mla.yield %x, %t : f32, i1
  }
  return
}

// -----

func.func @step_region(%q: memref<16x64xbf16>, %k: memref<32x64xbf16>, %v: memref<32x32xbf16>, %acc: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
  ^bb0(%r: index, %c: index, %x: f32):
    // expected-error @+1 {{the 'body' region must yield ('f32', 'i1'), got ('f32')}}
    mla.yield %x : f32
  }
  return
}

// -----

func.func @finish_width(%acc: memref<16x6xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_finish' op width 4 does not divide the 6 accumulator columns}}
  mla.attention_finish %acc state(%m, %l) width 4 : memref<16x6xf32>, memref<16xf32>, memref<16xf32> output {
  ^bb0(%r: index, %c: index, %v: vector<4xf32>):
    mla.yield
  } lse {
  ^bb0(%r: index, %x: f32):
    mla.yield
  }
  return
}

// -----

func.func @finish_rows(%acc: memref<16x8xf32>, %m: memref<16xf32>, %l: memref<8xf32>) {
  // expected-error @+1 {{'mla.attention_finish' op 'l' must have 16 elements (one per accumulator row)}}
  mla.attention_finish %acc state(%m, %l) width 4 : memref<16x8xf32>, memref<16xf32>, memref<8xf32> output {
  ^bb0(%r: index, %c: index, %v: vector<4xf32>):
    mla.yield
  } lse {
  ^bb0(%r: index, %x: f32):
    mla.yield
  }
  return
}

// -----

func.func @finish_dynamic(%acc: memref<?x8xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_finish' op operand 'acc' must have a static shape}}
  mla.attention_finish %acc state(%m, %l) width 4 : memref<?x8xf32>, memref<16xf32>, memref<16xf32> output {
  ^bb0(%r: index, %c: index, %v: vector<4xf32>):
    mla.yield
  } lse {
  ^bb0(%r: index, %x: f32):
    mla.yield
  }
  return
}

// -----

func.func @finish_output_args(%acc: memref<16x8xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_finish' op 'output' region argument 2 has type 'vector<2xf32>', expected 'vector<4xf32>' (the region takes row, column: index, o: vector<4xf32>)}}
  mla.attention_finish %acc state(%m, %l) width 4 : memref<16x8xf32>, memref<16xf32>, memref<16xf32> output {
  ^bb0(%r: index, %c: index, %v: vector<2xf32>):
    mla.yield
  } lse {
  ^bb0(%r: index, %x: f32):
    mla.yield
  }
  return
}

// -----

func.func @finish_lse_args(%acc: memref<16x8xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_finish' op 'lse' region must take (row: index, lse: f32), got 1 arguments}}
  mla.attention_finish %acc state(%m, %l) width 4 : memref<16x8xf32>, memref<16xf32>, memref<16xf32> output {
  ^bb0(%r: index, %c: index, %v: vector<4xf32>):
    mla.yield
  } lse {
  ^bb0(%r: index):
    mla.yield
  }
  return
}

// -----

// An empty region block has no terminator to verify against.
func.func @finish_empty(%acc: memref<16x8xf32>, %m: memref<16xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{'mla.attention_finish' op 'lse' region must end in mla.yield with no operands}}
  mla.attention_finish %acc state(%m, %l) width 4 : memref<16x8xf32>, memref<16xf32>, memref<16xf32> output {
  ^bb0(%r: index, %c: index, %v: vector<4xf32>):
    mla.yield
  } lse {
  ^bb0(%r: index, %x: f32):
  }
  return
}

// -----

func.func @finish_yield(%acc: memref<16x8xf32>, %m: memref<16xf32>, %l: memref<16xf32>, %x: f32) {
  // expected-error @+1 {{'mla.attention_finish' op 'lse' region must end in mla.yield with no operands}}
  mla.attention_finish %acc state(%m, %l) width 4 : memref<16x8xf32>, memref<16xf32>, memref<16xf32> output {
  ^bb0(%r: index, %c: index, %v: vector<4xf32>):
    mla.yield
  } lse {
  ^bb0(%r: index, %y: f32):
    mla.yield %y : f32
  }
  return
}

// -----

// expected-error @+1 {{unknown target 'sm_99' (known: host, sm_80, sm_90a, gfx90a, gfx942, gfx950, gfx90a-emu, gfx942-emu, gfx950-emu)}}
module attributes {mla.target = #mla.target<"sm_99">} {
}

// -----

// expected-error @+1 {{'mla.target' must be a #mla.target, got "gfx942"}}
module attributes {mla.target = "gfx942"} {
}

// -----

func.func @target_on_func() attributes {mla.target = #mla.target<"gfx942">} {
  // expected-error @-1 {{'mla.target' belongs on a builtin.module}}
  return
}

// -----

// expected-error @+1 {{'mla.kernel_info' belongs on a func.func}}
module attributes {mla.kernel_info = {kernel = "decode"}} {
}

// -----

// expected-error @+1 {{'mla.launch_plans' must be an array of #mla.launch_plan, got "x"}}
module attributes {mla.launch_plans = "x"} {
}

// -----

// expected-error @+1 {{unknown mla attribute 'mla.prefetch'}}
module attributes {mla.prefetch = 1 : i64} {
}

// -----

// expected-error @+1 {{'mla.role' of argument 0 must be a string, got 1 : i64}}
func.func @role(%q: memref<?xf32> {mla.role = 1 : i64}) {
  return
}

// -----

func.func @swizzle() {
  // expected-error @+1 {{'mla.swizzle_src' must be an integer buffer id, got "a"}}
  %a = memref.alloca() {mla.swizzle_src = "a"} : memref<8x64xbf16>
  return
}

// -----

func.func @grid_block_size() {
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'mla.grid' op attribute 'block_size' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1}}
  mla.grid in (%c1, %c1, %c1) attributes {block_size = 0 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
  }
  return
}

// -----

func.func @grid_occupancy() {
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'mla.grid' op attribute 'occupancy' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1}}
  mla.grid in (%c1, %c1, %c1) attributes {occupancy = 0 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
  }
  return
}

// -----

// The plan's indices: arguments in order, workspaces after them, launches
// naming only those.
// expected-error @+1 {{launch plan argument 0 has index 1}}
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<1, "q", "memref", "bf16", [?]>] workspaces [] launches []>]} {
}

// -----

// expected-error @+1 {{launch plan workspace 0 has index 3, expected 1}}
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<0, "q", "memref", "bf16", [?]>] workspaces [<3, "f32", [16]>] launches []>]} {
}

// -----

// expected-error @+1 {{launch of 'f_k0' names plan index 2 of 2}}
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<0, "q", "memref", "bf16", [?]>] workspaces [<1, "f32", [16]>] launches [<"f_k0", [0, 2] grid [1, 1, 1]>]>]} {
}

// -----

// expected-error @+2 {{plan argument 0 must be 'memref' or 'scalar', got 'tensor'}}
// expected-error @+1 {{failed to parse MLA_LaunchPlanAttr parameter 'args'}}
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<0, "q", "tensor", "bf16", [?]>] workspaces [] launches []>]} {
}

// -----

// expected-error @+1 {{max_bytes <5, 100> names no buffer of the plan}}
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<0, "q", "memref", "bf16", [?]>] workspaces [] launches [] max_bytes [<5, 100>]>]} {
}

// -----

// Sizes name dims of memref arguments the runtime can read.
// expected-error @+1 {{plan workspace 1 names dim 1 of argument 0 ('q'), which has 1 dims}}
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<0, "q", "memref", "bf16", [?]>] workspaces [<1, "f32", [arg0.1]>] launches []>]} {
}

// -----

// expected-error @+1 {{launch of 'k' grid names argument 3 of 1}}
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<0, "q", "memref", "bf16", [?]>] workspaces [] launches [<"k", [0] grid [arg3.0, 1, 1]>]>]} {
}

// -----

// expected-error @+1 {{launch of 'k' grid names dim 0 of argument 1 ('s'), which has 0 dims}}
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<0, "q", "memref", "bf16", [?]>, <1, "s", "scalar", "f32">] workspaces [] launches [<"k", [0] grid [arg1.0, 1, 1]>]>]} {
}

// -----

// expected-error @+2 {{launch of 'k' needs a grid of 3 sizes, got 2}}
// expected-error @+1 {{failed to parse MLA_LaunchPlanAttr parameter 'launches'}}
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [] workspaces [] launches [<"k", [] grid [1, 1]>]>]} {
}

// -----

// expected-error @+2 {{launch of 'k' needs a block of 3 dims of at most 1024 threads in all}}
// expected-error @+1 {{failed to parse MLA_LaunchPlanAttr parameter 'launches'}}
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [] workspaces [] launches [<"k", [] grid [1, 1, 1] block [64, 32, 1] shared 0>]>]} {
}

// -----

// expected-error @+2 {{plan workspace 1: size divisor 0 is not positive}}
// expected-error @+1 {{failed to parse MLA_LaunchPlanAttr parameter 'workspaces'}}
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<0, "q", "memref", "bf16", [?]>] workspaces [<1, "f32", [arg0.0 ceildiv 0]>] launches []>]} {
}

// -----

// expected-error @+3 {{write (argI.D + C) ceildiv K: the divisor applies to the sum}}
// expected-error @+2 {{failed to parse MLA_PlanWorkspaceAttr parameter 'dims'}}
// expected-error @+1 {{failed to parse MLA_LaunchPlanAttr parameter 'workspaces'}}
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<0, "q", "memref", "bf16", [?]>] workspaces [<1, "f32", [arg0.0 + 1 ceildiv 2]>] launches []>]} {
}

// -----

// expected-error @+3 {{expected a size: an integer or argI.D (dim D of memref argument I), got 'q.0'}}
// expected-error @+2 {{failed to parse MLA_PlanWorkspaceAttr parameter 'dims'}}
// expected-error @+1 {{failed to parse MLA_LaunchPlanAttr parameter 'workspaces'}}
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<0, "q", "memref", "bf16", [?]>] workspaces [<1, "f32", [q.0]>] launches []>]} {
}

// -----

func.func @chunk_plan_rows(%lens: memref<?xi32>, %plan: memref<4x?xi32>) {
  // expected-error @+1 {{operand 'plan' dim 0 must be 3 (the header and C_b row, the chunks' requests, the requests' finished-chunk counters), got 4}}
  mla.chunk_plan %lens, %plan {tile_kv = 64, chunks = 8, balance = 16} : memref<?xi32>, memref<4x?xi32>
  return
}

// -----

func.func @chunk_plan_windows_rows(%lens: memref<?xi32>, %plan: memref<3x?xi32>) {
  // expected-error @+1 {{operand 'plan' dim 0 must be 9 with windows (the header and C_b row, the chunks' requests, P_b, the windows' first chunks, their requests, first keys, key ends and lengths, the requests' finished-chunk counters), got 3}}
  mla.chunk_plan %lens, %plan {tile_kv = 64, chunks = 8, balance = 16, windows} : memref<?xi32>, memref<3x?xi32>
  return
}

// -----

func.func @chunk_plan_adaptive_needs_windows(%lens: memref<?xi32>, %plan: memref<3x?xi32>) {
  // expected-error @+1 {{adaptive needs windows (it writes the windows' plan layout)}}
  mla.chunk_plan %lens, %plan {tile_kv = 64, chunks = 8, balance = 16, adaptive} : memref<?xi32>, memref<3x?xi32>
  return
}

// -----

func.func @chunk_plan_windows_refine(%lens: memref<?xi32>, %plan: memref<9x?xi32>) {
  // expected-error @+1 {{windows has no refinement: refine must be 1, got 4}}
  mla.chunk_plan %lens, %plan {tile_kv = 64, chunks = 8, balance = 16, refine = 4, windows} : memref<?xi32>, memref<9x?xi32>
  return
}

// -----

func.func @chunk_merge_plan_rows(%op: memref<?x1x16x512xf32>, %lp: memref<?x1x16xf32>, %plan: memref<4x?xi32>, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{operand 'plan' dim 0 must be 3 or 9 (mla.chunk_plan's rows), got 4}}
  mla.chunk_merge %op, %lp, %plan, %o, %lse : memref<?x1x16x512xf32>, memref<?x1x16xf32>, memref<4x?xi32>, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @chunk_plan_small(%lens: memref<4xi32>, %plan: memref<3x13xi32>) {
  // expected-error @+1 {{operand 'plan' dim 1 must be at least batch + refine * chunks + 2 = 14, got 13}}
  mla.chunk_plan %lens, %plan {tile_kv = 64, chunks = 8, balance = 16} : memref<4xi32>, memref<3x13xi32>
  return
}

// -----

func.func @chunk_plan_zero(%lens: memref<?xi32>, %plan: memref<3x?xi32>) {
  // expected-error @+1 {{attribute 'chunks' failed to satisfy constraint}}
  mla.chunk_plan %lens, %plan {tile_kv = 64, chunks = 0, balance = 16} : memref<?xi32>, memref<3x?xi32>
  return
}

// -----

func.func @chunk_merge_heads(%op: memref<?x1x8x512xf32>, %lp: memref<?x1x8xf32>, %plan: memref<3x?xi32>, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{operand 'o_parts' dim 2 (heads) is 8, expected 16}}
  mla.chunk_merge %op, %lp, %plan, %o, %lse : memref<?x1x8x512xf32>, memref<?x1x8xf32>, memref<3x?xi32>, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @chunk_merge_value(%op: memref<?x1x16x256xf32>, %lp: memref<?x1x16xf32>, %plan: memref<3x?xi32>, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{operand 'o_parts' dim 3 (value dim) is 256, expected 512}}
  mla.chunk_merge %op, %lp, %plan, %o, %lse : memref<?x1x16x256xf32>, memref<?x1x16xf32>, memref<3x?xi32>, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @chunk_merge_no_groups(%op: memref<?x1x16x512xf32>, %lp: memref<?x1x16xf32>, %plan: memref<3x?xi32>, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{attribute 'groups' failed to satisfy constraint}}
  mla.chunk_merge %op, %lp, %plan, %o, %lse {groups = 0} : memref<?x1x16x512xf32>, memref<?x1x16xf32>, memref<3x?xi32>, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @chunk_merge_many_groups(%op: memref<?x1x16x512xf32>, %lp: memref<?x1x16xf32>, %plan: memref<3x?xi32>, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{groups must be in [1, 16], got 17}}
  mla.chunk_merge %op, %lp, %plan, %o, %lse {groups = 17} : memref<?x1x16x512xf32>, memref<?x1x16xf32>, memref<3x?xi32>, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @chunks_need_one_split(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{kv_chunks (the length-aware schedule) needs kv_splits = 1 and min_workgroups = 0, got kv_splits = 4, min_workgroups = 0}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse {config = #mla.config<tile_kv = 64, kv_splits = 4, head_group = 16, warps = 1, stages = 1, kv_chunks = 8>} : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

// expected-error @+1 {{chunk_balance must be in [1, 2^20], got 0}}
func.func private @bad_chunk_balance() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 1, stages = 1, kv_chunks = 8, chunk_balance = 0>}

// -----

// expected-error @+1 {{merge_groups must be in [1, 16], got 0}}
func.func private @bad_merge_groups() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 1, stages = 1, kv_chunks = 8, merge_groups = 0>}

// -----

// expected-error @+1 {{merge_groups applies to the length-aware schedule only (kv_chunks > 0)}}
func.func private @merge_groups_need_chunks() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 4, head_group = 1, warps = 1, stages = 1, merge_groups = 4>}

// -----

// expected-error @+1 {{chunk_windows must be 0, 1 or 2, got 3}}
func.func private @bad_chunk_windows() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 1, stages = 1, kv_chunks = 8, chunk_windows = 3>}

// -----

// expected-error @+1 {{chunk_windows applies to the length-aware schedule only (kv_chunks > 0)}}
func.func private @chunk_windows_need_chunks() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 4, head_group = 1, warps = 1, stages = 1, chunk_windows = 1>}

// -----

// expected-error @+1 {{fused_merge must be 0 or 1, got 2}}
func.func private @bad_fused_merge() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 1, stages = 1, kv_chunks = 8, fused_merge = 2>}

// -----

// expected-error @+1 {{lead_scores must be 0, 1, 2, 3 or 4, got 5}}
func.func private @bad_lead_scores() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 64, warps = 8, stages = 2, lead_scores = 5>}

// -----

// expected-error @+1 {{fused_merge applies to the length-aware schedule only (kv_chunks > 0)}}
func.func private @fused_merge_needs_chunks() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 4, head_group = 1, warps = 1, stages = 1, fused_merge = 1>}

// -----

// expected-error @+1 {{merge_groups applies to the merge launch; fused_merge = 1 merges in the chunks kernel (merge_groups must be 1, got 4)}}
func.func private @fused_merge_without_groups() attributes {cfg = #mla.config<tile_kv = 64, kv_splits = 1, head_group = 1, warps = 1, stages = 1, kv_chunks = 8, merge_groups = 4, fused_merge = 1>}

// -----

func.func @workgroups_need_chunks(%q: memref<?x1x16x576xbf16>, %kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: f32, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  // expected-error @+1 {{workgroups applies to the length-aware schedule only (kv_chunks > 0)}}
  mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse {config = #mla.config<tile_kv = 64, kv_splits = 4, head_group = 16, warps = 1, stages = 1, workgroups = 3>} : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}

// -----

func.func @fresh_tiles_on_if(%c: i1) {
  // expected-error @+1 {{'mla.fresh_tiles' belongs on a scf.for}}
  scf.if %c {
  } {mla.fresh_tiles}
  return
}

// -----

func.func @unsynchronized_on_for(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'mla.unsynchronized' belongs on a scf.parallel}}
  scf.for %i = %c0 to %n step %c1 {
  } {mla.unsynchronized}
  return
}

// -----

func.func @next_tile_not_unit(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'mla.next_tile' must be a unit attribute, got 1 : i64}}
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.reduce
  } {mla.next_tile = 1}
  return
}
