// RUN: mla-opt %s --mla-tile | FileCheck %s

// The chunk merge on a GPU target: the one-group path reads 16-byte
// columns (vector<4xf32>), so a 512-wide row is 128 columns, one for
// each thread of a 128-thread workgroup; the part groups' path keeps the
// widest columns (4 groups x 32 columns of 16 floats), which fill the
// workgroup already. A request of at most 16 parts (two rounds of 8
// loads) takes the one-group path. On NVIDIA the grid asks for 8
// workgroups an SM (one wave of small workgroups).
module attributes {mla.target = #mla.target<"sm_90a">} {
// CHECK-LABEL: func @merge_512
// CHECK: mla.grid in {{.*}} attributes {occupancy = 8 : i64}
// CHECK: %[[FEW:.*]] = arith.cmpi sle, %{{.*}}, %c16
// CHECK: scf.if %[[FEW]] {
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c128{{.*}})
// CHECK: scf.for %{{.*}} step %c8
// CHECK-COUNT-8: vector.load %arg0{{.*}} : memref<?x1x16x512xf32>, vector<4xf32>
// CHECK: vector.store %{{.*}}, %arg3{{.*}} : memref<?x1x16x512xbf16>, vector<4xbf16>
// CHECK: } else {
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) = (%{{.*}}, %{{.*}}) to (%c4{{.*}}, %c32{{.*}})
// CHECK-COUNT-4: vector.load %arg0{{.*}} : memref<?x1x16x512xf32>, vector<16xf32>
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c32{{.*}})
// CHECK: vector.store %{{.*}}, %arg3{{.*}} : memref<?x1x16x512xbf16>, vector<16xbf16>
func.func @merge_512(%op: memref<?x1x16x512xf32>, %lp: memref<?x1x16xf32>, %plan: memref<3x?xi32>, %o: memref<?x1x16x512xbf16>, %lse: memref<?x1x16xf32>) {
  mla.chunk_merge %op, %lp, %plan, %o, %lse {groups = 4} : memref<?x1x16x512xf32>, memref<?x1x16xf32>, memref<3x?xi32>, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
  return
}
}
