// RUN: mla-opt %s --mla-select-config=target=sm_90a --mla-outline-gpu-kernels | FileCheck %s
// RUN: mla-opt %s --mla-select-config=target=gfx942 --mla-outline-gpu-kernels | FileCheck %s --check-prefix=AMD

// A grid's `occupancy` (workgroups one compute unit holds at once) becomes
// NVIDIA's minimum resident blocks per SM and AMD's minimum waves per SIMD:
// 8 workgroups of 256 threads on wave64 are 32 waves over 4 SIMDs, 8 each;
// 8 of 64 threads, 8 waves, 2 each. A grid without it gets neither.
// CHECK-LABEL: gpu.func @f_k0
// CHECK-SAME:    nvvm.minctasm = 8 : i32
// CHECK-LABEL: gpu.func @f_k1
// CHECK-SAME:    nvvm.minctasm = 8 : i32
// CHECK-LABEL: gpu.func @f_k2
// CHECK-NOT:     nvvm.minctasm
// CHECK:         gpu.return
// AMD-LABEL: gpu.func @f_k0
// AMD-SAME:    rocdl.waves_per_eu = 8 : i32
// AMD-LABEL: gpu.func @f_k1
// AMD-SAME:    rocdl.waves_per_eu = 2 : i32
// AMD-LABEL: gpu.func @f_k2
// AMD-NOT:     rocdl.waves_per_eu
// AMD:         gpu.return
func.func @f(%a: memref<?xf32> {mla.role = "q"}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %a, %c0 : memref<?xf32>
  mla.grid in (%n, %c1, %c1) attributes {block_size = 256 : i64, occupancy = 8 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %v = memref.load %a[%x] : memref<?xf32>
    memref.store %v, %a[%x] : memref<?xf32>
  }
  mla.grid in (%n, %c1, %c1) attributes {block_size = 64 : i64, occupancy = 8 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %v = memref.load %a[%x] : memref<?xf32>
    memref.store %v, %a[%x] : memref<?xf32>
  }
  mla.grid in (%n, %c1, %c1) attributes {block_size = 64 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %v = memref.load %a[%x] : memref<?xf32>
    memref.store %v, %a[%x] : memref<?xf32>
  }
  return
}

