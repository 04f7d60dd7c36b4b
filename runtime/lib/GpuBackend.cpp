//===- GpuBackend.cpp - What the CUDA and HIP backends share --------------===//

#include "GpuBackend.h"

#include "mla/runtime/Tensor.h"

using namespace mla::rt;

Status gpu::checkGrid(const Grid &grid, bool &empty) {
  for (int64_t dim : grid)
    if (dim < 0)
      return Status::error(ErrorCode::InvalidArgument,
                           "invalid grid " +
                               shapeToString({grid[0], grid[1], grid[2]}));
  empty = grid[0] == 0 || grid[1] == 0 || grid[2] == 0;
  return Status::success();
}

Status gpu::checkOrdinal(const std::string &noDevice, int ordinal, int count) {
  if (count == 0)
    return Status::error(ErrorCode::Unsupported, noDevice);
  if (ordinal < 0 || ordinal >= count)
    return Status::error(ErrorCode::Unsupported,
                         noDevice + " " + std::to_string(ordinal) +
                             " (this machine has " + std::to_string(count) +
                             ")");
  return Status::success();
}

std::optional<int> gpu::parseOrdinalName(std::string_view name,
                                         std::string_view prefix) {
  if (name == prefix)
    return 0;
  size_t digits = prefix.size() + 1;
  if (name.substr(0, prefix.size()) != prefix || name.size() <= prefix.size() ||
      name[prefix.size()] != ':' || name.size() == digits ||
      name.size() > digits + 6)
    return std::nullopt;
  int ordinal = 0;
  for (char c : name.substr(digits)) {
    if (c < '0' || c > '9')
      return std::nullopt;
    ordinal = ordinal * 10 + (c - '0');
  }
  return ordinal;
}

std::string gpu::joinNames(const std::vector<std::string> &names) {
  std::string joined;
  for (const std::string &name : names)
    joined += (joined.empty() ? "" : ", ") + name;
  return joined;
}
