//===- MLAAttrs.td - mla attributes ------------------------*- tablegen -*-===//
#ifndef MLA_ATTRS_TD
#define MLA_ATTRS_TD

include "mla/Dialect/MLA/IR/MLADialect.td"

def MLA_ConfigAttr : AttrDef<MLA_Dialect, "Config"> {
  let mnemonic = "config";
  let summary = "Tiling and distribution choices for one attention op";
  let description = [{
    The typed configuration that `mla-select-config` attaches to a semantic
    op and that every later pass reads. Parameters:

    * `tile_kv`: keys per KV tile (rows staged per step of the online
      softmax). A power of two, 8..256.
    * `kv_splits`: how many workgroups share one request's keys (split-KV);
      their partial results are combined with `mla.merge`. 1..64.
    * `head_group`: query heads one workgroup processes together (the M
      dimension of both GEMMs with the query positions). Must divide the
      op's head count.
    * `warps`: waves/warps per workgroup on GPU targets (1..16); the host
      runs one workgroup per thread and ignores it.
    * `stages`: key tiles in flight (1..4): with S > 1 the key loop copies
      tile i + S - 1 while it computes tile i (all targets; cp.async groups
      stay in flight on NVIDIA). Key loops with a mask region use 1.
    * `min_workgroups` (optional, default 0): balanced split-KV. When
      non-zero, a request uses only `clamp(ceil(min_workgroups / (batch *
      head groups)), 1, kv_splits)` of its `kv_splits` splits, chosen at run
      time from the batch size, so that small batches still fill the chip
      and large ones do not pay for needless splits; the others are empty.
    * `kv_chunks` (optional, default 0): the length-aware schedule of
      `mla.decode` when non-zero (then `kv_splits = 1`, `min_workgroups =
      0`). At run time, on the device, `mla.chunk_plan` cuts the batch's key
      tiles into chunks of `q = max(1, ceil(T / max(1, kv_chunks / G)))`
      tiles each, where `T` is the sum over requests of `ceil(seq_len /
      tile_kv)` and `G` the head groups: each request gets
      `max(1, ceil(its tiles / q))` chunks, aligned to its first key, so that long
      requests are split and short ones take one chunk each; about
      `kv_chunks` workgroups (chunks times head groups) run, at most
      `kv_chunks + G·batch`. `mla.chunk_merge` combines each request's
      chunks. The chunks depend on the lengths alone, so the result is the
      same for any `workgroups`. `mla-select-config` sets it for decode on
      every target: the workgroups that fill the chip (256 on sm_90a), or
      the SMs / CUs (132 on sm_90a) where one workgroup takes more than
      half of the shared memory.
    * `workgroups` (optional, default 0): with `kv_chunks`, the workgroups
      along the grid's x that take the chunks in turn (workgroup w runs
      chunks w, w + workgroups, ...); 0: one workgroup per possible chunk
      (`batch + max(1, kv_chunks / G)`), each running at most one.
    * `chunk_balance` (optional, default 16, `kChunkBalance` in
      `mla/runtime/ChunkSchedule.h`): with `kv_chunks` and `chunk_windows`
      0 or 1 (asked for with 2 it is an error), chunks are
      also at least `ceil(sqrt(T / chunk_balance))` tiles long, so that a
      small batch is cut into fewer, longer chunks (each chunk costs its
      partial result and a share of the merge). 1..2^20; larger values give
      more, shorter chunks.
    * `merge_groups` (optional, default 1): with `kv_chunks`, the part
      groups of `mla.chunk_merge` (its `groups`): the threads of a merge
      workgroup split a request's chunks among this many groups, whose sums
      meet in workgroup memory (more loads in flight for a request of many
      chunks); a request of at most 16 chunks is merged by one group.
      1..16; mla-select-config picks 4 on GPUs where one workgroup takes
      every head (H <= head_group), else 1.
    * `chunk_windows` (optional, default 0): with `kv_chunks`, 1 cuts the
      batch's key tiles, requests laid end to end, into windows of `q`
      tiles (at most `max(1, kv_chunks / G)` of them, no refinement) in
      place of cutting each request from its first key: a chunk is a
      request's piece of one window, and one workgroup takes every piece
      of its window in turn, so every workgroup holds at most `q` tiles
      (a request that starts inside a window costs that window a second
      chunk). 2 chooses at run time, in the plan (the default on GPU
      targets; the host keeps 0): the least `q` is bounded by the merge
      (`ceil(T / (B·kMergeChunks))`, not by `chunk_balance`), and of `q` ..
      `q + kAdaptiveSearch - 1` (`mla/runtime/ChunkSchedule.h`) the least
      whose request-aligned chunks number at most `max(1, kv_chunks / G)`
      (one wave) is taken, else the windows of `q` (a ragged batch), in
      place of the refinement. 0, 1 or 2; kv_chunks = 0 turns a default of
      2 off.
    * `tile_q` (optional, default 0): query rows per workgroup of
      `mla.prefill` (a power of two, 16..256; 0 on decode, whose rows are
      `head_group` heads times the query length).
    * `wgmma` (optional, default 1): on targets with warpgroup MMA (sm_90a),
      the fused attention step of `mla-distribute` uses `wgmma.mma_async`
      (operands in 128-byte-swizzled shared memory) where its shape allows;
      0 keeps the warp-level `mma.sync` lowering. Other targets ignore it.
    * `blocked_copies` (optional, default 1): on targets with asynchronous
      copies (NVIDIA's cp.async), `mla-distribute` spreads a copy phase's
      rows over the threads with each thread's 16-byte pieces fixed where
      the tile's shape allows (one page lookup per row, the pieces
      immediate offsets, whole sectors per warp instruction); 0 keeps the
      linear mapping (`idx = tid + k * threads`, the previous strategy, for
      comparison). Other targets ignore it.
    * `overlap` (optional, default 0): 1 lags each key tile's P·V by one
      step so that it runs while the next tile's softmax does: `mla-tile`
      copies the values one tile behind the keys and marks the step
      `overlap`; on sm_90a the fused warpgroup-MMA step then issues tile
      i's scores, then tile i - 1's P·V, and computes tile i's softmax
      while that product runs (FlashAttention-3's intra-warpgroup
      overlap). Prefill only, with `stages` >= 2, no mask variant, on
      targets with warpgroup MMA or the host (which runs the lagged copies
      in order, for testing); `mla-select-config` refuses it elsewhere. 0
      keeps the step in sequence.

    * `fused_merge` (optional, default 0): with `kv_chunks`, 1 merges each
      request in the chunks kernel instead of a merge launch after it: each
      chunk, once its partial result is written, counts itself in its
      request's counter (the plan's last row, `counterRow` in
      `mla/runtime/ChunkSchedule.h`, an atomic add), and the workgroup
      whose chunk completes the count (chunks times head groups) merges the
      request's parts for every query and head and zeroes the counter
      again, so that requests merge while other chunks still run and no
      launch waits for the whole batch. `merge_groups` must then be 1. 0
      keeps `mla.chunk_merge` as a launch of its own.
    * `lead_scores` (optional, default 0): on sm_90a, where the fused
      warpgroup-MMA step has two warpgroups share 64 query rows and split
      the value columns (decode's 64-head groups), 1 has the first warpgroup
      compute the whole key tile's scores (`m64n64k16`), their softmax and
      P, and hand P and the rows' corrections to the second through shared
      memory, instead of each computing half of the keys' scores
      (`m64n32k16`, the row maxima exchanged, what 0 keeps): the scores
      then read 4 KB of shared memory per 64 x 64 x 16 product instead of
      6. 2 is 1 and, in a pipelined key loop (two stages), hands the
      next key tile's copy to the second warpgroup, which issues it over
      its 128 threads while the first computes the scores (each iteration
      then waits for the tile in flight and runs one barrier first, which
      also ends the previous tile: none at its end; its page lookup needs
      no barrier of its own). `mla-select-config` picks 2 for its sm_90a
      decode configs of 64-key tiles with such a split (H=128 without a
      mask variant; 9-14 % faster than 1 on an H100) and drops that
      default where the overrides' step has none; asked for where the
      step has none (other targets, other shapes), it is an error. 3 is 2
      with the second warpgroup's P·V one key tile behind the first's
      (it multiplies the last tile's P beside the lead's scores, then
      issues the next tile's copy into that tile's slot; named barriers
      in place of the handoff barrier); it needs two stages (an error
      otherwise). 4 is 3 with that copy split: the next tile's columns
      before the second warpgroup's value half are issued at the top of
      the iteration, the rest after its product (where a page holds a
      key tile; with smaller pages 4 runs as 3). 3 and 4 have not yet run
      on a GPU. The host ignores the field.

    Example: `#mla.config<tile_kv = 64, kv_splits = 4, head_group = 16,
    warps = 4, stages = 2>`.
  }];
  let parameters = (ins "int64_t":$tile_kv, "int64_t":$kv_splits,
                        "int64_t":$head_group, "int64_t":$warps,
                        "int64_t":$stages,
                        DefaultValuedParameter<"int64_t", "0">:$min_workgroups,
                        DefaultValuedParameter<"int64_t", "0">:$tile_q,
                        DefaultValuedParameter<"int64_t", "1">:$wgmma,
                        DefaultValuedParameter<"int64_t", "0">:$kv_chunks,
                        DefaultValuedParameter<"int64_t", "0">:$workgroups,
                        DefaultValuedParameter<"int64_t", "::mla::rt::schedule::kChunkBalance">:$chunk_balance,
                        DefaultValuedParameter<"int64_t", "1">:$merge_groups,
                        DefaultValuedParameter<"int64_t", "0">:$chunk_windows,
                        DefaultValuedParameter<"int64_t", "1">:$blocked_copies,
                        DefaultValuedParameter<"int64_t", "0">:$overlap,
                        DefaultValuedParameter<"int64_t", "0">:$fused_merge,
                        DefaultValuedParameter<"int64_t", "0">:$lead_scores);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def MLA_TargetAttr : AttrDef<MLA_Dialect, "Target"> {
  let mnemonic = "target";
  let summary = "The target a module is compiled for";
  let description = [{
    The chip (or the host) the passes of the lower half compile for, one
    name of the target table (`lib/Target/Arch.cpp`): `host`, `sm_80`,
    `sm_90a`, `gfx90a`, `gfx942`, `gfx950`. `mla-select-config` sets it on
    the module as `mla.target` (from its `target` option) and every later
    pass that depends on the target reads it from there; `getArch()` is its
    entry in the target table, which answers capability questions (warp
    size, shared memory, matrix instructions, async copies, buffer ops,
    warpgroup MMA).

    Example: `module attributes {mla.target = #mla.target<"gfx942">}`.
  }];
  let parameters = (ins StringRefParameter<"target name">:$name);
  let assemblyFormat = "`<` $name `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The target table's entry (never null for a verified attribute).
    const ::mla::ArchInfo &getArch() const;
  }];
}

//===----------------------------------------------------------------------===//
// The launch plan: what the outliners tell mla-compile (and the runtime,
// through the package manifest) about one function's kernels.
//===----------------------------------------------------------------------===//

// A list printed in square brackets, possibly empty (MLADialect.cpp); the
// optional form is left out where empty.
class MLA_BracketedList<string elem, string desc = "">
    : ArrayRefParameter<elem, desc> {
  let parser = "::mla::parseBracketedList<" # elem # ">($_parser)";
  let printer = "::mla::printBracketedList($_printer, $_self)";
}
/// A flag written as a keyword alone (the keyword of its optional group):
/// parsing it consumes nothing, printing it prints nothing.
class MLA_KeywordFlag<string desc = "">
    : AttrParameter<"bool", desc> {
  let parser = "::mlir::FailureOr<bool>(true)";
  let printer = "(void)$_self";
  let defaultValue = "false";
}

class MLA_OptionalBracketedList<string elem, string desc = "">
    : OptionalArrayRefParameter<elem, desc> {
  let parser = "::mla::parseBracketedList<" # elem # ">($_parser)";
  let printer = "::mla::printBracketedList($_printer, $_self)";
}

// An argument's dims: integers, `?` for one the launcher reads from the
// tensor (mla::rt::kDynamicDim); none for a scalar or a rank-0 memref.
def MLA_ArgDims : OptionalArrayRefParameter<"int64_t", "dims"> {
  let parser = "::mla::parseArgDims($_parser)";
  let printer = "::mla::printArgDims($_printer, $_self)";
}

def MLA_PlanArgAttr : AttrDef<MLA_Dialect, "PlanArg"> {
  let mnemonic = "plan_arg";
  let summary = "One argument of a planned function";
  let description = [{
    Argument `index` of the function: its `role` (its `mla.role`: every
    argument of a kernel tiled from a semantic op has one, an argument
    without it is a located error; in a hand-written grid function an
    argument without one is `argI`),
    `memref` or `scalar`, its element type as the runtime names it (`bf16`,
    `f16`, `f32`, `i32`, `i64`) and, for a memref, its dims (`?` for a size
    the launcher reads from the tensor; none for rank 0).
    Example: `#mla.plan_arg<0, "q", "memref", "bf16", [?, 16]>`.
  }];
  let parameters = (ins "int64_t":$index, StringRefParameter<"role">:$role,
                        StringRefParameter<"memref or scalar">:$kind,
                        StringRefParameter<"element type">:$dtype,
                        MLA_ArgDims:$dims);
  let assemblyFormat = "`<` $index `,` $role `,` $kind `,` $dtype (`,` $dims^)? `>`";
  let genVerifyDecl = 1;
}

def MLA_PlanWorkspaceAttr : AttrDef<MLA_Dialect, "PlanWorkspace"> {
  let mnemonic = "plan_workspace";
  let summary = "A workspace the launcher allocates for a planned function";
  let description = [{
    Buffer `index` (numbered after the arguments): a top-level `memref.alloc`
    of the function, with its element type and dims as sizes: integers or
    the runtime's formulas of the arguments' actual dims
    (include/mla/Dialect/MLA/IR/PlanSizes.h: `argI.D`, `argI.D + C`,
    `(argI.D - C) ceildiv K`, ...).
    Example: `#mla.plan_workspace<3, "f32", [arg0.0, 16]>`.
  }];
  let parameters = (ins "int64_t":$index, StringRefParameter<"element type">:$dtype,
                        MLA_BracketedList<"::mla::rt::DimExpr", "dims">:$dims);
  let assemblyFormat = "`<` $index `,` $dtype `,` $dims `>`";
  let genVerifyDecl = 1;
}

def MLA_PlanLaunchAttr : AttrDef<MLA_Dialect, "PlanLaunch"> {
  let mnemonic = "plan_launch";
  let summary = "One kernel launch of a planned function";
  let description = [{
    The kernel `entry`, the plan indices (arguments and workspaces) of its
    parameters in order, its grid as three sizes (as a workspace's dims)
    and, on GPUs, its workgroup size (three positive integers, at most
    the runtime's kMaxBlockThreads in all) and dynamic shared-memory bytes.
    `dependent` (the manifest's `dependent`): the kernel waits at its start
    for the launches before it (`nvvm.griddepcontrol wait`), so that the
    runtime may start it while they run (programmatic dependent launch;
    `mla-outline-gpu-kernels` sets it on every launch but the first where
    the target has it).
    Example: `#mla.plan_launch<"f_k1", [0, 1] grid [arg0.0 ceildiv 4, 1, 1]
    block [64, 1, 1] shared 1024 dependent>`.
  }];
  let parameters = (ins StringRefParameter<"entry">:$entry,
                        MLA_BracketedList<"int64_t", "parameters">:$args,
                        MLA_BracketedList<"::mla::rt::DimExpr", "grid">:$grid,
                        MLA_OptionalBracketedList<"int64_t", "block">:$block,
                        DefaultValuedParameter<"int64_t", "-1">:$shared,
                        MLA_KeywordFlag<"waits for the launches before it">:$dependent);
  let assemblyFormat = [{
    `<` $entry `,` $args `grid` $grid
    (`block` $block^)? (`shared` $shared^)? (`dependent` $dependent^)? `>`
  }];
  let genVerifyDecl = 1;
}

def MLA_PlanMaxBytesAttr : AttrDef<MLA_Dialect, "PlanMaxBytes"> {
  let mnemonic = "plan_max_bytes";
  let summary = "The largest byte size the runtime accepts for a buffer";
  let description = [{
    `mla-amdgpu-buffer-ops` bounds every buffer argument its code reads
    through a 32-bit buffer descriptor; the runtime refuses larger tensors.
    Example: `#mla.plan_max_bytes<1, 4294966143>`.
  }];
  let parameters = (ins "int64_t":$index, "int64_t":$bytes);
  let assemblyFormat = "`<` $index `,` $bytes `>`";
}

def MLA_LaunchPlanAttr : AttrDef<MLA_Dialect, "LaunchPlan"> {
  let mnemonic = "launch_plan";
  let summary = "How to launch the kernels of one outlined function";
  let description = [{
    Written by `mla-outline-host-kernels` / `mla-outline-gpu-kernels` (one
    per function with `mla.grid` ops, in the module's `mla.launch_plans`),
    amended by `mla-amdgpu-buffer-ops` (`max_bytes`), and turned by
    mla-compile into the package manifest: the function's name, its kernel
    info (`mla.kernel_info`: kind, shape, config), its arguments, the
    workspaces to allocate and the launches in order. Elements print in
    their short form. Example:
    `#mla.launch_plan<"f" args [<0, "q", "memref", "bf16", [?, 16]>]
    workspaces [] launches [<"f_k0", [0] grid [arg0.0, 1, 1]
    block [64, 1, 1] shared 0>]>`. The verifier checks that every size
    names a dim of a memref argument.
  }];
  let parameters = (ins
    StringRefParameter<"function">:$function,
    OptionalParameter<"::mlir::DictionaryAttr">:$info,
    MLA_BracketedList<"PlanArgAttr">:$args,
    MLA_BracketedList<"PlanWorkspaceAttr">:$workspaces,
    MLA_BracketedList<"PlanLaunchAttr">:$launches,
    MLA_OptionalBracketedList<"PlanMaxBytesAttr">:$max_bytes);
  let assemblyFormat = [{
    `<` $function (`info` $info^)?
    `args` $args `workspaces` $workspaces `launches` $launches
    (`max_bytes` $max_bytes^)? `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The launch of kernel `entry`, or null.
    PlanLaunchAttr findLaunch(::llvm::StringRef entry) const;
    /// This plan with `max_bytes` replaced.
    LaunchPlanAttr withMaxBytes(::llvm::ArrayRef<PlanMaxBytesAttr> bounds) const;
  }];
}

#endif // MLA_ATTRS_TD
