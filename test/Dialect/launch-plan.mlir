// RUN: mla-opt %s | FileCheck %s
// RUN: mla-opt %s | mla-opt | FileCheck %s

// The typed launch plan round-trips: arguments (memref and scalar), a
// workspace, host and GPU launches, kernel info and byte bounds.
// CHECK: mla.launch_plans = [#mla.launch_plan<"f" info {kernel = "decode"} args [<0, "q", "memref", "bf16", [?, 16]>, <1, "scale", "scalar", "f32">] workspaces [<2, "f32", [arg0.0, 16]>] launches [<"f_k0", [0, 1, 2] grid [arg0.0, 1, 2]>, <"f_k1", [2] grid [5, 1, 1] block [64, 1, 1] shared 1024>] max_bytes [<0, 4294967295>]>]
module attributes {mla.launch_plans = [#mla.launch_plan<"f" info {kernel = "decode"} args [<0, "q", "memref", "bf16", [?, 16]>, <1, "scale", "scalar", "f32">] workspaces [<2, "f32", [arg0.0, 16]>] launches [<"f_k0", [0, 1, 2] grid [arg0.0, 1, 2]>, <"f_k1", [2] grid [5, 1, 1] block [64, 1, 1] shared 1024>] max_bytes [<0, 4294967295>]>]} {
}

// Every form of a size: a constant, argI.D, plus or minus a constant, a
// ceiling division of either; a rank-0 argument (no dims) and workspace.
// CHECK: #mla.launch_plan<"g" args [<0, "x", "memref", "i32", [?, ?, 3]>, <1, "y", "memref", "f32">] workspaces [<2, "f32", []>, <3, "i32", [arg0.1 - 1, arg0.0 ceildiv 4, (arg0.2 + 7) ceildiv 8, (arg0.0 - 2) ceildiv 3]>] launches [<"g_k0", [0, 1, 2, 3] grid [arg0.0 + 32, arg0.1 ceildiv 64, 1] block [256, 1, 1] shared 0>]>
module attributes {mla.launch_plans = [#mla.launch_plan<"g" args [<0, "x", "memref", "i32", [?, ?, 3]>, <1, "y", "memref", "f32">] workspaces [<2, "f32", []>, <3, "i32", [arg0.1 - 1, arg0.0 ceildiv 4, (arg0.2 + 7) ceildiv 8, (arg0.0 - 2) ceildiv 3]>] launches [<"g_k0", [0, 1, 2, 3] grid [arg0.0 + 32, arg0.1 ceildiv 64, 1] block [256, 1, 1] shared 0>]>]} {
}
