//===- BuildersTest.cpp - the kernel builders against their listings ------===//
//
// Each builder's module is compared, locations included, with the parse of
// its kernel's listing: the text mla-compile formatted before the builders
// existed, and the module every embedding builds from the same spec.
//
//===----------------------------------------------------------------------===//
#include "mla/Kernels/Builders.h"
#include "mla/Dialect/MLA/IR/MLA.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

class BuildersTest : public ::testing::Test {
protected:
  BuildersTest() {
    context.loadDialect<mla::MLADialect, func::FuncDialect,
                        memref::MemRefDialect>();
  }

  /// `module` printed with its locations.
  static std::string printed(ModuleOp module) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os, OpPrintingFlags().enableDebugInfo(true, false));
    return text;
  }

  /// The built module, printed with locations, is the parse of `listing`
  /// (file name `name`).
  void expectListing(FailureOr<OwningOpRef<ModuleOp>> &built, StringRef listing,
                     StringRef name) {
    ASSERT_TRUE(succeeded(built)) << errors;
    OwningOpRef<ModuleOp> parsed =
        parseSourceString<ModuleOp>(listing, &context, name);
    ASSERT_TRUE(parsed) << errors;
    EXPECT_EQ(printed(**built), printed(*parsed));
  }

  /// Builds with errors collected in `errors` (`loc: message` lines).
  template <typename Spec, typename Build>
  FailureOr<OwningOpRef<ModuleOp>> build(Build fn, const Spec &spec,
                                         const mla::BuildOptions &options) {
    ScopedDiagnosticHandler collect(&context, [&](Diagnostic &diag) {
      llvm::raw_string_ostream os(errors);
      os << diag.getLocation() << ": " << diag.str() << "\n";
      return success();
    });
    return fn(context, spec, options);
  }

  MLIRContext context;
  std::string errors;
};

TEST_F(BuildersTest, DecodeIsItsListing) {
  mla::DecodeSpec spec;
  spec.heads = 8;
  spec.latentDim = 256;
  spec.ropeDim = 32;
  spec.pageSize = 0;
  spec.qLen = 2;
  spec.dtype = "f16";
  auto built = build(mla::buildDecodeModule, spec, {});
  expectListing(
      built,
      "func.func @decode(%q: memref<?x2x8x288xf16>, %kv: memref<?x?x288xf16>, "
      "%block_table: memref<?x?xi32>, %seq_lens: memref<?xi32>, %scale: f32, "
      "%o: memref<?x2x8x256xf16>, %lse: memref<?x2x8xf32>) {\n"
      "  mla.decode %q, %kv, %block_table, %seq_lens, %scale, %o, %lse : "
      "memref<?x2x8x288xf16>, memref<?x?x288xf16>, memref<?x?xi32>, "
      "memref<?xi32>, f32, memref<?x2x8x256xf16>, memref<?x2x8xf32>\n"
      "  return\n}\n",
      "<decode>");
}

TEST_F(BuildersTest, PrefillIsItsListing) {
  mla::PrefillSpec spec;
  spec.heads = 4;
  spec.causal = true;
  spec.oDtype = "f32";
  mla::BuildOptions options;
  options.sourceName = "kernel.mlir";
  auto built = build(mla::buildPrefillModule, spec, options);
  expectListing(
      built,
      "func.func @prefill(%q: memref<?x4x192xbf16>, %k: memref<?x4x192xbf16>, "
      "%v: memref<?x4x128xbf16>, %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: "
      "memref<?xi32>, %scale: f32, %o: memref<?x4x128xf32>, %lse: "
      "memref<4x?xf32>) {\n"
      "  mla.prefill %q, %k, %v, %cu_seqlens_q, %cu_seqlens_k, %scale, %o, "
      "%lse {causal} : memref<?x4x192xbf16>, memref<?x4x192xbf16>, "
      "memref<?x4x128xbf16>, memref<?xi32>, memref<?xi32>, f32, "
      "memref<?x4x128xf32>, memref<4x?xf32>\n"
      "  return\n}\n",
      "kernel.mlir");
}

TEST_F(BuildersTest, MergeIsItsListing) {
  mla::MergeSpec spec;
  spec.heads = 16;
  spec.vDim = 64;
  spec.parts = 3;
  auto built = build(mla::buildMergeModule, spec, {});
  const char *opT = "memref<3x?x16x64xf32>", *lpT = "memref<3x16x?xf32>",
             *oT = "memref<?x16x64xbf16>", *lseT = "memref<16x?xf32>",
             *opV = "memref<?x16x3x64xf32, strided<[1024, 64, ?, 1]>>",
             *lpV = "memref<?x16x3xf32, strided<[1, ?, ?]>>",
             *lseV = "memref<?x16xf32, strided<[1, ?]>>";
  std::string listing =
      std::string("func.func @merge(%o_parts: ") + opT +
      ", %lse_parts: " + lpT + ", %o: " + oT + ", %lse: " + lseT + ") {\n" +
      "  %op = memref.transpose %o_parts (n, t, h, d) -> (t, h, n, d) : " +
      opT + " to " + opV + "\n" +
      "  %lp = memref.transpose %lse_parts (n, h, t) -> (t, h, n) : " + lpT +
      " to " + lpV + "\n" +
      "  %l = memref.transpose %lse (h, t) -> (t, h) : " + lseT + " to " +
      lseV + "\n" + "  mla.merge %op, %lp, %o, %l : " + opV + ", " + lpV +
      ", " + oT + ", " + lseV + "\n  return\n}\n";
  expectListing(built, listing, "<merge>");
}

TEST_F(BuildersTest, AppendKVIsItsListing) {
  mla::AppendKVSpec spec;
  spec.pageSize = 3;
  spec.dtype = "f32";
  auto built = build(mla::buildAppendKVModule, spec, {});
  expectListing(built,
                "func.func @append_kv(%kv_new: memref<?x576xf32>, "
                "%slot_mapping: memref<?xi32>, %kv: memref<?x3x576xf32>) {\n"
                "  mla.append_kv %kv_new, %slot_mapping, %kv {latent_dim = 512 "
                ": i64} : memref<?x576xf32>, memref<?xi32>, "
                "memref<?x3x576xf32>\n"
                "  return\n}\n",
                "<append_kv>");
}

TEST_F(BuildersTest, SpecErrorsNameTheField) {
  mla::DecodeSpec decode;
  decode.heads = 0;
  EXPECT_TRUE(failed(build(mla::buildDecodeModule, decode, {})));
  EXPECT_EQ(errors, "loc(\"<decode>\":0:0): heads must be >= 1 (got 0)\n");

  errors.clear();
  decode.heads = 1;
  decode.ropeDim = 8;
  EXPECT_TRUE(failed(build(mla::buildDecodeModule, decode, {})));
  EXPECT_EQ(errors, "loc(\"<decode>\":0:0): rope_dim must be a non-negative "
                    "multiple of 16 (got 8)\n");

  // An embedding spells the fields its own way.
  errors.clear();
  mla::PrefillSpec prefill;
  prefill.qkDim = 64;
  mla::BuildOptions options;
  options.fieldName = [](StringRef field) { return "'" + field.str() + "'"; };
  EXPECT_TRUE(failed(build(mla::buildPrefillModule, prefill, options)));
  EXPECT_EQ(errors, "loc(\"<prefill>\":0:0): 'v_dim' (128) must not exceed "
                    "'qk_dim' (64)\n");

  errors.clear();
  prefill.qkDim = 192;
  prefill.oDtype = "f16";
  EXPECT_TRUE(failed(build(mla::buildPrefillModule, prefill, {})));
  EXPECT_EQ(errors, "loc(\"<prefill>\":0:0): o_dtype must be the dtype (bf16) "
                    "or f32 (got 'f16')\n");

  errors.clear();
  mla::MergeSpec merge;
  merge.dtype = "fp8";
  EXPECT_TRUE(failed(build(mla::buildMergeModule, merge, {})));
  EXPECT_EQ(errors, "loc(\"<merge>\":0:0): dtype must be bf16, f16 or f32 "
                    "(got 'fp8')\n");

  errors.clear();
  mla::AppendKVSpec append;
  append.latentDim = INT64_MAX - 15;
  EXPECT_TRUE(failed(build(mla::buildAppendKVModule, append, {})));
  EXPECT_EQ(errors, "loc(\"<append_kv>\":0:0): latent_dim + rope_dim is too "
                    "large\n");
}

} // namespace
