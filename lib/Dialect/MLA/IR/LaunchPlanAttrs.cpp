//===- LaunchPlanAttrs.cpp - the typed launch plan ------------------------===//
//
// #mla.launch_plan and its elements (MLAAttrs.td): the outliners build it,
// mla-amdgpu-buffer-ops amends it, mla-compile writes it as the package
// manifest. The verifier keeps the plan's indices consistent: arguments
// 0..A-1 in order, workspaces A.. after them, launches and byte bounds
// naming only those.
//
//===----------------------------------------------------------------------===//
#include "mla/Dialect/MLA/IR/MLA.h"

using namespace mlir;
using namespace mla;

LogicalResult PlanArgAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t index, StringRef role, StringRef kind,
                                  StringRef dtype, StringRef dims) {
  if (index < 0)
    return emitError() << "plan argument index must be >= 0, got " << index;
  if (role.empty() || dtype.empty())
    return emitError() << "plan argument " << index
                       << " needs a role and an element type";
  if (kind != "memref" && kind != "scalar")
    return emitError() << "plan argument " << index
                       << " must be 'memref' or 'scalar', got '" << kind << "'";
  if (kind == "scalar" && !dims.empty())
    return emitError() << "scalar plan argument " << index << " has dims";
  return success();
}

LogicalResult LaunchPlanAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, StringRef function,
    DictionaryAttr info, ArrayRef<PlanArgAttr> args,
    ArrayRef<PlanWorkspaceAttr> workspaces, ArrayRef<PlanLaunchAttr> launches,
    ArrayRef<PlanMaxBytesAttr> maxBytes) {
  if (function.empty())
    return emitError() << "launch plan needs a function name";
  for (auto [i, arg] : llvm::enumerate(args))
    if (arg.getIndex() != int64_t(i))
      return emitError() << "launch plan argument " << i << " has index "
                         << arg.getIndex();
  const int64_t total = args.size() + workspaces.size();
  for (auto [i, ws] : llvm::enumerate(workspaces))
    if (ws.getIndex() != int64_t(args.size() + i))
      return emitError() << "launch plan workspace " << i << " has index "
                         << ws.getIndex() << ", expected " << args.size() + i;
  for (PlanLaunchAttr launch : launches)
    for (int64_t a : launch.getArgs())
      if (a < 0 || a >= total)
        return emitError() << "launch of '" << launch.getEntry()
                           << "' names plan index " << a << " of " << total;
  for (PlanMaxBytesAttr bound : maxBytes)
    if (bound.getIndex() < 0 || bound.getIndex() >= total ||
        bound.getBytes() < 1)
      return emitError() << "max_bytes <" << bound.getIndex() << ", "
                         << bound.getBytes() << "> names no buffer of the plan";
  return success();
}

PlanLaunchAttr LaunchPlanAttr::findLaunch(StringRef entry) const {
  for (PlanLaunchAttr launch : getLaunches())
    if (launch.getEntry() == entry)
      return launch;
  return {};
}

LaunchPlanAttr
LaunchPlanAttr::withMaxBytes(ArrayRef<PlanMaxBytesAttr> bounds) const {
  return LaunchPlanAttr::get(getContext(), getFunction(), getInfo(), getArgs(),
                             getWorkspaces(), getLaunches(), bounds);
}
