//===- LaunchPlanAttrs.cpp - the typed launch plan ------------------------===//
//
// #mla.launch_plan and its elements (MLAAttrs.td): the outliners build it,
// mla-amdgpu-buffer-ops amends it, mla-compile writes it as the package
// manifest. The verifier keeps the plan's indices consistent: arguments
// 0..A-1 in order, workspaces A.. after them, launches and byte bounds
// naming only those, and every size formula naming a dim of a memref
// argument.
//
//===----------------------------------------------------------------------===//
#include "mla/Dialect/MLA/IR/MLA.h"

using namespace mlir;
using namespace mla;

//===----------------------------------------------------------------------===//
// Sizes (PlanSizes.h)
//===----------------------------------------------------------------------===//

AsmPrinter &mla::rt::operator<<(AsmPrinter &printer, const DimExpr &e) {
  if (e.isConstant())
    return printer << e.constant;
  bool paren = e.addend != 0 && e.divisor != 1;
  if (paren)
    printer << '(';
  printer << "arg" << e.argIndex << '.' << e.dim;
  if (e.addend > 0)
    printer << " + " << e.addend;
  else if (e.addend < 0)
    printer << " - " << -e.addend;
  if (paren)
    printer << ')';
  if (e.divisor != 1)
    printer << " ceildiv " << e.divisor;
  return printer;
}

FailureOr<rt::DimExpr> FieldParser<rt::DimExpr>::parse(AsmParser &parser) {
  rt::DimExpr e;
  SMLoc loc = parser.getCurrentLocation();
  bool paren = succeeded(parser.parseOptionalLParen());
  StringRef word;
  if (!paren && failed(parser.parseOptionalKeyword(&word))) {
    // A constant.
    if (failed(parser.parseInteger(e.constant)))
      return failure();
    return e;
  }
  if (paren && failed(parser.parseKeyword(&word)))
    return failure();
  // argI.D (one bare identifier).
  auto [argText, dimText] = word.split('.');
  int64_t arg = -1, dim = -1;
  if (!argText.consume_front("arg") || argText.getAsInteger(10, arg) ||
      dimText.getAsInteger(10, dim) || arg > INT32_MAX || dim > INT32_MAX)
    return parser.emitError(loc) << "expected a size: an integer or argI.D "
                                    "(dim D of memref argument I), got '"
                                 << word << "'";
  e.argIndex = arg;
  e.dim = dim;
  bool plus = succeeded(parser.parseOptionalPlus());
  if (plus || succeeded(parser.parseOptionalMinus())) {
    int64_t c = 0;
    if (failed(parser.parseInteger(c)))
      return failure();
    if (c < 0)
      return parser.emitError(loc) << "write argI.D - C, not + -C";
    e.addend = plus ? c : -c;
  }
  if (paren && failed(parser.parseRParen()))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("ceildiv"))) {
    if (e.addend != 0 && !paren)
      return parser.emitError(loc)
             << "write (argI.D + C) ceildiv K: the divisor applies to the "
                "sum";
    if (failed(parser.parseInteger(e.divisor)))
      return failure();
  }
  return e;
}

bool mla::isWellFormedSize(const rt::DimExpr &e, std::string &why) {
  if (e.isConstant()) {
    if (e.constant < 0)
      why = "size " + std::to_string(e.constant) + " is negative";
  } else if (e.divisor < 1) {
    why = "size divisor " + std::to_string(e.divisor) + " is not positive";
  } else if (e.dim < 0) {
    why = "size dim " + std::to_string(e.dim) + " is negative";
  }
  return why.empty();
}

/// Whether every size of `sizes` is well formed (emitting why not).
static LogicalResult verifySizes(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<rt::DimExpr> sizes,
                                 const Twine &what) {
  for (const rt::DimExpr &e : sizes)
    if (std::string why; !isWellFormedSize(e, why))
      return emitError() << what << ": " << why;
  return success();
}

/// Whether the argument sizes of `sizes` name dims of memref arguments of
/// `args`.
static LogicalResult
verifySizeArgs(function_ref<InFlightDiagnostic()> emitError,
               ArrayRef<PlanArgAttr> args, ArrayRef<rt::DimExpr> sizes,
               const Twine &what) {
  for (const rt::DimExpr &e : sizes) {
    if (e.isConstant())
      continue;
    if (e.argIndex >= int64_t(args.size()))
      return emitError() << what << " names argument " << e.argIndex << " of "
                         << args.size();
    PlanArgAttr arg = args[e.argIndex];
    if (arg.getKind() != "memref" || e.dim >= int64_t(arg.getDims().size()))
      return emitError() << what << " names dim " << e.dim << " of argument "
                         << e.argIndex << " ('" << arg.getRole()
                         << "'), which has " << arg.getDims().size() << " dims";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Plan elements
//===----------------------------------------------------------------------===//

LogicalResult PlanArgAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t index, StringRef role, StringRef kind,
                                  StringRef dtype, ArrayRef<int64_t> dims) {
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
  for (int64_t d : dims)
    if (d < 0 && d != rt::kDynamicDim)
      return emitError() << "plan argument " << index << " has dim " << d;
  return success();
}

LogicalResult
PlanWorkspaceAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                          int64_t index, StringRef dtype,
                          ArrayRef<rt::DimExpr> dims) {
  return verifySizes(emitError, dims,
                     "plan workspace " + std::to_string(index));
}

LogicalResult
PlanLaunchAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       StringRef entry, ArrayRef<int64_t> args,
                       ArrayRef<rt::DimExpr> grid, ArrayRef<int64_t> block,
                       int64_t shared, bool dependent) {
  if (entry.empty())
    return emitError() << "plan launch needs an entry name";
  std::string what = ("launch of '" + entry + "'").str();
  if (grid.size() != 3)
    return emitError() << what << " needs a grid of 3 sizes, got "
                       << grid.size();
  if (failed(verifySizes(emitError, grid, what + " grid")))
    return failure();
  if (!block.empty()) {
    int64_t threads = 1;
    for (int64_t b : block) {
      if (b < 1 || b > rt::kMaxBlockThreads)
        return emitError() << what << " has a workgroup dim of " << b;
      threads *= b;
    }
    if (block.size() != 3 || threads > rt::kMaxBlockThreads)
      return emitError() << what << " needs a block of 3 dims of at most "
                         << rt::kMaxBlockThreads << " threads in all";
  }
  if (shared < -1)
    return emitError() << what << " has " << shared << " shared bytes";
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
  for (PlanWorkspaceAttr ws : workspaces)
    if (failed(
            verifySizeArgs(emitError, args, ws.getDims(),
                           "plan workspace " + std::to_string(ws.getIndex()))))
      return failure();
  for (PlanLaunchAttr launch : launches) {
    for (int64_t a : launch.getArgs())
      if (a < 0 || a >= total)
        return emitError() << "launch of '" << launch.getEntry()
                           << "' names plan index " << a << " of " << total;
    if (failed(verifySizeArgs(emitError, args, launch.getGrid(),
                              "launch of '" + launch.getEntry() + "' grid")))
      return failure();
  }
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
