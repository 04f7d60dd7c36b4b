// RUN: mla-opt %s --mla-select-config=target=sm_90a --mla-outline-gpu-kernels | FileCheck %s
// RUN: mla-opt %s --mla-select-config=target=sm_80 --mla-outline-gpu-kernels | FileCheck %s --check-prefix=SM80
// RUN: mla-opt %s --mla-select-config=target=gfx942 --mla-outline-gpu-kernels | FileCheck %s --check-prefix=SM80

// Programmatic dependent launch on sm_90a: the second and third kernels
// wait for the ones before them at their start and their launches are
// `dependent`; the first two let their dependents start early. sm_80 and
// AMD: neither.
// CHECK: launches [<"f_k0", [0, 1] grid [arg0.0, 1, 1] block [64, 1, 1] shared 0>, <"f_k1", [1, 0] grid [arg0.0, 1, 1] block [64, 1, 1] shared 0 dependent >, <"f_k2", [0, 1] grid [1, 1, 1] block [32, 1, 1] shared 0 dependent >]
// CHECK-LABEL: gpu.func @f_k0
// CHECK-NOT:     nvvm.griddepcontrol wait
// CHECK:         nvvm.griddepcontrol launch_dependents
// CHECK-NEXT:    gpu.block_id x
// CHECK-LABEL: gpu.func @f_k1
// CHECK-NEXT:    nvvm.griddepcontrol wait
// CHECK-NEXT:    nvvm.griddepcontrol launch_dependents
// CHECK-NEXT:    gpu.block_id x
// CHECK-LABEL: gpu.func @f_k2
// CHECK-NEXT:    nvvm.griddepcontrol wait
// CHECK-NEXT:    gpu.block_id x
// CHECK-NOT:     nvvm.griddepcontrol
// SM80-NOT: dependent
// SM80-NOT: griddepcontrol
func.func @f(%a: memref<?xf32> {mla.role = "q"}, %b: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %a, %c0 : memref<?xf32>
  mla.grid in (%n, %c1, %c1) attributes {block_size = 64 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %v = memref.load %a[%x] : memref<?xf32>
    memref.store %v, %b[%x] : memref<?xf32>
  }
  mla.grid in (%n, %c1, %c1) attributes {block_size = 64 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %v = memref.load %b[%x] : memref<?xf32>
    memref.store %v, %a[%x] : memref<?xf32>
  }
  mla.grid in (%c1, %c1, %c1) attributes {block_size = 32 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %v = memref.load %a[%c0] : memref<?xf32>
    memref.store %v, %b[%c0] : memref<?xf32>
  }
  return
}

// From the third kernel on, loads of memory the kernel before does not
// write come before the wait: @g_k2 reads %a (written only by @g_k0,
// complete once every workgroup of @g_k1 has passed its wait) first, then
// waits for @g_k1, which writes %b. The second kernel never reads early:
// the plan launch before it may be skipped (plan reuse).
// CHECK-LABEL: gpu.func @g_k0
// CHECK-NEXT:    nvvm.griddepcontrol launch_dependents
// CHECK-LABEL: gpu.func @g_k1
// CHECK-NEXT:    nvvm.griddepcontrol wait
// CHECK-NEXT:    nvvm.griddepcontrol launch_dependents
// CHECK-LABEL: gpu.func @g_k2
// CHECK-NEXT:    gpu.block_id x
// CHECK:         memref.load %arg0
// CHECK-NEXT:    nvvm.griddepcontrol wait
// CHECK-NEXT:    nvvm.griddepcontrol launch_dependents
// CHECK-NEXT:    memref.load %arg1
// CHECK-LABEL: gpu.func @g_k3
// CHECK-NEXT:    nvvm.griddepcontrol wait
// CHECK-NEXT:    gpu.block_id x
func.func @g(%a: memref<?xf32> {mla.role = "q"}, %b: memref<?xf32>, %c: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %a, %c0 : memref<?xf32>
  mla.grid in (%n, %c1, %c1) attributes {block_size = 64 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %v = memref.load %c[%x] : memref<?xf32>
    memref.store %v, %a[%x] : memref<?xf32>
  }
  mla.grid in (%n, %c1, %c1) attributes {block_size = 64 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %v = memref.load %a[%x] : memref<?xf32>
    memref.store %v, %b[%x] : memref<?xf32>
  }
  mla.grid in (%n, %c1, %c1) attributes {block_size = 64 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %u = memref.load %a[%x] : memref<?xf32>
    %v = memref.load %b[%x] : memref<?xf32>
    %w = arith.addf %u, %v : f32
    memref.store %w, %c[%x] : memref<?xf32>
  }
  mla.grid in (%n, %c1, %c1) attributes {block_size = 64 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %v = memref.load %c[%x] : memref<?xf32>
    memref.store %v, %a[%x] : memref<?xf32>
  }
  return
}

// A third kernel with nothing in it waits at its start.
// CHECK-LABEL: gpu.func @h_k2
// CHECK-NEXT:    nvvm.griddepcontrol wait
// CHECK-NEXT:    gpu.block_id x
func.func @h(%a: memref<?xf32> {mla.role = "q"}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %a, %c0 : memref<?xf32>
  mla.grid in (%n, %c1, %c1) attributes {block_size = 64 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %f = arith.constant 0.0 : f32
    memref.store %f, %a[%x] : memref<?xf32>
  }
  mla.grid in (%n, %c1, %c1) attributes {block_size = 64 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
    %f = arith.constant 0.0 : f32
    memref.store %f, %a[%x] : memref<?xf32>
  }
  mla.grid in (%n, %c1, %c1) attributes {block_size = 64 : i64} {
  ^bb0(%x: index, %y: index, %z: index):
  }
  return
}
