//===- Passes.h - mla passes ------------------------------------*- C++ -*-===//
#ifndef MLA_TRANSFORMS_PASSES_H
#define MLA_TRANSFORMS_PASSES_H

#include "mla/Dialect/MLA/IR/MLA.h"
#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mla {

#define GEN_PASS_DECL
#include "mla/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "mla/Transforms/Passes.h.inc"

} // namespace mla

#endif // MLA_TRANSFORMS_PASSES_H
