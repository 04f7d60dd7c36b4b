// RUN: mla-opt %s -split-input-file --mla-tile -verify-diagnostics

// A package describes one kernel: its roles and manifest header come from
// one semantic op.
func.func @two_kernels(%new: memref<?x576xbf16>, %slots: memref<?xi32>, %kv: memref<?x64x576xbf16>, %new2: memref<?x576xbf16>) {
  mla.append_kv %new, %slots, %kv : memref<?x576xbf16>, memref<?xi32>, memref<?x64x576xbf16>
  // expected-error @+1 {{'mla.append_kv' op shares function 'two_kernels' with another kernel ('append_kv'); a package describes one kernel: put mla.append_kv in a function of its own}}
  mla.append_kv %new2, %slots, %kv : memref<?x576xbf16>, memref<?xi32>, memref<?x64x576xbf16>
  return
}
