//===- Runtime.h - The mla runtime, all public headers ----------*- C++ -*-===//
//
// Typical use (host device, decode kernel):
//
//   auto pkg = mla::rt::readPackage("decode.mlapkg");
//   auto dev = mla::rt::Device::open("host");
//   auto kernel = dev->loadKernel(*pkg);
//   mla::rt::DecodeArgs a{q, kv, blockTable, seqLens, scale, o, lse};
//   mla::rt::Status st = kernel->launchDecode(a);
//
// Every call returns a Status or an Expected<T>; check ok() before use.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_RUNTIME_H
#define MLA_RUNTIME_RUNTIME_H

#include "mla/runtime/AmdgpuMetadata.h"
#include "mla/runtime/Backend.h"
#include "mla/runtime/CudaBackend.h"
#include "mla/runtime/DType.h"
#include "mla/runtime/Device.h"
#include "mla/runtime/GridLimits.h"
#include "mla/runtime/HipBackend.h"
#include "mla/runtime/Kernel.h"
#include "mla/runtime/KernelParams.h"
#include "mla/runtime/Manifest.h"
#include "mla/runtime/Npy.h"
#include "mla/runtime/OutputShapes.h"
#include "mla/runtime/Package.h"
#include "mla/runtime/PagedKVCache.h"
#include "mla/runtime/Status.h"
#include "mla/runtime/Tensor.h"

#endif // MLA_RUNTIME_RUNTIME_H
