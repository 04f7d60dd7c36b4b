// RUN: mla-opt %s --mla-emulate-amdgpu-finalize --split-input-file --verify-diagnostics | FileCheck %s
// RUN: mla-opt %s --mla-emulate-amdgpu-finalize --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=TABLES

// LDS (3) and buffer (7) loads and stores become hook calls through a
// stack slot, with the site of their location; hooks call through the table.

// TABLES-DAG: llvm.mlir.global external @__mla_emu_hooks()
// TABLES-DAG: llvm.mlir.global external constant @__mla_emu_abi()
// TABLES-DAG: llvm.mlir.global internal constant @__mla_emu_site_0("t.mlir:7:9: LDS load\00")
// TABLES-DAG: llvm.mlir.global internal constant @__mla_emu_site_1("t.mlir:8:9: buffer store\00")
// CHECK-LABEL: llvm.func internal @__mla_emu_lds_load(
// CHECK: llvm.mlir.addressof @__mla_emu_hooks
// CHECK: llvm.call %{{.*}}(
// CHECK-LABEL: llvm.func @lane(
// CHECK: llvm.alloca {{.*}} x vector<4xf32> {alignment = 64 : i64}
// CHECK: llvm.call @__mla_emu_lds_load(%arg0, %{{.*}}, %[[SLOT:[0-9]+]], %{{.*}}) : (!llvm.ptr<3>, i64, !llvm.ptr, i32) -> ()
// CHECK: llvm.load %[[SLOT]] : !llvm.ptr -> vector<4xf32>
// CHECK: llvm.call @__mla_emu_buffer_store(
llvm.func @lane(%lds: !llvm.ptr<3>, %buf: !llvm.ptr<7>) {
  %v = llvm.load %lds : !llvm.ptr<3> -> vector<4xf32> loc("t.mlir":7:9)
  llvm.store %v, %buf : vector<4xf32>, !llvm.ptr<7> loc("t.mlir":8:9)
  llvm.return
}

// -----

llvm.func @lane(%lds: !llvm.ptr<3>, %x: i32) {
  // expected-error @+1 {{accesses LDS or buffer memory in a way the AMD emulator does not implement}}
  %old = llvm.atomicrmw add %lds, %x seq_cst : !llvm.ptr<3>, i32
  llvm.return
}

// -----

// An i32 atomic add through a buffer pointer (decode's fused_merge
// counters) calls the buffer atomic hook, which returns the old value.
// CHECK-LABEL: llvm.func @count(
// CHECK: %[[OLD:.*]] = llvm.call @__mla_emu_buffer_atomic_add(%arg0, %arg1, %{{.*}}) : (!llvm.ptr<7>, i32, i32) -> i32
// CHECK: llvm.return %[[OLD]]
llvm.func @count(%buf: !llvm.ptr<7>, %x: i32) -> i32 {
  %old = llvm.atomicrmw add %buf, %x acq_rel : !llvm.ptr<7>, i32
  llvm.return %old : i32
}

// -----

llvm.func @lane(%buf: !llvm.ptr<7>, %x: i32) {
  // expected-error @+1 {{accesses LDS or buffer memory in a way the AMD emulator does not implement}}
  %old = llvm.atomicrmw max %buf, %x seq_cst : !llvm.ptr<7>, i32
  llvm.return
}
