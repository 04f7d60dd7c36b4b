//===- MLADialect.td - The mla dialect ---------------------*- tablegen -*-===//
#ifndef MLA_DIALECT_TD
#define MLA_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def MLA_Dialect : Dialect {
  let name = "mla";
  let cppNamespace = "::mla";
  let summary = "Multi-head Latent Attention: semantic, gridwise and blockwise ops";
  let description = [{
    The `mla` dialect describes DeepSeek-style Multi-head Latent Attention at
    three levels, each produced from the one above by a pass:

    * **Semantic ops** (`mla.decode`, `mla.prefill`, `mla.merge`,
      `mla.append_kv`): what users write. Head dims are static, batch and
      lengths are dynamic, operands are memrefs. `mla-select-config` attaches
      a `#mla.config` to each and sets the module's `#mla.target`.
    * **Gridwise ops** (`mla.grid`): a grid of independent workgroups, each
      running its region; produced by `mla-tile`.
    * **Blockwise ops** (`mla.load_kv_tile`, `mla.attention_step`,
      `mla.attention_finish`, `mla.matmul`, `mla.online_softmax`): what one
      workgroup does with tiles held in fast memory (LDS / shared memory on
      GPUs, the stack on the host). `mla.attention_step` is one key tile of
      flash attention; where a target does not fuse it, it is decomposed
      into `mla.matmul` and `mla.online_softmax`. `mla.attention_finish` is
      the epilogue (normalised rows and LSE), lowered from registers where
      the step kept its accumulator there. Target lowerings replace them
      all.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let extraClassDeclaration = [{
    // The attributes passes hand each other on ops of other dialects,
    // verified by verifyOperationAttribute / verifyRegionArgAttribute:
    /// builtin.module: the compilation target (#mla.target; mla-select-config).
    static constexpr ::llvm::StringLiteral kTargetAttrName = "mla.target";
    /// builtin.module: the launch plans (array of #mla.launch_plan; the
    /// outliners, amended by mla-amdgpu-buffer-ops).
    static constexpr ::llvm::StringLiteral kLaunchPlansAttrName =
        "mla.launch_plans";
    /// func.func: what the kernel is, for the manifest (dictionary; mla-tile).
    static constexpr ::llvm::StringLiteral kKernelInfoAttrName =
        "mla.kernel_info";
    /// func.func argument: its role in the manifest (string; mla-tile).
    static constexpr ::llvm::StringLiteral kRoleAttrName = "mla.role";
    /// memref.alloca: a tile the warpgroup-MMA step stores swizzled (i64
    /// id of its swizzled buffer) and that buffer (mla-distribute).
    static constexpr ::llvm::StringLiteral kSwizzleSrcAttrName =
        "mla.swizzle_src";
    static constexpr ::llvm::StringLiteral kSwizzleDstAttrName =
        "mla.swizzle_dst";
    /// scf.for in an mla.grid: every iteration writes each workgroup tile
    /// it uses before reading it, so that no tile carries a value from one
    /// iteration to the next (the chunk loop of decode's length-aware
    /// schedule; unit attribute; mla-tile). mla-outline-gpu-kernels then
    /// lets tiles used only inside it share memory per iteration.
    static constexpr ::llvm::StringLiteral kFreshTilesAttrName =
        "mla.fresh_tiles";
    /// scf.parallel: nothing reads what it writes, nor writes what it
    /// reads, before a later barrier of the code around it orders them (the
    /// next key tile's page numbers, staged by mla-expand-paging while the
    /// current tile's copy reads the other slot; the queries' copy of an
    /// NVIDIA fused step, mla-distribute; unit attribute). mla-distribute
    /// emits no barrier after it and, for asynchronous copies, no wait: a
    /// later wait of the thread's copies takes them.
    static constexpr ::llvm::StringLiteral kUnsynchronizedAttrName =
        "mla.unsynchronized";
    /// scf.parallel in a key loop's body: it writes only what the loop's
    /// next iteration reads, into places this iteration reads nothing from
    /// (the next key tile's page numbers, staged by mla-expand-paging into
    /// the other slot; unit attribute). mla-distribute may then move the
    /// next iteration's copy reads to just after the barrier that follows
    /// it (ArchInfo::prefetchesThroughRegisters); on NVIDIA the phase
    /// becomes 4-byte cp.async that land with the key tile's copies.
    static constexpr ::llvm::StringLiteral kNextTileAttrName = "mla.next_tile";
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect", "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect"
  ];
}

class MLA_Op<string mnemonic, list<Trait> traits = []>
    : Op<MLA_Dialect, mnemonic, traits>;

#endif // MLA_DIALECT_TD
