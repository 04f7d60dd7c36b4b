// RUN: mla-opt %s -split-input-file --mla-outline-host-kernels | FileCheck %s

// Two grids (partial + combine) become two kernels with entry points; the
// workspace becomes plan entry 3 and the function becomes the launch plan.
// CHECK: module attributes {mla.launch_plans = [#mla.launch_plan<"f" info {kernel = "decode"} args [<0, "q", "memref", "bf16", [?, 16]>, <1, "scale", "scalar", "f32">, <2, "o", "memref", "f32", [?, 16]>] workspaces [<3, "f32", [arg0.0, 16]>] launches [<"f_k0_entry", [0, 1, 3] grid [arg0.0, 1, 2]>, <"f_k1_entry", [3, 2] grid [5, 1, 1]>]>]}
// CHECK: func.func private @f_k0(%{{.*}}: memref<?x16xbf16>, %{{.*}}: f32, %{{.*}}: memref<?x16xf32>, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index)
// CHECK: func.func @f_k0_entry(%[[ARGS:.*]]: !llvm.ptr, %[[X:.*]]: i64, %{{.*}}: i64, %{{.*}}: i64)
// CHECK:   %[[S0:.*]] = llvm.getelementptr %[[ARGS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK:   %[[P0:.*]] = llvm.load %[[S0]] : !llvm.ptr -> !llvm.ptr
// CHECK:   %[[D0:.*]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// CHECK:   %[[M0:.*]] = builtin.unrealized_conversion_cast %[[D0]] : {{.*}} to memref<?x16xbf16>
// CHECK:   llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK:   %[[XI:.*]] = arith.index_cast %[[X]] : i64 to index
// CHECK:   call @f_k0(%[[M0]], %{{.*}}, %{{.*}}, %[[XI]], %{{.*}}, %{{.*}})
// CHECK: func.func private @f_k1(
// CHECK: func.func @f_k1_entry(
// CHECK-NOT: func.func @f(
func.func @f(%q: memref<?x16xbf16> {mla.role = "q"}, %s: f32 {mla.role = "scale"}, %o: memref<?x16xf32> {mla.role = "o"}) attributes {mla.kernel_info = {kernel = "decode"}} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c5 = arith.constant 5 : index
  %b = memref.dim %q, %c0 : memref<?x16xbf16>
  %ws = memref.alloc(%b) : memref<?x16xf32>
  mla.grid in (%b, %c1, %c2) {
  ^bb0(%x: index, %y: index, %z: index):
    %v = memref.load %q[%x, %y] : memref<?x16xbf16>
    %e = arith.extf %v : bf16 to f32
    %m = arith.mulf %e, %s : f32
    memref.store %m, %ws[%x, %y] : memref<?x16xf32>
  }
  mla.grid in (%c5, %c1, %c1) {
  ^bb0(%x: index, %y: index, %z: index):
    %v = memref.load %ws[%x, %y] : memref<?x16xf32>
    memref.store %v, %o[%x, %y] : memref<?x16xf32>
  }
  memref.dealloc %ws : memref<?x16xf32>
  return
}

