//===- Builders.h - semantic kernels built from typed specs -----*- C++ -*-===//
//
// The kernels mla-compile's --kernel flags describe, built with OpBuilder so
// that every embedding (tools, C, Python) builds the same module: a
// builtin.module holding one func.func whose arguments are the kernel's
// operands, the semantic mla op and a return, ready for the pipelines of
// mla/Pipelines/Pipelines.h.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_KERNELS_BUILDERS_H
#define MLA_KERNELS_BUILDERS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include <cstdint>
#include <functional>
#include <string>

namespace mla {

/// mla.decode: q [B, q_len, heads, latent + rope], the page pool kv [pages,
/// page_size, latent + rope], block_table [B, ?] and seq_lens [B] (i32), the
/// f32 scale, o [B, q_len, heads, latent] and lse [B, q_len, heads] (f32).
struct DecodeSpec {
  int64_t heads = 16;         ///< >= 1
  int64_t latentDim = 512;    ///< a positive multiple of 16
  int64_t ropeDim = 64;       ///< a non-negative multiple of 16
  int64_t pageSize = 64;      ///< >= 1, or 0 for a page size chosen at run time
  int64_t qLen = 1;           ///< >= 1; > 1 is MTP
  std::string dtype = "bf16"; ///< q/kv/o: bf16, f16 or f32
};

/// mla.prefill over ragged requests: q, k [T, heads, qk_dim], v [T, heads,
/// v_dim], cu_seqlens_q/k (i32 prefix sums), the f32 scale, o [T, heads,
/// v_dim] and lse [heads, T] (f32).
struct PrefillSpec {
  int64_t heads = 16;         ///< >= 1
  int64_t qkDim = 192;        ///< a positive multiple of 16
  int64_t vDim = 128;         ///< a positive multiple of 16, <= qkDim
  bool causal = false;        ///< bottom-right aligned causal mask
  std::string dtype = "bf16"; ///< q/k/v: bf16, f16 or f32
  std::string oDtype;         ///< o: empty (the dtype), the dtype or f32
};

/// mla.merge of `parts` stacked chunk results: o_parts [parts, T, heads,
/// v_dim] and lse_parts [parts, heads, T] (f32) -> o [T, heads, v_dim], lse
/// [heads, T], through transposed views in mla.merge's layout.
struct MergeSpec {
  int64_t heads = 16;         ///< >= 1
  int64_t vDim = 128;         ///< a positive multiple of 16
  int64_t parts = 2;          ///< >= 1
  std::string dtype = "bf16"; ///< o: bf16, f16 or f32
};

/// mla.append_kv: new rows kv_new [N, latent + rope] written into the pool kv
/// [pages, page_size, latent + rope] at slot_mapping [N] (i32; -1 = padding).
struct AppendKVSpec {
  int64_t latentDim = 512;    ///< a positive multiple of 16
  int64_t ropeDim = 64;       ///< a non-negative multiple of 16
  int64_t pageSize = 64;      ///< >= 1, or 0 for a page size chosen at run time
  std::string dtype = "bf16"; ///< bf16, f16 or f32
};

/// How a module is built and its spec errors are worded.
struct BuildOptions {
  /// File name of the locations: `<name>:L:C` is the op's place in the
  /// kernel's listing (line 1 the signature, each op on its own line at
  /// column 3), the place it had in the text mla-compile used to parse.
  /// Empty: `<kernel>`, e.g. `<decode>`.
  std::string sourceName;
  /// Spelling of a spec field in error messages, given its snake_case name
  /// (`latent_dim`); unset: that name. mla-compile names its flags
  /// (`--latent-dim`).
  std::function<std::string(llvm::StringRef)> fieldName;
};

/// Each builder checks its spec and returns the verified module, or emits
/// one error naming the field at fault (`heads must be >= 1 (got 0)`),
/// located at the module's `<sourceName>:0:0`, through `context`'s
/// diagnostic handlers and fails. It loads the dialects the module uses.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildDecodeModule(mlir::MLIRContext &context, const DecodeSpec &spec,
                  const BuildOptions &options = {});
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildPrefillModule(mlir::MLIRContext &context, const PrefillSpec &spec,
                   const BuildOptions &options = {});
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildMergeModule(mlir::MLIRContext &context, const MergeSpec &spec,
                 const BuildOptions &options = {});
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildAppendKVModule(mlir::MLIRContext &context, const AppendKVSpec &spec,
                    const BuildOptions &options = {});

} // namespace mla

#endif // MLA_KERNELS_BUILDERS_H
