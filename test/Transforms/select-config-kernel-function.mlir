// RUN: mla-opt %s -split-input-file --mla-select-config -verify-diagnostics
// RUN: sed -n '/^func.func @store_beside/,/^}/p' %s > %t.mlir
// RUN: not mla-compile %t.mlir --target=host -o %t.pkg 2>&1 | FileCheck %s --check-prefix=COMPILE
// RUN: test ! -e %t.pkg

// A package runs the kernels of its function's mla ops and nothing else of
// the function: an op with side effects beside them (a store, a call) would
// be dropped without a word, so it is an error located at the op.
func.func @store_beside(%new: memref<?x40xf16>, %slots: memref<?xi32>, %kv: memref<3x1x40xf16>, %flag: memref<1xi32>) {
  mla.append_kv %new, %slots, %kv : memref<?x40xf16>, memref<?xi32>, memref<3x1x40xf16>
  %c0 = arith.constant 0 : index
  %one = arith.constant 1 : i32
  // expected-error @+1 {{'memref.store' op beside the kernel ops of @store_beside has side effects that a compiled kernel would drop: a function with mla kernel ops holds them, the side-effect-free ops feeding their operands and its return}}
  memref.store %one, %flag[%c0] : memref<1xi32>
  return
}

// COMPILE: .mlir:6:3: error: 'memref.store' op beside the kernel ops of @store_beside

// -----

func.func private @hook()

func.func @call_beside(%new: memref<?x40xf16>, %slots: memref<?xi32>, %kv: memref<3x1x40xf16>) {
  // expected-error @+1 {{'func.call' op beside the kernel ops of @call_beside has side effects}}
  func.call @hook() : () -> ()
  mla.append_kv %new, %slots, %kv : memref<?x40xf16>, memref<?xi32>, memref<3x1x40xf16>
  return
}

// -----

// A kernel op nested in another op's region is compiled by nothing.
func.func @nested_in_if(%new: memref<?x40xf16>, %slots: memref<?xi32>, %kv: memref<3x1x40xf16>, %c: i1) {
  scf.if %c {
    // expected-error @+1 {{'mla.append_kv' op is inside 'scf.if'; a kernel op must be directly in a function's body (nothing compiles it elsewhere)}}
    mla.append_kv %new, %slots, %kv : memref<?x40xf16>, memref<?xi32>, memref<3x1x40xf16>
  }
  return
}

// -----

// Side-effect-free ops may sit beside the kernel ops, and functions
// without kernel ops may hold anything.
func.func @pure_beside(%new: memref<?x40xf16>, %slots: memref<?xi32>, %kv: memref<3x1x40xf16>, %x: f32) {
  %c2 = arith.constant 2.0 : f32
  %y = arith.mulf %x, %c2 : f32
  mla.append_kv %new, %slots, %kv : memref<?x40xf16>, memref<?xi32>, memref<3x1x40xf16>
  return
}

func.func @no_kernel_ops(%flag: memref<1xi32>) {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1 : i32
  memref.store %one, %flag[%c0] : memref<1xi32>
  return
}
