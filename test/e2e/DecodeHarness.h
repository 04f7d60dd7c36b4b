//===- DecodeHarness.h - decode end to end: cases, runs, reference -*- C++ -*-//
//
// What the decode end-to-end tests share (DecodeHostTest.cpp defines it,
// DecodeChunksTest.cpp uses it too): a case compiled with the real
// mla-compile for the test target, one launch on random data (never zeros)
// in a random paged layout, and the float64 reference.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_TEST_E2E_DECODEHARNESS_H
#define MLA_TEST_E2E_DECODEHARNESS_H

#include "HostPackages.h"
#include "mla/runtime/Runtime.h"

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace mla::e2e {

using namespace mla::rt;

struct Case {
  std::string name;
  int64_t heads, latent, rope, pageSize, qLen;
  std::string dtype;
  std::vector<int32_t> lens;
  std::string perfConfig = "";
  /// The random inputs' seed (default: the name), so that cases that
  /// differ only in their config can share inputs.
  std::string inputs = "";
};

inline constexpr float kScale = 0.1352f;

inline std::ostream &operator<<(std::ostream &os, const Case &c) {
  return os << c.name;
}

/// Rounds through the kernel dtype and stores it there.
struct Buffer {
  DType dtype;
  std::vector<uint8_t> bytes;
  std::vector<double> exact; // the rounded values, as the kernel sees them
};

/// One launch: its inputs (the values as the kernel sees them) and outputs.
struct DecodeRun {
  DType dt;
  int64_t batch, d, page, maxPages;
  Buffer q, kv;
  std::vector<int32_t> table, lens;
  std::vector<uint8_t> o;
  std::vector<float> lse;
};

/// Compiles `c` and loads its kernel on the test device.
void loadDecode(const Case &c, std::optional<Kernel> &out);

/// A caller workspace: `bytes` at a MLA_WORKSPACE_ALIGNMENT boundary.
struct Workspace {
  std::vector<uint8_t> storage;
  uint8_t *data = nullptr;
  size_t bytes = 0;
  void allocate(size_t n) {
    storage.assign(n + kWorkspaceAlignment, 0);
    uintptr_t at = reinterpret_cast<uintptr_t>(storage.data());
    data = storage.data() + (kWorkspaceAlignment - at % kWorkspaceAlignment) %
                                kWorkspaceAlignment;
    bytes = n;
  }
};

/// Launches `kernel` (compiled from `c`) on random inputs (seeded by
/// c.inputs, else c.name) in a random paged layout, with `options`; with
/// `workspace`, in that caller workspace (allocated, zeroed, at the first
/// use).
void runDecodeWith(const Kernel &kernel, const Case &c, DecodeRun &r,
                   LaunchOptions options = {}, Workspace *workspace = nullptr);

/// Compiles `c`, launches it on random inputs in a random paged layout.
void runDecode(const Case &c, DecodeRun &r);

/// Compares a run's o and lse with a float64 reference.
void checkReference(const Case &c, const DecodeRun &r);

/// Expects `r` to hold the same bits as `base` (o and lse); `what` names
/// the difference in the message.
void expectSameBits(const DecodeRun &r, const DecodeRun &base,
                    const std::string &what);

} // namespace mla::e2e

#endif // MLA_TEST_E2E_DECODEHARNESS_H
