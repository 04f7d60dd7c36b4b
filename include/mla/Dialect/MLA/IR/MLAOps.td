//===- MLAOps.td - mla operations --------------------------*- tablegen -*-===//
#ifndef MLA_OPS_TD
#define MLA_OPS_TD

include "mla/Dialect/MLA/IR/MLADialect.td"
include "mla/Dialect/MLA/IR/MLAAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/OpAsmInterface.td"

//===----------------------------------------------------------------------===//
// Semantic ops
//===----------------------------------------------------------------------===//

def MLA_DecodeOp : MLA_Op<"decode"> {
  let summary = "MLA decode attention (absorbed form) over a paged KV cache";
  let description = [{
    Decode attention in DeepSeek's absorbed (MQA) form. Every cached token is
    one row of `D = latent + rope` elements; the value of a token is the
    first `latent` elements of the same row.

    Operands (B = batch, Sq = query tokens per request, H = heads,
    P = page size, Dv = latent dim, D = Dv + rope dim):

    | operand | type |
    |---|---|
    | `q` | `memref<B x Sq x H x D x T>` |
    | `kv` | `memref<pages x P x D x T>` (the page pool) |
    | `block_table` | `memref<B x max_pages x i32>` |
    | `seq_lens` | `memref<B x i32>` |
    | `scale` | `f32` (run-time softmax scale, no default) |
    | `o` | `memref<B x Sq x H x Dv x To>` (To = T or f32) |
    | `lse` | `memref<B x Sq x H x f32>` (natural log) |

    T is bf16, f16 or f32. Token `t` of request `b` is row
    `kv[block_table[b][t / P]][t % P]`. Query token `i` of request `b` sees
    keys `[0, seq_lens[b] - Sq + i]` (MTP: causal within the drafts).
    `o = softmax(scale · q·Kᵀ)·V` and `lse = log Σ exp(scale · q·Kᵀ)`;
    a row that sees no key gets `o = 0` and `lse = -inf`.

    Head dims, Sq, H and P are static; B, pages and max_pages may be
    dynamic. Latent and rope dims must be multiples of 16 (rope may be 0).
    The optional `config` is set by `mla-select-config`.

    Variants (optional regions, see docs/Variants.md): `score` rewrites each
    score `scale · q·k` before the softmax (block arguments: the score `f32`,
    request, head, query position, key position `index`; yields `f32`);
    `mask` decides whether a key is visible (request, head, query position,
    key position; yields `i1`), on top of the causal/length limits; `sink`
    adds a logit to the softmax denominator (request, head, query position;
    yields `f32`). Positions count within the request's sequence: key `j`,
    and query `i` sits at position `i + Lk - Lq` (decode: `len - Sq + i`).
    The regions may use arith ops, `math.exp`, `math.exp2`, `math.log`,
    `math.log2`, `math.tanh`, `math.absf`, `math.fma` and `memref.load` of
    values defined outside (e.g. a function argument holding per-head
    sinks), and end in `mla.yield`. A row that sees no key (and has no sink)
    gets `o = 0`, `lse = -inf`.

    Example:
    ```mlir
    mla.decode %q, %kv, %bt, %lens, %scale, %o, %lse
        : memref<?x1x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>,
          memref<?xi32>, f32, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[BF16, F16, F32], [4]>, "queries", [MemRead]>:$q,
    Arg<MemRefRankOf<[BF16, F16, F32], [3]>, "KV page pool", [MemRead]>:$kv,
    Arg<MemRefRankOf<[I32], [2]>, "block table", [MemRead]>:$block_table,
    Arg<MemRefRankOf<[I32], [1]>, "sequence lengths", [MemRead]>:$seq_lens,
    F32:$scale,
    Arg<MemRefRankOf<[BF16, F16, F32], [4]>, "output", [MemWrite]>:$o,
    Arg<MemRefRankOf<[F32], [3]>, "log-sum-exp", [MemWrite]>:$lse,
    OptionalAttr<MLA_ConfigAttr>:$config);
  let assemblyFormat = [{
    $q `,` $kv `,` $block_table `,` $seq_lens `,` $scale `,` $o `,` $lse
    attr-dict `:` type($q) `,` type($kv) `,` type($block_table) `,`
    type($seq_lens) `,` type($scale) `,` type($o) `,` type($lse)
    (`score` $score^)? (`mask` $mask^)? (`sink` $sink^)?
  }];
  let regions = (region AnyRegion:$score, AnyRegion:$mask, AnyRegion:$sink);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getQLen() { return getQ().getType().getDimSize(1); }
    int64_t getNumHeads() { return getQ().getType().getDimSize(2); }
    int64_t getHeadDim() { return getQ().getType().getDimSize(3); }
    int64_t getLatentDim() { return getO().getType().getDimSize(3); }
    int64_t getRopeDim() { return getHeadDim() - getLatentDim(); }
    /// Static page size, or ShapedType::kDynamic.
    int64_t getPageSize() { return getKv().getType().getDimSize(1); }
  }];
}

def MLA_PrefillOp : MLA_Op<"prefill"> {
  let summary = "MLA prefill attention (MHA form) over a ragged batch";
  let description = [{
    Prefill attention in the MHA form: every head has its own keys and
    values. A ragged batch of B requests is packed along the token dim;
    request `b` owns query rows `[cu_seqlens_q[b], cu_seqlens_q[b+1])` of
    `q`, `o` (and columns of `lse`) and key rows
    `[cu_seqlens_k[b], cu_seqlens_k[b+1])` of `k` and `v`.

    | operand | type |
    |---|---|
    | `q` | `memref<T x H x Dqk x T>` |
    | `k` | `memref<Tk x H x Dqk x T>` |
    | `v` | `memref<Tk x H x Dv x T>` |
    | `cu_seqlens_q` | `memref<B+1 x i32>` (prefix sums, from 0) |
    | `cu_seqlens_k` | `memref<B+1 x i32>` |
    | `scale` | `f32` (run-time softmax scale) |
    | `o` | `memref<T x H x Dv x To>` (To = T or f32) |
    | `lse` | `memref<H x T x f32>` (natural log) |

    T is bf16, f16 or f32; H, Dqk and Dv are static; Dqk >= Dv, both
    multiples of 16 (DeepSeek: Dqk = 192 = 128 + 64, Dv = 128).
    `o = softmax(scale · q·kᵀ)·v` per request and head. With `causal`, the
    mask is aligned bottom-right: query `i` of a request with `Lq` queries
    and `Lk` keys sees keys `j <= i + Lk - Lq` (chunked prefill: the cached
    context comes first). A query that sees no key gets `o = 0` and
    `lse = -inf`. Partial results over disjoint key chunks combine with
    `mla.merge`.

    Variants (optional regions, see docs/Variants.md): `score` rewrites each
    score `scale · q·k` before the softmax (block arguments: the score `f32`,
    request, head, query position, key position `index`; yields `f32`);
    `mask` decides whether a key is visible (request, head, query position,
    key position; yields `i1`), on top of the causal/length limits; `sink`
    adds a logit to the softmax denominator (request, head, query position;
    yields `f32`). Positions count within the request's sequence: key `j`,
    and query `i` sits at position `i + Lk - Lq` (decode: `len - Sq + i`).
    The regions may use arith ops, `math.exp`, `math.exp2`, `math.log`,
    `math.log2`, `math.tanh`, `math.absf`, `math.fma` and `memref.load` of
    values defined outside (e.g. a function argument holding per-head
    sinks), and end in `mla.yield`. A row that sees no key (and has no sink)
    gets `o = 0`, `lse = -inf`.

    ```mlir
    mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal}
        : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>,
          memref<?xi32>, memref<?xi32>, f32, memref<?x16x128xbf16>,
          memref<16x?xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[BF16, F16, F32], [3]>, "queries", [MemRead]>:$q,
    Arg<MemRefRankOf<[BF16, F16, F32], [3]>, "keys", [MemRead]>:$k,
    Arg<MemRefRankOf<[BF16, F16, F32], [3]>, "values", [MemRead]>:$v,
    Arg<MemRefRankOf<[I32], [1]>, "query prefix sums", [MemRead]>:$cu_seqlens_q,
    Arg<MemRefRankOf<[I32], [1]>, "key prefix sums", [MemRead]>:$cu_seqlens_k,
    F32:$scale,
    Arg<MemRefRankOf<[BF16, F16, F32], [3]>, "output", [MemWrite]>:$o,
    Arg<MemRefRankOf<[F32], [2]>, "log-sum-exp", [MemWrite]>:$lse,
    UnitAttr:$causal,
    OptionalAttr<MLA_ConfigAttr>:$config);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $cu_seqlens_q `,` $cu_seqlens_k `,` $scale `,` $o `,`
    $lse attr-dict `:` type($q) `,` type($k) `,` type($v) `,`
    type($cu_seqlens_q) `,` type($cu_seqlens_k) `,` type($scale) `,` type($o)
    `,` type($lse) (`score` $score^)? (`mask` $mask^)? (`sink` $sink^)?
  }];
  let regions = (region AnyRegion:$score, AnyRegion:$mask, AnyRegion:$sink);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumHeads() { return getQ().getType().getDimSize(1); }
    int64_t getQkDim() { return getQ().getType().getDimSize(2); }
    int64_t getVDim() { return getV().getType().getDimSize(2); }
  }];
}

def MLA_MergeOp : MLA_Op<"merge"> {
  let summary = "Merge partial attention results by their log-sum-exp";
  let description = [{
    Combines N partial results of attention over disjoint key sets (split-KV
    partials, or chunked-prefill chunks):

    `lse = log Σₙ exp(lse_parts[..., n])`,
    `o[..., :] = Σₙ exp(lse_parts[..., n] - lse) · o_parts[..., n, :]`.

    `o_parts` is `memref<R... x N x Dv x f32>`, `lse_parts` is
    `memref<R... x N x f32>`, `o` is `memref<R... x Dv x T>` and `lse`
    `memref<R... x f32>`, with 1 to 3 leading dims `R...`. A part whose LSE is
    `-inf` (an empty split or chunk) contributes nothing; when every part is
    empty, `o = 0` and `lse = -inf` (never NaN).

    ```mlir
    mla.merge %op, %lp, %o, %lse : memref<?x1x16x4x512xf32>,
        memref<?x1x16x4xf32>, memref<?x1x16x512xbf16>, memref<?x1x16xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefOf<[F32]>, "partial outputs", [MemRead]>:$o_parts,
    Arg<MemRefOf<[F32]>, "partial log-sum-exps", [MemRead]>:$lse_parts,
    Arg<MemRefOf<[BF16, F16, F32]>, "merged output", [MemWrite]>:$o,
    Arg<MemRefOf<[F32]>, "merged log-sum-exp", [MemWrite]>:$lse);
  let assemblyFormat = [{
    $o_parts `,` $lse_parts `,` $o `,` $lse attr-dict `:` type($o_parts) `,`
    type($lse_parts) `,` type($o) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def MLA_ChunkPlanOp : MLA_Op<"chunk_plan"> {
  let summary = "Cut a batch's key tiles into chunks by length (on the device)";
  let description = [{
    The plan of decode's length-aware schedule (`#mla.config` `kv_chunks`),
    computed where the kernel runs from the sequence lengths alone, with no
    host synchronisation (so that a captured graph replays with other
    lengths). With `T_b = ceil(max(seq_lens[b], 0) / tile_kv)` key tiles per
    request and `T = Σ T_b`, the chunk size is `q = max(1, ceil(T /
    chunks), ceil(sqrt(T / balance)))` tiles (the square root balances a
    chunk's fixed cost, its partial result and its share of the merge,
    against the tail that a long chunk leaves: the q that minimises
    `T / q · c0 / S + q · c1` is `sqrt(T · c0 / (S · c1))`); request `b` gets `n_b = max(1, ceil(T_b / q))` chunks,
    chunk `j` of it holding tiles `[j·q, min((j+1)·q, T_b))` (a request
    without keys gets one empty chunk, which still writes its rows: `o = 0`,
    or the sink's share). Chunks are numbered request by request: `C_b =
    Σ_{b' < b} n_b'` is the first chunk of request `b` and `K = C_B` their
    count. With `refine > 1`, when `K > chunks` (the chunks would not run
    in one wave of the `chunks` workgroups aimed at) `q` is chosen again
    for `refine · chunks` chunks, so that the wave they spill into holds
    short chunks; `K <= refine · chunks + B`.

    With `windows`, the chunks are cut from the batch's tiles laid end to
    end instead: with `P_b = Σ_{b' < b} T_b'` (request `b`'s first tile in
    the batch), `q = max(1, ceil(T / chunks), ceil(sqrt(T / balance)))`
    cuts them into `W = ceil(T / q) <= chunks` windows `[w·q, (w+1)·q)`,
    and request `b` gets one chunk per window it meets: `n_b = (P_b + T_b
    - 1) / q - P_b / q + 1` (1 when `T_b = 0`), chunk `j` holding its
    tiles `[max(0, (P_b / q + j)·q - P_b), min(T_b, (P_b / q + j + 1)·q -
    P_b))`. A window's chunks are consecutive: `K <= W + B`. `refine` must
    be 1. With `adaptive` (needs `windows`), the plan chooses at run time,
    and `balance` is not read: the least `q` is `q0 = max(1, ceil(T /
    chunks), ceil(T / (max(B, 1)·kMergeChunks)), 2·T > chunks ?
    ceil(kMinChunkKeys / tile_kv) : 1)` (ChunkSchedule.h); of
    `q0, ..., q0 + kAdaptiveSearch - 1` the least whose request-aligned
    chunks number at most `chunks` (one wave) is taken and they are
    written in the windows' layout (chunk `k` as window `k`: `plan[2][b] =
    C_b·q`, `plan[3][w] = min(w, K)`); when none fits, the windows of
    `q0`.

    `plan` is `memref<R x N x i32>` with `N >= B + refine · chunks + 2`:
    `plan[0][0] = K`, `plan[0][1] = q`, `plan[0][2 + b] = C_b` for
    `b = 0..B` (so `plan[0][2 + B] = K`), and `plan[1][k]` is the request of
    chunk `k < K`; `R = 2`. With `windows`, `R = 8`: also `plan[2][b] =
    P_b` and `plan[3][w]` the first chunk of window `w` for `w = 0..chunks`
    (`K` past the last window; window `w` runs chunks `[plan[3][w],
    plan[3][w + 1])`, requests without keys included), and that chunk's
    request `plan[4][w]`, keys `[plan[5][w], plan[6][w])` and request
    length `plan[7][w]` (`max(seq_lens[b], 0)`; an empty range of request
    0, length 0, where the window has no chunk or its first chunk is
    request 0's without keys), so that a workgroup reads its first chunk
    with its window. `mla-tile` runs it as one workgroup (a scan over
    the lengths in blocks of 256).

    ```mlir
    mla.chunk_plan %lens, %plan {tile_kv = 64, chunks = 256, balance = 16,
                                 refine = 4}
        : memref<?xi32>, memref<2x?xi32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[I32], [1]>, "sequence lengths", [MemRead]>:$seq_lens,
    Arg<MemRefRankOf<[I32], [2]>, "the plan", [MemWrite]>:$plan,
    ConfinedAttr<I64Attr, [IntPositive]>:$tile_kv,
    ConfinedAttr<I64Attr, [IntPositive]>:$chunks,
    ConfinedAttr<I64Attr, [IntPositive]>:$balance,
    DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>, "1">:$refine,
    UnitAttr:$windows,
    UnitAttr:$adaptive);
  let assemblyFormat = [{
    $seq_lens `,` $plan attr-dict `:` type($seq_lens) `,` type($plan)
  }];
  let hasVerifier = 1;
}

def MLA_ChunkMergeOp : MLA_Op<"chunk_merge"> {
  let summary = "Merge each request's chunks of a length-aware decode";
  let description = [{
    `mla.merge` for the chunks of `mla.chunk_plan`: request `b`'s rows are
    the log-sum-exp weighted sum of chunks `[C_b, C_{b+1})` of the plan
    (`plan[0][2 + b]`, `plan[0][3 + b]`), merged in chunk order:

    `lse[b, i, h] = log Σₖ exp(lse_parts[k, i, h])`,
    `o[b, i, h, :] = Σₖ exp(lse_parts[k, i, h] - lse[b, i, h]) ·
    o_parts[k, i, h, :]`.

    `o_parts` is `memref<K' x Sq x H x Dv x f32>`, `lse_parts`
    `memref<K' x Sq x H x f32>` (one slot per chunk), `o`
    `memref<B x Sq x H x Dv x T>`, `lse` `memref<B x Sq x H x f32>`. A
    request without chunks, or whose chunks all have `lse = -inf`, gets
    `o = 0` and `lse = -inf` (never NaN).

    `groups` (1..16, default 1; `#mla.config` `merge_groups`) is how
    `mla-tile` spreads a request's chunks over a workgroup's threads: with
    1, each thread sums every chunk of its vector columns, eight at a time;
    with `G > 1`, `G` groups of threads take chunks `C_b + p, C_b + p + G,
    ...` four at a time and their sums meet in workgroup memory (fewer
    groups where those sums would pass 16 KiB); a request of at most 8
    chunks is merged as with 1 (a branch on its part count, uniform in the
    workgroup). The result is the same merge either way, up to rounding.

    ```mlir
    mla.chunk_merge %op, %lp, %plan, %o, %lse : memref<?x1x16x512xf32>,
        memref<?x1x16xf32>, memref<2x?xi32>, memref<?x1x16x512xbf16>,
        memref<?x1x16xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[F32], [4]>, "partial outputs", [MemRead]>:$o_parts,
    Arg<MemRefRankOf<[F32], [3]>, "partial log-sum-exps", [MemRead]>:$lse_parts,
    Arg<MemRefRankOf<[I32], [2]>, "the plan", [MemRead]>:$plan,
    Arg<MemRefRankOf<[BF16, F16, F32], [4]>, "merged output", [MemWrite]>:$o,
    Arg<MemRefRankOf<[F32], [3]>, "merged log-sum-exp", [MemWrite]>:$lse,
    DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>, "1">:$groups);
  let assemblyFormat = [{
    $o_parts `,` $lse_parts `,` $plan `,` $o `,` $lse attr-dict `:`
    type($o_parts) `,` type($lse_parts) `,` type($plan) `,` type($o) `,`
    type($lse)
  }];
  let hasVerifier = 1;
}

def MLA_AppendKVOp : MLA_Op<"append_kv"> {
  let summary = "Write new tokens' KV rows into their pages (KV append)";
  let description = [{
    Writes the cached rows of new tokens into the paged KV pool, each to the
    slot its request's page allocation gave it (vLLM's
    `concat_and_cache_mla`, with the latent and rope parts already
    concatenated into one row).

    | operand | type |
    |---|---|
    | `kv_new` | `memref<N x D x T>`: the new rows, one per token |
    | `slot_mapping` | `memref<N x i32>`: the pool slot of each token |
    | `kv` | `memref<pages x P x D x T>`: the page pool, written in place |

    For each token `t`, with `slot = slot_mapping[t]`:
    `kv[slot / P][slot % P][:] = kv_new[t][:]`. A slot of `-1` marks a
    padding token, which writes nothing. Any slot outside
    `[0, pages · P)` is skipped the same way, so the kernel never writes out
    of bounds (the runtime also rejects such slots before launching). Rows
    not named by any slot keep their contents. Two tokens with the same slot
    write the same row in an unspecified order.

    T is bf16, f16 or f32 (the same for `kv_new` and `kv`). The row width D
    is static and a positive multiple of 8; N and the page count may be
    dynamic, and so may the page size P (>= 1 when static). The optional
    `latent_dim` (in `[1, D]`, default D) says how much of a row is the
    latent part (the rest is the rope part); it does not change what is
    written and is recorded in the package manifest, so that an append
    package can be matched with the decode packages reading the same pool.

    ```mlir
    mla.append_kv %kv_new, %slots, %kv {latent_dim = 512 : i64}
        : memref<?x576xbf16>, memref<?xi32>, memref<?x64x576xbf16>
    ```
  }];
  let arguments = (ins
    Arg<AnyMemRef, "new rows [N, D]", [MemRead]>:$kv_new,
    Arg<AnyMemRef, "slot of each new token [N] (i32; -1 = padding)",
        [MemRead]>:$slot_mapping,
    Arg<AnyMemRef, "KV page pool [pages, P, D]", [MemWrite]>:$kv,
    OptionalAttr<I64Attr>:$latent_dim);
  let assemblyFormat = [{
    $kv_new `,` $slot_mapping `,` $kv attr-dict `:` type($kv_new) `,`
    type($slot_mapping) `,` type($kv)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The row width D (static after verification).
    int64_t getRowWidth() {
      return ::llvm::cast<::mlir::MemRefType>(getKvNew().getType())
          .getDimSize(1);
    }
    /// The latent part of a row: `latent_dim`, else the whole row.
    int64_t getLatentDimOrRow() {
      return getLatentDim() ? static_cast<int64_t>(*getLatentDim())
                            : getRowWidth();
    }
    /// Static page size, or ShapedType::kDynamic.
    int64_t getPageSize() {
      return ::llvm::cast<::mlir::MemRefType>(getKv().getType())
          .getDimSize(1);
    }
  }];
}

def MLA_YieldOp : MLA_Op<"yield", [Pure, Terminator,
                                   ParentOneOf<["DecodeOp", "PrefillOp",
                                                "OnlineSoftmaxOp",
                                                "AttentionStepOp",
                                                "AttentionFinishOp"]>]> {
  let summary = "Ends a variant region or an online-softmax element function";
  let description = [{
    Yields the value of a variant region: the rewritten score (`f32`) of a
    `score` region, the visibility (`i1`) of a `mask` region, the logit
    (`f32`) of a `sink` region; the log2-domain score (`f32`) and the
    visibility (`i1`) of an element in `mla.online_softmax` and
    `mla.attention_step`; nothing at the end of `mla.attention_finish`'s
    regions.

    ```mlir
    score {
    ^bb0(%s: f32, %b: index, %h: index, %qpos: index, %kpos: index):
      %c = arith.constant 30.0 : f32
      %x = arith.divf %s, %c : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %t, %c : f32
      mla.yield %r : f32
    }
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Gridwise ops
//===----------------------------------------------------------------------===//

def MLA_GridOp : MLA_Op<"grid", [SingleBlock, NoTerminator,
                                 RecursiveMemoryEffects]> {
  let summary = "A grid of independent workgroups";
  let description = [{
    Runs its region once per workgroup `(x, y, z)` of a
    `grid_x × grid_y × grid_z` grid. Workgroups of one grid may run in any
    order and concurrently; the grid completes before the next op runs. The
    region's three `index` arguments are the workgroup's coordinates.

    The grid sizes must be constants or `memref.dim` of a function argument
    so that a launcher can compute them from the argument shapes.

    `config` is the `#mla.config` of the op the grid was tiled from
    (`mla-tile`); `block_size`, the threads of one workgroup, is set by
    `mla-distribute` and read by `mla-outline-gpu-kernels`. `occupancy`
    (optional, set by `mla-tile`) asks GPU code generation for room for
    that many workgroups of the grid on one compute unit (SM / CU) at
    once, each workgroup's registers kept within that share
    (`mla-outline-gpu-kernels`: NVIDIA `nvvm.minctasm`, AMD
    `rocdl.waves_per_eu`; more than one compute unit holds, 2048 threads
    or on NVIDIA 32 workgroups, is an error there); the host ignores it.

    ```mlir
    mla.grid in (%B, %c1, %c4) {
    ^bb0(%b: index, %g: index, %s: index):
      ...
    }
    ```
  }];
  let arguments = (ins Index:$grid_x, Index:$grid_y, Index:$grid_z,
                       OptionalAttr<MLA_ConfigAttr>:$config,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>>:$block_size,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>>:$occupancy);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `in` ` ` `(` $grid_x `,` $grid_y `,` $grid_z `)` attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Blockwise ops
//===----------------------------------------------------------------------===//

def MLA_LoadKVTileOp : MLA_Op<"load_kv_tile"> {
  let summary = "Stage rows of one request's paged KV sequence into a tile";
  let description = [{
    For each row `r` of `tile` (`memref<R x D x T>`), with `t = start + r`:
    if `t < end`, copies row `kv[block_table[batch][t / P]][t % P]` into
    `tile[r]`; otherwise fills `tile[r]` with zeros. The paging is logical
    here; `mla-expand-paging` makes the page/slot arithmetic explicit.
    The verifier requires `tile` to have a static shape, `kv`'s element
    type and rows as wide as `kv`'s (dim 2), and a page size `P` (`kv`
    dim 1) of at least 1 where it is static.
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[BF16, F16, F32], [3]>, "KV page pool", [MemRead]>:$kv,
    Arg<MemRefRankOf<[I32], [2]>, "block table", [MemRead]>:$block_table,
    Index:$batch, Index:$start, Index:$end,
    Arg<MemRefRankOf<[BF16, F16, F32], [2]>, "tile", [MemWrite]>:$tile);
  let assemblyFormat = [{
    $kv `[` $block_table `,` $batch `,` $start `,` $end `]` `into` $tile
    attr-dict `:` type($kv) `,` type($block_table) `,` type($tile)
  }];
  let hasVerifier = 1;
}

def MLA_MatmulOp : MLA_Op<"matmul"> {
  let summary = "Tile matrix product with f32 accumulation";
  let description = [{
    `C[m, n] = s[m] · C[m, n] + Σₖ A[m, k] · B[n, k]` with `transpose_b`,
    else with `B[k, n]`. `s` is the optional `c_scale` (the online-softmax
    correction of each accumulator row); without it `s = 1`. Products are
    accumulated in f32. Without `accumulate`, `C` is overwritten (and
    `c_scale` is not allowed). Target lowerings map it to matrix instructions
    (MFMA, MMA) or to vector code.

    ```mlir
    mla.matmul %p, %v, %acc scale %corr {accumulate} : memref<16x64xbf16>,
        memref<64x512xbf16, strided<[576, 1]>>, memref<16x512xf32>, memref<16xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[BF16, F16, F32], [2]>, "A", [MemRead]>:$a,
    Arg<MemRefRankOf<[BF16, F16, F32], [2]>, "B", [MemRead]>:$b,
    Arg<MemRefRankOf<[F32], [2]>, "C", [MemRead, MemWrite]>:$c,
    Arg<Optional<MemRefRankOf<[F32], [1]>>, "row scale of C", [MemRead]>:$c_scale,
    UnitAttr:$transpose_b, UnitAttr:$accumulate);
  let assemblyFormat = [{
    $a `,` $b `,` $c (`scale` $c_scale^)? attr-dict `:` type($a) `,` type($b)
    `,` type($c) (`,` type($c_scale)^)?
  }];
  let hasVerifier = 1;
}

def MLA_OnlineSoftmaxOp : MLA_Op<"online_softmax"> {
  let summary = "One online-softmax step over a tile of scores";
  let description = [{
    The update of flash attention's running softmax state by one tile of
    raw scores `S` (`R x C`, f32). For each row `r` and column `c`, the
    region maps `(r, c, S[r, c])` to the log2-domain logit `x[r, c]` and its
    visibility (the causal limit, the sequence end, a variant's mask, its
    score rewrite and the softmax scale all live there). Then, with `m`, `l`
    the running maximum (log2 domain, -inf before any key) and sum:

    ```
    m'[r]    = max(m[r], max over visible c of x[r, c])
    ref[r]   = m'[r] == -inf ? 0 : m'[r]
    corr[r]  = 2^(m[r] - ref[r])
    p        = visible ? 2^(x[r, c] - ref[r]) : 0      (f32)
    P[r, c]  = p rounded to P's element type
    l'[r]    = l[r] · corr[r] + Σ_c p
    ```

    The accumulator update `acc = diag(corr) · acc + P · V` is the
    `mla.matmul ... scale %corr {accumulate}` that follows. `mla-tile` emits
    the triple (Q·Kᵀ matmul, online_softmax, P·V matmul) once per key tile;
    `mla-distribute` on NVIDIA fuses the triple into warp-level register
    code (scores, probabilities and accumulators never touch shared
    memory); everywhere else `mla-expand-softmax` (host) or
    `mla-distribute` (what it does not fuse) expands it into parallel
    phases over rows and 8-column chunks.

    ```mlir
    mla.online_softmax %s -> %p state(%m, %l, %corr)
        : memref<32x32xf32>, memref<32x32xbf16>, memref<32xf32>,
          memref<32xf32>, memref<32xf32> {
    ^bb0(%row: index, %col: index, %score: f32):
      %x = arith.mulf %score, %scale_log2 : f32
      %vis = arith.cmpi ult, %col, %n : index
      mla.yield %x, %vis : f32, i1
    }
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[F32], [2]>, "scores", [MemRead]>:$s,
    Arg<MemRefRankOf<[BF16, F16, F32], [2]>, "probabilities", [MemWrite]>:$p,
    Arg<MemRefRankOf<[F32], [1]>, "running max", [MemRead, MemWrite]>:$m,
    Arg<MemRefRankOf<[F32], [1]>, "running sum", [MemRead, MemWrite]>:$l,
    Arg<MemRefRankOf<[F32], [1]>, "correction", [MemWrite]>:$corr);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $s `->` $p `state` `(` $m `,` $l `,` $corr `)` attr-dict `:` type($s)
    `,` type($p) `,` type($m) `,` type($l) `,` type($corr) $body
  }];
  let hasVerifier = 1;
}

def MLA_AttentionStepOp : MLA_Op<"attention_step"> {
  let summary = "One step of flash attention over a key tile";
  let description = [{
    The blockwise step of the online softmax that `mla-tile` emits once per
    key tile: with queries `Q` (`R x D`), keys `K` (`T x D`), values `V`
    (`T x Dv`), all of one element type, the accumulator `acc` (`R x Dv`,
    f32) and the running row maximum `m` (log2 domain, -inf before any
    key) and sum `l` (`R`, f32):

    ```
    S        = Q · Kᵀ                                   (f32 accumulation)
    x, vis   = body(r, c, S[r, c])                      (the element region)
    m'[r]    = max(m[r], max over visible c of x[r, c])
    ref[r]   = m'[r] == -inf ? 0 : m'[r]
    corr[r]  = 2^(m[r] - ref[r])
    P[r, c]  = visible ? 2^(x[r, c] - ref[r]) : 0       (rounded to Q's type)
    l'[r]    = l[r] · corr[r] + Σ_c P[r, c]
    acc'     = diag(corr) · acc + P · V
    ```

    The element region maps (row, column in the tile, raw score) to the
    log2-domain logit and its visibility: the softmax scale, the causal
    limit, the sequence end and a variant's score rewrite and mask live
    there, exactly as in `mla.online_softmax`.

    `query_groups = array<i64: G, stride>` (optional) lets `Q` be a view in
    which the step's rows come in groups: row `r` (of `R`, the rows of
    `acc`) is row `(r / G) · stride + r % G` of `Q`, e.g. a decode's
    `Sq x G` rows of a head group read in place from the `Sq x H` rows of
    one request (`stride` = H). Without it row `r` is row `r` of `Q`, which
    has `R` rows.

    `stages` is the key loop's pipeline depth (1..4): with `S > 1` the op
    sits in an `scf.for` whose body first copies key tile `i + S - 1` (the
    copies before the op in the loop body) while this step reads tile `i`,
    so a GPU target may keep the copies of `S - 1` tiles in flight.

    `overlap` (a unit attribute; needs `S > 1`) says that the loop body
    copies value tile `i + S - 2`, one tile behind the keys, so that value
    tile `i` stays intact through the next iteration's step: a lowering may
    then issue this tile's P·V in the next iteration, beside that tile's
    softmax (NVIDIA's fused warpgroup-MMA step; `mla-tile` sets it from the
    config's `overlap`). The op's meaning is unchanged, and the lowerings
    that compute P·V in the step itself (the host, the decomposition)
    ignore it; on a GPU target a step with `overlap` that no lowering can
    lag is an error, since the copies of its values may still be in flight.

    `all_visible(%f)` (optional, `i1`) says, where `%f` is true, that every
    element of this tile is visible: the element is then visible whatever
    the region yields (visibility is `%f or vis`), so a lowering may skip
    evaluating it. `mla-tile` sets it where no row's causal limit or
    sequence end falls inside the tile and no mask variant is present (the
    tiles off the diagonal); NVIDIA's fused step and AMD's register step
    branch on it to a softmax without the per-element check, the other
    lowerings (the transposed step, the decomposition, the host) fold it
    into the visibility.

    Lowerings: `mla-distribute` emits the step in registers where the
    target and the shapes allow one of its fused strategies (NVIDIA:
    mma.sync or wgmma, whole or split scores; AMD: the transposed products
    on MFMA with waves splitting rows and keys; `-debug-only=mla-distribute`
    says why a strategy is refused); otherwise, and everywhere on the host
    (`mla-expand-softmax`), the op is decomposed into `mla.matmul` (Q·Kᵀ),
    `mla.online_softmax` and `mla.matmul ... scale ... {accumulate}` (P·V)
    over score, probability and correction tiles it allocates.

    ```mlir
    mla.attention_step %q, %k, %v -> %acc state(%m, %l) stages 2
        : memref<16x576xbf16>, memref<32x576xbf16>, memref<32x512xbf16>,
          memref<16x512xf32>, memref<16xf32>, memref<16xf32> {
    ^bb0(%row: index, %col: index, %score: f32):
      %x = arith.mulf %score, %scale_log2 : f32
      %vis = arith.cmpi ult, %col, %n : index
      mla.yield %x, %vis : f32, i1
    }
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[BF16, F16, F32], [2]>, "queries", [MemRead]>:$q,
    Arg<MemRefRankOf<[BF16, F16, F32], [2]>, "keys", [MemRead]>:$k,
    Arg<MemRefRankOf<[BF16, F16, F32], [2]>, "values", [MemRead]>:$v,
    Arg<MemRefRankOf<[F32], [2]>, "accumulator", [MemRead, MemWrite]>:$acc,
    Arg<MemRefRankOf<[F32], [1]>, "running max", [MemRead, MemWrite]>:$m,
    Arg<MemRefRankOf<[F32], [1]>, "running sum", [MemRead, MemWrite]>:$l,
    ConfinedAttr<I64Attr, [IntMinValue<1>, IntMaxValue<4>]>:$stages,
    OptionalAttr<DenseI64ArrayAttr>:$query_groups,
    UnitAttr:$overlap,
    Optional<I1>:$all_visible);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $q `,` $k `,` $v `->` $acc `state` `(` $m `,` $l `)` `stages` $stages
    (`all_visible` `(` $all_visible^ `)`)?
    attr-dict `:` type($q) `,` type($k) `,` type($v) `,` type($acc) `,`
    type($m) `,` type($l) $body
  }];
  let extraClassDeclaration = [{
    /// Query rows (the accumulator's; Q's unless `query_groups`), key rows
    /// (the tile), query/key width, value width.
    int64_t getRows() { return getAcc().getType().getDimSize(0); }
    int64_t getTileKeys() { return getK().getType().getDimSize(0); }
    int64_t getHeadDim() { return getQ().getType().getDimSize(1); }
    int64_t getValueDim() { return getV().getType().getDimSize(1); }
    ::mlir::Type getElementType() {
      return getQ().getType().getElementType();
    }
  }];
  let hasVerifier = 1;
}

def MLA_AttentionFinishOp : MLA_Op<"attention_finish"> {
  let summary = "The normalised rows of a finished online softmax";
  let description = [{
    The epilogue of flash attention that `mla-tile` emits after the key
    loop: with the accumulator `acc` (`R x Dv`, f32), the running maximum
    `m` (log2 domain) and sum `l` (`R`, f32) that `mla.attention_step`
    left, and an optional row scale `s` (`R`, f32; a sink's correction,
    1 without it), for every row `r` and every block of `width`
    consecutive value columns starting at `c`:

    ```
    o        = l[r] == 0 ? 0 : acc[r, c : c + width] · s[r] / l[r]
    lse      = l[r] == 0 ? -inf : (m[r] + log2 l[r]) · ln 2
    output(r, c, o)                                      (the first region)
    lse(r, lse)                                          (the second region)
    ```

    The regions say where the results go (a split's workspace slot, the
    output rows of a prefill tile) and are run once per (row, column block)
    and once per row, in no particular order; they may hold any ops and end
    in `mla.yield` with no operands.

    Lowerings: where `mla-distribute` keeps the accumulator of the attention
    steps before it in registers (AMD's register step with one wave per
    row block), the op is lowered from those registers and `acc` needs no
    memory; otherwise (and on the host, `mla-expand-softmax`) it becomes a
    parallel loop over rows and column blocks reading `acc`.

    ```mlir
    mla.attention_finish %acc state(%m, %l) width 4
        : memref<16x512xf32>, memref<16xf32>, memref<16xf32> output {
    ^bb0(%row: index, %col: index, %o: vector<4xf32>):
      vector.store %o, %ws[%row, %col] : memref<16x512xf32>, vector<4xf32>
      mla.yield
    } lse {
    ^bb0(%row: index, %lse: f32):
      memref.store %lse, %lse_ws[%row] : memref<16xf32>
      mla.yield
    }
    ```
  }];
  let arguments = (ins MemRefRankOf<[F32], [2]>:$acc,
      MemRefRankOf<[F32], [1]>:$m, MemRefRankOf<[F32], [1]>:$l,
      Optional<MemRefRankOf<[F32], [1]>>:$scale,
      ConfinedAttr<I64Attr, [IntMinValue<1>]>:$width);
  let regions = (region SizedRegion<1>:$output, SizedRegion<1>:$lse_body);
  let assemblyFormat = [{
    $acc `state` `(` $m `,` $l `)` (`scale` $scale^)? `width` $width attr-dict
    `:` type($acc) `,` type($m) `,` type($l) (`,` type($scale)^)?
    `output` $output `lse` $lse_body
  }];
  let extraClassDeclaration = [{
    int64_t getRows() { return getAcc().getType().getDimSize(0); }
    int64_t getValueDim() { return getAcc().getType().getDimSize(1); }
  }];
  let hasVerifier = 1;
}

#endif // MLA_OPS_TD
