//===- ChunkSchedule.h - decode's length-aware schedule: its sizes -*- C++ -*-//
//
// The sizes of decode's length-aware schedule (#mla.config kv_chunks,
// docs/Architecture.md "Decode: what mla-tile builds"), written once for
// the compiler, which builds the plan, workspaces and grid from them, and
// for the runtime, which checks a package's manifest against them.
// Header-only; no dependencies.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_RUNTIME_CHUNKSCHEDULE_H
#define MLA_RUNTIME_CHUNKSCHEDULE_H

#include <algorithm>
#include <cstdint>

namespace mla::rt::schedule {

/// The chunks mla.chunk_plan aims at for `kvChunks` workgroups of
/// `headGroups` head groups each: max(1, kvChunks / headGroups).
inline int64_t chunkTarget(int64_t kvChunks, int64_t headGroups) {
  return std::max<int64_t>(1, kvChunks / std::max<int64_t>(1, headGroups));
}

/// The grid dim of decode's head groups in its key-range launches (the
/// chunks' and fixed split-KV's; the other of dims 0 and 1 is their
/// workgroups or requests): with several head groups dim 0, so that they
/// vary fastest. Workgroups start in the order of their linear index, so
/// the head groups of one chunk then run at the same time and its keys
/// cross memory once between them (the others read them through the L2
/// cache) instead of once each, a wave apart (H=128, 64 heads a group:
/// 2x the bytes; measured in docs/Performance.md, "Head groups side by
/// side"). With one head group dim 1, so that dim 0 takes the large
/// sizes.
inline constexpr int headGroupGridDim(int64_t headGroups) {
  return headGroups > 1 ? 0 : 1;
}

/// The plan's refinement: when the request-aligned chunks of size q
/// (from chunkTarget) number more than chunkTarget, so that they would not
/// run in one wave of the workgroups it aims at, q is chosen again for
/// kChunkRefine times as many chunks, so that the wave the ragged batch
/// spills into is a few short chunks (mla.chunk_plan). Measured on the
/// H200 (docs/Performance.md, "Length-aware split-KV, second part"): a
/// ragged batch of 128 requests U[1, 16384] took 540 us with these chunks,
/// 412 us with kv_chunks 4x larger and 413 us with the refinement; a
/// uniform batch, which fits one wave, keeps its chunks (371-372 us, where
/// 4x larger kv_chunks took 412 us).
inline constexpr int64_t kChunkRefine = 4;

/// Chunk slots beyond the batch: a batch of B requests gets at most
/// B + chunkSlots chunks (partial results in the workspaces). Windows
/// (#mla.config chunk_windows = 1): the batch's key tiles are cut into at
/// most chunkTarget windows, and a request into its pieces of them, so at
/// most B + chunkTarget chunks; no refinement.
inline int64_t chunkSlots(int64_t kvChunks, int64_t headGroups,
                          bool windows = false) {
  return (windows ? 1 : kChunkRefine) * chunkTarget(kvChunks, headGroups);
}

/// Workspace slots (partial results) for a batch: batch + chunkSlots.
/// The plan is [planRows, batch + chunkSlots + kPlanHeader] int32.
inline constexpr int64_t kPlanHeader = 2;

/// The plan's rows: 0 the header and each request's first chunk, 1 each
/// chunk's request; with windows also 2 each request's first key tile in
/// the batch, 3 each window's first chunk and, for that chunk, 4 its
/// request, 5 its first key, 6 its key end and 7 its request's length
/// (mla.chunk_plan): a workgroup reads its first chunk in one round trip
/// with its window, instead of two more after it. The last row
/// (counterRow) holds each request's count of finished chunks for
/// #mla.config fused_merge: zeroed by the plan, counted up by the chunks,
/// zeroed again by the chunk that merges the request.
inline constexpr int64_t planRows(bool windows) { return windows ? 9 : 3; }

/// The row of the requests' finished-chunk counters (planRows).
inline constexpr int64_t counterRow(bool windows) {
  return planRows(windows) - 1;
}

/// The rows of a window's first chunk (planRows).
inline constexpr int64_t kOpeningRequestRow = 4;
inline constexpr int64_t kOpeningStartRow = 5;
inline constexpr int64_t kOpeningEndRow = 6;
inline constexpr int64_t kOpeningLengthRow = 7;

/// The plan's balance: chunks of at least ceil(sqrt(T / kChunkBalance))
/// key tiles for T tiles in the batch (mla.chunk_plan). Measured on the
/// H200 (docs/Performance.md, "Length-aware split-KV"): fewer, longer
/// chunks for small batches (a chunk costs its partial result and a share
/// of the merge), more, shorter ones for large ragged ones (balance).
inline constexpr int64_t kChunkBalance = 16;

/// The adaptive plan (#mla.config chunk_windows = 2) in place of the
/// balance: chunks of at least ceil(T / (B · kMergeChunks)) tiles for B
/// requests, so that a small batch's requests are cut into at most about
/// this many chunks each (the merge of a request reads its chunks in rounds;
/// measured on the H200, docs/Performance.md "Windows": B=1 L=8192 took
/// 25.9 us in 64 chunks and 39.2 us in 256), while a batch of several
/// requests may still take short chunks (B=8 L=2048: 2-tile chunks 30.2 us,
/// 6-tile chunks 31.9 us).
inline constexpr int64_t kMergeChunks = 64;

/// The adaptive plan's least chunk, in keys: where the batch has more key
/// tiles T than half the chunks aimed at (one-tile chunks would put two
/// workgroups on many SMs), q0 is at least ceil(kMinChunkKeys / tile_kv)
/// tiles. A chunk's fixed cost (its plan and page lookups before the first
/// key, its partial result and a share of the merge after the last) then
/// outweighs the second workgroup's share of its SM for one 64-key tile;
/// where one-tile chunks leave SMs to themselves, a second tile per chunk
/// only halves the SMs at work. Measured on an H100 (docs/Performance.md,
/// "Where the chunks kernel's time goes"), H=16 at 256 chunks aimed at:
/// B=8 L=2048 (T = 256) took 30.1 us in 256 chunks of one 64-key tile,
/// 23.8 in 128 of two; B=4 L=2048 (T = 128) 18.8-20.2 in 128 of one,
/// 20.3-20.5 in 64 of two. Batches of more than 2 · kv_chunks tiles (the
/// production batch, every large one) have longer chunks anyway.
inline constexpr int64_t kMinChunkKeys = 128;

/// The adaptive plan's search: from the least q (the windows' size), the
/// request-aligned chunks of q, q + 1, ..., q + kAdaptiveSearch - 1 tiles
/// are counted (in one pass over the lengths), and the least of them that
/// fits one wave (at most chunkTarget chunks) is taken; when none fits, the
/// windows of q. Additive, not a factor of q: a window that a request
/// starts inside costs a second chunk (about 2-3 tiles' time), so
/// request-aligned chunks a few tiles longer than the windows are still
/// the faster cut. Measured on an H100 (docs/Performance.md "Adaptive
/// plan"): the production batch's chunks kernel took 60.8 us in
/// request-aligned chunks of 14 tiles and 70.0 us in windows of 12; the
/// plan kernel 8.9 us with 8 candidates, 6.6 with 1 (6.9 the default
/// plan's), hence 4.
inline constexpr int64_t kAdaptiveSearch = 4;

} // namespace mla::rt::schedule

#endif // MLA_RUNTIME_CHUNKSCHEDULE_H
