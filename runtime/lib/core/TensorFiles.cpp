//===- TensorFiles.cpp - numpy .npy and ONNX .pb tensor files -------------===//
//
// The .pb reader decodes the protobuf wire format of onnx.TensorProto
// directly (dims, data_type, the typed data fields and raw_data), so the
// runtime does not depend on protobuf.
//
//===----------------------------------------------------------------------===//

#include "weft/runtime/TensorFiles.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace weft::runtime {

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

static bool readFile(const std::string &path, std::string &data,
                     std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read '" + path + "'";
    return false;
  }
  data.assign(std::istreambuf_iterator<char>(in), {});
  return true;
}

/// The readers have checked that the count fits the file, but a zero dim
/// after huge ones still makes the running product overflow.
static int64_t elementCount(const std::vector<int64_t> &shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end())
    return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

static bool npyDtype(const std::string &descr, weft_dtype &dtype) {
  static const std::pair<const char *, weft_dtype> table[] = {
      {"<f4", WEFT_F32}, {"<f8", WEFT_F64}, {"<f2", WEFT_F16},
      {"<i8", WEFT_I64}, {"<i4", WEFT_I32}, {"|b1", WEFT_BOOL}};
  for (auto &[name, type] : table)
    if (descr == name) {
      dtype = type;
      return true;
    }
  return false;
}

static bool readNpy(const std::string &path, TensorData &out,
                    std::string &error) {
  std::string data;
  if (!readFile(path, data, error))
    return false;
  if (data.size() < 10 || data.compare(0, 6, "\x93NUMPY") != 0) {
    error = "'" + path + "' is not a .npy file";
    return false;
  }
  uint8_t major = data[6];
  size_t headerLength, headerStart;
  if (major == 1) {
    headerLength = uint8_t(data[8]) | (uint8_t(data[9]) << 8);
    headerStart = 10;
  } else {
    if (data.size() < 12) {
      error = "'" + path + "' is truncated";
      return false;
    }
    headerLength =
        uint32_t(uint8_t(data[8])) | uint32_t(uint8_t(data[9])) << 8 |
        uint32_t(uint8_t(data[10])) << 16 | uint32_t(uint8_t(data[11])) << 24;
    headerStart = 12;
  }
  if (headerStart + headerLength > data.size()) {
    error = "'" + path + "' has a truncated header";
    return false;
  }
  std::string header = data.substr(headerStart, headerLength);
  auto field = [&](const std::string &key) -> std::string {
    size_t at = header.find("'" + key + "'");
    if (at == std::string::npos)
      return "";
    size_t colon = header.find(':', at);
    return colon == std::string::npos ? "" : header.substr(colon + 1);
  };
  std::string descr = field("descr");
  size_t q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  if (q1 == std::string::npos || q2 == std::string::npos ||
      !npyDtype(descr.substr(q1 + 1, q2 - q1 - 1), out.dtype)) {
    error = "'" + path + "' has an unsupported dtype";
    return false;
  }
  if (field("fortran_order").find("True") < field("fortran_order").find(',')) {
    error = "'" + path + "' is in Fortran order";
    return false;
  }
  std::string shape = field("shape");
  size_t open = shape.find('('), close = shape.find(')');
  if (open == std::string::npos || close == std::string::npos) {
    error = "'" + path + "' has no shape";
    return false;
  }
  out.shape.clear();
  std::stringstream dims(shape.substr(open + 1, close - open - 1));
  std::string item;
  // Each dim a count, and all of them together no more bytes than a file
  // could hold.
  double wholeBytes = double(weft_dtype_size(out.dtype));
  while (std::getline(dims, item, ','))
    if (item.find_first_not_of(" ") != std::string::npos) {
      char *end = nullptr;
      errno = 0;
      long long dim = strtoll(item.c_str(), &end, 10);
      if (errno || dim < 0 || end == item.c_str() ||
          std::string(end).find_first_not_of(" ") != std::string::npos) {
        error = "'" + path + "' has a malformed shape '" + shape + "'";
        return false;
      }
      out.shape.push_back(dim);
      wholeBytes *= double(dim);
    }
  if (wholeBytes > double(data.size())) {
    error = "'" + path + "' holds " + std::to_string(data.size()) +
            " bytes, fewer than its shape " + shapeString(out.shape) + " needs";
    return false;
  }
  size_t bytes = elementCount(out.shape) * weft_dtype_size(out.dtype);
  size_t dataStart = headerStart + headerLength;
  if (data.size() - dataStart != bytes) {
    error = "'" + path + "' holds " + std::to_string(data.size() - dataStart) +
            " data bytes but its shape " + shapeString(out.shape) + " needs " +
            std::to_string(bytes);
    return false;
  }
  out.bytes.assign(data.begin() + dataStart, data.end());
  return true;
}

bool writeNpy(const std::string &path, const TensorData &tensor,
              std::string &error) {
  const char *descr = nullptr;
  switch (tensor.dtype) {
  case WEFT_F32:
    descr = "<f4";
    break;
  case WEFT_F64:
    descr = "<f8";
    break;
  case WEFT_F16:
    descr = "<f2";
    break;
  case WEFT_I64:
    descr = "<i8";
    break;
  case WEFT_I32:
    descr = "<i4";
    break;
  case WEFT_BOOL:
    descr = "|b1";
    break;
  case WEFT_BF16:
    error = "bf16 has no numpy dtype; cannot write '" + path + "'";
    return false;
  }
  std::string shape = "(";
  for (int64_t d : tensor.shape)
    shape += std::to_string(d) + ",";
  if (tensor.shape.size() > 1)
    shape.pop_back();
  shape += ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    error = "cannot write '" + path + "'";
    return false;
  }
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t length = header.size();
  out.put(char(length & 0xff)).put(char(length >> 8));
  out << header;
  out.write(reinterpret_cast<const char *>(tensor.bytes.data()),
            tensor.bytes.size());
  if (!out) {
    error = "failed writing '" + path + "'";
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// ONNX TensorProto (.pb)
//===----------------------------------------------------------------------===//

namespace {
struct WireReader {
  const uint8_t *p, *end;
  bool ok = true;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) {
        ok = false;
        return 0;
      }
      uint8_t byte = *p++;
      v |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return v;
    }
    ok = false;
    return 0;
  }
  std::pair<const uint8_t *, size_t> lengthDelimited() {
    uint64_t n = varint();
    if (!ok || n > uint64_t(end - p)) {
      ok = false;
      return {nullptr, 0};
    }
    const uint8_t *start = p;
    p += n;
    return {start, size_t(n)};
  }
  void skip(int wireType) {
    switch (wireType) {
    case 0:
      varint();
      break;
    case 1:
      p + 8 <= end ? p += 8 : (ok = false, p);
      break;
    case 2:
      lengthDelimited();
      break;
    case 5:
      p + 4 <= end ? p += 4 : (ok = false, p);
      break;
    default:
      ok = false;
    }
  }
};

bool onnxDtype(uint64_t code, weft_dtype &dtype) {
  switch (code) {
  case 1:
    dtype = WEFT_F32;
    return true;
  case 11:
    dtype = WEFT_F64;
    return true;
  case 10:
    dtype = WEFT_F16;
    return true;
  case 16:
    dtype = WEFT_BF16;
    return true;
  case 7:
    dtype = WEFT_I64;
    return true;
  case 6:
    dtype = WEFT_I32;
    return true;
  case 9:
    dtype = WEFT_BOOL;
    return true;
  default:
    return false;
  }
}
} // namespace

static bool readPb(const std::string &path, TensorData &out,
                   std::string &error) {
  std::string data;
  if (!readFile(path, data, error))
    return false;
  WireReader reader{reinterpret_cast<const uint8_t *>(data.data()),
                    reinterpret_cast<const uint8_t *>(data.data()) +
                        data.size()};
  uint64_t dataType = 0;
  std::string raw;
  bool hasRaw = false;
  std::vector<uint64_t> varints; // int32_data / int64_data
  std::vector<uint8_t> fixed;    // float_data / double_data as bytes
  out.shape.clear();
  auto packedOrSingle = [&](int wireType, int width, bool isVarint) {
    auto take = [&](WireReader &r) {
      if (isVarint) {
        varints.push_back(r.varint());
      } else if (r.p + width <= r.end) {
        fixed.insert(fixed.end(), r.p, r.p + width);
        r.p += width;
      } else {
        r.ok = false;
      }
    };
    if (wireType == 2) {
      auto [start, n] = reader.lengthDelimited();
      WireReader inner{start, start + n};
      while (reader.ok && inner.ok && inner.p < inner.end)
        take(inner);
      reader.ok &= inner.ok;
    } else {
      take(reader);
    }
  };
  while (reader.ok && reader.p < reader.end) {
    uint64_t key = reader.varint();
    int field = int(key >> 3), wireType = int(key & 7);
    if (field == 1) { // dims
      if (wireType == 2) {
        auto [start, n] = reader.lengthDelimited();
        WireReader inner{start, start + n};
        while (inner.ok && inner.p < inner.end)
          out.shape.push_back(int64_t(inner.varint()));
        reader.ok &= inner.ok;
      } else {
        out.shape.push_back(int64_t(reader.varint()));
      }
    } else if (field == 2 && wireType == 0) {
      dataType = reader.varint();
    } else if (field == 4) { // float_data
      packedOrSingle(wireType, 4, false);
    } else if (field == 5 || field == 7) { // int32_data, int64_data
      packedOrSingle(wireType, 0, true);
    } else if (field == 10) { // double_data
      packedOrSingle(wireType, 8, false);
    } else if (field == 9 && wireType == 2) { // raw_data
      auto [start, n] = reader.lengthDelimited();
      if (start)
        raw.assign(reinterpret_cast<const char *>(start), n);
      hasRaw = true;
    } else if (field == 14 && wireType == 0) { // data_location
      if (reader.varint() == 1) {
        error = "'" + path + "' keeps its data externally (unsupported here)";
        return false;
      }
    } else {
      reader.skip(wireType);
    }
  }
  if (!reader.ok) {
    error = "'" + path + "' is not a valid ONNX TensorProto";
    return false;
  }
  if (!onnxDtype(dataType, out.dtype)) {
    error = "'" + path + "' has unsupported ONNX data type " +
            std::to_string(dataType);
    return false;
  }
  // The dims may not ask for more values than the file holds (each value
  // takes at least a byte of it), negative ones included.
  size_t width = weft_dtype_size(out.dtype);
  double values = 1;
  bool negative = false;
  for (int64_t d : out.shape) {
    negative |= d < 0;
    values *= double(d);
  }
  if (negative || values > double(data.size())) {
    error = "'" + path + "' has dims " + shapeString(out.shape) + " that its " +
            std::to_string(data.size()) + " bytes cannot hold";
    return false;
  }
  size_t count = elementCount(out.shape);
  out.bytes.assign(count * width, 0);
  if (hasRaw) {
    if (raw.size() != out.bytes.size()) {
      error = "'" + path + "' holds " + std::to_string(raw.size()) +
              " bytes but its dims need " + std::to_string(out.bytes.size());
      return false;
    }
    std::copy(raw.begin(), raw.end(), out.bytes.begin());
    return true;
  }
  size_t have = fixed.empty() ? varints.size() : fixed.size() / width;
  if (have != count || fixed.size() % width != 0) {
    error = "'" + path + "' holds " + std::to_string(have) +
            " values but its dims need " + std::to_string(count);
    return false;
  }
  if (!fixed.empty()) {
    std::copy(fixed.begin(), fixed.end(), out.bytes.begin());
    return true;
  }
  for (size_t i = 0; i < count; ++i) {
    uint64_t v = varints[i];
    // int32_data holds int32, bool, f16 and bf16 bits; int64_data int64.
    memcpy(out.bytes.data() + i * width, &v, width);
  }
  return true;
}

bool readTensorFile(const std::string &path, TensorData &out,
                    std::string &error) {
  auto endsWith = [&](const char *suffix) {
    size_t n = strlen(suffix);
    return path.size() >= n && path.compare(path.size() - n, n, suffix) == 0;
  };
  if (endsWith(".npy"))
    return readNpy(path, out, error);
  if (endsWith(".pb"))
    return readPb(path, out, error);
  error = "'" + path + "': unknown tensor file type (use .npy or .pb)";
  return false;
}

bool bindInputFile(weft_model *model, size_t index, const std::string &path,
                   const std::vector<int64_t> &coordinates,
                   const MeshShape &mesh, std::vector<uint8_t> &storage,
                   std::string &error) {
  const weft_buffer_info *info = weft_model_buffer(model, index);
  std::vector<int64_t> shape(info->shape, info->shape + info->rank);
  TensorData data;
  if (!readTensorFile(path, data, error)) {
    error = std::string("input '") + info->name + "': " + error;
    return false;
  }
  if (data.dtype != info->dtype || data.shape != shape) {
    error = std::string("input '") + info->name + "': expected " +
            weft_dtype_name(info->dtype) + " " + shapeString(shape) + " but '" +
            path + "' holds " + weft_dtype_name(data.dtype) + " " +
            shapeString(data.shape);
    return false;
  }
  char message[1024];
  if (weft_model_check_indices(model, index, data.bytes.data(), message,
                               sizeof(message)) != 0) {
    error = message;
    return false;
  }
  ShardSpec spec = bufferSpec(info);
  if (spec.isReplicated()) {
    storage = std::move(data.bytes);
  } else {
    storage.resize(info->local_bytes);
    spec.extract(data.bytes.data(), storage.data(), shape,
                 weft_dtype_size(info->dtype),
                 spec.shardIndex(coordinates, mesh), mesh);
  }
  weft_model_set_input(model, index, storage.data());
  return true;
}

} // namespace weft::runtime
