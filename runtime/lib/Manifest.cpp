//===- Manifest.cpp - Manifest parser and printer -------------------------===//

#include "mla/runtime/Manifest.h"

#include "KernelKinds.h"

#include <cctype>
#include <charconv>
#include <cstdint>
#include <map>
#include <set>

using namespace mla::rt;

const ManifestArg *Manifest::findArg(std::string_view role) const {
  for (const ManifestArg &arg : args)
    if (arg.role == role)
      return &arg;
  return nullptr;
}

const MaxBytesSpec *TargetSpec::findMaxBytes(int index) const {
  for (const MaxBytesSpec &limit : maxBytes)
    if (limit.index == index)
      return &limit;
  return nullptr;
}

const TargetSpec *Manifest::findTarget(std::string_view name) const {
  for (const TargetSpec &target : targets)
    if (target.name == name)
      return &target;
  return nullptr;
}

namespace {

using Tokens = std::vector<std::string_view>;

/// Splits a line into tokens after dropping a `#` comment.
Tokens tokenize(std::string_view line) {
  line = line.substr(0, line.find('#'));
  Tokens tokens;
  size_t pos = 0;
  while (true) {
    pos = line.find_first_not_of(" \t\r", pos);
    if (pos == std::string_view::npos)
      return tokens;
    size_t end = line.find_first_of(" \t\r", pos);
    if (end == std::string_view::npos)
      end = line.size();
    tokens.push_back(line.substr(pos, end - pos));
    pos = end;
  }
}

Tokens splitCommas(std::string_view list) {
  Tokens parts;
  size_t pos = 0;
  while (true) {
    size_t comma = list.find(',', pos);
    parts.push_back(list.substr(pos, comma - pos));
    if (comma == std::string_view::npos)
      return parts;
    pos = comma + 1;
  }
}

bool isIdentifier(std::string_view text) {
  if (text.empty() ||
      !(std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_'))
    return false;
  for (char c : text)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return true;
}

/// Target names such as host-x86_64, gfx942, sm_90a; section names such as
/// code.host-x86_64.
bool isName(std::string_view text) {
  if (text.empty())
    return false;
  for (char c : text)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' &&
        c != '.')
      return false;
  return true;
}

std::optional<int64_t> parseNonNegative(std::string_view text) {
  int64_t value = 0;
  const char *end = text.data() + text.size();
  auto result = std::from_chars(text.data(), end, value);
  if (text.empty() || result.ec != std::errc() || result.ptr != end ||
      value < 0 || text[0] == '-' || text[0] == '+')
    return std::nullopt;
  return value;
}

std::string quoted(std::string_view text) {
  return "'" + std::string(text) + "'";
}

/// The optional header keys (all but `kernel`, `function` and `config`), in
/// canonical order: sorted by name, as mla-compile writes them (its header
/// comes from a sorted DictionaryAttr). The parser dispatches on this table
/// and printManifest prints from it.
struct HeaderKey {
  std::string_view name;
  /// The Manifest field (-1 when absent); null for `dtype`, the one key whose
  /// value is not a count.
  int64_t Manifest::*field;
  /// 0 is valid (a dynamic size, a flag, no rope part); else >= 1.
  bool mayBeZero;
};

constexpr HeaderKey kHeaderKeys[] = {
    {"causal", &Manifest::causal, true},
    {"dtype", nullptr, false},
    {"heads", &Manifest::heads, false},
    {"latent_dim", &Manifest::latentDim, false},
    {"page_size", &Manifest::pageSize, true},
    {"parts", &Manifest::parts, false},
    {"q_len", &Manifest::qLen, true},
    {"qk_dim", &Manifest::qkDim, false},
    {"rope_dim", &Manifest::ropeDim, true},
    {"v_dim", &Manifest::vDim, false},
};

/// nullptr when `name` is not in kHeaderKeys.
const HeaderKey *findHeaderKey(std::string_view name) {
  for (const HeaderKey &key : kHeaderKeys)
    if (key.name == name)
      return &key;
  return nullptr;
}

/// Spellings shared by the parser and the printer: `?` in arg DIMS, and the
/// `argI.D[+C|-C][/K]` form of a SIZE.
constexpr std::string_view kDynamicDimToken = "?";
constexpr std::string_view kSizeArgPrefix = "arg";
constexpr char kSizeDimSeparator = '.';
constexpr char kSizePlus = '+';
constexpr char kSizeMinus = '-';
constexpr char kSizeDivide = '/';

class ManifestParser {
public:
  Expected<Manifest> parse(std::string_view text);

private:
  Status error(const std::string &message) const {
    return Status::error(ErrorCode::InvalidManifest, "manifest line " +
                                                         std::to_string(line) +
                                                         ": " + message);
  }
  Status expectTokens(const Tokens &tokens, size_t count,
                      const char *form) const {
    if (tokens.size() == count)
      return Status::success();
    return error("expected '" + std::string(form) + "', got " +
                 std::to_string(tokens.size()) + " tokens");
  }

  Status parseLine(const Tokens &tokens);
  Status parseVersion(const Tokens &tokens);
  Status parseHeaderKey(const Tokens &tokens);
  Status parseCompiler(const Tokens &tokens);
  Status parseConfig(const Tokens &tokens);
  Status parseArg(const Tokens &tokens);
  Status parseTarget(const Tokens &tokens);
  Status parseConfigEntries(const Tokens &tokens,
                            std::map<std::string, std::string> &config);
  Status parseWorkspace(const Tokens &tokens);
  Status parseLaunch(const Tokens &tokens);
  Status parseMaxBytes(const Tokens &tokens);
  Status parseEndTarget(const Tokens &tokens);
  Status finish();

  Expected<DType> parseDTypeToken(std::string_view token) const;
  Expected<int64_t> parseCount(std::string_view key,
                               std::string_view token) const;
  Expected<std::vector<int64_t>> parseArgDims(std::string_view list) const;
  Expected<DimExpr> parseDimExpr(std::string_view token) const;
  Expected<std::vector<DimExpr>> parseDimExprs(std::string_view list) const;

  Manifest manifest;
  int line = 0;
  bool sawVersion = false;
  /// Header key -> the line it first appeared on.
  std::map<std::string, int, std::less<>> headerLines;
  /// The open target block, if any, and where it started.
  TargetSpec *openTarget = nullptr;
  int openTargetLine = 0;
};

} // namespace

Expected<Manifest> ManifestParser::parse(std::string_view text) {
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos)
      end = text.size();
    ++line;
    Tokens tokens = tokenize(text.substr(pos, end - pos));
    if (!tokens.empty()) {
      Status status = parseLine(tokens);
      if (!status.ok())
        return status;
    }
    pos = end + 1;
  }
  Status status = finish();
  if (!status.ok())
    return status;
  return std::move(manifest);
}

Status ManifestParser::parseLine(const Tokens &tokens) {
  std::string_view key = tokens[0];
  if (!sawVersion)
    return parseVersion(tokens);
  if (openTarget) {
    if (key == "workspace")
      return parseWorkspace(tokens);
    if (key == "launch")
      return parseLaunch(tokens);
    if (key == "max-bytes")
      return parseMaxBytes(tokens);
    if (key == "end-target")
      return parseEndTarget(tokens);
    if (key == "config")
      return parseConfigEntries(tokens, openTarget->config);
    if (key == "target")
      return error("target " + quoted(tokens.size() > 1 ? tokens[1] : "") +
                   " starts inside target " + quoted(openTarget->name) +
                   " (line " + std::to_string(openTargetLine) +
                   "); close it with 'end-target' first");
    return error(quoted(key) +
                 " is not allowed inside a target block (expected "
                 "'config', 'workspace', 'launch', 'max-bytes' or "
                 "'end-target')");
  }
  if (key == "arg")
    return parseArg(tokens);
  if (key == "target")
    return parseTarget(tokens);
  if (key == "config")
    return parseConfig(tokens);
  if (key == "compiler")
    return parseCompiler(tokens);
  if (key == "kernel" || key == "function" || findHeaderKey(key))
    return parseHeaderKey(tokens);
  if (key == "workspace" || key == "launch" || key == "max-bytes" ||
      key == "end-target")
    return error(quoted(key) + " is only allowed inside a target block");
  if (key == "mla-manifest")
    return error("duplicate 'mla-manifest' line");
  return error("unknown key " + quoted(key));
}

Status ManifestParser::parseVersion(const Tokens &tokens) {
  if (tokens[0] != "mla-manifest")
    return error("expected 'mla-manifest " + std::to_string(kManifestVersion) +
                 "' first, got " + quoted(tokens[0]));
  if (Status status = expectTokens(tokens, 2, "mla-manifest VERSION");
      !status.ok())
    return status;
  std::optional<int64_t> version = parseNonNegative(tokens[1]);
  if (!version)
    return error("manifest version " + quoted(tokens[1]) +
                 " is not an integer");
  if (*version != kManifestVersion)
    return error("manifest version " + std::to_string(*version) +
                 " is not supported (this runtime reads " +
                 std::to_string(kManifestVersion) + ")");
  sawVersion = true;
  return Status::success();
}

Status ManifestParser::parseHeaderKey(const Tokens &tokens) {
  std::string_view key = tokens[0];
  auto [it, inserted] = headerLines.emplace(std::string(key), line);
  if (!inserted)
    return error("duplicate " + quoted(key) + " (first on line " +
                 std::to_string(it->second) + ")");
  std::string form = std::string(key) + " VALUE";
  if (Status status = expectTokens(tokens, 2, form.c_str()); !status.ok())
    return status;
  std::string_view value = tokens[1];
  if (key == "kernel" || key == "function") {
    if (!isIdentifier(value))
      return error(quoted(key) + " must be an identifier, got " +
                   quoted(value));
    (key == "kernel" ? manifest.kernel : manifest.function) = value;
    return Status::success();
  }
  const HeaderKey *header = findHeaderKey(key);
  if (!header->field) { // dtype
    Expected<DType> dtype = parseDTypeToken(value);
    if (!dtype.ok())
      return dtype.status();
    manifest.dtype = *dtype;
    return Status::success();
  }
  Expected<int64_t> count = parseCount(key, value);
  if (!count.ok())
    return count.status();
  if (*count == 0 && !header->mayBeZero)
    return error(quoted(key) + " must be positive");
  if (header->field == &Manifest::causal && *count > 1)
    return error("'causal' must be 0 or 1, got " + quoted(value));
  manifest.*header->field = *count;
  return Status::success();
}

Status ManifestParser::parseCompiler(const Tokens &tokens) {
  auto [it, inserted] = headerLines.emplace("compiler", line);
  if (!inserted)
    return error("duplicate 'compiler' (first on line " +
                 std::to_string(it->second) + ")");
  if (tokens.size() < 2)
    return error("expected 'compiler TEXT ...'");
  for (size_t i = 1; i < tokens.size(); ++i)
    manifest.compiler += (i > 1 ? " " : "") + std::string(tokens[i]);
  return Status::success();
}

Status ManifestParser::parseConfig(const Tokens &tokens) {
  auto [it, inserted] = headerLines.emplace("config", line);
  if (!inserted)
    return error("duplicate 'config' (first on line " +
                 std::to_string(it->second) + ")");
  return parseConfigEntries(tokens, manifest.config);
}

Status
ManifestParser::parseConfigEntries(const Tokens &tokens,
                                   std::map<std::string, std::string> &config) {
  if (!config.empty())
    return error("duplicate 'config' in this block");
  if (tokens.size() < 2)
    return error("expected 'config KEY=VALUE ...'");
  for (size_t i = 1; i < tokens.size(); ++i) {
    size_t eq = tokens[i].find('=');
    if (eq == std::string_view::npos || eq + 1 == tokens[i].size() ||
        !isIdentifier(tokens[i].substr(0, eq)))
      return error("config entry " + quoted(tokens[i]) + " is not KEY=VALUE");
    std::string key(tokens[i].substr(0, eq));
    if (!config.emplace(key, tokens[i].substr(eq + 1)).second)
      return error("duplicate config key " + quoted(key));
  }
  return Status::success();
}

Status ManifestParser::parseArg(const Tokens &tokens) {
  if (!manifest.targets.empty())
    return error("'arg' lines must come before the first 'target'");
  if (tokens.size() < 5 || (tokens[3] != "memref" && tokens[3] != "scalar"))
    return error("expected 'arg INDEX ROLE memref DTYPE DIMS' or 'arg INDEX "
                 "ROLE scalar DTYPE'");
  bool isMemref = tokens[3] == "memref";
  if (Status status = expectTokens(tokens, isMemref ? 6 : 5,
                                   isMemref ? "arg INDEX ROLE memref DTYPE DIMS"
                                            : "arg INDEX ROLE scalar DTYPE");
      !status.ok())
    return status;
  std::optional<int64_t> index = parseNonNegative(tokens[1]);
  if (!index || *index != static_cast<int64_t>(manifest.args.size()))
    return error("arg index " + quoted(tokens[1]) +
                 " is out of order, expected " +
                 std::to_string(manifest.args.size()));
  if (!isIdentifier(tokens[2]))
    return error("arg role " + quoted(tokens[2]) + " is not an identifier");
  if (const ManifestArg *other = manifest.findArg(tokens[2]))
    return error("duplicate arg role " + quoted(tokens[2]) +
                 " (first on line " + std::to_string(other->line) + ")");
  ManifestArg arg;
  arg.index = static_cast<int>(*index);
  arg.role = tokens[2];
  arg.kind = isMemref ? ArgKind::Memref : ArgKind::Scalar;
  arg.line = line;
  Expected<DType> dtype = parseDTypeToken(tokens[4]);
  if (!dtype.ok())
    return dtype.status();
  arg.dtype = *dtype;
  if (isMemref) {
    Expected<std::vector<int64_t>> dims = parseArgDims(tokens[5]);
    if (!dims.ok())
      return dims.status();
    arg.dims = dims.take();
  }
  manifest.args.push_back(std::move(arg));
  return Status::success();
}

Status ManifestParser::parseTarget(const Tokens &tokens) {
  if (Status status = expectTokens(tokens, 3, "target NAME SECTION");
      !status.ok())
    return status;
  if (!isName(tokens[1]))
    return error("target name " + quoted(tokens[1]) +
                 " may only use letters, digits, '_', '-' and '.'");
  if (!isName(tokens[2]) || tokens[2] == "manifest")
    return error("section name " + quoted(tokens[2]) +
                 " is not a valid code section name");
  if (manifest.findTarget(tokens[1]))
    return error("duplicate target " + quoted(tokens[1]));
  TargetSpec target;
  target.name = tokens[1];
  target.section = tokens[2];
  target.line = line;
  manifest.targets.push_back(std::move(target));
  openTarget = &manifest.targets.back();
  openTargetLine = line;
  return Status::success();
}

Status ManifestParser::parseWorkspace(const Tokens &tokens) {
  if (Status status = expectTokens(tokens, 4, "workspace INDEX DTYPE DIMS");
      !status.ok())
    return status;
  size_t expected = manifest.args.size() + openTarget->workspaces.size();
  std::optional<int64_t> index = parseNonNegative(tokens[1]);
  if (!index || *index != static_cast<int64_t>(expected))
    return error("workspace index " + quoted(tokens[1]) +
                 " is out of order, expected " + std::to_string(expected) +
                 " (workspaces continue the arg numbering)");
  WorkspaceSpec workspace;
  workspace.index = static_cast<int>(*index);
  workspace.line = line;
  Expected<DType> dtype = parseDTypeToken(tokens[2]);
  if (!dtype.ok())
    return dtype.status();
  workspace.dtype = *dtype;
  Expected<std::vector<DimExpr>> dims = parseDimExprs(tokens[3]);
  if (!dims.ok())
    return dims.status();
  workspace.dims = dims.take();
  openTarget->workspaces.push_back(std::move(workspace));
  return Status::success();
}

Status ManifestParser::parseLaunch(const Tokens &tokens) {
  const char *form = "expected 'launch ENTRY args I,J,... grid X,Y,Z [block "
                     "BX,BY,BZ] [shared BYTES] [dependent]'";
  if (tokens.size() < 6 || tokens[2] != "args" || tokens[4] != "grid")
    return error(form);
  if (!isIdentifier(tokens[1]))
    return error("launch entry " + quoted(tokens[1]) + " is not an identifier");
  LaunchSpec launch;
  launch.entry = tokens[1];
  launch.line = line;
  size_t numIndices = manifest.args.size() + openTarget->workspaces.size();
  for (std::string_view item : splitCommas(tokens[3])) {
    std::optional<int64_t> index = parseNonNegative(item);
    if (!index)
      return error("launch argument " + quoted(item) + " is not an index");
    if (*index >= static_cast<int64_t>(numIndices))
      return error("launch argument " + std::to_string(*index) +
                   " is neither an arg nor a workspace declared above");
    launch.args.push_back(static_cast<int>(*index));
  }
  Expected<std::vector<DimExpr>> grid = parseDimExprs(tokens[5]);
  if (!grid.ok())
    return grid.status();
  if (grid->size() != 3)
    return error("launch grid " + quoted(tokens[5]) + " has " +
                 std::to_string(grid->size()) + " dims, expected 3 (X,Y,Z)");
  for (int i = 0; i < 3; ++i)
    launch.grid[i] = (*grid)[i];

  // Optional `block BX,BY,BZ` then `shared BYTES`, in this order.
  size_t pos = 6;
  if (pos + 1 < tokens.size() && tokens[pos] == "block") {
    Tokens dims = splitCommas(tokens[pos + 1]);
    int64_t threads = 1;
    for (size_t i = 0; i < dims.size() && i < 3; ++i) {
      std::optional<int64_t> dim = parseNonNegative(dims[i]);
      if (!dim || *dim == 0 || *dim > kMaxBlockThreads)
        return error("launch block " + quoted(tokens[pos + 1]) +
                     " is not three positive integers BX,BY,BZ");
      launch.block[i] = *dim;
      threads *= *dim;
    }
    if (dims.size() != 3)
      return error("launch block " + quoted(tokens[pos + 1]) + " has " +
                   std::to_string(dims.size()) +
                   " dims, expected 3 (BX,BY,BZ)");
    if (threads > kMaxBlockThreads)
      return error("launch block " + quoted(tokens[pos + 1]) + " has " +
                   std::to_string(threads) + " threads, more than " +
                   std::to_string(kMaxBlockThreads));
    pos += 2;
  }
  if (pos + 1 < tokens.size() && tokens[pos] == "shared") {
    std::optional<int64_t> bytes = parseNonNegative(tokens[pos + 1]);
    if (!bytes || *bytes > INT32_MAX)
      return error("launch shared " + quoted(tokens[pos + 1]) +
                   " is not a byte count in [0, 2147483647]");
    launch.sharedBytes = *bytes;
    pos += 2;
  }
  if (pos < tokens.size() && tokens[pos] == "dependent") {
    if (openTarget->launches.empty())
      return error("the first launch of target " + quoted(openTarget->name) +
                   " cannot be 'dependent' (it has no launch to wait for)");
    launch.dependent = true;
    ++pos;
  }
  if (pos != tokens.size())
    return error(std::string(form) + ", got " + quoted(tokens[pos]) +
                 " after the " +
                 (pos == 6                         ? "grid"
                  : tokens[pos - 1] == "dependent" ? "dependent"
                  : tokens[pos - 2] == "block"     ? "block"
                                                   : "shared"));
  openTarget->launches.push_back(std::move(launch));
  return Status::success();
}

Status ManifestParser::parseMaxBytes(const Tokens &tokens) {
  if (Status status = expectTokens(tokens, 3, "max-bytes INDEX BYTES");
      !status.ok())
    return status;
  std::optional<int64_t> index = parseNonNegative(tokens[1]);
  if (!index || *index > INT32_MAX)
    return error("max-bytes index " + quoted(tokens[1]) + " is not an index");
  std::optional<int64_t> bytes = parseNonNegative(tokens[2]);
  if (!bytes)
    return error("max-bytes " + quoted(tokens[2]) +
                 " is not a byte count (a non-negative integer below 2^63)");
  if (const MaxBytesSpec *other =
          openTarget->findMaxBytes(static_cast<int>(*index)))
    return error("duplicate max-bytes for index " + std::to_string(*index) +
                 " (first on line " + std::to_string(other->line) + ")");
  // Whether INDEX names a memref arg or a workspace is checked at
  // end-target: the line may precede the workspace it limits.
  openTarget->maxBytes.push_back({static_cast<int>(*index), *bytes, line});
  return Status::success();
}

Status ManifestParser::parseEndTarget(const Tokens &tokens) {
  if (Status status = expectTokens(tokens, 1, "end-target"); !status.ok())
    return status;
  if (openTarget->launches.empty())
    return error("target " + quoted(openTarget->name) + " has no 'launch'");
  size_t numIndices = manifest.args.size() + openTarget->workspaces.size();
  for (const MaxBytesSpec &limit : openTarget->maxBytes) {
    auto fail = [&](const std::string &message) {
      return Status::error(ErrorCode::InvalidManifest,
                           "manifest line " + std::to_string(limit.line) +
                               ": " + message);
    };
    if (static_cast<size_t>(limit.index) >= numIndices)
      return fail("max-bytes index " + std::to_string(limit.index) +
                  " is neither an arg nor a workspace of target " +
                  quoted(openTarget->name));
    if (static_cast<size_t>(limit.index) < manifest.args.size() &&
        manifest.args[limit.index].kind != ArgKind::Memref)
      return fail("max-bytes index " + std::to_string(limit.index) +
                  " is scalar arg " + quoted(manifest.args[limit.index].role) +
                  " (only memrefs and workspaces have a byte size)");
  }
  openTarget = nullptr;
  return Status::success();
}

Status ManifestParser::finish() {
  auto fail = [](const std::string &message) {
    return Status::error(ErrorCode::InvalidManifest, "manifest " + message);
  };
  if (!sawVersion)
    return fail("is empty (expected 'mla-manifest " +
                std::to_string(kManifestVersion) + "' first)");
  if (openTarget)
    return fail("ends inside target " + quoted(openTarget->name) + " (line " +
                std::to_string(openTargetLine) + "): missing 'end-target'");
  if (manifest.kernel.empty())
    return fail("has no 'kernel' line");
  if (manifest.function.empty())
    return fail("has no 'function' line");
  if (manifest.args.empty())
    return fail("declares no 'arg'");
  if (manifest.targets.empty())
    return fail("declares no 'target'");
  if (const KernelKindRules *rules = findKernelKindRules(manifest.kernel))
    return rules->checkManifest(manifest);
  return Status::success();
}

Expected<DType> ManifestParser::parseDTypeToken(std::string_view token) const {
  if (std::optional<DType> dtype = parseDType(token))
    return *dtype;
  return error("unknown dtype " + quoted(token) +
               " (expected bf16, f16, f32, i32 or i64)");
}

Expected<int64_t> ManifestParser::parseCount(std::string_view key,
                                             std::string_view token) const {
  if (std::optional<int64_t> value = parseNonNegative(token))
    return *value;
  return error(quoted(key) + " expects a non-negative integer, got " +
               quoted(token));
}

Expected<std::vector<int64_t>>
ManifestParser::parseArgDims(std::string_view list) const {
  std::vector<int64_t> dims;
  if (list == kRankZeroDims)
    return dims;
  for (std::string_view item : splitCommas(list)) {
    if (item == kDynamicDimToken) {
      dims.push_back(kDynamicDim);
      continue;
    }
    std::optional<int64_t> dim = parseNonNegative(item);
    if (!dim)
      return error("dim " + quoted(item) + " in " + quoted(list) +
                   " is neither a non-negative integer nor '?'");
    dims.push_back(*dim);
  }
  return dims;
}

Expected<DimExpr> ManifestParser::parseDimExpr(std::string_view token) const {
  DimExpr expr;
  if (std::optional<int64_t> value = parseNonNegative(token)) {
    expr.constant = *value;
    return expr;
  }
  // argI.D, then optionally +C or -C, then optionally /K.
  std::string_view rest = token;
  std::optional<int64_t> divisor = 1, addend = 0;
  if (size_t slash = rest.find(kSizeDivide); slash != std::string_view::npos) {
    divisor = parseNonNegative(rest.substr(slash + 1));
    rest = rest.substr(0, slash);
  }
  const char signs[] = {kSizePlus, kSizeMinus, '\0'};
  if (size_t sign = rest.find_first_of(signs); sign != std::string_view::npos) {
    addend = parseNonNegative(rest.substr(sign + 1));
    if (addend && rest[sign] == kSizeMinus)
      addend = -*addend;
    rest = rest.substr(0, sign);
  }
  size_t dot = rest.find(kSizeDimSeparator);
  std::optional<int64_t> argIndex, dim;
  size_t prefix = kSizeArgPrefix.size();
  if (rest.substr(0, prefix) == kSizeArgPrefix &&
      dot != std::string_view::npos) {
    argIndex = parseNonNegative(rest.substr(prefix, dot - prefix));
    dim = parseNonNegative(rest.substr(dot + 1));
  }
  if (!argIndex || !dim || !addend || !divisor || *divisor == 0)
    return error("size " + quoted(token) +
                 " is neither a non-negative integer nor 'argI.D[+C|-C][/K]' "
                 "(K > 0)");
  if (*argIndex >= static_cast<int64_t>(manifest.args.size()))
    return error("size " + quoted(token) + " refers to arg " +
                 std::to_string(*argIndex) + ", but there are only " +
                 std::to_string(manifest.args.size()) + " args");
  const ManifestArg &arg = manifest.args[*argIndex];
  if (arg.kind != ArgKind::Memref)
    return error("size " + quoted(token) + " refers to scalar arg " +
                 quoted(arg.role));
  if (*dim >= static_cast<int64_t>(arg.dims.size()))
    return error("size " + quoted(token) + " refers to dim " +
                 std::to_string(*dim) + " of " + quoted(arg.role) +
                 ", which has rank " + std::to_string(arg.dims.size()));
  expr.argIndex = static_cast<int>(*argIndex);
  expr.dim = static_cast<int>(*dim);
  expr.addend = *addend;
  expr.divisor = *divisor;
  return expr;
}

Expected<std::vector<DimExpr>>
ManifestParser::parseDimExprs(std::string_view list) const {
  std::vector<DimExpr> dims;
  if (list == kRankZeroDims)
    return dims;
  for (std::string_view item : splitCommas(list)) {
    Expected<DimExpr> dim = parseDimExpr(item);
    if (!dim.ok())
      return dim.status();
    dims.push_back(*dim);
  }
  return dims;
}

Expected<Manifest> mla::rt::parseManifest(std::string_view text) {
  return ManifestParser().parse(text);
}

//===----------------------------------------------------------------------===//
// Printer
//===----------------------------------------------------------------------===//

namespace {

/// `A,B,C` of `items`, each written by `print`.
template <typename Range, typename Print>
std::string joinCommas(const Range &items, Print print) {
  std::string out;
  for (const auto &item : items) {
    if (!out.empty())
      out += ',';
    out += print(item);
  }
  return out;
}

/// DIMS: the comma-joined dims, or `()` for rank 0.
template <typename Range, typename Print>
std::string joinDims(const Range &dims, Print print) {
  return dims.empty() ? std::string(kRankZeroDims) : joinCommas(dims, print);
}

} // namespace

/// An arg dim: INT, or `?` for kDynamicDim.
static std::string printArgDim(int64_t dim) {
  return dim == kDynamicDim ? std::string(kDynamicDimToken)
                            : std::to_string(dim);
}

/// A SIZE: INT, or `argI.D[+C|-C][/K]` without a 0 addend or a divisor of 1
/// (what parseDimExpr reads back to the same DimExpr).
std::string mla::rt::printDimExpr(const DimExpr &expr) {
  if (expr.isConstant())
    return std::to_string(expr.constant);
  std::string out = std::string(kSizeArgPrefix) +
                    std::to_string(expr.argIndex) + kSizeDimSeparator +
                    std::to_string(expr.dim);
  if (expr.addend > 0)
    out += kSizePlus + std::to_string(expr.addend);
  else if (expr.addend < 0) // Never INT64_MIN: the parser reads -C, C >= 0.
    out += kSizeMinus + std::to_string(-expr.addend);
  if (expr.divisor != 1)
    out += kSizeDivide + std::to_string(expr.divisor);
  return out;
}

std::string mla::rt::printLaunch(const LaunchSpec &launch) {
  std::string out =
      "launch " + launch.entry + " args " +
      joinCommas(launch.args, [](int index) { return std::to_string(index); }) +
      " grid " + joinCommas(launch.grid, printDimExpr);
  // Both or neither, as mla-compile writes GPU and host launches.
  if (launch.block != LaunchSpec().block ||
      launch.sharedBytes != LaunchSpec().sharedBytes)
    out += " block " +
           joinCommas(launch.block,
                      [](int64_t dim) { return std::to_string(dim); }) +
           " shared " + std::to_string(launch.sharedBytes);
  if (launch.dependent)
    out += " dependent";
  return out;
}

std::string mla::rt::printArgDims(const std::vector<int64_t> &dims) {
  return joinDims(dims, printArgDim);
}

std::string mla::rt::printSizes(const std::vector<DimExpr> &dims) {
  return joinDims(dims, printDimExpr);
}

/// `config KEY=VALUE ...` (keys sorted), or nothing for an empty config.
static std::string printConfig(const std::map<std::string, std::string> &c) {
  if (c.empty())
    return "";
  std::string out = "config";
  for (const auto &[key, value] : c)
    out += " " + key + "=" + value;
  return out + "\n";
}

std::string mla::rt::printManifest(const Manifest &m) {
  std::string out = "mla-manifest " + std::to_string(kManifestVersion) + "\n";
  out += "kernel " + m.kernel + "\n";
  out += "function " + m.function + "\n";
  if (!m.compiler.empty())
    out += "compiler " + m.compiler + "\n";
  for (const HeaderKey &key : kHeaderKeys) {
    if (!key.field) { // dtype
      if (m.dtype)
        out += std::string(key.name) + " " + dtypeName(*m.dtype) + "\n";
    } else if (m.*key.field >= 0) {
      out += std::string(key.name) + " " + std::to_string(m.*key.field) + "\n";
    }
  }
  out += printConfig(m.config);
  for (const ManifestArg &arg : m.args) {
    out += "arg " + std::to_string(arg.index) + " " + arg.role + " ";
    if (arg.kind == ArgKind::Memref)
      out += std::string("memref ") + dtypeName(arg.dtype) + " " +
             printArgDims(arg.dims) + "\n";
    else
      out += std::string("scalar ") + dtypeName(arg.dtype) + "\n";
  }
  for (const TargetSpec &target : m.targets) {
    out += "target " + target.name + " " + target.section + "\n";
    out += printConfig(target.config);
    for (const WorkspaceSpec &workspace : target.workspaces)
      out += "workspace " + std::to_string(workspace.index) + " " +
             dtypeName(workspace.dtype) + " " + printSizes(workspace.dims) +
             "\n";
    for (const LaunchSpec &launch : target.launches)
      out += printLaunch(launch) + "\n";
    for (const MaxBytesSpec &limit : target.maxBytes)
      out += "max-bytes " + std::to_string(limit.index) + " " +
             std::to_string(limit.bytes) + "\n";
    out += "end-target\n";
  }
  return out;
}
