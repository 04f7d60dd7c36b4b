//===- PackageInfo.cpp - What mla-run --info prints about a package -------===//

#include "PackageInfo.h"

#include "mla/runtime/Kinds.h"

#include <algorithm>

using namespace mla::rt;

namespace {

/// "[?, 1, 16, 576]".
std::string argDims(const std::vector<int64_t> &dims) {
  std::string out = "[";
  for (size_t d = 0; d < dims.size(); ++d)
    out += (d ? ", " : "") + (dims[d] == kDynamicDim ? std::string("?")
                                                     : std::to_string(dims[d]));
  return out + "]";
}

/// A size in words: "16", "q.shape[0]", "ceil((q.shape[0] + 3) / 32)",
/// "cu_seqlens_q.shape[0] - 1".
std::string sizeText(const Manifest &m, const DimExpr &e) {
  if (e.isConstant())
    return std::to_string(e.constant);
  std::string out =
      m.args[e.argIndex].role + ".shape[" + std::to_string(e.dim) + "]";
  if (e.addend > 0)
    out += " + " + std::to_string(e.addend);
  else if (e.addend < 0)
    out += " - " + std::to_string(-e.addend);
  if (e.divisor == 1)
    return out;
  if (e.addend != 0)
    out = "(" + out + ")";
  return "ceil(" + out + " / " + std::to_string(e.divisor) + ")";
}

template <typename Range, typename Show>
std::string listOf(const Range &items, Show show) {
  std::string out;
  for (const auto &item : items)
    out += (out.empty() ? "" : ", ") + show(item);
  return out;
}

std::string configText(const std::map<std::string, std::string> &config) {
  std::string out;
  for (const auto &[key, value] : config)
    out += (out.empty() ? "" : " ") + key + "=" + value;
  return out;
}

/// "input", "output", "input, updated" for a kind's roles; "variant input"
/// for the other memrefs of a known kind; "-" for kinds mla-run has no
/// table for.
std::string useOf(const Manifest &m, const ManifestArg &arg) {
  std::optional<KernelKind> kind = findKind(m.kernel);
  if (!kind)
    return "-";
  std::optional<Role> role = findRole(arg.role);
  const KindRole *entry = role ? kindRoles(*kind).find(*role) : nullptr;
  if (!entry)
    return "variant input";
  switch (entry->use) {
  case RoleUse::Input:
    return "input";
  case RoleUse::Output:
    return "output";
  case RoleUse::InOut:
    return "input, updated";
  }
  return "-";
}

std::string header(const Manifest &m) {
  std::vector<std::pair<const char *, int64_t>> keys = {
      {"causal", m.causal},
      {"heads", m.heads},
      {"latent_dim", m.latentDim},
      {"page_size", m.pageSize},
      {"parts", m.parts},
      {"q_len", m.qLen},
      {"qk_dim", m.qkDim},
      {"rope_dim", m.ropeDim},
      {"v_dim", m.vDim}};
  std::string out = m.dtype ? std::string("dtype=") + dtypeName(*m.dtype) : "";
  for (auto [key, value] : keys)
    if (value >= 0)
      out += (out.empty() ? "" : " ") + std::string(key) + "=" +
             std::to_string(value);
  return out;
}

std::string describeTarget(const Package &package, const TargetSpec &target) {
  const Manifest &m = package.manifest;
  auto indexName = [&](int index) {
    return index < static_cast<int>(m.args.size())
               ? m.args[index].role
               : "workspace " + std::to_string(index);
  };
  const std::vector<uint8_t> *code = package.findSection(target.section);
  std::string out = "target " + target.name + ": section " + target.section +
                    " (" + std::to_string(code ? code->size() : 0) +
                    " bytes)\n";
  if (!target.config.empty())
    out += "  config: " + configText(target.config) + "\n";
  for (const WorkspaceSpec &w : target.workspaces)
    out += "  workspace " + std::to_string(w.index) + ": " +
           dtypeName(w.dtype) + " [" +
           listOf(w.dims, [&](const DimExpr &e) { return sizeText(m, e); }) +
           "]\n";
  for (const LaunchSpec &launch : target.launches) {
    out += "  launch " + launch.entry + ": args " +
           listOf(launch.args, indexName) + "\n";
    out +=
        "    grid [" +
        listOf(launch.grid, [&](const DimExpr &e) { return sizeText(m, e); }) +
        "]";
    if (launch.block != LaunchSpec().block ||
        launch.sharedBytes != LaunchSpec().sharedBytes)
      out += ", block [" +
             listOf(launch.block, [](int64_t b) { return std::to_string(b); }) +
             "], shared " + std::to_string(launch.sharedBytes) + " bytes";
    out += "\n";
  }
  if (!target.maxBytes.empty())
    out += "  max-bytes: " +
           listOf(target.maxBytes,
                  [&](const MaxBytesSpec &limit) {
                    return indexName(limit.index) + " " +
                           std::to_string(limit.bytes);
                  }) +
           "\n";
  return out;
}

} // namespace

std::string mla::rt::describePackage(const std::string &path,
                                     const Package &package) {
  const Manifest &m = package.manifest;
  std::string out = "package: " + path + "\n";
  out += "kernel: " + m.kernel + "\n";
  out += "function: " + m.function + "\n";
  out += "compiler: " +
         (m.compiler.empty() ? std::string("unknown (no 'compiler' line)")
                             : m.compiler) +
         "\n";
  out += "header: " + header(m) + "\n";
  if (!m.config.empty())
    out += "config: " + configText(m.config) + "\n";
  out += "arguments:\n";
  size_t width = 0;
  for (const ManifestArg &arg : m.args)
    width = std::max(width, arg.role.size());
  for (const ManifestArg &arg : m.args) {
    std::string role = arg.role + std::string(width - arg.role.size(), ' ');
    std::string use = useOf(m, arg);
    use.resize(std::max<size_t>(use.size(), 14), ' ');
    out += "  " + std::to_string(arg.index) + " " + role + "  " + use + "  " +
           (arg.kind == ArgKind::Memref
                ? std::string("memref ") + dtypeName(arg.dtype) + " " +
                      argDims(arg.dims)
                : std::string("scalar ") + dtypeName(arg.dtype)) +
           "\n";
  }
  out += "targets: " +
         listOf(m.targets, [](const TargetSpec &t) { return t.name; }) + "\n";
  for (const TargetSpec &target : m.targets)
    out += describeTarget(package, target);
  return out;
}
