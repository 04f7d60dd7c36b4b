// RUN: mla-opt %s --mla-tile | FileCheck %s

// overlap = 1 (the lagged P·V): the key loop copies the values one tile
// behind the keys. Before the loop only key tile 0 (slot 0); iteration i
// (tile start t0, index i = t0 / 16) copies key tile t0 + 16 into key slot
// (i + 1) % 2 and value tile t0 into value slot i % 2, then the step reads
// key and value slot i % 2 and carries `overlap`. A lowering that issues
// tile i's P·V in iteration i + 1 finds its values still in slot i % 2:
// iteration i + 1 writes the other one.
// CHECK-LABEL: func @prefill
// CHECK-SAME: config = "tile_q=16 tile_kv=16 warps=1 stages=2 overlap=1"
//   Keys (16 x 48, two slots) and values (16 x 32, two slots).
// CHECK: %[[KBUF:.*]] = memref.subview %{{.*}}[0, 0] [32, 48] [1, 1] : memref<32x56xbf16>
// CHECK: %[[VBUF:.*]] = memref.subview %{{.*}}[0, 0] [32, 32] [1, 1] : memref<32x40xbf16>
//   Before the loop: key tile 0 into slot 0, no values.
// CHECK: %[[K0:.*]] = memref.subview %[[KBUF]][0, 0] [16, 48]
// CHECK-NOT: memref.subview %[[VBUF]]
// CHECK: vector.store %{{.*}}, %[[K0]]
// CHECK-NOT: memref.subview %[[VBUF]]
// CHECK: scf.for %[[T0:.*]] = %[[START:.*]] to %{{.*}} step %[[C16:.*]] {
// CHECK: %[[OFF:.*]] = arith.subi %[[T0]], %[[START]]
// CHECK: %[[I:.*]] = arith.divui %[[OFF]], %[[C16]]
// CHECK: %[[SLOT:.*]] = arith.remui %[[I]], %[[C2:.*]] : index
//   The keys of the next tile into slot (i + 1) % 2.
// CHECK: %[[I1:.*]] = arith.addi %[[I]], %c1
// CHECK: %[[NEXT:.*]] = arith.remui %[[I1]], %[[C2]]
// CHECK: %[[NROW:.*]] = arith.muli %[[NEXT]]
// CHECK: %[[KN:.*]] = memref.subview %[[KBUF]][%[[NROW]], 0] [16, 48]
// CHECK: %[[TN:.*]] = arith.addi %[[T0]], %c16
// CHECK: vector.load %arg1
// CHECK: vector.store %{{.*}}, %[[KN]]
//   This tile's values into slot i % 2.
// CHECK: %[[VS:.*]] = arith.remui %[[I]], %[[C2]]
// CHECK: %[[VROW:.*]] = arith.muli %[[VS]]
// CHECK: %[[VT:.*]] = memref.subview %[[VBUF]][%[[VROW]], 0] [16, 32]
// CHECK: arith.subi %{{.*}}, %[[T0]] : index
// CHECK: vector.load %arg2
// CHECK: vector.store %{{.*}}, %[[VT]]
//   The step reads both from slot i % 2.
// CHECK: %[[KROW:.*]] = arith.muli %[[SLOT]]
// CHECK: %[[KS:.*]] = memref.subview %[[KBUF]][%[[KROW]], 0] [16, 48]
// CHECK: %[[VROW2:.*]] = arith.muli %[[SLOT]]
// CHECK: %[[VS2:.*]] = memref.subview %[[VBUF]][%[[VROW2]], 0] [16, 32]
// CHECK: mla.attention_step %{{.*}}, %[[KS]], %[[VS2]] -> %{{.*}} stages 2 all_visible(%{{.*}}) {overlap}
func.func @prefill(%q: memref<?x2x48xbf16>, %k: memref<?x2x48xbf16>, %v: memref<?x2x32xbf16>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x2x32xbf16>, %lse: memref<2x?xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal, config = #mla.config<tile_kv = 16, kv_splits = 1, head_group = 1, warps = 1, stages = 2, tile_q = 16, overlap = 1>} : memref<?x2x48xbf16>, memref<?x2x48xbf16>, memref<?x2x32xbf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x2x32xbf16>, memref<2x?xf32>
  return
}
