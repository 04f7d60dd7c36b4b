//===- Passes.td - mla passes ------------------------------*- tablegen -*-===//
//
// Every pass of the project. The order they run in, per target, lives in
// lib/Pipelines/Pipelines.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_TRANSFORMS_PASSES_TD
#define MLA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MLASelectConfig : Pass<"mla-select-config", "mlir::ModuleOp"> {
  let summary = "Set the module's #mla.target; attach a typed #mla.config to "
                "every semantic op";
  let description = [{
    The start of the pipeline. Sets the module attribute `mla.target =
    #mla.target<"NAME">` from the `target` option (a module that already
    names a target keeps it; naming a different one in the option is an
    error located at the module; with neither, the target is `host`).
    Every later pass that depends on the target reads it from there.
    Then chooses tile sizes, the KV split count and the head grouping for each
    `mla.decode` from per-target heuristics and attaches them as
    `#mla.config<...>`. An op that already carries a `config` keeps it. The
    `perf-config` option overrides individual fields, e.g.
    `perf-config=tile_kv=32,kv_splits=2`; an unknown field or a config the
    op cannot use is an error located at the op, and so is a config the
    target cannot run (`wgmma=1` on a chip without warpgroup MMA, or for
    shapes whose attention step cannot use warpgroup MMA: the error says
    why, instead of a silent fallback to `mma.sync`).
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "Target to compile for: host, gfx90a, gfx942, gfx950, sm_80, "
           "sm_90a, or an AMD emulation target gfx90a-emu, gfx942-emu, "
           "gfx950-emu (default: the module's mla.target, else host)">,
    Option<"perfConfig", "perf-config", "std::string", /*default=*/"\"\"",
           "Comma-separated field=value overrides of the chosen config "
           "(fields: tile_kv, kv_splits, head_group, warps, stages, "
           "min_workgroups, tile_q, wgmma, kv_chunks, workgroups, "
           "chunk_balance, merge_groups, chunk_windows)">,
  ];
  let dependentDialects = ["mla::MLADialect"];
}

def MLATile : Pass<"mla-tile", "mlir::ModuleOp"> {
  let summary = "Split-KV tiling: semantic ops to grids of blockwise code";
  let description = [{
    Rewrites each configured `mla.decode` into
    1. workspace buffers for the partial results of each KV split,
    2. an `mla.grid` over (request, head group, KV split) whose workgroup
       stages its queries, walks its keys tile by tile with an online softmax
       (running max, running sum, rescaled f32 accumulator; `exp2` with
       log2(e) folded into the scale) and writes a partial `o` and `lse`,
    3. an `mla.merge` combining the splits.
    and rewrites each `mla.merge` into an `mla.grid` over its leading dims.
    Rows that see no key produce `o = 0`, `lse = -inf`. Key tiles are read
    through the logical `mla.load_kv_tile`; each key tile's step of the
    online softmax is one `mla.attention_step` (its `stages` the config's
    pipeline depth: with `stages > 1` the loop body first copies tile
    `i + stages - 1`, then steps over tile `i`); other products use
    `mla.matmul`.
    Each `mla.append_kv` becomes an `mla.grid` with one workgroup per new
    token that reads the token's slot once, checks it against the pool
    (`-1` and any slot outside `[0, pages · P)` write nothing) and copies
    the row in 16-byte vector chunks over an `scf.parallel`.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::scf::SCFDialect", "mlir::math::MathDialect",
                           "mlir::LLVM::LLVMDialect"];
}

def MLAExpandPaging : Pass<"mla-expand-paging", "mlir::ModuleOp"> {
  let summary = "Make the paged KV indirection explicit";
  let description = [{
    Replaces each `mla.load_kv_tile` by a loop over the tile's rows that
    reads the block table, computes `page = block_table[b][t / P]` and
    `slot = t % P` (shifts and masks when P is a power of two), and copies
    the row with vector loads; rows past the end are zero-filled. The page
    of each row is looked up once into a small workgroup buffer; on targets
    that stage pages ahead (AMD; read from the module's `#mla.target`) a key
    loop's tile stages the next tile's pages into the other slot of a
    two-slot buffer in an `mla.unsynchronized` phase, so that the loop has
    no staging barrier.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::scf::SCFDialect",
                           "mlir::vector::VectorDialect"];
}

def MLAExpandSoftmax : Pass<"mla-expand-softmax", "mlir::ModuleOp"> {
  let summary = "Decompose attention steps; online softmax to parallel phases";
  let description = [{
    Decomposes each `mla.attention_step` into `mla.matmul` (S = Q·Kᵀ),
    `mla.online_softmax` and the accumulating `mla.matmul` (P·V) over the
    score, probability and correction tiles it allocates. Then replaces
    each `mla.online_softmax` by four `scf.parallel` phases over
    (row, 8-column chunk) and rows: chunk maxima of the visible logits, the
    new row maxima and corrections, the chunk exponentials (stored to `P`)
    and their sums, the new row sums. Each phase evaluates the op's element
    function inline. The host pipeline runs it before `mla-lower-host`;
    `mla-distribute` applies the same decomposition and expansion to every
    attention step it does not fuse into registers (f32 tiles, masked key
    loops, shapes no register-resident strategy takes).
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::math::MathDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::scf::SCFDialect"];
}

def MLALowerHost : Pass<"mla-lower-host", "mlir::ModuleOp"> {
  let summary = "Lower blockwise ops to vectorised CPU loops";
  let description = [{
    The host target leaves the GPU path at the blockwise level: each
    `mla.matmul` becomes loops over its tile with 16-wide f32 vector FMAs
    along the contiguous dimension (dot products for `transpose_b`, row
    updates otherwise).
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::scf::SCFDialect",
                           "mlir::vector::VectorDialect"];
}

def MLAOutlineHostKernels : Pass<"mla-outline-host-kernels",
                                 "mlir::ModuleOp"> {
  let summary = "Outline grids into host kernel entry points and record "
                "the launch plan";
  let description = [{
    For every function holding `mla.grid` ops: each grid becomes a function
    `<func>_k<i>(captured memrefs and scalars, x, y, z)` plus an entry
    `<func>_k<i>_entry(!llvm.ptr args, i64 x, i64 y, i64 z)` that unpacks
    an array of pointers (memref descriptors, scalars) and calls it once per
    workgroup. Top-level `memref.alloc`s become workspace the runtime
    provides. The function is replaced by a `#mla.launch_plan` in the
    module's `mla.launch_plans` (arguments, workspaces, launches in order
    with grid formulas) from which `mla-compile` writes the package
    manifest.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect",
                           "mlir::func::FuncDialect"];
}

def MLADistribute : Pass<"mla-distribute", "mlir::ModuleOp"> {
  let summary = "Spread blockwise code over the threads of a GPU workgroup";
  let description = [{
    Layer 4 for GPU targets. Inside each `mla.grid`, first the attention
    steps: on NVIDIA, an `mla.attention_step` that ends its key loop's body,
    on 16-bit tiles of the grid (whole 16-row blocks, at most two warps per
    block) becomes one register-resident step per warp
    (`mma.sync` scores, the element function on the fragments, quad
    shuffles for row maxima, probabilities converted in registers into the
    A operand of `P·V`, accumulators/maxima/sums carried by the loop; two
    warps of a block split the key columns and exchange maxima and P in
    shared memory). On sm_90a (config `wgmma`, default 1), when the warps
    form whole warpgroups of 64 rows and the head dims are multiples of 64,
    both products of that step are warpgroup MMA (`wgmma.mma_async` as
    inline PTX): the query, key and value tiles move to 1024-byte aligned
    buffers in the 128-byte swizzle layout (their copies are rewritten to
    the swizzled positions after distribution, and a
    `fence.proxy.async.shared::cta` precedes every barrier), scores come
    from two descriptors, P·V takes P from registers and V as an MN-major
    descriptor, and several warpgroups issue their scores in turn (named
    barriers: ping-pong). The fused lowering is NVIDIA/FusedStep.cpp; with
    `-debug-only=mla-distribute` (a build with LLVM debug output) it says
    which strategy it took or why none is feasible. On AMD, a step that
    ends its key loop's body on 16-bit grid tiles runs in registers through
    the register step (GPU/RegisterStep.cpp): the transposed products
    Sᵀ = K·Qᵀ and Oᵀ += Vᵀ·Pᵀ on MFMA (16x16x16, 32x32x8 or 16x16x32, the
    best whose layouts allow it, from the matrix-instruction data), Q, S, P
    and the output accumulators in registers, the softmax's row maxima by
    XOR shuffles across the lanes of an accumulator column, waves splitting
    rows and key tiles and combining once after the loop. Every other step
    (f32, masked loops, shapes no strategy takes) is decomposed and
    expanded into parallel phases as by `mla-expand-softmax`.
    The copies before a step with `stages > 1` in its loop (pipelined key
    loops) leave their cp.async groups in flight, down to those the loop
    reads next.
    Then the tiles (top-level `memref.alloca`s that are still used) move to
    workgroup memory; every `scf.parallel`
    becomes a loop over its linearised iteration space strided by the
    workgroup's thread count, followed by a `gpu.barrier` (on NVIDIA, a
    parallel masked copy from global memory into a tile becomes `cp.async`
    16-byte copies with zero-fill, waited for before the barrier); every
    `mla.matmul` becomes warp-level matrix-instruction code for bf16/f16
    operands (`mma.sync m16n8k16` on NVIDIA, `amdgpu.mfma 16x16x16` on AMD;
    C tiles spread over the warps/waves, fragments loaded from wherever A
    and B live, rows past M masked) or, for f32 operands, a
    thread-distributed FMA loop; each is followed by a `gpu.barrier`.
    `math.exp2`/`math.log2` become the chip's special-function instructions
    and `math.fma` the LLVM intrinsic, so kernels need no device library. The thread count is the grid config's `warps` (else
    `default-warps`) times the target's warp size, recorded as
    `block_size` on the grid.
  }];
  let options = [
    Option<"defaultWarps", "default-warps", "int64_t", /*default=*/"4",
           "Warps per workgroup for grids without a config">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::NVVM::NVVMDialect",
                           "mlir::nvgpu::NVGPUDialect",
                           "mlir::amdgpu::AMDGPUDialect",
                           "mlir::LLVM::LLVMDialect",
                           "mlir::vector::VectorDialect",
                           "mlir::scf::SCFDialect", "mlir::math::MathDialect"];
}

def MLAOutlineGPUKernels : Pass<"mla-outline-gpu-kernels", "mlir::ModuleOp"> {
  let summary = "Outline distributed grids into gpu.func kernels and record "
                "the launch plan";
  let description = [{
    Every `mla.grid` (after `mla-distribute`) becomes a `gpu.func` kernel in
    `gpu.module @mla_kernels`, reading its coordinates from `gpu.block_id`.
    The grid's tiles (top-level `memref.alloca`s) become views into the
    kernel's dynamic shared memory; more than the module's `mla.target`
    allows is an error.
    Tiles are packed by liveness: two tiles share memory when a barrier
    separates all uses of one from all uses of the other (a use inside a
    loop counts for the whole loop; a loop whose body ends in a barrier
    ends with one).
    Top-level `memref.alloc`s become workspaces, and the function is replaced
    by a `#mla.launch_plan` in the module's `mla.launch_plans`, whose
    launches carry the block size and the dynamic shared-memory bytes.
    On targets with programmatic dependent launch (`ArchInfo::
    hasDependentLaunch`, sm_90a), every kernel but the first waits with
    `nvvm.griddepcontrol wait` and its launch is `dependent`: at its start
    or, from the third kernel on, after its loads of memory the kernel
    before it does not write (`DependentLaunch.h`). Every kernel but the
    last issues `nvvm.griddepcontrol launch_dependents` right after its
    wait (the first: at its start). A grid's `occupancy` becomes
    `nvvm.minctasm` (NVIDIA) or `rocdl.waves_per_eu` (AMD); one that a
    compute unit cannot hold is an error at the grid.
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::NVVM::NVVMDialect"];
}

def MLAAMDGPUBufferOps : Pass<"mla-amdgpu-buffer-ops", "mlir::ModuleOp"> {
  let summary = "Global memory accesses of AMD kernels as buffer operations";
  let description = [{
    In every `gpu.func` kernel, each global memref argument is wrapped once
    at entry in `amdgpu.fat_raw_buffer_cast` (bounds-checked, offset reset):
    the descriptor's base is a kernel argument, hence wave-uniform, and every
    load and store through it lowers to `buffer_load`/`buffer_store` with a
    32-bit per-lane offset. Masked reads (`scf.if` yielding a buffer
    `vector.load` or zeros) become unconditional loads whose first index is
    sent one past the end when masked, so the hardware bounds check returns
    zeros without a branch; the page lookup feeding them is hoisted too.
    Masked writes (`scf.if` around a buffer `vector.store`, e.g. KV append's
    slot check) become unconditional stores sent one past the end the same
    way, which the hardware drops.
    Because offsets are 32-bit, every buffer argument gets a byte limit in
    the launch plan (`#mla.plan_max_bytes`, `max-bytes INDEX BYTES` in the
    manifest: 2^32 - 1 minus the largest
    masked overshoot, one slice of dim 0, or 2^31 when that slice is dynamic)
    that the runtime enforces before launching.
  }];
  let dependentDialects = ["mlir::amdgpu::AMDGPUDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect"];
}

def MLAEmulateAMDGPU : Pass<"mla-emulate-amdgpu", "mlir::ModuleOp"> {
  let summary = "AMD kernels before ROCDL conversion -> host lanes for the "
                "emulator (gfx90a-emu, gfx942-emu, gfx950-emu)";
  let description = [{
    The fork point of the emulation targets: runs on the module that the
    real AMD target converts to ROCDL. Every `gpu.func` becomes a
    `func.func`; a kernel `K` gets an exported entry `K(void **args)` that
    runs one lane (arguments as for host kernels). GPU ids, `gpu.barrier`,
    `gpu.dynamic_shared_memory`, `amdgpu.fat_raw_buffer_cast` (num_records as
    the ROCDL lowering computes it), `amdgpu.mfma` and the cross-lane reads
    (`gpu.shuffle`, `rocdl.readlane`, `rocdl.readfirstlane`,
    `rocdl.ds_bpermute`, `amdgpu.swizzle_bitmode`, `amdgpu.dpp`) become
    calls of the emulator's hooks (runtime/include/mla/runtime/EmuAbi.h);
    memory spaces become integers (LDS 3, fat raw buffer 7, others host
    memory); `llvm.amdgcn.exp2`/`log` become `llvm.exp2`/`log2`. An op of the
    gpu, amdgpu or rocdl dialects it does not emulate is an error located at
    the op. Followed by the host conversion to LLVM and
    `mla-emulate-amdgpu-finalize`. `drop-barrier=N` removes the N-th
    `gpu.barrier` (0-based, in walk order): a test of the emulator's race
    checker on a real kernel.
  }];
  let options = [
    Option<"dropBarrier", "drop-barrier", "int", /*default=*/"-1",
           "Remove the N-th gpu.barrier (testing the race checker; -1: none)">,
  ];
  let dependentDialects = ["mlir::LLVM::LLVMDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::func::FuncDialect",
                           "mlir::memref::MemRefDialect"];
}

def MLAEmulateAMDGPUFinalize : Pass<"mla-emulate-amdgpu-finalize",
                                    "mlir::ModuleOp"> {
  let summary = "Route LDS and buffer accesses of emulated AMD lanes through "
                "the emulator; emit its hook and site tables";
  let description = [{
    On the LLVM dialect, after `mla-emulate-amdgpu` and the conversion to
    LLVM: every `llvm.load`/`llvm.store` through an LDS (address space 3) or
    buffer (7) pointer becomes a call of the emulator's LDS or buffer hook
    through a stack slot; any other memory operation on such a pointer is
    an error. Hooks get bodies that call through the exported table
    `__mla_emu_hooks` (filled by the runtime); hook calls get the index of
    their source location in `__mla_emu_sites` for the emulator's messages.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif // MLA_TRANSFORMS_PASSES_TD
