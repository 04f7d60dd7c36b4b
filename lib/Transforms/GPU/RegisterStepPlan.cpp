//===- RegisterStepPlan.cpp - how a register step spreads over waves -----===//
//
// See RegisterStep.h: the plan of an mla.attention_step in registers (the
// split of a workgroup's waves over rows, keys and value columns, on one
// of the chip's matrix instructions), its register and LDS checks, the
// cost model that ranks plans, and the check, by enumerating an
// instruction's lanes, that its layouts allow the transposed form.
//
//===----------------------------------------------------------------------===//
#include "../AttentionLayout.h"
#include "../WorkgroupTiles.h"
#include "RegisterStep.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Debug.h"

#include <cassert>
#include <limits>

#define DEBUG_TYPE "mla-distribute"

using namespace mlir;
using namespace mla;

int64_t RegisterStepPlan::laneRegisters() const {
  const int64_t ce = instr->c.elems, be = instr->b.elems;
  int64_t o = dvBlocks() * qBlocks * ce, s = sBlocks() * qBlocks * ce;
  int64_t q = (qBlocks * kStepsPerWave() * be + 1) / 2; // 16-bit elements
  return o + s + q + copyRegisters();
}

int64_t RegisterStepPlan::copyRegisters() const {
  return llvm::divideCeil(shape.keyTileBytes(), 4 * shape.warps * instr->lanes);
}

int64_t RegisterStepPlan::vGroup() const {
  int64_t g = kValueGroup;
  while (dvBlocks() % g != 0)
    g /= 2;
  return g;
}

int64_t RegisterStepPlan::registerBudget() const {
  int64_t perSimd = llvm::divideCeil(shape.warps, kSimdsPerCU);
  return kLaneRegisters / perSimd - kTemporaryRegisters;
}

int64_t RegisterStepPlan::combineBytes() const {
  return keyWaves > 1 ? keyWaves * 2 * paddedRows() * 4 : 0;
}

int64_t RegisterStepPlan::exchangeBytes() const {
  if (scoreSplit == 1)
    return 0;
  return waves() * sBlocks() * qBlocks * instr->lanes * instr->c.elems * 4;
}

int64_t RegisterStepPlan::issueEstimate() const {
  const int64_t e =
      std::max<int64_t>(1, shape.elem.getIntOrFloatBitWidth() / 8);
  const int64_t be = instr->b.elems, ce = instr->c.elems;
  // A product holds the matrix pipe for its passes (MatrixInstrs.def:
  // 16x16x16 8, 32x32x8 16, gfx950's 16x16x32 8); the other instructions
  // count one each.
  const int64_t passes = std::max<int64_t>(1, instr->passes);
  int64_t qk = passes * qBlocks * sBlocks() * kStepsPerWave();
  int64_t pv = passes * qBlocks * dvBlocks() * pvSteps();
  int64_t kReads =
      llvm::divideCeil(sBlocks() * kStepsPerWave() * instr->a.elems * e, 16);
  int64_t vReads = dvBlocks() / vGroup() * pvSteps() * instr->a.elems;
  int64_t permutes = dvBlocks() * pvSteps() * llvm::divideCeil(be * e, 4);
  int64_t softmax = 4 * qBlocks * sBlocks() * ce;
  int64_t rescale = llvm::divideCeil(qBlocks * dvBlocks() * ce, 2);
  int64_t copy = 2 * llvm::divideCeil(copyRegisters(), 4);
  // A score split: per block of scores one vector write, the other value
  // waves' reads and their adds, and a barrier (kBarrierIssue).
  int64_t exchange = 0;
  if (scoreSplit > 1)
    exchange = qBlocks * sBlocks() * (scoreSplit + (scoreSplit - 1) * ce) +
               kBarrierIssue;
  return qk + pv + kReads + vReads + permutes + softmax + rescale + copy +
         exchange;
}

int64_t RegisterStepPlan::simdCost() const {
  return llvm::divideCeil(shape.warps, kSimdsPerCU) * issueEstimate();
}

const RegisterStepPlan &
mla::chooseRegisterStepPlan(ArrayRef<RegisterStepPlan> plans) {
  assert(!plans.empty() && "no plan to choose from");
  int64_t pad = std::numeric_limits<int64_t>::max();
  for (const RegisterStepPlan &p : plans)
    pad = std::min(pad, p.paddedRows() - p.shape.rows);
  int64_t cheapest = std::numeric_limits<int64_t>::max();
  for (const RegisterStepPlan &p : plans)
    if (p.paddedRows() - p.shape.rows == pad)
      cheapest = std::min(cheapest, p.simdCost());
  const RegisterStepPlan *best = nullptr;
  auto rank = [](const RegisterStepPlan &p) {
    return std::make_tuple(-p.keyWaves, p.instr->m * p.instr->n * p.instr->k,
                           -p.simdCost());
  };
  for (const RegisterStepPlan &p : plans) {
    if (p.paddedRows() - p.shape.rows != pad ||
        p.simdCost() * kPlanCostTieDen > cheapest * kPlanCostTieNum)
      continue;
    if (!best || rank(p) > rank(*best))
      best = &p;
  }
  return *best;
}

namespace {

/// Why `mi`'s layouts do not allow the transposed form over `keys` keys per
/// wave, or empty when they do.
std::string transposedFormRefusal(const MatrixInstr &mi, int64_t keys) {
  const FragLayout &a = mi.a, &b = mi.b, &c = mi.c;
  if (a.elems == 0 || a.elems != b.elems)
    return "its A and B fragments differ in size";
  for (int64_t l = 0; l < mi.lanes; ++l) {
    for (int64_t e = 0; e < b.elems; ++e) {
      if (b.colOf(l, e) != b.colOf(l, 0) || a.rowOf(l, e) != a.rowOf(l, 0))
        return "a lane's A or B fragment spans several rows or columns";
      if (b.rowOf(l, e) != b.rowOf(l, 0) + e)
        return "a lane's B elements are not consecutive in k";
      if (a.colOf(l, e) != b.rowOf(l, e))
        return "its A and B fragments differ in their k layout";
    }
    for (int64_t e = 0; e < c.elems; ++e)
      if (c.colOf(l, e) != b.colOf(l, 0))
        return "a lane's C columns are not its B column (P cannot be the B "
               "operand of the second product)";
  }
  if (keys % mi.m != 0 || keys % mi.k != 0)
    return "the keys of a wave are not a multiple of the instruction's M "
           "and K";
  const int64_t steps = keys / mi.k;
  if (steps * b.elems != (keys / mi.m) * c.elems)
    return "a lane's scores do not fill its B fragments";
  // The P element of B slot (lane, e) of step s is the lane's C element
  // s * |B| + e; its key must depend on k alone, every key exactly once.
  llvm::DenseSet<int64_t> seen;
  for (int64_t s = 0; s < steps; ++s) {
    llvm::DenseMap<int64_t, int64_t> keyOfK;
    for (int64_t l = 0; l < mi.lanes; ++l)
      for (int64_t e = 0; e < b.elems; ++e) {
        int64_t j = s * b.elems + e;
        int64_t key = (j / c.elems) * mi.m + c.rowOf(l, j % c.elems);
        auto [it, fresh] = keyOfK.try_emplace(b.rowOf(l, e), key);
        if (!fresh && it->second != key)
          return "the keys of the scores do not line up with the B "
                 "operand's k";
      }
    for (auto [k, key] : keyOfK)
      if (!seen.insert(key).second)
        return "a key would enter the second product twice";
  }
  if (int64_t(seen.size()) != keys)
    return "the scores do not cover every key";
  return "";
}

/// Why `p` does not fit the registers, or where it adds an accumulator
/// tile or a score exchange, its tiles (registerStepTiles, no query tile
/// or page numbers: the caller's to check) `ldsBytes` of LDS; or empty.
std::string planRefusal(const RegisterStepPlan &p, int64_t ldsBytes) {
  if (p.laneRegisters() > p.registerBudget())
    return "its state needs " + std::to_string(p.laneRegisters()) +
           " registers per lane, more than the " +
           std::to_string(p.registerBudget()) + " " +
           std::to_string(p.shape.warps) + " waves leave";
  if (p.finishInRegisters && p.scoreSplit == 1)
    return "";
  int64_t bytes =
      registerStepTiles(p, /*queryTile=*/false, /*pageSlots=*/0).bytes();
  if (bytes > ldsBytes)
    return std::string(p.finishInRegisters
                           ? "its score exchange"
                           : "its key waves' accumulator tile, row state") +
           (p.scoreSplit > 1 && !p.finishInRegisters ? " and score exchange"
                                                     : "") +
           " take " + std::to_string(bytes) + " bytes, more than the " +
           std::to_string(ldsBytes) + " bytes of LDS";
  return "";
}

/// The plan on `mi` for `shape`, or the reason there is none.
/// Appends the plans on `mi` for `shape` to `plans`; the reason there is
/// none in `why`.
void planOn(const MatrixInstr &mi, const StepShape &shape, int64_t waveSize,
            int64_t ldsBytes, SmallVectorImpl<RegisterStepPlan> &plans,
            std::string &why) {
  if (mi.lanes != waveSize) {
    why = "it is not a whole-wave instruction";
    return;
  }
  if (shape.dim % mi.k != 0 || shape.dv % mi.m != 0) {
    why = "the head dims are not multiples of its K and M";
    return;
  }
  why = "no split of the " + std::to_string(shape.warps) +
        " waves over rows, keys and value columns fits";
  const int64_t valueBlocks = shape.dv / mi.m;
  for (int64_t rowWaves = 1; rowWaves <= shape.warps; ++rowWaves) {
    if (shape.warps % rowWaves != 0 || shape.rows % rowWaves != 0)
      continue;
    int64_t rows = shape.rows / rowWaves;
    // Padded query rows only where one wave holds them all.
    if (rows % mi.n != 0 && (rowWaves > 1 || rows > mi.n))
      continue;
    for (int64_t keyWaves = 1; keyWaves <= shape.warps / rowWaves; ++keyWaves) {
      if ((shape.warps / rowWaves) % keyWaves != 0 ||
          shape.tile % keyWaves != 0)
        continue;
      RegisterStepPlan p;
      p.instr = &mi;
      p.shape = shape;
      p.rowWaves = rowWaves;
      p.keyWaves = keyWaves;
      p.valueWaves = shape.warps / (rowWaves * keyWaves);
      if (valueBlocks % p.valueWaves != 0)
        continue;
      p.qBlocks = llvm::divideCeil(rows, mi.n);
      p.keysPerWave = shape.tile / keyWaves;
      if (std::string r = transposedFormRefusal(mi, p.keysPerWave);
          !r.empty()) {
        why = r;
        continue;
      }
      p.finishInRegisters =
          p.keyWaves == 1 && p.vGroup() % finishWidth(shape.dv) == 0;
      // Each value wave computing the whole Sᵀ and, where the value waves
      // can split its k steps evenly, each computing its share.
      SmallVector<int64_t, 2> splits{1};
      if (p.valueWaves > 1 && p.kSteps() % p.valueWaves == 0)
        splits.push_back(p.valueWaves);
      for (int64_t split : splits) {
        p.scoreSplit = split;
        if (std::string r = planRefusal(p, ldsBytes); !r.empty())
          why = r;
        else
          plans.push_back(p);
      }
    }
  }
}

} // namespace

FailureOr<RegisterStepPlan>
mla::planRegisterStep(const StepShape &shape, ArrayRef<MatrixInstrId> instrs,
                      int64_t waveSize, int64_t ldsBytes, std::string *whyNot) {
  MatrixType type = shape.elem.isBF16()  ? MatrixType::BF16
                    : shape.elem.isF16() ? MatrixType::F16
                                         : MatrixType::Any;
  SmallVector<RegisterStepPlan> plans;
  std::string reasons;
  for (MatrixInstrId id : instrs) {
    const MatrixInstr &mi = matrixInstr(id);
    if (mi.type != type || mi.type == MatrixType::Any)
      continue;
    std::string why;
    size_t before = plans.size();
    planOn(mi, shape, waveSize, ldsBytes, plans, why);
    if (plans.size() == before)
      reasons += (reasons.empty() ? "" : "; ") + mi.mnemonic.str() + ": " + why;
  }
  FailureOr<RegisterStepPlan> best = failure();
  if (!plans.empty())
    best = chooseRegisterStepPlan(plans);
  if (failed(best)) {
    if (reasons.empty())
      reasons = "the chip has no matrix instruction for the operand type";
    LLVM_DEBUG(llvm::dbgs()
               << "mla-distribute: no register step for " << shape.rows
               << " rows, " << shape.tile << "-key tiles on " << shape.warps
               << " waves: " << reasons << "\n");
    if (whyNot)
      *whyNot = reasons;
  }
  return best;
}
