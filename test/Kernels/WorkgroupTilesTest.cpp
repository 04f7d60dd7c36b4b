//===- WorkgroupTilesTest.cpp - the tile model against the placed bytes --===//
//
// mla-select-config decides whether a config fits the chip from the tile
// model (lib/Transforms/WorkgroupTiles.h); mla-outline-gpu-kernels places
// the real buffers. For the configurations the compiler picks on every GPU
// target, the model's bytes must bound the placed ones from above (a config
// judged to fit does fit) and stay close to them (the model is the tiles
// the lowering allocates, not a guess).
//
//===----------------------------------------------------------------------===//
#include "WorkgroupTiles.h"

#include "mla/Dialect/MLA/IR/MLA.h"
#include "mla/Kernels/Builders.h"
#include "mla/Target/Arch.h"
#include "mla/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

/// How far the model may exceed the placed bytes: the placement packs the
/// small row buffers into the gaps the model counts separately.
constexpr int64_t kSlackBytes = 4096;

struct Case {
  std::string target;
  std::string kernel; // "decode" or "prefill"
  int64_t heads, qLen, pageSize;
  bool causal;
  std::string dtype;
  /// A variant example of test/e2e/variants (its file name without .mlir)
  /// instead of a built kernel; the other fields are then unused.
  std::string variant = {};
};

/// gtest prints a parameter through this (not its bytes).
[[maybe_unused]] void PrintTo(const Case &c, std::ostream *os) {
  *os << (c.variant.empty() ? c.kernel : c.variant) << " on " << c.target;
}

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  const Case &c = info.param;
  if (!c.variant.empty())
    return c.target + "_variant_" + c.variant;
  std::string s = c.target + "_" + c.kernel + "_h" + std::to_string(c.heads);
  if (c.kernel == "decode")
    s += "_sq" + std::to_string(c.qLen) + "_p" + std::to_string(c.pageSize);
  else if (c.causal)
    s += "_causal";
  return s + "_" + c.dtype;
}

class WorkgroupTilesTest : public ::testing::TestWithParam<Case> {
protected:
  WorkgroupTilesTest() {
    DialectRegistry registry;
    registerAllDialects(registry);
    registerAllExtensions(registry);
    registry.insert<mla::MLADialect>();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }
  MLIRContext context;
};

TEST_P(WorkgroupTilesTest, BoundsThePlacedBytes) {
  const Case &c = GetParam();
  std::string errors;
  ScopedDiagnosticHandler collect(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      errors += diag.str() + "\n";
    return success();
  });
  OwningOpRef<ModuleOp> owned;
  if (!c.variant.empty()) {
    std::string path =
        std::string(MLA_VARIANTS_DIR) + "/" + c.variant + ".mlir";
    owned = parseSourceFile<ModuleOp>(path, &context);
    ASSERT_TRUE(owned) << path << ": " << errors;
  } else {
    FailureOr<OwningOpRef<ModuleOp>> built =
        c.kernel == "decode"
            ? mla::buildDecodeModule(
                  context, {c.heads, 512, 64, c.pageSize, c.qLen, c.dtype})
            : mla::buildPrefillModule(
                  context, {c.heads, 192, 128, c.causal, c.dtype, ""});
    ASSERT_TRUE(succeeded(built)) << errors;
    owned = std::move(*built);
  }
  ModuleOp module = *owned;
  const mla::ArchInfo *arch = mla::lookupArch(c.target);
  ASSERT_TRUE(arch);

  PassManager select(&context);
  mla::MLASelectConfigOptions options;
  options.target = c.target;
  select.addPass(mla::createMLASelectConfig(options));
  ASSERT_TRUE(succeeded(select.run(module))) << errors;
  Operation *op = nullptr;
  mla::ConfigAttr config;
  module.walk([&](Operation *o) {
    if (auto d = dyn_cast<mla::DecodeOp>(o))
      op = o, config = d.getConfigAttr();
    if (auto p = dyn_cast<mla::PrefillOp>(o))
      op = o, config = p.getConfigAttr();
  });
  ASSERT_TRUE(op && config);
  std::string configText;
  llvm::raw_string_ostream(configText) << config;
  FailureOr<mla::WorkgroupTiles> tiles = mla::workgroupTiles(op, config, *arch);
  ASSERT_TRUE(succeeded(tiles));
  const int64_t model = tiles->bytes();

  PassManager lower(&context);
  lower.addPass(mla::createMLATile());
  lower.addPass(mla::createMLAExpandPaging());
  lower.addPass(mla::createMLADistribute());
  lower.addPass(mla::createMLAOutlineGPUKernels());
  ASSERT_TRUE(succeeded(lower.run(module))) << errors;
  auto plans = module->getAttrOfType<ArrayAttr>("mla.launch_plans");
  ASSERT_TRUE(plans);
  // The launch of the attention step: the one with the most bytes (the
  // decode's plan and merge kernels hold a scan tile or nothing).
  int64_t placed = -1;
  for (Attribute a : plans)
    for (mla::PlanLaunchAttr launch :
         cast<mla::LaunchPlanAttr>(a).getLaunches())
      placed = std::max(placed, launch.getShared());
  ASSERT_GT(placed, 0);
  EXPECT_LE(placed, model) << "config " << configText << ": the model ("
                           << static_cast<int>(tiles->lowering)
                           << ") undercounts: " << model << " < placed "
                           << placed;
  EXPECT_LE(model, placed + kSlackBytes)
      << "config " << configText << ": the model is " << model - placed
      << " bytes over the placed " << placed;
  EXPECT_LE(model, arch->sharedBytes);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char *target : {"sm_80", "sm_90a", "gfx90a", "gfx942", "gfx950"})
    for (const char *dtype : {"bf16", "f32"}) {
      for (int64_t heads : {16, 128})
        for (int64_t qLen : {1, 2})
          for (int64_t page : {1, 64})
            out.push_back({target, "decode", heads, qLen, page, false, dtype});
      out.push_back({target, "decode", 1, 4, 3, false, dtype});
      for (bool causal : {false, true})
        out.push_back({target, "prefill", 16, 0, 0, causal, dtype});
    }
  // The variant examples: masked key loops (sliding window) take the fused
  // and register steps through their tile skip.
  for (const char *target : {"sm_80", "sm_90a", "gfx90a", "gfx942", "gfx950"})
    for (const char *variant :
         {"sliding_window", "decode_sliding_window", "softcap",
          "decode_softcap", "alibi", "decode_alibi", "sink", "decode_sink"})
      out.push_back({target, "", 0, 0, 0, false, "", variant});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shipped, WorkgroupTilesTest,
                         ::testing::ValuesIn(cases()), caseName);

} // namespace
