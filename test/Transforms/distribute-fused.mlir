// RUN: mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=tile_q=32,tile_kv=32,warps=2,stages=2" --mla-tile --mla-distribute | FileCheck %s
// RUN: mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=tile_q=32,tile_kv=32,warps=8" --mla-tile --mla-distribute | FileCheck %s --check-prefix=PHASES
// RUN: mla-opt %s -split-input-file --mla-select-config="target=gfx942 perf-config=tile_q=32,tile_kv=32,warps=2" --mla-tile --mla-distribute | FileCheck %s --check-prefix=AMD

// NVIDIA: the key loop's Q·Kᵀ, online softmax and P·V become one
// register-resident step. Two warps own one 16-row block each; the loop
// carries 4 value fragments x 4 accumulators + m, l of two rows per lane;
// the accumulator's zero-fill is gone (its tile is only written after the
// loop). Two stages: the copy of the next key/value tiles is issued first
// and only waited for down to the groups still in flight (K: 1, V: 2).
// CHECK-LABEL: func @prefill
// CHECK-NOT: mla.online_softmax
// CHECK-NOT: mla.matmul
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32
// CHECK: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 2 : i32}
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: nvvm.mma.sync
//   Row maxima over the quad: xor 1 and 2.
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
//   P to bf16 pairs in registers, V read transposed.
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK: nvvm.mma.sync
// CHECK: gpu.barrier
// CHECK: scf.yield
//   After the loop: the per-lane sums reduced over the quad, state back to
//   shared memory for the epilogue.
// CHECK: gpu.shuffle  xor
// CHECK: memref.store
// CHECK: gpu.barrier

// With 8 warps per 2 row blocks (4 warps would share each row's scores)
// the step stays in shared-memory phases.
// PHASES-LABEL: func @prefill
// PHASES: scf.for
// PHASES: nvvm.mma.sync
// PHASES: gpu.barrier
// PHASES: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// PHASES-NOT: gpu.shuffle

// On AMD, the same op as parallel phases between the two MFMA products.
// AMD-LABEL: func @prefill
// AMD-NOT: mla.online_softmax
// AMD: amdgpu.mfma
// AMD: llvm.call_intrinsic "llvm.amdgcn.exp2.f32"
// AMD: amdgpu.mfma
func.func @prefill(%q: memref<?x2x64xbf16>, %k: memref<?x2x64xbf16>, %v: memref<?x2x32xbf16>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x2x32xbf16>, %lse: memref<2x?xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal} : memref<?x2x64xbf16>, memref<?x2x64xbf16>, memref<?x2x32xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x2x32xbf16>, memref<2x?xf32>
  return
}

