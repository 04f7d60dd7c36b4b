// RUN: mla-opt %s --mla-emulate-amdgpu --split-input-file --verify-diagnostics | FileCheck %s

// A hand-written AMD kernel: ids, LDS, a barrier, a fat raw buffer, one MFMA
// and a shuffle become hook calls; memory spaces become integers (LDS 3,
// buffers 7); the kernel gets a `void **` lane entry.

// CHECK-NOT: gpu.module
// CHECK-DAG: func.func private @__mla_emu_dim(i32) -> i64
// CHECK-DAG: func.func private @__mla_emu_barrier(i32)
// CHECK-DAG: func.func private @__mla_emu_lds_base() -> !llvm.ptr<3>
// CHECK-DAG: func.func private @__mla_emu_make_buffer(!llvm.ptr, i32) -> !llvm.ptr<7>
// CHECK-DAG: func.func private @__mla_emu_mfma(i32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32)
// CHECK-DAG: func.func private @__mla_emu_shuffle(i32, i32, i32) -> i32
// CHECK-LABEL: func.func private @k_lane(%{{.*}}: memref<?xf32>, %{{.*}}: memref<64x4xbf16>)
// CHECK: call @__mla_emu_make_buffer
// CHECK: builtin.unrealized_conversion_cast {{.*}} to memref<?xf32, 7>
// CHECK: call @__mla_emu_dim
// CHECK: call @__mla_emu_lds_base()
// CHECK: memref.view {{.*}} to memref<64xf32, 3>
// CHECK: memref.store {{.*}} : memref<64xf32, 3>
// CHECK: call @__mla_emu_barrier
// CHECK: call @__mla_emu_mfma
// CHECK: call @__mla_emu_shuffle
// CHECK: memref.store {{.*}} : memref<?xf32, 7>
// CHECK-LABEL: func.func @k(%{{.*}}: !llvm.ptr)
// CHECK: call @k_lane
module attributes {gpu.container_module} {
  gpu.module @mla_kernels {
    gpu.func @k(%out: memref<?xf32>, %ab: memref<64x4xbf16>) kernel {
      %buf = amdgpu.fat_raw_buffer_cast %out resetOffset : memref<?xf32> to memref<?xf32, #amdgpu.address_space<fat_raw_buffer>>
      %t = gpu.thread_id x
      %lds = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %c0 = arith.constant 0 : index
      %tile = memref.view %lds[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xf32, #gpu.address_space<workgroup>>
      %one = arith.constant 1.0 : f32
      memref.store %one, %tile[%t] : memref<64xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %a = vector.load %ab[%t, %c0] : memref<64x4xbf16>, vector<4xbf16>
      %acc = arith.constant dense<0.0> : vector<4xf32>
      %d = amdgpu.mfma 16x16x16 %a * %a + %acc blgp = none : vector<4xbf16>, vector<4xbf16>, vector<4xf32>
      %e = vector.extract %d[0] : f32 from vector<4xf32>
      %off = arith.constant 1 : i32
      %w = arith.constant 64 : i32
      %s, %valid = gpu.shuffle xor %e, %off, %w : f32
      memref.store %s, %buf[%t] : memref<?xf32, #amdgpu.address_space<fat_raw_buffer>>
      gpu.return
    }
  }
}

// -----

// What the emulator does not implement is an error at the op.
module attributes {gpu.container_module} {
  gpu.module @mla_kernels {
    gpu.func @k() kernel {
      // expected-error @+1 {{'amdgpu.lds_barrier' op is not emulated}}
      amdgpu.lds_barrier
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @mla_kernels {
    gpu.func @k(%x: f32) kernel {
      // expected-error @+1 {{intrinsic 'llvm.amdgcn.rcp.f32' is not emulated}}
      %r = llvm.call_intrinsic "llvm.amdgcn.rcp.f32"(%x) : (f32) -> f32
      gpu.return
    }
  }
}

// -----

// Cross-lane reads: each is one wave-collective shuffle of 32 bits.
// CHECK-LABEL: func.func private @x_lane(
// CHECK-COUNT-6: call @__mla_emu_shuffle
// CHECK-NOT: rocdl.
// CHECK-NOT: amdgpu.
module attributes {gpu.container_module} {
  gpu.module @mla_kernels {
    gpu.func @x(%v: f32, %i: i32, %out: memref<6xf32>) kernel {
      %a = rocdl.readlane %v, %i : (f32, i32) -> f32
      %b = rocdl.readfirstlane %v : f32
      %bits = arith.bitcast %v : f32 to i32
      %c = rocdl.ds_bpermute %i, %bits : (i32, i32) -> i32
      %cf = arith.bitcast %c : i32 to f32
      %d = amdgpu.swizzle_bitmode %v 31 0 1 : f32
      %e = amdgpu.dpp %v %v quad_perm([1 : i32, 0 : i32, 3 : i32, 2 : i32]) : f32
      %f = amdgpu.dpp %v %v row_shr(1 : i32) { bound_ctrl = true } : f32
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %c5 = arith.constant 5 : index
      memref.store %a, %out[%c0] : memref<6xf32>
      memref.store %b, %out[%c1] : memref<6xf32>
      memref.store %cf, %out[%c2] : memref<6xf32>
      memref.store %d, %out[%c3] : memref<6xf32>
      memref.store %e, %out[%c4] : memref<6xf32>
      memref.store %f, %out[%c5] : memref<6xf32>
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @mla_kernels {
    gpu.func @k(%v: f32) kernel {
      // expected-error @+1 {{DPP row_bcast_15 is not emulated}}
      %r = amdgpu.dpp %v %v row_bcast_15 : f32
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @mla_kernels {
    gpu.func @k(%v: f32) kernel {
      // expected-error @+1 {{is emulated with full row and bank masks only}}
      %r = amdgpu.dpp %v %v row_shl(1 : i32) { row_mask = 0xa : i32 } : f32
      gpu.return
    }
  }
}
