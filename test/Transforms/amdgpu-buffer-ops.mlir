// RUN: mla-opt %s --mla-amdgpu-buffer-ops | FileCheck %s

// Every global memref argument is wrapped once in a bounds-checked fat raw
// buffer; the masked page read loses its branch: the page lookup is hoisted
// and the first index is sent one past the end (num_pages) when masked.
// CHECK: max_bytes [<0, 2147483648>, <1, 4294893567>]
// CHECK-LABEL: gpu.func @k(
// CHECK-SAME: %[[BT:[a-z0-9]+]]: memref<?x?xi32>, %[[KV:[a-z0-9]+]]: memref<?x64x576xbf16>
// CHECK-DAG: %[[FBT:.*]] = amdgpu.fat_raw_buffer_cast %[[BT]] resetOffset : memref<?x?xi32> to memref<?x?xi32, #amdgpu.address_space<fat_raw_buffer>>
// CHECK-DAG: %[[FKV:.*]] = amdgpu.fat_raw_buffer_cast %[[KV]] resetOffset : memref<?x64x576xbf16> to memref<?x64x576xbf16, #amdgpu.address_space<fat_raw_buffer>>
// CHECK-NOT: scf.if
// CHECK: %[[E:.*]] = memref.load %[[FBT]]
// CHECK: %[[P:.*]] = arith.index_cast %[[E]]
// CHECK: %[[N:.*]] = memref.dim %[[FKV]], %c0
// CHECK: %[[SEL:.*]] = arith.select %{{.*}}, %[[P]], %[[N]] : index
// CHECK: vector.load %[[FKV]][%[[SEL]], %{{.*}}, %{{.*}}] : memref<?x64x576xbf16, #amdgpu.address_space<fat_raw_buffer>>, vector<8xbf16>
module attributes {mla.launch_plans = [#mla.launch_plan<"f" args [<0, "block_table", "memref", "i32", [?, ?]>, <1, "kv", "memref", "bf16", [?, 64, 576]>] workspaces [] launches [<"k", [0, 1] grid [1, 1, 1] block [64, 1, 1] shared 1024>]>]} {
  gpu.module @mla_kernels {
    gpu.func @k(%bt: memref<?x?xi32>, %kv: memref<?x64x576xbf16>, %t: index, %end: index, %tile: memref<4x576xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant dense<0.0> : vector<8xbf16>
      %in = arith.cmpi slt, %t, %end : index
      %v = scf.if %in -> (vector<8xbf16>) {
        %pi = arith.divui %t, %c64 : index
        %slot = arith.remui %t, %c64 : index
        %e = memref.load %bt[%c0, %pi] : memref<?x?xi32>
        %page = arith.index_cast %e : i32 to index
        %l = vector.load %kv[%page, %slot, %c0] : memref<?x64x576xbf16>, vector<8xbf16>
        scf.yield %l : vector<8xbf16>
      } else {
        scf.yield %zero : vector<8xbf16>
      }
      vector.store %v, %tile[%c0, %c0] : memref<4x576xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
      gpu.return
    }
  }
}
