//===- Npy.cpp - NumPy .npy reader and writer -----------------------------===//

#include "mla/runtime/Npy.h"

#include "FileIO.h"

#include <cctype>
#include <charconv>
#include <cstring>
#include <optional>

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

namespace {

/// A parsed .npy file: its header and where its data lies in the bytes.
struct NpyFile {
  std::string descr;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr;
  size_t dataSize = 0;
};

/// The element type of a descr parseNpyAs reads: the runtime's dtypes, and
/// float64 (kF64, no DType of its own).
struct NpyType {
  std::string_view descr;
  std::optional<DType> dtype; ///< nullopt: float64
  size_t size;
  const char *numpyName;
};

constexpr NpyType kNpyTypes[] = {
    {"<f8", std::nullopt, 8, "float64"}, {"<f4", DType::F32, 4, "float32"},
    {"<f2", DType::F16, 2, "float16"},   {"<i8", DType::I64, 8, "int64"},
    {"<i4", DType::I32, 4, "int32"},
};

const NpyType *findNpyType(std::string_view descr) {
  for (const NpyType &type : kNpyTypes)
    if (type.descr == descr)
      return &type;
  return nullptr;
}

/// Checks the magic, version and header; the dtype is the caller's.
Expected<NpyFile> parseNpyFile(const uint8_t *data, size_t size) {
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
  NpyFile file;
  file.descr = header.descr;
  file.shape = header.shape;
  file.data = data + prefix + headerLength;
  file.dataSize = size - prefix - headerLength;
  if (!findNpyType(file.descr)) // Fortran order is only reported for these.
    return file;
  if (header.fortranOrder)
    return npyError("Fortran-order arrays are not supported (save the array "
                    "in C order)");
  return file;
}

/// Checks that the data holds exactly the shape's elements of `type`.
Status checkDataSize(const NpyFile &file, const NpyType &type,
                     int64_t elements) {
  size_t expected = static_cast<size_t>(elements) * type.size;
  if (file.dataSize == expected)
    return Status::success();
  return npyError("npy data is " + std::to_string(file.dataSize) +
                  " bytes, expected " + std::to_string(expected) +
                  " for shape " + shapeToString(file.shape) + " of " +
                  file.descr);
}

/// "[1, 2]": the index of element `flat` of `shape`.
std::string elementIndex(const std::vector<int64_t> &shape, int64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shapeToString(index);
}

/// Copies integer elements of `from` into `to` (both integer types),
/// checking that each value fits.
Status convertIntegers(const NpyFile &file, DType from, HostTensor &to) {
  int64_t count = to.numElements();
  if (from == to.getDType()) {
    if (count)
      std::memcpy(to.data(), file.data, file.dataSize);
    return Status::success();
  }
  if (from == DType::I32) {
    for (int64_t i = 0; i < count; ++i) {
      int32_t value;
      std::memcpy(&value, file.data + 4 * i, 4);
      to.dataAs<int64_t>()[i] = value;
    }
    return Status::success();
  }
  for (int64_t i = 0; i < count; ++i) {
    int64_t value;
    std::memcpy(&value, file.data + 8 * i, 8);
    if (value < INT32_MIN || value > INT32_MAX)
      return npyError("element " + elementIndex(file.shape, i) + " = " +
                      std::to_string(value) +
                      " is outside the int32 range [-2147483648, "
                      "2147483647]");
    to.dataAs<int32_t>()[i] = static_cast<int32_t>(value);
  }
  return Status::success();
}

} // namespace

Expected<HostTensor> mla::rt::parseNpy(const uint8_t *data, size_t size) {
  Expected<NpyFile> file = parseNpyFile(data, size);
  if (!file.ok())
    return file.status();
  const NpyType *type = findNpyType(file->descr);
  if (!type || !type->dtype)
    return npyError("unsupported npy dtype '" + file->descr +
                    "' (supported: little-endian <f4, <f2, <i4, <i8)");
  Expected<HostTensor> tensor = HostTensor::allocate(*type->dtype, file->shape);
  if (!tensor.ok())
    return tensor.status();
  if (Status status = checkDataSize(*file, *type, tensor->numElements());
      !status.ok())
    return status;
  if (file->dataSize)
    std::memcpy(tensor->data(), file->data, file->dataSize);
  return tensor;
}

Expected<HostTensor> mla::rt::parseNpyAs(const uint8_t *data, size_t size,
                                         DType dtype) {
  Expected<NpyFile> file = parseNpyFile(data, size);
  if (!file.ok())
    return file.status();
  const NpyType *type = findNpyType(file->descr);
  if (!type)
    return npyError("unsupported npy dtype '" + file->descr +
                    "' (supported: little-endian <f8, <f4, <f2, <i8, <i4)");
  bool fileFloat = !type->dtype || isFloatingPoint(*type->dtype);
  if (fileFloat != isFloatingPoint(dtype))
    return npyError(std::string("expected ") +
                    (isFloatingPoint(dtype)
                         ? "floating-point data (float64, float32 or float16)"
                         : "integer data (int64 or int32)") +
                    " for " + dtypeName(dtype) + ", got " + type->numpyName);
  Expected<HostTensor> tensor = HostTensor::allocate(dtype, file->shape);
  if (!tensor.ok())
    return tensor.status();
  int64_t count = tensor->numElements();
  if (Status status = checkDataSize(*file, *type, count); !status.ok())
    return status;
  if (!fileFloat) {
    if (Status status = convertIntegers(*file, *type->dtype, *tensor);
        !status.ok())
      return status;
    return tensor;
  }
  // Copied first: the file's bytes need not be aligned for their type.
  if (!type->dtype) {
    std::vector<double> f64(static_cast<size_t>(count));
    if (count)
      std::memcpy(f64.data(), file->data, file->dataSize);
    if (Status status =
            convertF64Elements(f64.data(), tensor->data(), dtype, f64.size());
        !status.ok())
      return status;
    return tensor;
  }
  if (*type->dtype == dtype) {
    if (count)
      std::memcpy(tensor->data(), file->data, file->dataSize);
    return tensor;
  }
  Expected<HostTensor> raw = HostTensor::allocate(*type->dtype, file->shape);
  if (!raw.ok())
    return raw.status();
  if (count)
    std::memcpy(raw->data(), file->data, file->dataSize);
  if (Status status = convertElements(raw->data(), *type->dtype, tensor->data(),
                                      dtype, static_cast<size_t>(count));
      !status.ok())
    return status;
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

Expected<HostTensor> mla::rt::readNpyAs(const std::string &path, DType dtype) {
  Expected<std::vector<uint8_t>> bytes = readFile(path);
  if (!bytes.ok())
    return bytes.status();
  Expected<HostTensor> tensor = parseNpyAs(bytes->data(), bytes->size(), dtype);
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
