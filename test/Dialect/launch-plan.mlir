// RUN: mla-opt %s | FileCheck %s
// RUN: mla-opt %s | mla-opt | FileCheck %s

// The typed launch plan round-trips: arguments (memref and scalar), a
// workspace, host and GPU launches, kernel info and byte bounds.
// CHECK: mla.launch_plans = [#mla.launch_plan<"f" info {kernel = "decode"} args [<0, "q", "memref", "bf16", "?,16">, <1, "scale", "scalar", "f32">] workspaces [<2, "f32", "arg0.0,16">] launches [<"f_k0", [0, 1, 2], "arg0.0,1,2">, <"f_k1", [2], "5,1,1" block "64,1,1" shared 1024>] max_bytes [<0, 4294967295>]>]
module attributes {mla.launch_plans = [#mla.launch_plan<"f" info {kernel = "decode"} args [<0, "q", "memref", "bf16", "?,16">, <1, "scale", "scalar", "f32">] workspaces [<2, "f32", "arg0.0,16">] launches [<"f_k0", [0, 1, 2], "arg0.0,1,2">, <"f_k1", [2], "5,1,1" block "64,1,1" shared 1024>] max_bytes [<0, 4294967295>]>]} {
}
