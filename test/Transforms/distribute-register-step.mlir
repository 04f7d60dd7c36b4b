// RUN: mla-opt %s -split-input-file --mla-select-config=target=gfx942 --mla-distribute="default-warps=2" | FileCheck %s --check-prefix=KEYS
// RUN: mla-opt %s -split-input-file --mla-select-config=target=gfx942 --mla-distribute="default-warps=4" | FileCheck %s --check-prefixes=ROWS,VALUES
// RUN: mla-opt %s -split-input-file --mla-select-config=target=gfx942 --mla-distribute="default-warps=1" | FileCheck %s --check-prefix=PAD
// RUN: mla-opt %s -split-input-file --mla-select-config=target=gfx950 --mla-distribute="default-warps=1" | FileCheck %s --check-prefix=K32
// RUN: mla-opt %s -split-input-file --mla-select-config=target=gfx942 --mla-distribute="default-warps=2" | FileCheck %s --check-prefix=FIN
// RUN: mla-opt %s -split-input-file --mla-select-config=target=gfx942 --mla-distribute="default-warps=2" | FileCheck %s --check-prefix=SKIP

// The register step (lib/Transforms/GPU/RegisterStep.cpp) from hand-written
// blockwise IR: mla.attention_step as the transposed products Sᵀ = K·Qᵀ
// and Oᵀ += Vᵀ·Pᵀ on MFMA, the softmax on the accumulators, P handed to
// the second product in registers.

// Two waves split the 32 keys (16 each, 16x16x16): Q in registers before
// the loop, then in the loop only the K and V tiles are read from LDS; the
// row maximum (arith.maxnumf: one v_max_f32; a NaN score still reaches
// the output through its probability) crosses the lanes of one column (XOR
// 16, 32); after the loop
// the two waves' (m, l, O) meet in a 2x2x16 buffer.
// KEYS-LABEL: func @step
// KEYS-NOT: mla.attention_step
// KEYS: memref.alloca() : memref<2x2x16xf32, #gpu.address_space<workgroup>>
// KEYS: vector.load {{.*}} : memref<16x64xbf16, #gpu.address_space<workgroup>>, vector<4xbf16>
// KEYS: gpu.barrier
// KEYS: scf.for {{.*}} -> (vector<4xf32>, vector<4xf32>, f32, f32)
// KEYS-NOT: memref.store
// KEYS-NOT: vector.store
// KEYS: vector.load {{.*}} : memref<32x64xbf16, #gpu.address_space<workgroup>>, vector<4xbf16>
// KEYS: amdgpu.mfma 16x16x16
// KEYS-NOT: arith.maximumf
// KEYS: arith.maxnumf
// KEYS: gpu.shuffle xor %{{.*}}, %c16_i32
// KEYS-NEXT: arith.maxnumf
// KEYS: gpu.shuffle xor %{{.*}}, %c32_i32
// KEYS-NEXT: arith.maxnumf
// KEYS: llvm.call_intrinsic "llvm.amdgcn.exp2.f32"
// KEYS: arith.truncf %{{.*}} : f32 to bf16
// KEYS: amdgpu.mfma 16x16x16
// KEYS: gpu.barrier
// KEYS-NEXT: scf.yield
//   After the loop: partial sums across the lanes of a column, then the
//   waves combine.
// KEYS: gpu.shuffle xor
// KEYS: memref.store {{.*}} : memref<2x2x16xf32, #gpu.address_space<workgroup>>
// KEYS: gpu.barrier
// KEYS: memref.store {{.*}} : memref<16x32xf32, strided<[36, 1]>, #gpu.address_space<workgroup>>
// KEYS: gpu.barrier
// PAD-LABEL: func @step
// K32-LABEL: func @step
// K32: amdgpu.mfma 16x16x32
// K32-NOT: memref<1x2x16xf32
// Four waves on the same step: two key waves x two value waves (one 16-
// column block of the 32 each). wave = rowWave + rowWaves * (keyWave +
// keyWaves * valueWave), and a value wave's columns start at valueWave *
// 16; the loop carries one output block a wave. The two value waves of a
// key range split the scores' head dim (a score split): each computes
// two of the four k steps of Sᵀ (its head dims from valueWave * 32, the
// query fragments of those alone), writes its partial scores to its slot
// of a [wave][block][lane] exchange, and after a barrier adds the other
// value wave's (wave + 2 mod 4) before the softmax.
// VALUES-LABEL: func @step
// VALUES: memref.alloca() : memref<2x2x16xf32, #gpu.address_space<workgroup>>
// VALUES: memref.alloca() : memref<4x1x64x4xf32, #gpu.address_space<workgroup>>
// VALUES: %[[REST:[0-9]+]] = arith.divui %{{[0-9]+}}, %c1{{(_[0-9]+)?}} : index
// VALUES: arith.remui %[[REST]], %c2{{(_[0-9]+)?}} : index
// VALUES: %[[VW:[0-9]+]] = arith.divui %[[REST]], %c2{{(_[0-9]+)?}} : index
// VALUES: arith.muli %[[VW]], %c32{{(_[0-9]+)?}} : index
// VALUES: arith.muli %[[VW]], %c16{{(_[0-9]+)?}} : index
// VALUES-COUNT-2: vector.load {{.*}} : memref<16x64xbf16, #gpu.address_space<workgroup>>, vector<4xbf16>
// VALUES-NOT: memref<16x64xbf16
// VALUES: scf.for {{.*}} -> (vector<4xf32>, f32, f32)
// VALUES-COUNT-2: amdgpu.mfma 16x16x16
// VALUES-NOT: amdgpu.mfma
// VALUES: vector.store %[[PART:[0-9]+]], %{{.*}} : memref<4x1x64x4xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// VALUES-NEXT: gpu.barrier
// VALUES: %[[OTHER:[0-9]+]] = vector.load %{{.*}} : memref<4x1x64x4xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// VALUES-NEXT: arith.addf %[[PART]], %[[OTHER]] : vector<4xf32>
// VALUES: llvm.amdgcn.exp2.f32
// VALUES: amdgpu.mfma 16x16x16
func.func @step(%n: index, %scale: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %q = memref.alloca() : memref<16x64xbf16>
    %k = memref.alloca() : memref<32x64xbf16>
    %v = memref.subview %k[0, 0] [32, 32] [1, 1] : memref<32x64xbf16> to memref<32x32xbf16, strided<[64, 1]>>
    %accb = memref.alloca() : memref<16x36xf32>
    %acc = memref.subview %accb[0, 0] [16, 32] [1, 1] : memref<16x36xf32> to memref<16x32xf32, strided<[36, 1]>>
    %m = memref.alloca() : memref<16xf32>
    %l = memref.alloca() : memref<16xf32>
    scf.for %t = %c0 to %n step %c32 {
      mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16, strided<[64, 1]>>, memref<16x32xf32, strided<[36, 1]>>, memref<16xf32>, memref<16xf32> {
      ^bb0(%r: index, %c: index, %s: f32):
        %sx = arith.mulf %s, %scale : f32
        %key = arith.addi %t, %c : index
        %vis = arith.cmpi ult, %key, %n : index
        mla.yield %sx, %vis : f32, i1
      }
    }
  }
  return
}

// -----

// 64 rows on four waves: four row waves of 16 rows on 16x16x16, each over
// all 64 keys. Two row x two key waves on 32x32x8 would take as many
// passes of the matrix pipe (RegisterStepPlan::issueEstimate); of plans as
// fast, the one without key waves wins (chooseRegisterStepPlan): no
// combine buffer. A query's row maximum crosses its column's lanes (XOR
// 16, 32).
// ROWS-LABEL: func @rows64
// ROWS-NOT: memref<2x2x64xf32
// ROWS: scf.for {{.*}} -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, f32, f32)
// ROWS-NOT: memref.store
// ROWS: amdgpu.mfma 16x16x16
// ROWS: gpu.shuffle xor %{{.*}}, %c16_i32
// ROWS: gpu.shuffle xor %{{.*}}, %c32_i32
// ROWS-NOT: memref.store
// ROWS: scf.yield
// KEYS-LABEL: func @rows64
// PAD-LABEL: func @rows64
// K32-LABEL: func @rows64
func.func @rows64(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %q = memref.alloca() : memref<64x64xbf16>
    %k = memref.alloca() : memref<64x64xbf16>
    %v = memref.alloca() : memref<64x64xbf16>
    %acc = memref.alloca() : memref<64x64xf32>
    %m = memref.alloca() : memref<64xf32>
    %l = memref.alloca() : memref<64xf32>
    scf.for %t = %c0 to %n step %c64 {
      mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<64x64xbf16>, memref<64x64xbf16>, memref<64x64xbf16>, memref<64x64xf32>, memref<64xf32>, memref<64xf32> {
      ^bb0(%r: index, %c: index, %s: f32):
        %key = arith.addi %t, %c : index
        %vis = arith.cmpi ule, %key, %r : index
        mla.yield %s, %vis : f32, i1
      }
    }
  }
  return
}

// -----

// Eight rows on one wave: the 16-query MFMA column block is padded; the
// padded queries read zeros, evaluate the element region on the last real
// row and store nothing. One wave: no combine buffer.
// PAD-LABEL: func @padded
// PAD-NOT: memref.alloca() : memref<1x2
// PAD: arith.cmpi ult, %{{.*}}, %c8
// PAD: arith.minui %{{.*}}, %c7
// PAD: scf.for {{.*}} -> (vector<4xf32>, vector<4xf32>, f32, f32)
// PAD: amdgpu.mfma 16x16x16
// PAD: scf.yield
// PAD: scf.if
// PAD: memref.store {{.*}} : memref<8xf32, #gpu.address_space<workgroup>>
// FIN-LABEL: func @padded
// KEYS-LABEL: func @padded
// ROWS-LABEL: func @padded
// K32-LABEL: func @padded
func.func @padded(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %q = memref.alloca() : memref<8x64xbf16>
    %k = memref.alloca() : memref<32x64xbf16>
    %v = memref.subview %k[0, 0] [32, 32] [1, 1] : memref<32x64xbf16> to memref<32x32xbf16, strided<[64, 1]>>
    %acc = memref.alloca() : memref<8x32xf32>
    %m = memref.alloca() : memref<8xf32>
    %l = memref.alloca() : memref<8xf32>
    scf.for %t = %c0 to %n step %c32 {
      mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<8x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16, strided<[64, 1]>>, memref<8x32xf32>, memref<8xf32>, memref<8xf32> {
      ^bb0(%r: index, %c: index, %s: f32):
        %key = arith.addi %t, %c : index
        %vis = arith.cmpi ult, %key, %n : index
        mla.yield %s, %vis : f32, i1
      }
    }
  }
  return
}

// -----

// 32 rows on two waves: two row waves of 16 queries, one key wave each, so
// the mla.attention_finish after the loop is lowered from the output
// registers: each lane scales its runs of four value columns by 1 / l and
// stores them through the output region; the lane of a query's first C
// row writes its LSE. The accumulator tile is never written (and is
// erased). A run is element e of four value blocks of a group (64 value
// columns: one group of 4 blocks; with fewer blocks than a run is wide the
// accumulator goes through its tile).
// FIN-LABEL: func @finish
// FIN-NOT: memref<32x64xf32, #gpu.address_space<workgroup>>
// FIN: scf.for {{.*}} -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, f32, f32)
//   The output is rescaled only on lanes whose row maximum moved.
// FIN: %[[MOVED:.*]] = arith.cmpf ult, %{{.*}}, %cst{{.*}} : f32
// FIN: scf.if %[[MOVED]] -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>) {
// FIN:   arith.mulf %{{.*}} : vector<4xf32>
// FIN: } else {
//   Vᵀ's fragments: one 4-column read of V per key for the four blocks.
// FIN-NOT: memref.load {{.*}} : memref<32x64xbf16
// FIN: vector.load {{.*}} : memref<32x64xbf16, strided<[96, 1]>, #gpu.address_space<workgroup>>, vector<4xbf16>
// FIN-NOT: memref.load {{.*}} : memref<32x64xbf16
// FIN: scf.yield
// FIN: memref.store {{.*}} : memref<32xf32, #gpu.address_space<workgroup>>
// FIN: gpu.barrier
// FIN: arith.divf
// FIN: llvm.amdgcn.log.f32
// FIN: vector.store %{{.*}} : memref<32x64xf32>, vector<4xf32>
// FIN: vector.store %{{.*}} : memref<32x64xf32>, vector<4xf32>
// FIN: scf.if
// FIN: memref.store %{{.*}} : memref<32xf32>
// FIN: gpu.barrier
// FIN-NOT: mla.attention_finish
func.func @finish(%n: index, %o: memref<32x64xf32>, %lse: memref<32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %zero = arith.constant dense<0.0> : vector<4xf32>
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %q = memref.alloca() : memref<32x96xbf16>
    %k = memref.alloca() : memref<32x96xbf16>
    %v = memref.subview %k[0, 0] [32, 64] [1, 1] : memref<32x96xbf16> to memref<32x64xbf16, strided<[96, 1]>>
    %acc = memref.alloca() : memref<32x64xf32>
    %m = memref.alloca() : memref<32xf32>
    %l = memref.alloca() : memref<32xf32>
    scf.parallel (%i, %j) = (%c0, %c0) to (%c32, %c16) step (%c1, %c1) {
      %col = arith.muli %j, %c4 : index
      vector.store %zero, %acc[%i, %col] : memref<32x64xf32>, vector<4xf32>
      scf.reduce
    }
    scf.for %t = %c0 to %n step %c32 {
      mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<32x96xbf16>, memref<32x96xbf16>, memref<32x64xbf16, strided<[96, 1]>>, memref<32x64xf32>, memref<32xf32>, memref<32xf32> {
      ^bb0(%r: index, %c: index, %s: f32):
        %key = arith.addi %t, %c : index
        %vis = arith.cmpi ult, %key, %n : index
        mla.yield %s, %vis : f32, i1
      }
    }
    mla.attention_finish %acc state(%m, %l) width 4 : memref<32x64xf32>, memref<32xf32>, memref<32xf32> output {
    ^bb0(%r: index, %c: index, %ov: vector<4xf32>):
      vector.store %ov, %o[%r, %c] : memref<32x64xf32>, vector<4xf32>
      mla.yield
    } lse {
    ^bb0(%r: index, %lv: f32):
      memref.store %lv, %lse[%r] : memref<32xf32>
      mla.yield
    }
  }
  return
}

// -----

// A mask's tile skip: mla-tile wraps a masked key tile's copy and step in an
// scf.if on "some key of the tile is visible". The register step carries
// its state through it: the if yields the next state, or the current one
// for a skipped tile (GPU/GPUCommon.cpp, carryStepState). No score or
// probability tile: the softmax stays on the accumulators.
// SKIP-LABEL: func @skip
// SKIP-NOT: memref<16x36xf32
// SKIP: scf.for {{.*}} -> (vector<4xf32>, vector<4xf32>, f32, f32)
// SKIP: %[[NEXT:[0-9]+]]:4 = scf.if %{{.*}} -> (vector<4xf32>, vector<4xf32>, f32, f32)
// SKIP: amdgpu.mfma 16x16x16
// SKIP: amdgpu.mfma 16x16x16
// SKIP: scf.yield %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : vector<4xf32>, vector<4xf32>, f32, f32
// SKIP-NEXT: } else {
// SKIP-NEXT: scf.yield %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : vector<4xf32>, vector<4xf32>, f32, f32
// SKIP: scf.yield %[[NEXT]]#0, %[[NEXT]]#1, %[[NEXT]]#2, %[[NEXT]]#3
// KEYS-LABEL: func @skip
// PAD-LABEL: func @skip
// K32-LABEL: func @skip
// FIN-LABEL: func @skip
func.func @skip(%n: index, %lo: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  mla.grid in (%c1, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %q = memref.alloca() : memref<16x64xbf16>
    %k = memref.alloca() : memref<32x64xbf16>
    %v = memref.subview %k[0, 0] [32, 32] [1, 1] : memref<32x64xbf16> to memref<32x32xbf16, strided<[64, 1]>>
    %acc = memref.alloca() : memref<16x32xf32>
    %m = memref.alloca() : memref<16xf32>
    %l = memref.alloca() : memref<16xf32>
    scf.for %t = %c0 to %n step %c32 {
      %end = arith.addi %t, %c32 : index
      %any = arith.cmpi ugt, %end, %lo : index
      scf.if %any {
        mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 1 : memref<16x64xbf16>, memref<32x64xbf16>, memref<32x32xbf16, strided<[64, 1]>>, memref<16x32xf32>, memref<16xf32>, memref<16xf32> {
        ^bb0(%r: index, %c: index, %s: f32):
          %key = arith.addi %t, %c : index
          %vis = arith.cmpi uge, %key, %lo : index
          mla.yield %s, %vis : f32, i1
        }
      }
    }
  }
  return
}
