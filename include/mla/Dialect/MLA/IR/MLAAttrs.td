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
    * `tile_q` (optional, default 0): query rows per workgroup of
      `mla.prefill` (a power of two, 16..256; 0 on decode, whose rows are
      `head_group` heads times the query length).
    * `wgmma` (optional, default 1): on targets with warpgroup MMA (sm_90a),
      the fused attention step of `mla-distribute` uses `wgmma.mma_async`
      (operands in 128-byte-swizzled shared memory) where its shape allows;
      0 keeps the warp-level `mma.sync` lowering. Other targets ignore it.

    Example: `#mla.config<tile_kv = 64, kv_splits = 4, head_group = 16,
    warps = 4, stages = 2>`.
  }];
  let parameters = (ins "int64_t":$tile_kv, "int64_t":$kv_splits,
                        "int64_t":$head_group, "int64_t":$warps,
                        "int64_t":$stages,
                        DefaultValuedParameter<"int64_t", "0">:$min_workgroups,
                        DefaultValuedParameter<"int64_t", "0">:$tile_q,
                        DefaultValuedParameter<"int64_t", "1">:$wgmma);
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

#endif // MLA_ATTRS_TD
