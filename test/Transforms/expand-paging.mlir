// RUN: mla-opt %s -split-input-file --mla-expand-paging | FileCheck %s
// RUN: mla-opt %s -split-input-file --mla-expand-paging | FileCheck %s --check-prefix=AHEAD

// Static page size. First the page of each row, once per row, into a small
// buffer (rows past `end` look up entry 0): page = block_table[b][t / 64].
// Then one parallel iteration per (row, 16-element chunk): slot = t % 64 and
// a vector copy; rows past `end` read zeros.
// CHECK-LABEL: func @static_page
// CHECK-NOT: mla.load_kv_tile
// CHECK: %[[PAGES:.*]] = memref.alloca() : memref<8xi32>
// CHECK: scf.parallel (%[[R0:.*]]) = (%{{.*}}) to (%c8) step (%{{.*}})
// CHECK:   %[[T0:.*]] = arith.addi %arg3, %[[R0]]
// CHECK:   %[[IN0:.*]] = arith.cmpi slt, %[[T0]], %arg4
// CHECK:   %[[PI:.*]] = arith.divui %[[T0]], %c64
// CHECK:   %[[SAFE:.*]] = arith.select %[[IN0]], %[[PI]], %c0
// CHECK:   %[[E:.*]] = memref.load %arg1[%arg2, %[[SAFE]]] : memref<?x?xi32>
// CHECK:   memref.store %[[E]], %[[PAGES]][%[[R0]]]
// CHECK: scf.parallel (%[[R:.*]], %[[C:.*]]) = (%{{.*}}, %{{.*}}) to (%{{.*}}, %c36) step (%{{.*}}, %{{.*}})
// CHECK:   %[[D:.*]] = arith.muli %[[C]], %c16
// CHECK:   %[[T:.*]] = arith.addi %arg3, %[[R]]
// CHECK:   %[[IN:.*]] = arith.cmpi slt, %[[T]], %arg4
// CHECK:   %[[V:.*]] = scf.if %[[IN]] -> (vector<16xbf16>) {
// CHECK:     %[[SLOT:.*]] = arith.remui %[[T]], %c64
// CHECK:     %[[P:.*]] = memref.load %[[PAGES]][%[[R]]] : memref<8xi32>
// CHECK:     %[[PAGE:.*]] = arith.index_cast %[[P]] : i32 to index
// CHECK:     %[[L:.*]] = vector.load %arg0[%[[PAGE]], %[[SLOT]], %[[D]]] : memref<?x64x576xbf16>, vector<16xbf16>
// CHECK:     scf.yield %[[L]]
// CHECK:   } else {
// CHECK:     scf.yield %cst
// CHECK:   vector.store %[[V]], %arg5[%[[R]], %[[D]]] : memref<8x576xbf16>, vector<16xbf16>
func.func @static_page(%kv: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %b: index, %start: index, %end: index, %tile: memref<8x576xbf16>) {
  mla.load_kv_tile %kv[%bt, %b, %start, %end] into %tile : memref<?x64x576xbf16>, memref<?x?xi32>, memref<8x576xbf16>
  return
}

// -----

// Page size chosen at run time (and page size 1 works the same way).
// CHECK-LABEL: func @dynamic_page
// CHECK: %[[P:.*]] = memref.dim %arg0, %{{.*}} : memref<?x?x288xf32>
// CHECK: arith.divui %{{.*}}, %[[P]]
// CHECK: arith.remui %{{.*}}, %[[P]]
// CHECK: vector.load %arg0[{{.*}}] : memref<?x?x288xf32>, vector<16xf32>
func.func @dynamic_page(%kv: memref<?x?x288xf32>, %bt: memref<?x?xi32>, %b: index, %start: index, %end: index, %tile: memref<4x288xf32>) {
  mla.load_kv_tile %kv[%bt, %b, %start, %end] into %tile : memref<?x?x288xf32>, memref<?x?xi32>, memref<4x288xf32>
  return
}

// -----

// CHECK-LABEL: func @page1
// CHECK: arith.divui %{{.*}}, %c1
// CHECK: arith.remui %{{.*}}, %c1
func.func @page1(%kv: memref<?x1x576xbf16>, %bt: memref<?x?xi32>, %b: index, %start: index, %end: index, %tile: memref<4x576xbf16>) {
  mla.load_kv_tile %kv[%bt, %b, %start, %end] into %tile : memref<?x1x576xbf16>, memref<?x?xi32>, memref<4x576xbf16>
  return
}

// -----

// A target that stages pages ahead (AMD), in a key loop: the first tile's
// pages before the loop into slot 0; in iteration i the next tile's pages
// into slot 1 - i % 2 in a phase marked mla.unsynchronized (mla-distribute
// puts no barrier after it), then the copy reads slot i % 2.
// AHEAD-LABEL: func @key_loop
// AHEAD: %[[PAGES:.*]] = memref.alloca() : memref<2x8xi32>
// AHEAD: scf.parallel
// AHEAD:   memref.store %{{.*}}, %[[PAGES]][%c0{{.*}}, %{{.*}}]
// AHEAD-NOT: mla.unsynchronized
// AHEAD: scf.for %[[T:.*]] = %[[LB:.*]] to %{{.*}} step %[[STEP:[^ ]*]]
// AHEAD:   %[[OFF:.*]] = arith.subi %[[T]], %[[LB]]
// AHEAD:   %[[I:.*]] = arith.divui %[[OFF]], %[[STEP]]
// AHEAD:   %[[SLOT:.*]] = arith.remui %[[I]], %c2
// AHEAD:   %[[NEXT:.*]] = arith.subi %c1{{.*}}, %[[SLOT]]
// AHEAD:   %[[T1:.*]] = arith.addi %[[T]], %[[STEP]]
// AHEAD:   scf.parallel
// AHEAD:     arith.addi %[[T1]], %{{.*}}
// AHEAD:     memref.store %{{.*}}, %[[PAGES]][%[[NEXT]], %{{.*}}]
// AHEAD:   } {mla.next_tile, mla.unsynchronized}
// AHEAD:   scf.parallel
// AHEAD:     memref.load %[[PAGES]][%[[SLOT]], %{{.*}}] : memref<2x8xi32>
// (Without a target, as in the cases above, or outside a key loop the
// pages are staged per tile.)
module attributes {mla.target = #mla.target<"gfx942">} {
func.func @key_loop(%kv: memref<?x1x576xbf16>, %bt: memref<?x?xi32>, %b: index, %lb: index, %end: index, %tile: memref<8x576xbf16>) {
  %c8 = arith.constant 8 : index
  scf.for %t = %lb to %end step %c8 {
    mla.load_kv_tile %kv[%bt, %b, %t, %end] into %tile : memref<?x1x576xbf16>, memref<?x?xi32>, memref<8x576xbf16>
  }
  return
}
}

// -----

// NVIDIA (sm_90a): pages are staged ahead in single-stage key loops only,
// and the first tile's only when the loop runs a tile (the block table is
// no bounds-checked buffer: a table without columns must not be read).
// AHEAD-LABEL: func @nvidia_key_loop
// AHEAD: %[[PAGES:.*]] = memref.alloca() : memref<2x8xi32>
// AHEAD: %[[RUNS:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : index
// AHEAD: scf.if %[[RUNS]] {
// AHEAD:   scf.parallel
// AHEAD:     memref.store %{{.*}}, %[[PAGES]][%c0{{.*}}, %{{.*}}]
// AHEAD: scf.for
// AHEAD:   } {mla.next_tile, mla.unsynchronized}
// AHEAD:   memref.load %[[PAGES]]
module attributes {mla.target = #mla.target<"sm_90a">} {
func.func @nvidia_key_loop(%kv: memref<?x1x576xbf16>, %bt: memref<?x?xi32>, %b: index, %lb: index, %end: index, %tile: memref<8x576xbf16>) {
  %c8 = arith.constant 8 : index
  scf.for %t = %lb to %end step %c8 {
    mla.load_kv_tile %kv[%bt, %b, %t, %end] into %tile : memref<?x1x576xbf16>, memref<?x?xi32>, memref<8x576xbf16>
  }
  return
}
}
