// The target is set once, by mla-select-config, as the module's
// #mla.target; the later passes read it from the IR.
// RUN: mla-opt %s -split-input-file --mla-select-config=target=gfx942 | FileCheck %s
// RUN: not mla-opt %s -split-input-file --mla-select-config=target=sm_80 2>&1 | FileCheck %s --check-prefix=MIXED
// RUN: not mla-opt %s -split-input-file --mla-select-config=target=sm_99 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not mla-opt %s -split-input-file --mla-distribute 2>&1 | FileCheck %s --check-prefix=NOTARGET
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=sm_90a perf-config=wgmma=1" --mla-tile --mla-expand-paging --mla-distribute="target=gfx942" 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not mla-opt %s -split-input-file --mla-select-config="target=sm_80 perf-config=wgmma=1" 2>&1 | FileCheck %s --check-prefix=WGMMA

// CHECK: module attributes {mla.target = #mla.target<"gfx942">}
// NOTARGET: error: mla-distribute: the module has no 'mla.target' (#mla.target, set by mla-select-config)
// UNKNOWN: error: mla-select-config: unknown target 'sm_99' (known: host, sm_80, sm_90a, gfx90a, gfx942, gfx950, gfx90a-emu, gfx942-emu, gfx950-emu)
// The mixed-target pipeline of issue #14 cannot be written any more: the
// later passes take no target.
// OPTION: no such option target
// WGMMA: error: perf-config: wgmma=1 needs warpgroup MMA, which target sm_80 does not have
module {
  func.func @empty() {
    return
  }
}

// -----

// A module that names its target keeps it; a pipeline for another target
// is an error located at the module.
// CHECK: module attributes {mla.target = #mla.target<"gfx942">}
// MIXED: :[[@LINE+1]]:1: error: mla-select-config: target=sm_80 differs from the module's #mla.target<"gfx942">; one module compiles for one target
module attributes {mla.target = #mla.target<"gfx942">} {
  func.func @named() {
    return
  }
}
