// RUN: mla-opt %s -split-input-file --mla-select-config=target=sm_90a --mla-outline-gpu-kernels | FileCheck %s
// RUN: not mla-opt %s -split-input-file --mla-select-config=target=sm_80 --mla-outline-gpu-kernels 2>&1 | FileCheck %s --check-prefix=SMALL

// A distributed grid becomes a gpu.func kernel reading gpu.block_id; its
// tiles move to dynamic shared memory at 16-byte aligned offsets (largest
// first); the plan records block size and shared bytes.
// CHECK: module attributes {gpu.container_module, mla.launch_plans = [#mla.launch_plan<"f" args [<0, "q", "memref", "bf16", [?, 16]>, <1, "arg1", "memref", "f32", [?, 16]>] workspaces [] launches [<"f_k0", [0, 1] grid [arg0.0, 1, 1] block [64, 1, 1] shared 168064>]>], mla.target = #mla.target<"sm_90a">}
// CHECK: gpu.module @mla_kernels
// CHECK:   gpu.func @f_k0(%[[Q:.*]]: memref<?x16xbf16>, %[[O:.*]]: memref<?x16xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>}
// CHECK:     %[[SMEM:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK:     %[[X:.*]] = gpu.block_id x
// CHECK:     %[[T0:.*]] = memref.view %[[SMEM]][%c168000{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<3x5xf32, #gpu.address_space<workgroup>>
// CHECK:     %[[T1:.*]] = memref.view %[[SMEM]][%c0{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<21000x4xbf16, #gpu.address_space<workgroup>>
// CHECK:     memref.subview %[[T1]][0, 0] [8, 2] [1, 1] : memref<21000x4xbf16, #gpu.address_space<workgroup>> to memref<8x2xbf16, strided<[4, 1]>, #gpu.address_space<workgroup>>
// CHECK:     memref.load %[[Q]][%[[X]], %{{.*}}]
// CHECK:     gpu.return
// SMALL: error: kernel needs 168064 bytes of shared memory, more than the target's 166912; choose smaller tiles (tile_kv, tile_q, head_group) or fewer stages
func.func @f(%q: memref<?x16xbf16> {mla.role = "q"}, %o: memref<?x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = memref.dim %q, %c0 : memref<?x16xbf16>
  mla.grid in (%b, %c1, %c1) attributes {block_size = 64 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %t0 = memref.alloca() : memref<3x5xf32>
    %t1 = memref.alloca() : memref<21000x4xbf16>
    %sub = memref.subview %t1[0, 0] [8, 2] [1, 1] : memref<21000x4xbf16> to memref<8x2xbf16, strided<[4, 1]>>
    %v = memref.load %q[%x, %c0] : memref<?x16xbf16>
    memref.store %v, %sub[%c0, %c0] : memref<8x2xbf16, strided<[4, 1]>>
    %w = memref.load %sub[%c1, %c1] : memref<8x2xbf16, strided<[4, 1]>>
    %e = arith.extf %w : bf16 to f32
    memref.store %e, %t0[%c0, %c0] : memref<3x5xf32>
    memref.store %e, %o[%x, %c0] : memref<?x16xf32>
  }
  return
}

// -----

// Tiles whose uses a barrier separates share memory: %a is only used in
// the loop (whose body ends in a barrier), %c only after it, so %c reuses
// %a's bytes; %b is used on both sides and keeps its own. Without a
// barrier between them (%d after %c), tiles do not overlap.
// CHECK: <"g_k0", [0] grid [1, 1, 1] block [32, 1, 1] shared 320>
// CHECK-LABEL: gpu.func @g_k0
// CHECK-DAG: memref.view %{{.*}}[%c0{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.view %{{.*}}[%c256{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.view %{{.*}}[%c0{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<32xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.view %{{.*}}[%c128{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<8xf32, #gpu.address_space<workgroup>>
func.func @g(%o: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 1.0 : f32
  mla.grid in (%c1, %c1, %c1) attributes {block_size = 32 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %a = memref.alloca() : memref<64xf32>
    %b = memref.alloca() : memref<16xf32>
    %c = memref.alloca() : memref<32xf32>
    %d = memref.alloca() : memref<8xf32>
    memref.store %f, %b[%c0] : memref<16xf32>
    scf.for %i = %c0 to %c4 step %c1 {
      memref.store %f, %a[%i] : memref<64xf32>
      gpu.barrier
    }
    memref.store %f, %c[%c0] : memref<32xf32>
    %v = memref.load %b[%c0] : memref<16xf32>
    memref.store %v, %d[%c0] : memref<8xf32>
    memref.store %v, %o[%c0] : memref<4xf32>
  }
  return
}

// -----

// A loop whose body does not end in a barrier separates nothing: %c, used
// after it, may not reuse the bytes of %a, used in it.
// CHECK: <"h_k0", [0] grid [1, 1, 1] block [32, 1, 1] shared 384>
// CHECK-LABEL: gpu.func @h_k0
// CHECK-DAG: memref.view %{{.*}}[%c0{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.view %{{.*}}[%c256{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<32xf32, #gpu.address_space<workgroup>>
func.func @h(%o: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 1.0 : f32
  mla.grid in (%c1, %c1, %c1) attributes {block_size = 32 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %a = memref.alloca() : memref<64xf32>
    %c = memref.alloca() : memref<32xf32>
    scf.for %i = %c0 to %c4 step %c1 {
      gpu.barrier
      memref.store %f, %a[%i] : memref<64xf32>
    }
    memref.store %f, %c[%c0] : memref<32xf32>
    %v = memref.load %c[%c0] : memref<32xf32>
    memref.store %v, %o[%c0] : memref<4xf32>
  }
  return
}

// -----

// A tile with an alignment (the 1024-byte aligned swizzled operand tiles of
// warpgroup MMA) is placed at a multiple of it: the 2080-byte tile takes
// offset 0, the aligned 512-byte tile the next multiple of 1024, not 2080.
// CHECK: <"al_k0", [0] grid [1, 1, 1] block [32, 1, 1] shared 3584>
// CHECK-LABEL: gpu.func @al_k0
// CHECK-DAG: memref.view %{{.*}}[%c0{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<520xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.view %{{.*}}[%c3072{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4x64xbf16, #gpu.address_space<workgroup>>
func.func @al(%o: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  %h = arith.constant 1.0 : bf16
  mla.grid in (%c1, %c1, %c1) attributes {block_size = 32 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %a = memref.alloca() : memref<520xf32>
    %s = memref.alloca() {alignment = 1024 : i64} : memref<4x64xbf16>
    memref.store %f, %a[%c0] : memref<520xf32>
    memref.store %h, %s[%c0, %c0] : memref<4x64xbf16>
    %v = memref.load %a[%c1] : memref<520xf32>
    %w = memref.load %s[%c1, %c1] : memref<4x64xbf16>
    %e = arith.extf %w : bf16 to f32
    %r = arith.addf %v, %e : f32
    memref.store %r, %o[%c0] : memref<4xf32>
  }
  return
}
