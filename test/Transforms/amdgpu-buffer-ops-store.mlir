// RUN: mla-opt %s -split-input-file --mla-amdgpu-buffer-ops | FileCheck %s

// Masked writes (KV append's slot check): the guarded load and store run
// unconditionally, and the store's first index is sent one past the end
// (num_pages) when the slot is invalid, so the hardware drops it; no branch.
// CHECK-LABEL: gpu.func @append(
// CHECK-SAME: %[[SLOTS:[a-z0-9]+]]: memref<?xi32>, %[[KV:[a-z0-9]+]]: memref<?x16x576xbf16>, %[[NEW:[a-z0-9]+]]: memref<?x576xbf16>
// CHECK-DAG: %[[FKV:.*]] = amdgpu.fat_raw_buffer_cast %[[KV]] resetOffset
// CHECK-DAG: %[[FNEW:.*]] = amdgpu.fat_raw_buffer_cast %[[NEW]] resetOffset
// CHECK: %[[OK:.*]] = arith.cmpi ult
// CHECK: %[[PAGE:.*]] = arith.divui
// CHECK: scf.for
// CHECK-NOT: scf.if
// CHECK: %[[ROW:.*]] = vector.load %[[FNEW]]
// CHECK: %[[N:.*]] = memref.dim %[[FKV]], %c0
// CHECK: %[[SEL:.*]] = arith.select %[[OK]], %[[PAGE]], %[[N]] : index
// CHECK: vector.store %[[ROW]], %[[FKV]][%[[SEL]], %{{.*}}, %{{.*}}] : memref<?x16x576xbf16, #amdgpu.address_space<fat_raw_buffer>>, vector<8xbf16>
// CHECK-NOT: scf.if
// CHECK: gpu.return
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<0, "kv_new", "memref", "bf16", [?, 576]>, <1, "slot_mapping", "memref", "i32", [?]>, <2, "kv", "memref", "bf16", [?, 16, 576]>] workspaces [] launches [<"append", [1, 2, 0] grid [arg0.0, 1, 1] block [256, 1, 1] shared 0>]>]} {
  gpu.module @mla_kernels {
    gpu.func @append(%slots: memref<?xi32>, %kv: memref<?x16x576xbf16>, %new: memref<?x576xbf16>) kernel {
      %c0 = arith.constant 0 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c72 = arith.constant 72 : index
      %c256 = arith.constant 256 : index
      %t = gpu.block_id x
      %tid = gpu.thread_id x
      %s32 = memref.load %slots[%t] : memref<?xi32>
      %s = arith.index_cast %s32 : i32 to index
      %pages = memref.dim %kv, %c0 : memref<?x16x576xbf16>
      %cap = arith.muli %pages, %c16 : index
      %ok = arith.cmpi ult, %s, %cap : index
      %page = arith.divui %s, %c16 : index
      %off = arith.remui %s, %c16 : index
      scf.for %i = %tid to %c72 step %c256 {
        %d = arith.muli %i, %c8 : index
        scf.if %ok {
          %row = vector.load %new[%t, %d] : memref<?x576xbf16>, vector<8xbf16>
          vector.store %row, %kv[%page, %off, %d] : memref<?x16x576xbf16>, vector<8xbf16>
        }
      }
      gpu.barrier
      gpu.return
    }
  }
}

// -----

// Stores that stay guarded: into workgroup memory (no bounds check there),
// and after an op that may not run speculatively (a plain global store).
// CHECK-LABEL: gpu.func @keep(
// CHECK: scf.if
// CHECK: vector.store %{{.*}} : memref<16xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK: scf.if
// CHECK: memref.store
// CHECK: vector.store
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<0, "kv", "memref", "bf16", [?, 16, 576]>] workspaces [] launches [<"keep", [0] grid [1, 1, 1] block [64, 1, 1] shared 32>]>]} {
  gpu.module @mla_kernels {
    gpu.func @keep(%kv: memref<?x16x576xbf16>, %ok: i1, %tile: memref<16xbf16, #gpu.address_space<workgroup>>, %v: vector<8xbf16>, %x: f32, %scratch: memref<4xf32, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      scf.if %ok {
        vector.store %v, %tile[%c0] : memref<16xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
      }
      scf.if %ok {
        memref.store %x, %scratch[%c0] : memref<4xf32, #gpu.address_space<workgroup>>
        vector.store %v, %kv[%c0, %c0, %c0] : memref<?x16x576xbf16>, vector<8xbf16>
      }
      gpu.return
    }
  }
}
