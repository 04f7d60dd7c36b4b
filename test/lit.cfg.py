# -*- Python -*-
import os
import lit.formats
from lit.llvm import llvm_config

config.name = "MLA"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "e2e", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mla_obj_root, "test")
config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%mla_src_root", config.mla_src_root))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
tool_dirs = [config.mla_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["mla-opt", "mla-compile", "mla-run", "mla-bench"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.mla_tools_dir, append_path=True)

# ptxas (CUDA toolkit) is optional: when present, generated PTX is also
# assembled for the chip it targets.
import shutil
ptxas = shutil.which("ptxas") or (
    "/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
# nvcc likewise: scripts/racecheck-pingpong.cu (gpu-roundtrip's reproducer)
# is compiled and its barriers checked.
nvcc = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
if nvcc:
    config.available_features.add("nvcc")
    config.substitutions.append(("%nvcc", nvcc))

# valgrind (installed by scripts/setup) runs the compiler under memcheck in
# test/tools/memcheck-*.test: a use of an erased op is found on every run,
# not only when the freed memory happens to be reused.
valgrind = shutil.which("valgrind")
if valgrind:
    config.available_features.add("valgrind")
    config.substitutions.append(
        ("%memcheck", valgrind + " -q --error-exitcode=99 --leak-check=no"))
