// RUN: mla-opt %s -split-input-file --mla-tile | FileCheck %s

// KV append: one workgroup per new token; the slot is read once, checked
// with one unsigned compare against pages * P (-1 padding and any other
// negative slot are huge unsigned), and the row is copied in 16-byte chunks
// (8 bf16) under that check.
// CHECK-LABEL: func @append_p64
// CHECK-SAME: %[[NEW:[a-z0-9]+]]: memref<?x576xbf16> {mla.role = "kv_new"}
// CHECK-SAME: %[[SLOTS:[a-z0-9]+]]: memref<?xi32> {mla.role = "slot_mapping"}
// CHECK-SAME: %[[KV:[a-z0-9]+]]: memref<?x64x576xbf16> {mla.role = "kv"}
// CHECK-SAME: mla.kernel_info = {dtype = "bf16", kernel = "append_kv", latent_dim = 512 : i64, page_size = 64 : i64, rope_dim = 64 : i64}
// CHECK: %[[N:.*]] = memref.dim %[[NEW]], %c0
// CHECK: mla.grid in (%[[N]], %c1, %c1) {
// CHECK: ^bb0(%[[T:.*]]: index, %{{.*}}: index, %{{.*}}: index):
// CHECK: %[[S32:.*]] = memref.load %[[SLOTS]][%[[T]]] : memref<?xi32>
// CHECK: %[[S:.*]] = arith.index_cast %[[S32]] : i32 to index
// CHECK: %[[PAGES:.*]] = memref.dim %[[KV]], %{{.*}} : memref<?x64x576xbf16>
// CHECK: %[[CAP:.*]] = arith.muli %[[PAGES]], %[[P:.*]] : index
// CHECK: %[[OK:.*]] = arith.cmpi ult, %[[S]], %[[CAP]] : index
//   Page and offset in 32-bit unsigned arithmetic.
// CHECK: %[[P32:.*]] = arith.constant 64 : i32
// CHECK: %[[PAGE32:.*]] = arith.divui %[[S32]], %[[P32]] : i32
// CHECK: %[[PAGE:.*]] = arith.index_castui %[[PAGE32]] : i32 to index
// CHECK: %[[OFF32:.*]] = arith.remui %[[S32]], %[[P32]] : i32
// CHECK: %[[OFF:.*]] = arith.index_castui %[[OFF32]] : i32 to index
// CHECK: scf.parallel (%[[C:.*]]) = (%{{.*}}) to (%c72{{.*}}) step
// CHECK: %[[D:.*]] = arith.muli %[[C]], %c8
// CHECK: scf.if %[[OK]] {
// CHECK: %[[ROW:.*]] = vector.load %[[NEW]][%[[T]], %[[D]]] : memref<?x576xbf16>, vector<8xbf16>
// CHECK: vector.store %[[ROW]], %[[KV]][%[[PAGE]], %[[OFF]], %[[D]]] : memref<?x64x576xbf16>, vector<8xbf16>
// CHECK-NOT: mla.append_kv
func.func @append_p64(%new: memref<?x576xbf16>, %slots: memref<?xi32>, %kv: memref<?x64x576xbf16>) {
  mla.append_kv %new, %slots, %kv {latent_dim = 512 : i64} : memref<?x576xbf16>, memref<?xi32>, memref<?x64x576xbf16>
  return
}

// -----

// A run-time page size: the divisor is P clamped to [1, 2^31], so an empty
// pool (P = 0, no valid slot) never divides by zero, and a page larger than
// any i32 slot still gives page 0. f32 rows move 4 elements at a time;
// without latent_dim the whole row counts as latent. Static token counts
// give a constant grid.
// CHECK-LABEL: func @append_dynamic_page
// CHECK-SAME: mla.kernel_info = {dtype = "f32", kernel = "append_kv", latent_dim = 288 : i64, page_size = 0 : i64, rope_dim = 0 : i64}
// CHECK: mla.grid in (%c7, %c1, %c1) {
// CHECK: %[[P:.*]] = memref.dim %arg2, %c1{{.*}} : memref<?x?x288xf32>
// CHECK: %[[PAGES:.*]] = memref.dim %arg2, %c0{{.*}} : memref<?x?x288xf32>
// CHECK: %[[CAP:.*]] = arith.muli %[[PAGES]], %[[P]] : index
// CHECK: arith.cmpi ult, %{{.*}}, %[[CAP]] : index
// CHECK: %[[AT1:.*]] = arith.maxui %[[P]], %c1 : index
// CHECK: %[[CLAMP:.*]] = arith.minui %[[AT1]], %c2147483648 : index
// CHECK: %[[DIV:.*]] = arith.index_castui %[[CLAMP]] : index to i32
// CHECK: arith.divui %{{.*}}, %[[DIV]] : i32
// CHECK: arith.remui %{{.*}}, %[[DIV]] : i32
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c72{{.*}}) step
// CHECK: vector.load %arg0[%{{.*}}, %{{.*}}] : memref<7x288xf32>, vector<4xf32>
// CHECK: vector.store %{{.*}}, %arg2[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x?x288xf32>, vector<4xf32>
func.func @append_dynamic_page(%new: memref<7x288xf32>, %slots: memref<7xi32>, %kv: memref<?x?x288xf32>) {
  mla.append_kv %new, %slots, %kv : memref<7x288xf32>, memref<7xi32>, memref<?x?x288xf32>
  return
}

// -----

// A row of 40 f16 elements: 8-element chunks (16 bytes), 5 per row; a
// static pool of 3 pages of 1 token gives a constant capacity.
// CHECK-LABEL: func @append_narrow
// CHECK: %[[CAP:.*]] = arith.muli %c3, %c1{{.*}} : index
// CHECK: arith.cmpi ult, %{{.*}}, %[[CAP]] : index
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c5{{.*}}) step
// CHECK: vector.store %{{.*}} : memref<3x1x40xf16>, vector<8xf16>
func.func @append_narrow(%new: memref<?x40xf16>, %slots: memref<?xi32>, %kv: memref<3x1x40xf16>) {
  mla.append_kv %new, %slots, %kv : memref<?x40xf16>, memref<?xi32>, memref<3x1x40xf16>
  return
}
