//===- Fiber.cpp - Stackful coroutines for the emulator's lanes -----------===//

#include "Fiber.h"

#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define MLA_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLA_EMU_ASAN 1
#endif
#endif

#if defined(MLA_EMU_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

using namespace mla::rt::emu;

FiberStack::FiberStack(size_t want) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  bytes = (want + page - 1) / page * page;
  mapped = bytes + page;
  void *m =
      mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (m == MAP_FAILED)
    return;
  mapping = static_cast<char *>(m);
  // The lowest page faults on a stack overflow instead of corrupting memory.
  if (mprotect(mapping, page, PROT_NONE) != 0) {
    munmap(mapping, mapped);
    mapping = nullptr;
    return;
  }
  base = mapping + page;
}

FiberStack::~FiberStack() {
  if (mapping)
    munmap(mapping, mapped);
}

namespace {
/// The context that switched to the one now running (for ASan's stack
/// bounds of the resumer).
thread_local Context *tlsSwitchFrom = nullptr;

struct Start {
  FiberEntry entry;
  void *arg;
};

[[noreturn]] void fiberMain(Start *start) {
#if defined(MLA_EMU_ASAN)
  if (tlsSwitchFrom)
    __sanitizer_finish_switch_fiber(nullptr, &tlsSwitchFrom->stackBottom,
                                    &tlsSwitchFrom->stackSize);
#endif
  start->entry(start->arg);
  std::abort(); // entries switch away for good instead of returning
}
} // namespace

#if defined(__x86_64__)
extern "C" void mla_emu_switch_x86(void **saveSp, void *loadSp);
extern "C" void mla_emu_fiber_start_x86();
extern "C" [[noreturn]] void mla_emu_fiber_main(Start *start) {
  fiberMain(start);
}

// switch: push the callee-saved registers and the FP control state, store
// rsp, load the other rsp, pop the same. fiber_start: the first `ret` of a
// new fiber lands here with the entry's Start in r12.
asm(R"(
  .text
  .p2align 4
  .hidden mla_emu_switch_x86
  .globl mla_emu_switch_x86
  .type mla_emu_switch_x86,@function
mla_emu_switch_x86:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size mla_emu_switch_x86, .-mla_emu_switch_x86

  .p2align 4
  .hidden mla_emu_fiber_start_x86
  .globl mla_emu_fiber_start_x86
  .type mla_emu_fiber_start_x86,@function
mla_emu_fiber_start_x86:
  subq $8, %rsp
  movq %r12, %rdi
  call mla_emu_fiber_main
  ud2
  .size mla_emu_fiber_start_x86, .-mla_emu_fiber_start_x86
)");

void mla::rt::emu::initFiber(Context &fiber, FiberStack &stack,
                             FiberEntry entry, void *arg) {
  char *top = stack.bottom() + stack.size();
  // The Start record lives at the top of the fiber's own stack.
  top -= sizeof(Start);
  top = reinterpret_cast<char *>(reinterpret_cast<uintptr_t>(top) & ~15ull);
  auto *start = reinterpret_cast<Start *>(top);
  start->entry = entry;
  start->arg = arg;
  auto *sp = reinterpret_cast<uint64_t *>(top) - 9;
  uint32_t mxcsr = 0x1F80; // round to nearest, all exceptions masked
  uint16_t fpcw = 0x037F;  // the x87 default
  std::memset(sp, 0, 9 * sizeof(uint64_t));
  std::memcpy(&sp[0], &mxcsr, 4);
  std::memcpy(reinterpret_cast<char *>(&sp[0]) + 4, &fpcw, 2);
  sp[4] = reinterpret_cast<uint64_t>(start); // r12
  sp[7] = reinterpret_cast<uint64_t>(&mla_emu_fiber_start_x86);
  fiber.sp = sp;
  fiber.stackBottom = stack.bottom();
  fiber.stackSize = stack.size();
}

static void rawSwitch(Context &from, Context &to) {
  mla_emu_switch_x86(&from.sp, to.sp);
}
#else
namespace {
void ucontextMain(unsigned hi, unsigned lo) {
  auto *start = reinterpret_cast<Start *>((static_cast<uintptr_t>(hi) << 32) |
                                          static_cast<uintptr_t>(lo));
  fiberMain(start);
}
} // namespace

void mla::rt::emu::initFiber(Context &fiber, FiberStack &stack,
                             FiberEntry entry, void *arg) {
  char *top = stack.bottom() + stack.size() - sizeof(Start);
  top = reinterpret_cast<char *>(reinterpret_cast<uintptr_t>(top) & ~15ull);
  auto *start = reinterpret_cast<Start *>(top);
  start->entry = entry;
  start->arg = arg;
  getcontext(&fiber.uc);
  fiber.uc.uc_stack.ss_sp = stack.bottom();
  fiber.uc.uc_stack.ss_size = static_cast<size_t>(top - stack.bottom());
  fiber.uc.uc_link = nullptr;
  auto p = reinterpret_cast<uintptr_t>(start);
  makecontext(&fiber.uc, reinterpret_cast<void (*)()>(&ucontextMain), 2,
              static_cast<unsigned>(p >> 32), static_cast<unsigned>(p));
  fiber.stackBottom = stack.bottom();
  fiber.stackSize = stack.size();
}

static void rawSwitch(Context &from, Context &to) {
  swapcontext(&from.uc, &to.uc);
}
#endif

void mla::rt::emu::switchContext(Context &from, Context &to) {
#if defined(MLA_EMU_ASAN)
  __sanitizer_start_switch_fiber(&from.fakeStack, to.stackBottom, to.stackSize);
#endif
  tlsSwitchFrom = &from;
  rawSwitch(from, to);
#if defined(MLA_EMU_ASAN)
  Context *resumer = tlsSwitchFrom;
  __sanitizer_finish_switch_fiber(from.fakeStack, &resumer->stackBottom,
                                  &resumer->stackSize);
#endif
}
