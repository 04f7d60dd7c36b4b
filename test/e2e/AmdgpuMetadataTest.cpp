//===- AmdgpuMetadataTest.cpp - The AMDGPU reader vs llvm-readelf ---------===//
//
// For gfx90a, gfx942 and gfx950 and a few decode shapes, mla-compile writes a
// code object (--emit=obj) and a package. The runtime's metadata reader must
// agree with `llvm-readelf --notes` on every field it returns, and the
// kernel-argument layout the HIP backend packs (the gpu.func memref ABI at
// natural alignment, for the arguments of each manifest launch line) must be
// exactly the explicit `.args` of both kernels of the package's code object,
// as llvm-readelf prints them; checkAmdgpuCodeObject (what the HIP backend
// runs before loading) must accept the package. Nothing here runs on a GPU.
//
//===----------------------------------------------------------------------===//

#include "mla/runtime/AmdgpuMetadata.h"
#include "mla/runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace mla::rt;

namespace {

struct Case {
  std::string target;
  std::string shape; // a name
  std::string flags; // mla-compile flags of the shape
};

void PrintTo(const Case &c, std::ostream *os) {
  *os << c.target << "_" << c.shape;
}

std::string tempDir() {
  static std::string dir = [] {
    char tmpl[] = "/tmp/mla-amdgpu-e2e-XXXXXX";
    const char *d = mkdtemp(tmpl);
    return std::string(d ? d : "/tmp");
  }();
  return dir;
}

/// Runs a shell command; its stdout, or nullopt when it failed.
std::optional<std::string> run(const std::string &command) {
  FILE *pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (!pipe)
    return std::nullopt;
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  if (pclose(pipe) != 0)
    return std::nullopt;
  return out;
}

std::vector<uint8_t> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

//===----------------------------------------------------------------------===//
// The YAML subset llvm-readelf prints for NT_AMDGPU_METADATA
//===----------------------------------------------------------------------===//

struct Yaml {
  enum Kind { Scalar, Map, Seq } kind = Scalar;
  std::string scalar;
  std::vector<std::pair<std::string, Yaml>> map;
  std::vector<Yaml> seq;

  const Yaml *get(const std::string &key) const {
    for (const auto &entry : map)
      if (entry.first == key)
        return &entry.second;
    return nullptr;
  }
};

struct Line {
  size_t indent;
  std::string text;
};

std::string trim(const std::string &s) {
  size_t a = s.find_first_not_of(" \t");
  size_t b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

/// Parses the block starting at lines[i] with indentation `indent`.
Yaml parseBlock(std::vector<Line> &lines, size_t &i, size_t indent) {
  Yaml node;
  if (i < lines.size() && lines[i].text.rfind("- ", 0) == 0) {
    node.kind = Yaml::Seq;
    while (i < lines.size() && lines[i].indent == indent &&
           lines[i].text.rfind("- ", 0) == 0) {
      std::string rest = lines[i].text.substr(2);
      if (rest.find(':') == std::string::npos) {
        Yaml item;
        item.scalar = trim(rest);
        node.seq.push_back(item);
        ++i;
        continue;
      }
      // "- key: value": a map whose first key sits two columns in.
      lines[i] = {indent + 2, rest};
      node.seq.push_back(parseBlock(lines, i, indent + 2));
    }
    return node;
  }
  node.kind = Yaml::Map;
  while (i < lines.size() && lines[i].indent == indent &&
         lines[i].text.rfind("- ", 0) != 0) {
    const std::string &text = lines[i].text;
    size_t colon = text.find(':');
    std::string key = text.substr(0, colon);
    std::string value = trim(text.substr(colon + 1));
    ++i;
    if (!value.empty()) {
      Yaml scalar;
      scalar.scalar = value;
      node.map.emplace_back(key, scalar);
    } else if (i < lines.size() && lines[i].indent > indent) {
      node.map.emplace_back(key, parseBlock(lines, i, lines[i].indent));
    } else {
      node.map.emplace_back(key, Yaml());
    }
  }
  return node;
}

/// The metadata document of `llvm-readelf --notes` output.
std::optional<Yaml> readelfMetadata(const std::string &path) {
  std::optional<std::string> out =
      run(std::string(MLA_LLVM_READELF) + " --notes " + path);
  if (!out)
    return std::nullopt;
  std::vector<Line> lines;
  std::istringstream in(*out);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (trim(line) == "---") {
      inside = true;
      continue;
    }
    if (trim(line) == "...")
      break;
    if (!inside || trim(line).empty())
      continue;
    size_t indent = line.find_first_not_of(' ');
    lines.push_back({indent, line.substr(indent)});
  }
  if (lines.empty())
    return std::nullopt;
  size_t i = 0;
  return parseBlock(lines, i, lines[0].indent);
}

uint64_t number(const Yaml *node) {
  EXPECT_NE(node, nullptr);
  return node ? std::stoull(node->scalar) : ~0ull;
}

std::string text(const Yaml *node) {
  EXPECT_NE(node, nullptr);
  return node ? node->scalar : "<missing>";
}

//===----------------------------------------------------------------------===//

class AmdgpuReadelfTest : public ::testing::TestWithParam<Case> {
protected:
  void SetUp() override {
    if (access(MLA_LLVM_READELF, X_OK) != 0)
      GTEST_SKIP() << MLA_LLVM_READELF << " not found";
    const Case &c = GetParam();
    std::string base = tempDir() + "/" + c.target + "_" + c.shape;
    object = base + ".hsaco";
    package = base + ".mlapkg";
    std::string compile = std::string(MLA_COMPILE_PATH) +
                          " --kernel=decode --target=" + c.target + " " +
                          c.flags;
    ASSERT_TRUE(run(compile + " --emit=obj -o " + object)) << compile;
    ASSERT_TRUE(run(compile + " -o " + package)) << compile;
  }

  std::string object, package;
};

/// Every field the runtime returns, against llvm-readelf's YAML.
void expectSameMetadata(const AmdgpuMetadata &m, const Yaml &yaml) {
  EXPECT_EQ(m.target, text(yaml.get("amdhsa.target")));
  const Yaml *version = yaml.get("amdhsa.version");
  ASSERT_NE(version, nullptr);
  ASSERT_EQ(m.version.size(), version->seq.size());
  for (size_t i = 0; i < m.version.size(); ++i)
    EXPECT_EQ(m.version[i], std::stoull(version->seq[i].scalar));
  const Yaml *kernels = yaml.get("amdhsa.kernels");
  ASSERT_NE(kernels, nullptr);
  ASSERT_EQ(m.kernels.size(), kernels->seq.size());
  for (const Yaml &expected : kernels->seq) {
    std::string name = text(expected.get(".name"));
    SCOPED_TRACE(name);
    const AmdgpuKernelMetadata *k = m.findKernel(name);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->symbol, text(expected.get(".symbol")));
    EXPECT_EQ(k->kernargSegmentSize,
              number(expected.get(".kernarg_segment_size")));
    EXPECT_EQ(k->kernargSegmentAlign,
              number(expected.get(".kernarg_segment_align")));
    EXPECT_EQ(k->groupSegmentFixedSize,
              number(expected.get(".group_segment_fixed_size")));
    EXPECT_EQ(k->privateSegmentFixedSize,
              number(expected.get(".private_segment_fixed_size")));
    EXPECT_EQ(k->wavefrontSize, number(expected.get(".wavefront_size")));
    EXPECT_EQ(k->sgprCount, number(expected.get(".sgpr_count")));
    EXPECT_EQ(k->vgprCount, number(expected.get(".vgpr_count")));
    if (const Yaml *agpr = expected.get(".agpr_count"))
      EXPECT_EQ(k->agprCount, number(agpr));
    else
      EXPECT_FALSE(k->agprCount.has_value());
    EXPECT_EQ(k->maxFlatWorkgroupSize,
              number(expected.get(".max_flat_workgroup_size")));
    EXPECT_EQ(k->usesDynamicStack ? "true" : "false",
              text(expected.get(".uses_dynamic_stack")));
    if (const Yaml *reqd = expected.get(".reqd_workgroup_size")) {
      ASSERT_TRUE(k->reqdWorkgroupSize.has_value());
      ASSERT_EQ(reqd->seq.size(), 3u);
      for (int d = 0; d < 3; ++d)
        EXPECT_EQ((*k->reqdWorkgroupSize)[d], std::stoull(reqd->seq[d].scalar));
    } else {
      EXPECT_FALSE(k->reqdWorkgroupSize.has_value());
    }
    const Yaml *args = expected.get(".args");
    ASSERT_NE(args, nullptr);
    ASSERT_EQ(k->args.size(), args->seq.size());
    for (size_t i = 0; i < k->args.size(); ++i) {
      SCOPED_TRACE("arg " + std::to_string(i));
      const Yaml &arg = args->seq[i];
      EXPECT_EQ(k->args[i].offset, number(arg.get(".offset")));
      EXPECT_EQ(k->args[i].size, number(arg.get(".size")));
      EXPECT_EQ(k->args[i].valueKind, text(arg.get(".value_kind")));
      const Yaml *argName = arg.get(".name");
      EXPECT_EQ(k->args[i].name, argName ? argName->scalar : "");
      const Yaml *space = arg.get(".address_space");
      EXPECT_EQ(k->args[i].addressSpace, space ? space->scalar : "");
    }
  }
}

} // namespace

TEST_P(AmdgpuReadelfTest, ReaderAgreesWithLlvmReadelf) {
  std::optional<Yaml> yaml = readelfMetadata(object);
  ASSERT_TRUE(yaml.has_value()) << "llvm-readelf --notes " << object;
  std::vector<uint8_t> bytes = readFile(object);
  Expected<AmdgpuMetadata> metadata =
      parseAmdgpuMetadata(bytes.data(), bytes.size());
  ASSERT_TRUE(metadata.ok()) << metadata.status().toString();
  EXPECT_EQ(metadata->processor(), GetParam().target);
  // Decode's length-aware schedule: the plan, the chunks, the merge.
  EXPECT_EQ(metadata->kernels.size(), 3u);
  expectSameMetadata(*metadata, *yaml);
}

TEST_P(AmdgpuReadelfTest, PackedKernargsMatchEveryKernelOfThePackage) {
  const std::string &targetName = GetParam().target;
  Expected<Package> pkg = readPackage(package);
  ASSERT_TRUE(pkg.ok()) << pkg.status().toString();
  const Manifest &manifest = pkg->manifest;
  const TargetSpec *target = manifest.findTarget(targetName);
  ASSERT_NE(target, nullptr);
  EXPECT_EQ(target->launches.size(), 3u);
  EXPECT_FALSE(target->maxBytes.empty());
  const std::vector<uint8_t> *code = pkg->findSection(target->section);
  ASSERT_NE(code, nullptr);

  // llvm-readelf's view of the package's own code object.
  std::string section = package + "." + targetName + ".hsaco";
  std::ofstream(section, std::ios::binary)
      .write(reinterpret_cast<const char *>(code->data()),
             static_cast<std::streamsize>(code->size()));
  std::optional<Yaml> yaml = readelfMetadata(section);
  ASSERT_TRUE(yaml.has_value());
  const Yaml *kernels = yaml->get("amdhsa.kernels");
  ASSERT_NE(kernels, nullptr);

  for (const LaunchSpec &launch : target->launches) {
    SCOPED_TRACE(launch.entry);
    const Yaml *kernel = nullptr;
    for (const Yaml &k : kernels->seq)
      if (text(k.get(".name")) == launch.entry)
        kernel = &k;
    ASSERT_NE(kernel, nullptr) << "no kernel " << launch.entry;
    std::vector<LaunchParam> params = launchParams(manifest, *target, launch);
    std::vector<KernargSlot> layout = kernargLayout(params);
    std::vector<const Yaml *> explicitArgs;
    for (const Yaml &arg : kernel->get(".args")->seq)
      if (text(arg.get(".value_kind")).rfind("hidden_", 0) != 0)
        explicitArgs.push_back(&arg);
    ASSERT_EQ(layout.size(), explicitArgs.size());
    for (size_t i = 0; i < layout.size(); ++i) {
      SCOPED_TRACE(describeKernargSlot(layout, i, params));
      EXPECT_EQ(layout[i].offset, number(explicitArgs[i]->get(".offset")));
      EXPECT_EQ(layout[i].size, number(explicitArgs[i]->get(".size")));
      EXPECT_EQ(layout[i].isPointer ? "global_buffer" : "by_value",
                text(explicitArgs[i]->get(".value_kind")));
    }
    EXPECT_LE(kernargBufferBytes(layout),
              number(kernel->get(".kernarg_segment_size")));
  }

  // The library check the HIP backend runs before loading.
  Expected<AmdgpuMetadata> metadata =
      parseAmdgpuMetadata(code->data(), code->size());
  ASSERT_TRUE(metadata.ok()) << metadata.status().toString();
  AmdgpuDeviceLimits limits;
  limits.ldsBytes = targetName == "gfx950" ? 160 * 1024 : 64 * 1024;
  limits.wavefrontSize = 64;
  Status status = checkAmdgpuCodeObject(*metadata, manifest, *target, limits);
  EXPECT_TRUE(status.ok()) << status.toString();
}

INSTANTIATE_TEST_SUITE_P(
    Targets, AmdgpuReadelfTest, ::testing::ValuesIn([] {
      std::vector<Case> cases;
      for (const char *target : {"gfx90a", "gfx942", "gfx950"}) {
        cases.push_back({target, "deepseek", "--heads=16"});
        cases.push_back(
            {target, "small", "--heads=1 --latent-dim=16 --rope-dim=16"});
        cases.push_back({target, "mtp_f16_dynamic_pages",
                         "--heads=8 --q-len=2 --dtype=f16 --page-size=0"});
      }
      return cases;
    }()),
    [](const ::testing::TestParamInfo<Case> &info) {
      return info.param.target + "_" + info.param.shape;
    });
