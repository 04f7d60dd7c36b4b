//===- KindTestUtils.h - Prefill, merge, append_kv packages ----*- C++ -*-===//
//
// Packages around the reference kernels of RefKindKernels.cpp with the
// manifests the compiler writes for `kernel prefill`, `kernel merge` and
// `kernel append_kv`, random data for them, and float64 references.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_TEST_KINDTESTUTILS_H
#define MLA_RUNTIME_TEST_KINDTESTUTILS_H

#include "mla/runtime/Runtime.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mla::rt::test {

/// The bytes of the reference prefill/merge/append_kv shared object.
std::vector<uint8_t> refKindKernelCode();

/// A package of `manifest` with the reference kernels as code.host-x86_64.
std::vector<uint8_t> kindPackageBytes(const std::string &manifest);
Package kindPackage(const std::string &manifest);

/// Loads kindPackage(manifest) on the host (gtest failure on error).
Kernel loadKindKernel(const std::string &manifest, unsigned threads = 2);

// ---- prefill --------------------------------------------------------------

struct PrefillShape {
  DType dtype = DType::BF16; // bf16 or f32
  int64_t heads = 2;
  int64_t qkDim = 24;
  int64_t vDim = 16;
  bool causal = true;
  /// Write '?' for the heads / head-dim dims of the args (the header still
  /// fixes them): reaches the launch-time header checks.
  bool dynamicDims = false;
};

std::string prefillManifest(const PrefillShape &shape);

struct PrefillData {
  HostTensor q, k, v, cuSeqlensQ, cuSeqlensK, o, lse;
  float scale = 0;

  std::map<std::string, ArgValue> byRole() const;
};

/// Random q, k, v in [-1, 1) (rounded to the dtype) for requests with the
/// given query and key lengths; o and lse zeroed.
PrefillData makePrefillData(const PrefillShape &shape,
                            const std::vector<int32_t> &queryLens,
                            const std::vector<int32_t> &keyLens, uint32_t seed);

/// float64 reference: o [T,H,Dv], lse [H,T] (-inf for a query that sees no
/// key, with o = 0).
struct KindReference {
  std::vector<double> o, lse;
};
KindReference referencePrefill(const PrefillShape &shape,
                               const PrefillData &data);

// ---- merge ----------------------------------------------------------------

struct MergeShape {
  DType dtype = DType::BF16; // of o
  int64_t heads = 2;
  int64_t vDim = 16;
  int64_t parts = 3;
};

std::string mergeManifest(const MergeShape &shape);

struct MergeData {
  HostTensor oParts, lseParts, o, lse;

  std::map<std::string, ArgValue> byRole() const;
};

/// Random parts for `rows` query rows: o_parts in [-1, 1), lse_parts in
/// [-4, 4); part n of row t is empty (-inf) when (t + n) % 3 == 0, and
/// every part of row 1 (when rows > 1) is empty.
MergeData makeMergeData(const MergeShape &shape, int64_t rows, uint32_t seed);

KindReference referenceMerge(const MergeShape &shape, const MergeData &data);

// ---- append_kv ------------------------------------------------------------

struct AppendKvShape {
  DType dtype = DType::BF16;
  int64_t latentDim = 24;
  int64_t ropeDim = 8;
  /// Manifest page size (0 = dynamic); the data uses actualPageSize().
  int64_t pageSize = 4;

  int64_t row() const { return latentDim + ropeDim; }
  int64_t actualPageSize() const { return pageSize ? pageSize : 4; }
};

std::string appendKvManifest(const AppendKvShape &shape);

struct AppendKvData {
  HostTensor kvNew, slotMapping, kv;

  std::map<std::string, ArgValue> byRole() const;
};

/// `slots.size()` new random rows, a pool of `numPages` pages filled with
/// random rows.
AppendKvData makeAppendKvData(const AppendKvShape &shape,
                              const std::vector<int32_t> &slots,
                              int64_t numPages, uint32_t seed);

/// The pool after the append, as floats: `before` with every row of a
/// token whose slot is not -1 replaced by its kv_new row.
std::vector<float> referenceAppendKv(const AppendKvData &before);

} // namespace mla::rt::test

#endif // MLA_RUNTIME_TEST_KINDTESTUTILS_H
