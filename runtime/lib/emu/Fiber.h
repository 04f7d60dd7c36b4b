//===- Fiber.h - Stackful coroutines for the emulator's lanes ---*- C++ -*-===//
//
// Each lane of an emulated workgroup runs as a Fiber on its own stack; the
// workgroup scheduler switches to a lane and the lane switches back when it
// blocks (a barrier, a wave-collective operation) or finishes. A switch
// saves only the callee-saved state of the C ABI (x86-64: rbx, rbp, r12-r15,
// MXCSR and the x87 control word), so it costs a few nanoseconds; other
// hosts use ucontext.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_LIB_EMU_FIBER_H
#define MLA_RUNTIME_LIB_EMU_FIBER_H

#include <cstddef>
#include <cstdint>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace mla::rt::emu {

/// A saved execution context: the scheduler's or a fiber's.
struct Context {
#if defined(__x86_64__)
  void *sp = nullptr;
#else
  ucontext_t uc;
#endif
  /// AddressSanitizer's fake stack of the context while switched away.
  void *fakeStack = nullptr;
  const void *stackBottom = nullptr;
  size_t stackSize = 0;
};

/// A stack of `bytes` usable bytes (rounded up to pages) with a guard page
/// below it, reserved lazily (untouched pages cost nothing).
class FiberStack {
public:
  explicit FiberStack(size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack &) = delete;
  FiberStack &operator=(const FiberStack &) = delete;
  bool ok() const { return base != nullptr; }
  char *bottom() const { return base; }
  size_t size() const { return bytes; }

private:
  char *mapping = nullptr; // guard page + stack
  char *base = nullptr;    // lowest usable byte
  size_t bytes = 0;
  size_t mapped = 0;
};

using FiberEntry = void (*)(void *arg);

/// Prepares `fiber` to run entry(arg) on `stack` at its first switch. The
/// entry must never return: it switches away for the last time instead.
void initFiber(Context &fiber, FiberStack &stack, FiberEntry entry, void *arg);

/// Saves the current context into `from` and resumes `to`.
void switchContext(Context &from, Context &to);

} // namespace mla::rt::emu

#endif // MLA_RUNTIME_LIB_EMU_FIBER_H
