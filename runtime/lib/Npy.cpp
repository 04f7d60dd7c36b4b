//===- Npy.cpp - NumPy .npy reader and writer -----------------------------===//

#include "mla/runtime/Npy.h"

#include "FileIO.h"

#include <cctype>
#include <charconv>
#include <cstring>

using namespace mla::rt;

static const char kNpyMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

static Status npyError(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument, message);
}

static const char *npyDescr(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "<f4";
  case DType::F16:
    return "<f2";
  case DType::I32:
    return "<i4";
  case DType::I64:
    return "<i8";
  case DType::BF16:
    return nullptr;
  }
  return nullptr;
}

namespace {

/// Parses the header dictionary, e.g.
///   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
public:
  explicit HeaderParser(std::string_view header) : text(header) {
    // Drop the padding so messages show just the dictionary.
    while (!text.empty() &&
           std::isspace(static_cast<unsigned char>(text.back())))
      text.remove_suffix(1);
  }

  Status parse();

  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;

private:
  void skipSpace() {
    while (pos < text.size() &&
           std::isspace(static_cast<unsigned char>(text[pos])))
      ++pos;
  }
  bool consume(char c) {
    skipSpace();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool consumeWord(std::string_view word) {
    skipSpace();
    if (text.substr(pos, word.size()) != word)
      return false;
    pos += word.size();
    return true;
  }
  Expected<std::string> parseString();
  Status parseShape();
  Status error(const std::string &what) const {
    return npyError("malformed npy header (" + what +
                    "): " + std::string(text));
  }

  std::string_view text;
  size_t pos = 0;
};

} // namespace

Expected<std::string> HeaderParser::parseString() {
  skipSpace();
  if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
    return error("expected a string");
  char quote = text[pos++];
  size_t end = text.find(quote, pos);
  if (end == std::string_view::npos)
    return error("unterminated string");
  std::string value(text.substr(pos, end - pos));
  pos = end + 1;
  return value;
}

Status HeaderParser::parseShape() {
  if (!consume('('))
    return error("expected a shape tuple");
  while (!consume(')')) {
    skipSpace();
    int64_t dim = 0;
    const char *begin = text.data() + pos, *end = text.data() + text.size();
    auto result = std::from_chars(begin, end, dim);
    if (result.ec != std::errc() || dim < 0)
      return error("bad shape dim");
    pos += result.ptr - begin;
    shape.push_back(dim);
    if (!consume(',')) {
      if (!consume(')'))
        return error("expected ',' or ')' in the shape");
      break;
    }
  }
  return Status::success();
}

Status HeaderParser::parse() {
  if (!consume('{'))
    return error("expected '{'");
  bool sawDescr = false, sawOrder = false, sawShape = false;
  while (!consume('}')) {
    Expected<std::string> key = parseString();
    if (!key.ok())
      return key.status();
    if (!consume(':'))
      return error("expected ':'");
    if (*key == "descr") {
      Expected<std::string> value = parseString();
      if (!value.ok())
        return value.status();
      descr = *value;
      sawDescr = true;
    } else if (*key == "fortran_order") {
      if (consumeWord("True"))
        fortranOrder = true;
      else if (!consumeWord("False"))
        return error("fortran_order must be True or False");
      sawOrder = true;
    } else if (*key == "shape") {
      if (Status status = parseShape(); !status.ok())
        return status;
      sawShape = true;
    } else {
      return error("unexpected key '" + *key + "'");
    }
    if (!consume(',')) {
      if (!consume('}'))
        return error("expected ',' or '}'");
      break;
    }
  }
  if (!sawDescr || !sawOrder || !sawShape)
    return error("needs 'descr', 'fortran_order' and 'shape'");
  return Status::success();
}

Expected<HostTensor> mla::rt::parseNpy(const uint8_t *data, size_t size) {
  if (size < 10 || std::memcmp(data, kNpyMagic, sizeof(kNpyMagic)) != 0)
    return npyError("not a .npy file (bad magic)");
  int major = data[6], minor = data[7];
  if ((major != 1 && major != 2) || minor != 0)
    return npyError("npy format version " + std::to_string(major) + "." +
                    std::to_string(minor) +
                    " is not supported (supported: 1.0, 2.0)");
  size_t prefix = major == 1 ? 10 : 12;
  if (size < prefix)
    return npyError("truncated npy header");
  size_t headerLength = data[8] | (data[9] << 8);
  if (major == 2)
    headerLength |= static_cast<size_t>(data[10]) << 16 |
                    static_cast<size_t>(data[11]) << 24;
  if (size - prefix < headerLength)
    return npyError("truncated npy header: needs " +
                    std::to_string(headerLength) + " bytes, " +
                    std::to_string(size - prefix) + " remain");
  HeaderParser header(std::string_view(
      reinterpret_cast<const char *>(data + prefix), headerLength));
  if (Status status = header.parse(); !status.ok())
    return status;

  DType dtype;
  if (header.descr == "<f4")
    dtype = DType::F32;
  else if (header.descr == "<f2")
    dtype = DType::F16;
  else if (header.descr == "<i4")
    dtype = DType::I32;
  else if (header.descr == "<i8")
    dtype = DType::I64;
  else
    return npyError("unsupported npy dtype '" + header.descr +
                    "' (supported: little-endian <f4, <f2, <i4, <i8)");
  if (header.fortranOrder)
    return npyError("Fortran-order arrays are not supported (save the array "
                    "in C order)");
  Expected<HostTensor> tensor = HostTensor::allocate(dtype, header.shape);
  if (!tensor.ok())
    return tensor.status();
  size_t dataSize = size - prefix - headerLength;
  if (dataSize != tensor->sizeInBytes())
    return npyError("npy data is " + std::to_string(dataSize) +
                    " bytes, expected " +
                    std::to_string(tensor->sizeInBytes()) + " for shape " +
                    shapeToString(header.shape) + " of " + header.descr);
  if (dataSize)
    std::memcpy(tensor->data(), data + prefix + headerLength, dataSize);
  return tensor;
}

Expected<HostTensor> mla::rt::readNpy(const std::string &path) {
  Expected<std::vector<uint8_t>> bytes = readFile(path);
  if (!bytes.ok())
    return bytes.status();
  Expected<HostTensor> tensor = parseNpy(bytes->data(), bytes->size());
  if (!tensor.ok())
    return tensor.status().withContext(path);
  return tensor;
}

Expected<std::vector<uint8_t>> mla::rt::encodeNpy(const TensorView &tensor) {
  const char *descr = npyDescr(tensor.dtype);
  if (!descr)
    return npyError(std::string("npy has no ") + dtypeName(tensor.dtype) +
                    " type; convert the tensor to f32 first");
  std::string shape = "(";
  for (size_t i = 0; i < tensor.shape.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(tensor.shape[i]);
  shape += tensor.shape.size() == 1 ? ",)" : ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and a final newline so the data starts 64-byte aligned.
  // Version 1.0 stores the header length in 16 bits, 2.0 in 32.
  size_t prefix = 10 + header.size() + 64 > 65535 ? 12 : 10;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';

  std::vector<uint8_t> out(kNpyMagic, kNpyMagic + sizeof(kNpyMagic));
  out.push_back(prefix == 10 ? 1 : 2);
  out.push_back(0);
  for (size_t i = 0; i < prefix - 8; ++i)
    out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  const auto *data = static_cast<const uint8_t *>(tensor.data);
  out.insert(out.end(), data, data + tensor.sizeInBytes());
  return out;
}

Status mla::rt::writeNpy(const std::string &path, const TensorView &tensor) {
  Expected<std::vector<uint8_t>> bytes = encodeNpy(tensor);
  if (!bytes.ok())
    return bytes.status();
  return writeFileAtomic(path, bytes->data(), bytes->size());
}
