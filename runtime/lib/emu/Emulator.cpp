//===- Emulator.cpp - Runs emulated AMD workgroups ------------------------===//
//
// See Emulator.h for the execution model. The hooks below are what an
// emulated code object calls (runtime/include/mla/runtime/EmuAbi.h); they
// find their workgroup and lane through thread-local state, since every
// lane of a workgroup runs on the thread that runs the workgroup.
//
//===----------------------------------------------------------------------===//

#include "Emulator.h"
#include "Fiber.h"

#include "mla/runtime/DType.h"
#include "mla/runtime/EmuAbi.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>

using namespace mla::rt;
using namespace mla::rt::emu;
using mla::emu::Hook;
using mla::emu::MfmaShape;
using mla::emu::MfmaType;

namespace {
constexpr int kWaveSize = 64;
constexpr size_t kLaneStackBytes = 256 * 1024;
constexpr uint16_t kManyReaders = 0xFFFF;

enum class LaneState { Ready, Barrier, Collective, Done };
enum class Collective { Mfma, Shuffle };

struct Lane {
  Context ctx;
  std::unique_ptr<FiberStack> stack;
  int64_t tid[3] = {0, 0, 0};
  int32_t wave = 0, lane = 0;
  LaneState state = LaneState::Ready;
  int32_t site = -1;
  Collective kind = Collective::Mfma;
  // Operands of the collective the lane waits at.
  const void *a = nullptr, *b = nullptr, *c = nullptr;
  void *d = nullptr;
  int32_t shape = 0, type = 0;
  int32_t value = 0, src = 0, result = 0;
};

/// The LDS shadow of one byte: its last writer and reader, per epoch.
struct Shadow {
  uint32_t writeEpoch = 0, writeSync = 0, readEpoch = 0;
  int32_t writeSite = -1, readSite = -1;
  uint16_t writeWave = 0, writeLane = 0, readWave = 0;
};

struct BufferResource {
  char *base;
  uint32_t records;
};

/// Buffer pointers are tags, never dereferenced: bits 48.. hold the resource
/// index + 1, bits 0..47 the byte offset biased by 2^47 (so that address
/// arithmetic below the base stays recognisable).
constexpr uint64_t kOffsetBits = 48;
constexpr int64_t kOffsetBias = int64_t(1) << 47;

class Workgroup;
thread_local Workgroup *tlsWorkgroup = nullptr;

/// Records the message (a full statement: its temporaries die here), then
/// abandons the lane.
#define MLA_EMU_FAIL_ON(wg, message)                                           \
  do {                                                                         \
    (wg).setError(message);                                                    \
    (wg).abandon();                                                            \
  } while (0)
#define MLA_EMU_FAIL(message) MLA_EMU_FAIL_ON(*this, message)
/// Epochs and wave-synchronisation stamps only grow on a thread, so the
/// shadow never needs clearing between workgroups.
thread_local uint32_t tlsEpoch = 0;
thread_local uint32_t tlsSyncStamp = 0;

class Workgroup {
public:
  Status run(const EmuKernel &kernel, const EmuLaunch &launch,
             std::array<int64_t, 3> blockId, const EmuOptions &options);

  /// The lane's last switch after a problem was recorded: a failed
  /// workgroup's lanes are never resumed. Use MLA_EMU_FAIL, so that the
  /// message's temporaries are destroyed before the lane's stack is
  /// abandoned.
  [[noreturn]] void abandon() {
    failed = true;
    Lane &l = *current;
    switchContext(l.ctx, scheduler);
    std::abort();
  }
  void setError(std::string message) { error = std::move(message); }

  std::string where(int32_t site) const {
    if (site >= 0 && site < kernel->siteCount && kernel->sites[site])
      return kernel->sites[site];
    return "<unknown site>";
  }
  std::string who(const Lane &l) const {
    return "wave " + std::to_string(l.wave) + " lane " + std::to_string(l.lane);
  }

  /// The lane's last switch: it finished its kernel.
  [[noreturn]] void finish() {
    Lane &l = *current;
    l.state = LaneState::Done;
    switchContext(l.ctx, scheduler);
    std::abort();
  }

  void block(LaneState state, int32_t site) {
    Lane &l = *current;
    l.state = state;
    l.site = site;
    switchContext(l.ctx, scheduler);
  }

  void ldsAccess(void *p, int64_t bytes, void *data, int32_t site, bool store);
  void *makeBuffer(void *base, int32_t records);
  void bufferAccess(void *p, int64_t bytes, void *data, int32_t site,
                    bool store);
  int32_t bufferAtomicAdd(void *p, int32_t value, int32_t site);
  /// The buffer and byte offset that buffer pointer `p` names (`what`:
  /// "access", "atomic"); null after failing the launch where `p` is no
  /// buffer resource or its offset is outside [0, 2^32).
  const BufferResource *bufferAt(void *p, int32_t site, const char *what,
                                 int64_t &offset);

  Lane *current = nullptr;
  const EmuKernel *kernel = nullptr;
  const EmuLaunch *launch = nullptr;
  std::array<int64_t, 3> blockId = {0, 0, 0};
  std::vector<uint8_t> lds;

private:
  bool runWave(int32_t wave, const std::vector<int32_t> &laneOrder);
  void collective(int32_t wave);
  void raceCheck(Lane &l, int64_t offset, int64_t bytes, int32_t site,
                 bool store);

  std::vector<std::unique_ptr<Lane>> lanes;
  int64_t laneCount = 0;
  Context scheduler;
  std::vector<Shadow> shadow;
  std::vector<uint32_t> waveSync;
  std::vector<BufferResource> buffers;
  uint32_t epoch = 0;
  std::string error;
  bool failed = false;
};

void laneMain(void *arg) {
  (void)arg;
  Workgroup &wg = *tlsWorkgroup;
  wg.kernel->entry(wg.launch->args);
  wg.finish();
}

std::vector<int32_t> makeOrder(int32_t n, EmuOrder order,
                               std::mt19937_64 &rng) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  if (order == EmuOrder::Reverse)
    std::reverse(v.begin(), v.end());
  else if (order == EmuOrder::Random)
    std::shuffle(v.begin(), v.end(), rng);
  return v;
}

Status Workgroup::run(const EmuKernel &k, const EmuLaunch &l,
                      std::array<int64_t, 3> id, const EmuOptions &options) {
  kernel = &k;
  launch = &l;
  blockId = id;
  failed = false;
  error.clear();
  const auto &blk = l.block;
  laneCount = blk[0] * blk[1] * blk[2];
  int32_t waves = static_cast<int32_t>((laneCount + kWaveSize - 1) / kWaveSize);
  while (static_cast<int64_t>(lanes.size()) < laneCount) {
    auto lane = std::make_unique<Lane>();
    lane->stack = std::make_unique<FiberStack>(kLaneStackBytes);
    if (!lane->stack->ok())
      return Status::error(ErrorCode::BackendError,
                           "emu: cannot map a lane stack");
    lanes.push_back(std::move(lane));
  }
  for (int64_t i = 0; i < laneCount; ++i) {
    Lane &ln = *lanes[i];
    ln.tid[0] = i % blk[0];
    ln.tid[1] = i / blk[0] % blk[1];
    ln.tid[2] = i / (blk[0] * blk[1]);
    ln.wave = static_cast<int32_t>(i / kWaveSize);
    ln.lane = static_cast<int32_t>(i % kWaveSize);
    ln.state = LaneState::Ready;
    ln.site = -1;
    initFiber(ln.ctx, *ln.stack, &laneMain, &ln);
  }
  // LDS starts as 0xFF bytes: a read of a byte never written is a NaN.
  lds.assign(static_cast<size_t>(l.ldsBytes), 0xFF);
  if (shadow.size() < lds.size())
    shadow.resize(lds.size());
  waveSync.assign(waves, 0);
  buffers.clear();
  epoch = ++tlsEpoch;
  uint64_t linear = id[0] + l.grid[0] * (id[1] + l.grid[1] * id[2]);
  std::mt19937_64 rng(options.seed * 0x9E3779B97F4A7C15ull + linear);
  while (true) {
    std::vector<int32_t> waveOrder = makeOrder(waves, options.order, rng);
    for (int32_t w : waveOrder) {
      std::vector<int32_t> laneOrder =
          makeOrder(static_cast<int32_t>(std::min<int64_t>(
                        kWaveSize, laneCount - w * kWaveSize)),
                    options.order, rng);
      if (!runWave(w, laneOrder))
        return Status::error(ErrorCode::BackendError, error);
    }
    // Every lane is at a barrier or done. A wave that finished no longer
    // takes part; a wave split between the two diverged.
    bool anyBarrier = false;
    for (int32_t w = 0; w < waves; ++w) {
      int64_t first = int64_t(w) * kWaveSize,
              last = std::min<int64_t>(laneCount, first + kWaveSize);
      bool done = false, barrier = false;
      for (int64_t i = first; i < last; ++i)
        (lanes[i]->state == LaneState::Done ? done : barrier) = true;
      if (done && barrier)
        return Status::error(
            ErrorCode::BackendError,
            "wave " + std::to_string(w) +
                " diverged: some lanes finished while others wait at the "
                "barrier at " +
                where(lanes[first]->state == LaneState::Barrier
                          ? lanes[first]->site
                          : lanes[last - 1]->site));
      anyBarrier |= barrier;
    }
    if (!anyBarrier)
      return Status::success();
    epoch = ++tlsEpoch;
    for (int64_t i = 0; i < laneCount; ++i)
      if (lanes[i]->state == LaneState::Barrier)
        lanes[i]->state = LaneState::Ready;
  }
}

bool Workgroup::runWave(int32_t wave, const std::vector<int32_t> &laneOrder) {
  int64_t first = int64_t(wave) * kWaveSize;
  while (true) {
    for (int32_t i : laneOrder) {
      Lane &ln = *lanes[first + i];
      if (ln.state != LaneState::Ready)
        continue;
      current = &ln;
      switchContext(scheduler, ln.ctx);
      current = nullptr;
      if (failed)
        return false;
    }
    // Parked (barrier or done), or all at one collective.
    const Lane &lead = *lanes[first + laneOrder[0]];
    bool anyCollective = false, same = true;
    for (int32_t i : laneOrder) {
      const Lane &ln = *lanes[first + i];
      anyCollective |= ln.state == LaneState::Collective;
      same &= ln.state == lead.state && ln.site == lead.site &&
              (ln.state != LaneState::Collective || ln.kind == lead.kind);
    }
    if (!anyCollective)
      return true;
    if (!same) {
      std::string states;
      for (int32_t i : laneOrder) {
        const Lane &ln = *lanes[first + i];
        if (ln.state == lead.state && ln.site == lead.site)
          continue;
        states = "lane " + std::to_string(ln.lane) + " is " +
                 (ln.state == LaneState::Done ? std::string("done")
                                              : "at " + where(ln.site));
        break;
      }
      error = "wave " + std::to_string(wave) +
              " diverged at a wave-collective operation: lane " +
              std::to_string(lead.lane) + " is " +
              (lead.state == LaneState::Done ? std::string("done")
                                             : "at " + where(lead.site)) +
              ", " + states;
      failed = true;
      return false;
    }
    collective(wave);
    if (failed)
      return false;
    waveSync[wave] = ++tlsSyncStamp;
    for (int32_t i : laneOrder)
      lanes[first + i]->state = LaneState::Ready;
  }
}

/// The MFMA register layouts of AMD's matrix instruction calculator
/// (docs/AMD.md): element e of lane l holds A[row][k], B[k][col], C[row][col].
struct MfmaLayout {
  int m, n, k, perLaneAB, perLaneC;
  void a(int l, int e, int &i, int &kk) const {
    int g = m == 32 ? 32 : 16;
    i = l % g;
    kk = perLaneAB * (l / g) + e;
  }
  void b(int l, int e, int &kk, int &j) const {
    int g = m == 32 ? 32 : 16;
    kk = perLaneAB * (l / g) + e;
    j = l % g;
  }
  void c(int l, int e, int &i, int &j) const {
    if (m == 32) {
      i = 8 * (e / 4) + 4 * (l / 32) + e % 4;
      j = l % 32;
    } else {
      i = 4 * (l / 16) + e;
      j = l % 16;
    }
  }
};

bool mfmaLayout(int32_t shape, MfmaLayout &out) {
  switch (static_cast<MfmaShape>(shape)) {
  case MfmaShape::M16N16K16:
    out = {16, 16, 16, 4, 4};
    return true;
  case MfmaShape::M32N32K8:
    out = {32, 32, 8, 4, 16};
    return true;
  case MfmaShape::M16N16K32:
    out = {16, 16, 32, 8, 4};
    return true;
  }
  return false;
}

void Workgroup::collective(int32_t wave) {
  int64_t first = int64_t(wave) * kWaveSize;
  int64_t count = std::min<int64_t>(kWaveSize, laneCount - first);
  Lane &lead = *lanes[first];
  if (lead.kind == Collective::Shuffle) {
    for (int64_t i = 0; i < count; ++i) {
      Lane &ln = *lanes[first + i];
      int32_t src = ln.src;
      ln.result =
          src >= 0 && src < count ? lanes[first + src]->value : ln.value;
    }
    return;
  }
  MfmaLayout lay;
  if (!mfmaLayout(lead.shape, lay) ||
      (lead.type != static_cast<int32_t>(MfmaType::BF16) &&
       lead.type != static_cast<int32_t>(MfmaType::F16))) {
    error = "unknown MFMA shape or type at " + where(lead.site);
    failed = true;
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    if (lanes[first + i]->shape != lead.shape ||
        lanes[first + i]->type != lead.type) {
      error = "lanes of wave " + std::to_string(wave) +
              " disagree on the MFMA at " + where(lead.site);
      failed = true;
      return;
    }
  // Inactive lanes (a partial last wave) contribute zeros. A: M x K,
  // B: K x N, C: M x N, row-major; at most 32 x 32 floats each.
  float A[32 * 32] = {}, B[32 * 32] = {}, C[32 * 32] = {};
  const bool bf16 = lead.type == static_cast<int32_t>(MfmaType::BF16);
  for (int64_t l = 0; l < count; ++l) {
    const Lane &ln = *lanes[first + l];
    const auto *a = static_cast<const uint16_t *>(ln.a);
    const auto *b = static_cast<const uint16_t *>(ln.b);
    const auto *c = static_cast<const float *>(ln.c);
    for (int e = 0; e < lay.perLaneAB; ++e) {
      int r, k;
      lay.a(int(l), e, r, k);
      A[r * lay.k + k] = bf16 ? bf16ToFloat(a[e]) : f16ToFloat(a[e]);
      lay.b(int(l), e, k, r);
      B[k * lay.n + r] = bf16 ? bf16ToFloat(b[e]) : f16ToFloat(b[e]);
    }
    for (int e = 0; e < lay.perLaneC; ++e) {
      int r, j;
      lay.c(int(l), e, r, j);
      C[r * lay.n + j] = c[e];
    }
  }
  // f32 accumulation in k order; bf16/f16 products are exact in f32.
  for (int i = 0; i < lay.m; ++i)
    for (int kk = 0; kk < lay.k; ++kk) {
      float x = A[i * lay.k + kk];
      for (int j = 0; j < lay.n; ++j)
        C[i * lay.n + j] += x * B[kk * lay.n + j];
    }
  for (int64_t l = 0; l < count; ++l) {
    auto *d = static_cast<float *>(lanes[first + l]->d);
    for (int e = 0; e < lay.perLaneC; ++e) {
      int r, j;
      lay.c(int(l), e, r, j);
      d[e] = C[r * lay.n + j];
    }
  }
}

void Workgroup::raceCheck(Lane &l, int64_t offset, int64_t bytes, int32_t site,
                          bool store) {
  uint32_t sync = waveSync[l.wave];
  for (int64_t i = 0; i < bytes; ++i) {
    Shadow &s = shadow[offset + i];
    auto what = [&] {
      return std::string(store ? "writes" : "reads") + " LDS byte " +
             std::to_string(offset + i);
    };
    if (s.writeEpoch == epoch) {
      if (s.writeWave != l.wave)
        MLA_EMU_FAIL("LDS race at " + where(site) + ": " + who(l) + " " +
                     what() + ", written by wave " +
                     std::to_string(s.writeWave) + " lane " +
                     std::to_string(s.writeLane) + " at " + where(s.writeSite) +
                     " with no barrier between");
      if (s.writeLane != l.lane && s.writeSync == sync)
        MLA_EMU_FAIL("relies on wave-synchronous LDS at " + where(site) + ": " +
                     who(l) + " " + what() + ", written by lane " +
                     std::to_string(s.writeLane) + " of the same wave at " +
                     where(s.writeSite) +
                     " with no barrier or wave-level synchronisation between");
    }
    if (store && s.readEpoch == epoch &&
        (s.readWave == kManyReaders || s.readWave != l.wave))
      MLA_EMU_FAIL("LDS race at " + where(site) + ": " + who(l) + " " + what() +
                   ", read by another wave at " + where(s.readSite) +
                   " with no barrier between");
    if (store) {
      s.writeEpoch = epoch;
      s.writeSync = sync;
      s.writeWave = static_cast<uint16_t>(l.wave);
      s.writeLane = static_cast<uint16_t>(l.lane);
      s.writeSite = site;
    } else if (s.readEpoch != epoch) {
      s.readEpoch = epoch;
      s.readWave = static_cast<uint16_t>(l.wave);
      s.readSite = site;
    } else if (s.readWave != l.wave) {
      s.readWave = kManyReaders;
    }
  }
}

void Workgroup::ldsAccess(void *p, int64_t bytes, void *data, int32_t site,
                          bool store) {
  Lane &l = *current;
  int64_t offset =
      static_cast<char *>(p) - reinterpret_cast<char *>(lds.data());
  int64_t size = static_cast<int64_t>(lds.size());
  if (bytes < 0 || offset < 0 || offset > size || bytes > size - offset)
    MLA_EMU_FAIL(std::string("LDS ") + (store ? "store" : "load") + " of " +
                 std::to_string(bytes) + " bytes at offset " +
                 std::to_string(offset) + " is outside the workgroup's " +
                 std::to_string(size) +
                 " bytes of LDS (the launch plan's) at " + where(site) + " (" +
                 who(l) + ")");
  raceCheck(l, offset, bytes, site, store);
  if (store)
    std::memcpy(lds.data() + offset, data, bytes);
  else
    std::memcpy(data, lds.data() + offset, bytes);
}

void *Workgroup::makeBuffer(void *base, int32_t records) {
  auto r = static_cast<uint32_t>(records);
  size_t index = 0;
  while (index < buffers.size() &&
         !(buffers[index].base == base && buffers[index].records == r))
    ++index;
  if (index == buffers.size())
    buffers.push_back({static_cast<char *>(base), r});
  uint64_t tag = (uint64_t(index + 1) << kOffsetBits) | uint64_t(kOffsetBias);
  return reinterpret_cast<void *>(tag);
}

const BufferResource *Workgroup::bufferAt(void *p, int32_t site,
                                          const char *what, int64_t &offset) {
  Lane &l = *current;
  auto bits = reinterpret_cast<uint64_t>(p);
  uint64_t index = (bits >> kOffsetBits) - 1;
  if (index >= buffers.size()) {
    MLA_EMU_FAIL("buffer " + std::string(what) +
                 " through a pointer that is no buffer resource at " +
                 where(site));
    return nullptr;
  }
  offset = int64_t(bits & ((uint64_t(1) << kOffsetBits) - 1)) - kOffsetBias;
  if (offset < 0 || offset > int64_t(UINT32_MAX)) {
    MLA_EMU_FAIL("buffer offset " + std::to_string(offset) + " at " +
                 where(site) + " (" + who(l) +
                 ") does not fit the instruction's 32-bit unsigned offset");
    return nullptr;
  }
  return &buffers[index];
}

void Workgroup::bufferAccess(void *p, int64_t bytes, void *data, int32_t site,
                             bool store) {
  int64_t offset = 0;
  const BufferResource *found = bufferAt(p, site, "access", offset);
  if (!found)
    return;
  const BufferResource &buf = *found;
  Lane &l = *current;
  // The range check per 4-byte component (CDNA3 ISA, buffer range
  // checking): a component starting at or beyond num_records reads 0 and
  // is not written.
  for (int64_t c = 0; c < bytes; c += 4) {
    int64_t piece = std::min<int64_t>(4, bytes - c);
    uint64_t start = uint64_t(offset + c);
    bool inRange = start < buf.records;
    if (inRange && start + piece > buf.records)
      MLA_EMU_FAIL("buffer " + std::string(store ? "store" : "load") + " at " +
                   where(site) + " (" + who(l) + ") straddles num_records (" +
                   std::to_string(buf.records) + " bytes) at offset " +
                   std::to_string(start) +
                   ": the hardware's result is not specified there");
    char *mem = buf.base + start;
    char *val = static_cast<char *>(data) + c;
    if (store) {
      if (inRange)
        std::memcpy(mem, val, piece);
    } else if (inRange) {
      std::memcpy(val, mem, piece);
    } else {
      std::memset(val, 0, piece);
    }
  }
}

/// An i32 atomic add through a buffer pointer: atomic among the
/// workgroups that the backend runs on several host threads at once (a
/// decode's fused merge counts its chunks so); out of range it adds
/// nothing and returns 0, as a buffer load there reads 0.
int32_t Workgroup::bufferAtomicAdd(void *p, int32_t value, int32_t site) {
  int64_t offset = 0;
  const BufferResource *buf = bufferAt(p, site, "atomic", offset);
  if (!buf)
    return 0;
  if (offset % 4 != 0) {
    MLA_EMU_FAIL("buffer atomic at " + where(site) + " (" + who(*current) +
                 ") at offset " + std::to_string(offset) +
                 ", not 4-byte aligned");
    return 0;
  }
  if (uint64_t(offset) + 4 > buf->records)
    return 0;
  return __atomic_fetch_add(reinterpret_cast<int32_t *>(buf->base + offset),
                            value, __ATOMIC_ACQ_REL);
}

// The hooks (EmuAbi.h), called by lanes of the emulated code object.
Workgroup &wg() { return *tlsWorkgroup; }

int64_t hookDim(int32_t code) {
  using mla::emu::DimKind;
  Workgroup &g = wg();
  const Lane &l = *g.current;
  int32_t kind = code / 3, d = code % 3;
  if (code < 0 || kind > static_cast<int32_t>(DimKind::LaneId))
    MLA_EMU_FAIL_ON(g, "unknown id code " + std::to_string(code));
  switch (static_cast<DimKind>(kind)) {
  case DimKind::ThreadId:
    return l.tid[d];
  case DimKind::BlockId:
    return g.blockId[d];
  case DimKind::BlockDim:
    return g.launch->block[d];
  case DimKind::GridDim:
    return g.launch->grid[d];
  case DimKind::LaneId:
    return l.lane;
  }
  return 0;
}
void hookBarrier(int32_t site) { wg().block(LaneState::Barrier, site); }
void *hookLdsBase() { return wg().lds.data(); }
int64_t hookLdsBytes() { return static_cast<int64_t>(wg().lds.size()); }
void hookLdsLoad(void *p, int64_t bytes, void *data, int32_t site) {
  wg().ldsAccess(p, bytes, data, site, false);
}
void hookLdsStore(void *p, int64_t bytes, const void *data, int32_t site) {
  wg().ldsAccess(p, bytes, const_cast<void *>(data), site, true);
}
void *hookMakeBuffer(void *base, int32_t records) {
  return wg().makeBuffer(base, records);
}
void hookBufferLoad(void *p, int64_t bytes, void *data, int32_t site) {
  wg().bufferAccess(p, bytes, data, site, false);
}
void hookBufferStore(void *p, int64_t bytes, const void *data, int32_t site) {
  wg().bufferAccess(p, bytes, const_cast<void *>(data), site, true);
}
int32_t hookBufferAtomicAdd(void *p, int32_t value, int32_t site) {
  return wg().bufferAtomicAdd(p, value, site);
}
void hookMfma(int32_t shape, int32_t type, const void *a, const void *b,
              const void *c, void *d, int32_t site) {
  Workgroup &g = wg();
  Lane &l = *g.current;
  l.kind = Collective::Mfma;
  l.shape = shape;
  l.type = type;
  l.a = a;
  l.b = b;
  l.c = c;
  l.d = d;
  g.block(LaneState::Collective, site);
}
int32_t hookShuffle(int32_t value, int32_t src, int32_t site) {
  Workgroup &g = wg();
  Lane &l = *g.current;
  l.kind = Collective::Shuffle;
  l.value = value;
  l.src = src;
  g.block(LaneState::Collective, site);
  return l.result;
}

/// Hook implementations in table order (checked against EmuAbi.h's types).
void *const kHookTable[] = {
#define MLA_EMU_IMPL(e, sym, ret, params, sig)                                 \
  reinterpret_cast<void *>(static_cast<ret(*) params>(&hook##e)),
    MLA_EMU_HOOKS(MLA_EMU_IMPL)
#undef MLA_EMU_IMPL
};
static_assert(sizeof(kHookTable) / sizeof(kHookTable[0]) ==
                  static_cast<size_t>(Hook::Count),
              "one implementation per hook");

thread_local std::unique_ptr<Workgroup> tlsExecutor;
} // namespace

Status mla::rt::emu::runWorkgroup(const EmuKernel &kernel,
                                  const EmuLaunch &launch,
                                  std::array<int64_t, 3> blockId,
                                  const EmuOptions &options) {
  if (!tlsExecutor)
    tlsExecutor = std::make_unique<Workgroup>();
  Workgroup *previous = tlsWorkgroup;
  tlsWorkgroup = tlsExecutor.get();
  Status status = tlsExecutor->run(kernel, launch, blockId, options);
  tlsWorkgroup = previous;
  if (!status.ok())
    return Status::error(ErrorCode::BackendError,
                         "emu: workgroup (" + std::to_string(blockId[0]) + "," +
                             std::to_string(blockId[1]) + "," +
                             std::to_string(blockId[2]) +
                             "): " + status.message());
  return status;
}

Status mla::rt::emu::fillHookTable(void **table, int64_t count) {
  if (count != static_cast<int64_t>(Hook::Count))
    return Status::error(ErrorCode::BackendError,
                         "emu: the code object has " + std::to_string(count) +
                             " hook slots, this runtime " +
                             std::to_string(static_cast<int>(Hook::Count)));
  for (int64_t i = 0; i < count; ++i)
    table[i] = kHookTable[i];
  return Status::success();
}
