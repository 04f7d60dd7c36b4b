// RUN: mla-opt %s -split-input-file --mla-select-config -verify-diagnostics
// RUN: not mla-compile %s --target=gfx942 -o %t.pkg 2>&1 | FileCheck %s --check-prefix=COMPILE

// The later passes outline the functions directly inside the top-level
// module; an mla op in a nested module would pass through them uncompiled.
module {
  module {
    func.func @nested(%new: memref<?x40xf16>, %slots: memref<?xi32>, %kv: memref<3x1x40xf16>) {
      // expected-error @+1 {{'mla.append_kv' op is inside a nested module; mla ops compile only in functions directly inside the top-level module}}
      mla.append_kv %new, %slots, %kv : memref<?x40xf16>, memref<?xi32>, memref<3x1x40xf16>
      return
    }
  }
}

// COMPILE: select-config-nested.mlir:10:7: error: 'mla.append_kv' op is inside a nested module

// -----

// Functions with no mla ops may sit in nested modules.
module {
  module {
    func.func @plain(%x: f32) -> f32 {
      return %x : f32
    }
  }
}
