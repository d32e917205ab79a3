//===- ImportONNX.cpp - ONNX model to weft dialect ------------------------===//
//
// The importer walks the graph in dependency order and emits one or a few
// weft ops per node. Shapes must be static once `--dim` binds the symbolic
// dims, so every op's result type is known when it is built and shape
// subgraphs (Shape, Gather, Concat, ...) fold to constants as they are
// emitted: each op is folded right after it is built.
//
//===----------------------------------------------------------------------===//

#include "Importer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <exception>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <map>

using namespace mlir;
using namespace weft;

namespace weft::onnx_import {

//===----------------------------------------------------------------------===//
// Diagnostics and node operands
//===----------------------------------------------------------------------===//

InFlightDiagnostic Importer::nodeError() {
  InFlightDiagnostic diag = emitError(loc);
  diag << "node '" << nodeName << "' (" << node->op_type() << ", opset "
       << opset << "): ";
  return diag;
}

Value Importer::input(int index) {
  if (index >= node->input_size() || node->input(index).empty())
    return nullptr;
  return values.lookup(node->input(index));
}

FailureOr<Value> Importer::requiredInput(int index) {
  if (Value v = input(index))
    return v;
  nodeError() << "missing required input #" << index;
  return failure();
}

FailureOr<HostTensor> Importer::constantInput(int index, StringRef role) {
  Value v = input(index);
  DenseElementsAttr attr;
  if (v && matchPattern(v, m_Constant(&attr)))
    if (std::optional<HostTensor> host = HostTensor::fromAttr(attr))
      return *host;
  nodeError() << role << " (input '"
              << (index < node->input_size() ? node->input(index) : "")
              << "') must be a constant once shapes are static";
  return failure();
}

const onnx::AttributeProto *Importer::attr(StringRef name) {
  for (const onnx::AttributeProto &a : node->attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t Importer::intAttr(StringRef name, int64_t defaultValue) {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->i() : defaultValue;
}

float Importer::floatAttr(StringRef name, float defaultValue) {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->f() : defaultValue;
}

std::optional<SmallVector<int64_t>> Importer::intsAttr(StringRef name) {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

std::string Importer::stringAttr(StringRef name, StringRef defaultValue) {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->s() : defaultValue.str();
}

FailureOr<int64_t> Importer::normalizeAxis(int64_t axis, int64_t rank,
                                           StringRef what) {
  if (axis < -rank || axis >= rank) {
    nodeError() << what << " " << axis << " is out of range for rank "
                << rank;
    return failure();
  }
  return axis < 0 ? axis + rank : axis;
}

bool Importer::outputUsed(int index) const {
  if (index >= node->output_size() || node->output(index).empty())
    return false;
  const std::string &name = node->output(index);
  return consumers.count(name) || graphOutputs.contains(name);
}

LogicalResult Importer::setOutput(int index, Value value) {
  if (index < node->output_size() && !node->output(index).empty())
    values[node->output(index)] = value;
  return success();
}

//===----------------------------------------------------------------------===//
// Op construction
//===----------------------------------------------------------------------===//

FailureOr<Value> Importer::finish(Operation *op) {
  if (failed(mlir::verify(op)))
    return failure();
  SmallVector<OpFoldResult> folded;
  if (op->getNumResults() != 1 || failed(op->fold(folded)) ||
      folded.size() != 1)
    return op->getResult(0);
  Value result;
  if (auto v = llvm::dyn_cast<Value>(folded.front())) {
    result = v;
  } else {
    auto elements =
        llvm::dyn_cast<ElementsAttr>(llvm::cast<Attribute>(folded.front()));
    if (!elements || elements.getType() != op->getResult(0).getType())
      return op->getResult(0);
    result = ConstantOp::create(builder, op->getLoc(), elements);
  }
  op->erase();
  return result;
}

Value Importer::constant(const HostTensor &tensor) {
  return ConstantOp::create(builder, loc, tensor.toAttr());
}

Value Importer::scalarConstant(Type elementType, double value) {
  HostTensor t = HostTensor::zeros({}, elementType);
  if (t.isFloat())
    t.floats[0] = value;
  else
    t.ints[0] = static_cast<int64_t>(value);
  return constant(t);
}

FailureOr<Value> Importer::reshape(Value value, ArrayRef<int64_t> shape) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  return createTyped<ReshapeOp>(
      RankedTensorType::get(shape, type.getElementType()), {value});
}

FailureOr<Value> Importer::castTo(Value value, Type elementType) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  if (type.getElementType() == elementType)
    return value;
  return createTyped<CastOp>(type.clone(elementType), {value});
}

//===----------------------------------------------------------------------===//
// Model loading
//===----------------------------------------------------------------------===//

LogicalResult Importer::loadModel() {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    modelError() << "cannot read ONNX model '" << path
                 << "': " << buffer.getError().message();
    return failure();
  }
  modelDir = llvm::sys::path::parent_path(path).str();
  StringRef bytes = (*buffer)->getBuffer();
  if (StringRef(path).ends_with(".onnxtxt")) {
    // Lines starting with '#' are comments (lit RUN lines); blank them so
    // the parser's positions still match the file.
    std::string text = bytes.str();
    for (size_t line = 0; line < text.size();) {
      size_t end = text.find('\n', line);
      if (end == std::string::npos)
        end = text.size();
      size_t first = text.find_first_not_of(" \t", line);
      if (first < end && text[first] == '#')
        std::fill(text.begin() + first, text.begin() + end, ' ');
      line = end + 1;
    }
    onnx::OnnxParser parser(text.c_str());
    // The parser reports most errors in its status, but throws on a number
    // it cannot convert (std::stoi on "1e999").
    std::string message;
    try {
      onnx::Common::Status status = parser.Parse(model);
      if (!status.IsOK())
        message = status.ErrorMessage();
    } catch (const std::exception &exception) {
      message = exception.what();
    }
    if (!message.empty()) {
      modelError() << "cannot parse ONNX text model '" << path
                   << "': " << message;
      return failure();
    }
    return success();
  }
  google::protobuf::io::ArrayInputStream raw(bytes.data(),
                                             static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT32_MAX);
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    modelError() << "'" << path << "' is not a valid ONNX model (protobuf "
                 << "parse failed; truncated or not an ONNX file?)";
    return failure();
  }
  if (!model.has_graph()) {
    modelError() << "'" << path << "' has no graph";
    return failure();
  }
  return success();
}

LogicalResult Importer::checkOpsets() {
  for (const onnx::OperatorSetIdProto &id : model.opset_import())
    if (id.domain().empty() || id.domain() == "ai.onnx")
      opset = id.version();
  if (opset == 0 && model.opset_import_size() == 0)
    opset = kMaxOpset;
  if (opset < kMinOpset || opset > kMaxOpset) {
    modelError() << "default-domain opset " << opset
                 << " is not supported (supported: " << kMinOpset << " to "
                 << kMaxOpset << ")";
    return failure();
  }
  return success();
}

FailureOr<SmallVector<const onnx::NodeProto *>> Importer::sortNodes() {
  const onnx::GraphProto &graph = model.graph();
  llvm::StringMap<int> producer;
  for (int i = 0; i < graph.node_size(); ++i)
    for (const std::string &out : graph.node(i).output())
      if (!out.empty())
        producer[out] = i;
  // Kahn's algorithm over node indices, keeping file order among ready nodes.
  std::vector<int> pending(graph.node_size(), 0);
  std::vector<SmallVector<int>> dependents(graph.node_size());
  for (int i = 0; i < graph.node_size(); ++i) {
    for (const std::string &in : graph.node(i).input()) {
      if (in.empty())
        continue;
      auto it = producer.find(in);
      if (it != producer.end()) {
        ++pending[i];
        dependents[it->second].push_back(i);
      } else if (!values.count(in)) {
        const onnx::NodeProto &n = graph.node(i);
        emitError(NameLoc::get(StringAttr::get(ctx, n.name())))
            << "node '" << n.name() << "' (" << n.op_type()
            << "): input '" << in
            << "' is not a graph input, initializer or node output";
        return failure();
      }
    }
  }
  std::deque<int> ready;
  for (int i = 0; i < graph.node_size(); ++i)
    if (pending[i] == 0)
      ready.push_back(i);
  SmallVector<const onnx::NodeProto *> order;
  while (!ready.empty()) {
    int i = ready.front();
    ready.pop_front();
    order.push_back(&graph.node(i));
    for (int d : dependents[i])
      if (--pending[d] == 0)
        ready.push_back(d);
  }
  if (static_cast<int>(order.size()) != graph.node_size()) {
    for (int i = 0; i < graph.node_size(); ++i)
      if (pending[i] > 0) {
        modelError() << "the graph has a cycle through node '"
                     << graph.node(i).name() << "' ("
                     << graph.node(i).op_type() << ")";
        break;
      }
    return failure();
  }
  return order;
}

/// A symbolic dim is a name bound by --dim, or a sum of such names and
/// integers ("past_sequence_length + sequence_length") as exporters write.
std::optional<int64_t> Importer::evaluateDimParam(StringRef param) {
  int64_t total = 0;
  SmallVector<StringRef> terms;
  param.split(terms, '+');
  for (StringRef term : terms) {
    term = term.trim();
    int64_t literal;
    if (!term.getAsInteger(10, literal)) {
      total += literal;
      continue;
    }
    auto it = options.dims.find(term);
    if (it == options.dims.end())
      return std::nullopt;
    total += it->second;
  }
  return total;
}

FailureOr<RankedTensorType>
Importer::valueInfoType(const onnx::ValueInfoProto &info) {
  if (!info.type().has_tensor_type()) {
    modelError() << "graph input '" << info.name()
                 << "' is not a tensor (sequences, maps and optionals are "
                    "not supported)";
    return failure();
  }
  const onnx::TypeProto::Tensor &tensor = info.type().tensor_type();
  Type elementType = elementTypeFor(ctx, tensor.elem_type());
  if (!elementType) {
    modelError() << "graph input '" << info.name() << "' has unsupported "
                 << "element type " << dataTypeName(tensor.elem_type());
    return failure();
  }
  if (!tensor.has_shape()) {
    modelError() << "graph input '" << info.name() << "' has no shape";
    return failure();
  }
  SmallVector<int64_t> shape;
  for (const onnx::TensorShapeProto::Dimension &dim : tensor.shape().dim()) {
    if (dim.has_dim_value()) {
      shape.push_back(dim.dim_value());
      continue;
    }
    std::optional<int64_t> bound =
        dim.has_dim_param() ? evaluateDimParam(dim.dim_param()) : std::nullopt;
    if (!bound) {
      modelError() << "graph input '" << info.name() << "' dim #"
                   << shape.size() << " is symbolic ('" << dim.dim_param()
                   << "'); bind it with --dim " << dim.dim_param() << "=N";
      return failure();
    }
    shape.push_back(*bound);
  }
  int64_t count = 1;
  for (int64_t d : shape)
    if (d < 0 || llvm::MulOverflow(count, d, count)) {
      modelError() << "graph input '" << info.name()
                   << "' has an invalid or overflowing shape";
      return failure();
    }
  return RankedTensorType::get(shape, elementType);
}

static bool isNarrowInt(int32_t dataType) {
  return dataType == onnx::TensorProto::INT8 ||
         dataType == onnx::TensorProto::UINT8 ||
         dataType == onnx::TensorProto::INT16 ||
         dataType == onnx::TensorProto::UINT16;
}

FailureOr<RankedTensorType>
Importer::tensorType(const onnx::TensorProto &tensor, bool widenNarrowInts) {
  Type elementType = elementTypeFor(ctx, tensor.data_type());
  if (widenNarrowInts && isNarrowInt(tensor.data_type()))
    elementType = IntegerType::get(ctx, 32);
  if (!elementType) {
    modelError() << "initializer '" << tensor.name()
                 << "' has unsupported element type "
                 << dataTypeName(tensor.data_type());
    return failure();
  }
  SmallVector<int64_t> shape;
  int64_t count = 1;
  for (int64_t d : tensor.dims()) {
    if (d < 0 || (d > 0 && count > INT64_MAX / d)) {
      modelError() << "initializer '" << tensor.name()
                   << "' has an invalid or overflowing shape";
      return failure();
    }
    count *= d;
    shape.push_back(d);
  }
  return RankedTensorType::get(shape, elementType);
}

FailureOr<std::pair<std::string, int64_t>>
Importer::resolveExternalData(const onnx::TensorProto &t, int64_t byteSize) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const onnx::StringStringEntryProto &entry : t.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset" || entry.key() == "length") {
      char *end = nullptr;
      long long v = std::strtoll(entry.value().c_str(), &end, 10);
      if (entry.value().empty() || *end || v < 0) {
        modelError() << "initializer '" << t.name() << "' has an invalid "
                     << "external data " << entry.key();
        return failure();
      }
      (entry.key() == "offset" ? offset : length) = v;
    }
  }
  // External data must stay beneath the model's directory (ONNX loader
  // CVEs came from `..`, absolute paths and symlinks).
  if (location.empty() || llvm::sys::path::is_absolute(location) ||
      llvm::any_of(llvm::make_range(llvm::sys::path::begin(location),
                                    llvm::sys::path::end(location)),
                   [](StringRef c) { return c == ".."; })) {
    modelError() << "initializer '" << t.name() << "': external data "
                 << "location '" << location
                 << "' must be a relative path beneath the model directory";
    return failure();
  }
  SmallString<256> file(modelDir);
  llvm::sys::path::append(file, location);
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(file, status, /*follow=*/false) ||
      status.type() != llvm::sys::fs::file_type::regular_file) {
    modelError() << "initializer '" << t.name() << "': external data file '"
                 << file << "' is missing or not a regular file";
    return failure();
  }
  if (length < 0)
    length = static_cast<int64_t>(status.getSize()) - offset;
  if (length != byteSize || offset > static_cast<int64_t>(status.getSize()) ||
      length > static_cast<int64_t>(status.getSize()) - offset) {
    modelError() << "initializer '" << t.name() << "': external data range "
                 << "(offset " << offset << ", length " << length
                 << ") does not match its " << byteSize
                 << " bytes or the file size " << status.getSize();
    return failure();
  }
  return std::pair(file.str().str(), offset);
}

FailureOr<std::string> Importer::readExternalData(const onnx::TensorProto &t,
                                                  int64_t byteSize,
                                                  int64_t start,
                                                  int64_t length) {
  FailureOr<std::pair<std::string, int64_t>> where =
      resolveExternalData(t, byteSize);
  if (failed(where))
    return failure();
  if (length < 0)
    length = byteSize;
  auto buffer = llvm::MemoryBuffer::getFileSlice(where->first, length,
                                                 where->second + start);
  if (!buffer) {
    modelError() << "initializer '" << t.name() << "': cannot read '"
                 << where->first << "'";
    return failure();
  }
  return (*buffer)->getBuffer().str();
}

FailureOr<DenseElementsAttr>
Importer::readTensor(const onnx::TensorProto &t, bool widenNarrowInts) {
  FailureOr<RankedTensorType> type = tensorType(t, widenNarrowInts);
  if (failed(type))
    return failure();
  int64_t count = type->getNumElements();
  int64_t byteSize = count * elementByteSize(t.data_type());
  std::string raw;
  bool hasRaw = t.has_raw_data();
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    FailureOr<std::string> data = readExternalData(t, byteSize);
    if (failed(data))
      return failure();
    raw = std::move(*data);
    hasRaw = true;
  } else if (hasRaw) {
    raw = t.raw_data();
  }
  HostTensor host = HostTensor::zeros(type->getShape(), type->getElementType());
  auto mismatch = [&](int64_t have) {
    modelError() << "tensor '" << t.name() << "' holds " << have
                 << " values but its dims " << "need " << count;
    return failure();
  };
  if (hasRaw) {
    if (static_cast<int64_t>(raw.size()) != byteSize)
      return mismatch(raw.size() / std::max<int64_t>(
                                       1, elementByteSize(t.data_type())));
    const char *p = raw.data();
    for (int64_t i = 0; i < count; ++i) {
      switch (t.data_type()) {
      case onnx::TensorProto::FLOAT: {
        float v;
        memcpy(&v, p + 4 * i, 4);
        host.floats[i] = v;
        break;
      }
      case onnx::TensorProto::DOUBLE:
        memcpy(&host.floats[i], p + 8 * i, 8);
        break;
      case onnx::TensorProto::FLOAT16:
      case onnx::TensorProto::BFLOAT16: {
        uint16_t bits;
        memcpy(&bits, p + 2 * i, 2);
        const llvm::fltSemantics &sem =
            t.data_type() == onnx::TensorProto::FLOAT16
                ? llvm::APFloat::IEEEhalf()
                : llvm::APFloat::BFloat();
        host.floats[i] = APFloat(sem, APInt(16, bits)).convertToDouble();
        break;
      }
      case onnx::TensorProto::INT64:
        memcpy(&host.ints[i], p + 8 * i, 8);
        break;
      case onnx::TensorProto::INT32: {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        host.ints[i] = v;
        break;
      }
      case onnx::TensorProto::BOOL:
        host.ints[i] = p[i] != 0;
        break;
      case onnx::TensorProto::UINT8:
        host.ints[i] = static_cast<uint8_t>(p[i]);
        break;
      case onnx::TensorProto::INT8:
        host.ints[i] = static_cast<int8_t>(p[i]);
        break;
      case onnx::TensorProto::INT16:
      case onnx::TensorProto::UINT16: {
        uint16_t bits;
        memcpy(&bits, p + 2 * i, 2);
        host.ints[i] = t.data_type() == onnx::TensorProto::INT16
                           ? static_cast<int16_t>(bits)
                           : bits;
        break;
      }
      }
    }
    return host.toAttr();
  }
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    if (t.float_data_size() != count)
      return mismatch(t.float_data_size());
    for (int64_t i = 0; i < count; ++i)
      host.floats[i] = t.float_data(i);
    break;
  case onnx::TensorProto::DOUBLE:
    if (t.double_data_size() != count)
      return mismatch(t.double_data_size());
    for (int64_t i = 0; i < count; ++i)
      host.floats[i] = t.double_data(i);
    break;
  case onnx::TensorProto::INT64:
    if (t.int64_data_size() != count)
      return mismatch(t.int64_data_size());
    for (int64_t i = 0; i < count; ++i)
      host.ints[i] = t.int64_data(i);
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16: {
    if (t.int32_data_size() != count)
      return mismatch(t.int32_data_size());
    const llvm::fltSemantics &sem = t.data_type() == onnx::TensorProto::FLOAT16
                                        ? llvm::APFloat::IEEEhalf()
                                        : llvm::APFloat::BFloat();
    for (int64_t i = 0; i < count; ++i)
      host.floats[i] =
          APFloat(sem, APInt(16, static_cast<uint16_t>(t.int32_data(i))))
              .convertToDouble();
    break;
  }
  default: // INT32, BOOL and the narrow integers
    if (t.int32_data_size() != count)
      return mismatch(t.int32_data_size());
    for (int64_t i = 0; i < count; ++i)
      host.ints[i] = t.data_type() == onnx::TensorProto::BOOL
                         ? t.int32_data(i) != 0
                         : t.int32_data(i);
  }
  return host.toAttr();
}

/// True if every use of `name` only moves data into a cast to a non-float
/// type: such a float tensor is a mask buffer, not a trainable weight.
bool Importer::isMaskOnly(const std::string &name, int depth) {
  auto it = consumers.find(name);
  if (it == consumers.end() || depth > 16 || graphOutputs.contains(name))
    return false;
  static const llvm::StringSet<> dataMovement = {
      "Slice", "Reshape", "Unsqueeze", "Squeeze", "Transpose", "Expand",
      "Identity", "Gather"};
  for (const onnx::NodeProto *user : it->second) {
    if (user->op_type() == "Cast") {
      int64_t to = 0;
      for (const onnx::AttributeProto &a : user->attribute())
        if (a.name() == "to")
          to = a.i();
      if (to != onnx::TensorProto::BOOL && to != onnx::TensorProto::INT64 &&
          to != onnx::TensorProto::INT32)
        return false;
      continue;
    }
    if (!dataMovement.contains(user->op_type()) || user->input(0) != name)
      return false;
    for (const std::string &out : user->output())
      if (!out.empty() && !isMaskOnly(out, depth + 1))
        return false;
  }
  return true;
}

std::optional<std::string> Importer::floatBytes(const onnx::TensorProto &t) {
  int64_t count = 1;
  for (int64_t dim : t.dims())
    count *= dim;
  int64_t byteSize = count * elementByteSize(t.data_type());
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    FailureOr<std::string> data = readExternalData(t, byteSize);
    if (failed(data))
      return std::nullopt;
    return std::move(*data);
  }
  if (t.has_raw_data())
    return t.raw_data().size() == static_cast<size_t>(byteSize)
               ? std::optional<std::string>(t.raw_data())
               : std::nullopt;
  if (t.data_type() != onnx::TensorProto::FLOAT || t.float_data_size() != count)
    return std::nullopt;
  std::string bytes(byteSize, '\0');
  memcpy(bytes.data(), t.float_data().data(), byteSize);
  return bytes;
}

std::optional<std::string> Importer::elementBytes(const onnx::TensorProto &t,
                                                  int64_t index) {
  int64_t width = elementByteSize(t.data_type()), count = 1;
  for (int64_t dim : t.dims())
    count *= dim;
  if (index < 0 || index >= count)
    return std::nullopt;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    FailureOr<std::string> data =
        readExternalData(t, count * width, index * width, width);
    return succeeded(data) ? std::optional<std::string>(*data) : std::nullopt;
  }
  if (t.has_raw_data())
    return t.raw_data().size() == static_cast<size_t>(count * width)
               ? std::optional<std::string>(
                     t.raw_data().substr(index * width, width))
               : std::nullopt;
  if (t.data_type() != onnx::TensorProto::FLOAT || t.float_data_size() != count)
    return std::nullopt;
  float value = t.float_data(index);
  return std::string(reinterpret_cast<const char *>(&value), sizeof(value));
}

bool Importer::readAsWeight(const std::string &name, int depth) {
  auto it = consumers.find(name);
  if (it == consumers.end() || depth > 16)
    return false;
  static const llvm::StringSet<> dataMovement = {
      "Transpose", "Cast", "Identity", "Reshape", "Squeeze", "Unsqueeze"};
  for (const onnx::NodeProto *user : it->second) {
    StringRef op = user->op_type();
    bool weight = ((op == "MatMul" || op == "Gemm" || op == "Conv") &&
                   user->input_size() > 1 && user->input(1) == name) ||
                  (op == "Gather" && user->input(0) == name);
    if (weight || (dataMovement.contains(op) && user->input(0) == name &&
                   readAsWeight(user->output(0), depth + 1)))
      return true;
  }
  return false;
}

/// Whether a float tensor holds an infinity or a NaN (by its exponent bits:
/// all ones).
bool Importer::holdsNonFinite(const onnx::TensorProto &t) {
  std::optional<std::string> bytes = floatBytes(t);
  if (!bytes)
    return false;
  const char *p = bytes->data();
  auto anyExponentAllOnes = [&](auto word, uint64_t mask) {
    using Word = decltype(word);
    for (size_t i = 0; i + sizeof(Word) <= bytes->size(); i += sizeof(Word)) {
      memcpy(&word, p + i, sizeof(Word));
      if ((word & mask) == mask)
        return true;
    }
    return false;
  };
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    return anyExponentAllOnes(uint32_t(), 0x7F800000u);
  case onnx::TensorProto::DOUBLE:
    return anyExponentAllOnes(uint64_t(), 0x7FF0000000000000ull);
  case onnx::TensorProto::FLOAT16:
    return anyExponentAllOnes(uint16_t(), 0x7C00u);
  case onnx::TensorProto::BFLOAT16:
    return anyExponentAllOnes(uint16_t(), 0x7F80u);
  default:
    return false;
  }
}

llvm::StringMap<std::string> Importer::findTransposedCopies() {
  llvm::StringMap<std::string> copies;
  llvm::SmallPtrSet<const onnx::TensorProto *, 4> tied;
  std::map<std::pair<int64_t, int64_t>, SmallVector<const onnx::TensorProto *>>
      byShape;
  // Only weights tie (not a mask and its transpose); an empty matrix has
  // nothing to compare.
  auto trained = [&](const onnx::TensorProto &t) {
    return !isMaskOnly(t.name()) &&
           (readAsWeight(t.name()) || !holdsNonFinite(t));
  };
  for (const onnx::TensorProto &t : model.graph().initializer())
    if (t.dims_size() == 2 && t.dims(0) != t.dims(1) && t.dims(0) > 0 &&
        t.dims(1) > 0 && trained(t) &&
        (t.data_type() == onnx::TensorProto::FLOAT ||
         t.data_type() == onnx::TensorProto::FLOAT16 ||
         t.data_type() == onnx::TensorProto::BFLOAT16 ||
         t.data_type() == onnx::TensorProto::DOUBLE))
      byShape[{t.dims(0), t.dims(1)}].push_back(&t);
  for (auto &[shape, sources] : byShape) {
    auto transposed = byShape.find({shape.second, shape.first});
    if (transposed == byShape.end())
      continue;
    int64_t rows = shape.first, cols = shape.second;
    size_t width = 0;
    // A few elements first: most pairs of shapes (an MLP's two
    // projections) differ at once, without reading either whole, and
    // samples of one value (zeros) say the tensor is no trained weight.
    auto samplesAgree = [&](const onnx::TensorProto &source,
                            const onnx::TensorProto &copy) {
      std::optional<std::string> first;
      bool varied = false;
      for (int64_t k = 0; k < 8; ++k) {
        int64_t i = (k * 7919) % rows, j = (k * 104729 + 1) % cols;
        std::optional<std::string> a = elementBytes(source, i * cols + j);
        std::optional<std::string> b = elementBytes(copy, j * rows + i);
        if (!a || !b || *a != *b)
          return false;
        varied |= first && *first != *a;
        first = a;
      }
      return varied;
    };
    for (const onnx::TensorProto *source : sources) {
      for (const onnx::TensorProto *copy : transposed->second) {
        if (copy->data_type() != source->data_type() || tied.count(copy) ||
            tied.count(source) || !samplesAgree(*source, *copy))
          continue;
        std::optional<std::string> a = floatBytes(*source);
        std::optional<std::string> b = floatBytes(*copy);
        if (!a || !b || b->size() != a->size())
          continue;
        // copy[j][i] == source[i][j], byte for byte; a tensor of one value
        // (zeros) equals the transpose of any other such.
        width = elementByteSize(source->data_type());
        bool equal = true, splat = true;
        for (int64_t i = 0; i < rows && equal; ++i)
          for (int64_t j = 0; j < cols && equal; ++j) {
            const char *element = a->data() + (i * cols + j) * width;
            equal = !memcmp(element, b->data() + (j * rows + i) * width, width);
            splat = splat && !memcmp(element, a->data(), width);
          }
        if (!equal || splat)
          continue;
        // The exporter's folded copy (torch: onnx::MatMul_<N>) is the copy.
        bool swap = StringRef(source->name()).starts_with("onnx::") &&
                    !StringRef(copy->name()).starts_with("onnx::");
        copies[(swap ? source : copy)->name()] = (swap ? copy : source)->name();
        tied.insert(source);
        tied.insert(copy);
      }
    }
  }
  return copies;
}

LogicalResult Importer::declareGraphInputs(func::FuncOp &func) {
  const onnx::GraphProto &graph = model.graph();
  SmallVector<Type> argTypes;
  SmallVector<std::pair<StringRef, std::string>> argNames;
  for (const onnx::TensorProto &t : graph.initializer())
    initializers[t.name()] = &t;
  for (const onnx::ValueInfoProto &in : graph.input()) {
    if (initializers.count(in.name()))
      continue; // IR < 4 lists initializers as inputs too
    FailureOr<RankedTensorType> type = valueInfoType(in);
    if (failed(type))
      return failure();
    argTypes.push_back(*type);
    argNames.push_back({WeftDialect::kInputAttrName, in.name()});
  }
  // Weights (docs/training.md, "Which initializers train"): float
  // initializers with more than one element, unless they only feed masks or
  // hold an infinity or a NaN (a mask folded by the exporter: weight decay
  // would turn -inf into NaN). The rest are constants, read now; a constant
  // too large to inline is a frozen parameter. An initializer that is the
  // transpose of another is that one, transposed: one parameter.
  llvm::StringMap<std::string> transposedCopies = findTransposedCopies();
  SmallVector<const onnx::TensorProto *> constants;
  SmallVector<bool> frozen;
  for (const onnx::TensorProto &t : graph.initializer()) {
    if (transposedCopies.count(t.name()))
      continue;
    FailureOr<RankedTensorType> type =
        tensorType(t, isNarrowInt(t.data_type()) && isMaskOnly(t.name()));
    if (failed(type))
      return failure();
    bool tooLarge = type->getNumElements() > kMaxFoldedElements;
    bool isWeight = llvm::isa<FloatType>(type->getElementType()) &&
                    type->getNumElements() > 1 && !isMaskOnly(t.name()) &&
                    (readAsWeight(t.name()) || !holdsNonFinite(t));
    if (isWeight || tooLarge) {
      argTypes.push_back(*type);
      argNames.push_back({WeftDialect::kParamAttrName, t.name()});
      frozen.push_back(!isWeight);
    } else {
      constants.push_back(&t);
    }
  }
  func.setType(FunctionType::get(ctx, argTypes, {}));
  Block *entry = func.addEntryBlock();
  for (auto [i, entryName] : llvm::enumerate(argNames)) {
    func.setArgAttr(i, entryName.first, StringAttr::get(ctx, entryName.second));
    values[entryName.second] = entry->getArgument(i);
  }
  for (auto [i, isFrozen] : llvm::enumerate(frozen))
    if (isFrozen)
      func.setArgAttr(argTypes.size() - frozen.size() + i,
                      WeftDialect::kFrozenAttrName, UnitAttr::get(ctx));
  builder.setInsertionPointToEnd(entry);
  for (const auto &[copy, source] : transposedCopies) {
    loc = NameLoc::get(StringAttr::get(ctx, copy));
    FailureOr<Value> transposed = create<TransposeOp>(
        ValueRange{values[source]},
        {builder.getNamedAttr("permutation",
                              builder.getDenseI64ArrayAttr({1, 0}))});
    if (failed(transposed))
      return failure();
    values[copy] = *transposed;
    emitRemark(loc) << "initializer '" << copy.str()
                    << "' is the transpose of '" << source
                    << "': trained as that one parameter (tied)";
  }
  for (const onnx::TensorProto *t : constants) {
    FailureOr<DenseElementsAttr> attr =
        readTensor(*t, isNarrowInt(t->data_type()) && isMaskOnly(t->name()));
    if (failed(attr))
      return failure();
    loc = NameLoc::get(StringAttr::get(ctx, t->name()));
    values[t->name()] = ConstantOp::create(builder, loc, *attr);
  }
  return success();
}

OwningOpRef<ModuleOp> Importer::run() {
  if (failed(loadModel()) || failed(checkOpsets()))
    return nullptr;
  const onnx::GraphProto &graph = model.graph();
  for (const onnx::NodeProto &n : graph.node())
    for (const std::string &in : n.input())
      if (!in.empty())
        consumers[in].push_back(&n);
  for (const onnx::ValueInfoProto &out : graph.output())
    graphOutputs.insert(out.name());

  Location fileLoc = FileLineColLoc::get(ctx, path, 0, 0);
  // Reject foreign domains first: that is the most useful error to see.
  for (auto [index, n] : llvm::enumerate(graph.node()))
    if (!n.domain().empty() && n.domain() != "ai.onnx") {
      std::string name = n.name().empty()
                             ? n.op_type() + "_" + std::to_string(index)
                             : n.name();
      emitError(NameLoc::get(StringAttr::get(ctx, name), fileLoc))
          << "node '" << name << "': unsupported op '" << n.op_type()
          << "' of domain '" << n.domain() << "'";
      return nullptr;
    }
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  SmallString<256> absolute(path);
  llvm::sys::fs::make_absolute(absolute);
  (*module)->setAttr(WeftDialect::kWeightsAttrName,
                     StringAttr::get(ctx, absolute));
  builder.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(builder, fileLoc, "main",
                                   FunctionType::get(ctx, {}, {}));
  if (failed(declareGraphInputs(func)))
    return nullptr;

  FailureOr<SmallVector<const onnx::NodeProto *>> order = sortNodes();
  if (failed(order))
    return nullptr;
  const llvm::StringMap<NodeHandler> &table = handlers();
  for (auto [index, n] : llvm::enumerate(*order)) {
    node = n;
    nodeName = n->name().empty()
                   ? n->op_type() + "_" + std::to_string(index)
                   : n->name();
    loc = NameLoc::get(StringAttr::get(ctx, nodeName), fileLoc);
    auto handler = table.find(n->op_type());
    if (handler == table.end()) {
      nodeError() << "unsupported op '" << n->op_type() << "'";
      return nullptr;
    }
    // Errors from op verifiers get the node prefix that importer errors have.
    std::string prefix = "node '" + nodeName + "' (" + n->op_type() +
                         ", opset " + std::to_string(opset) + "): ";
    ScopedDiagnosticHandler prefixer(ctx, [&](Diagnostic &diag) {
      std::string message = diag.str();
      if (StringRef(message).starts_with("node '"))
        return failure();
      emitError(diag.getLocation()) << prefix << message;
      return success();
    });
    if (failed((this->*(handler->second))(*n)))
      return nullptr;
    for (const std::string &out : n->output())
      if (!out.empty() && !values.count(out) &&
          (consumers.count(out) || graphOutputs.contains(out))) {
        nodeError() << "output '" << out << "' is not produced";
        return nullptr;
      }
  }

  SmallVector<Value> results;
  SmallVector<Attribute> names;
  for (const onnx::ValueInfoProto &out : graph.output()) {
    Value v = values.lookup(out.name());
    if (!v) {
      modelError() << "graph output '" << out.name() << "' is never produced";
      return nullptr;
    }
    if (out.type().has_tensor_type()) {
      Type declared = elementTypeFor(ctx, out.type().tensor_type().elem_type());
      if (declared && declared != getElementTypeOrSelf(v.getType())) {
        modelError() << "graph output '" << out.name() << "' is declared "
                     << declared << " but computed as " << v.getType();
        return nullptr;
      }
    }
    results.push_back(v);
    names.push_back(StringAttr::get(ctx, out.name()));
  }
  func::ReturnOp::create(builder, fileLoc, results);
  func.setType(FunctionType::get(ctx, func.getArgumentTypes(),
                                 TypeRange(ValueRange(results))));
  func->setAttr(WeftDialect::kOutputsAttrName, ArrayAttr::get(ctx, names));
  if (failed(mlir::verify(*module)))
    return nullptr;
  return module;
}

FailureOr<llvm::StringMap<HostTensor>> Importer::readInitializers() {
  if (failed(loadModel()))
    return failure();
  llvm::StringMap<HostTensor> result;
  for (const onnx::TensorProto &t : model.graph().initializer()) {
    FailureOr<DenseElementsAttr> attr = readTensor(t, /*widenNarrowInts=*/true);
    if (failed(attr))
      return failure();
    result[t.name()] = *HostTensor::fromAttr(*attr, INT64_MAX);
  }
  return result;
}

FailureOr<HostTensor> Importer::readTensorFile() {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    modelError() << "cannot read tensor file '" << path
                 << "': " << buffer.getError().message();
    return failure();
  }
  modelDir = llvm::sys::path::parent_path(path).str();
  onnx::TensorProto tensor;
  StringRef bytes = (*buffer)->getBuffer();
  if (!tensor.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    modelError() << "'" << path << "' is not an ONNX TensorProto";
    return failure();
  }
  FailureOr<DenseElementsAttr> attr = readTensor(tensor);
  if (failed(attr))
    return failure();
  return *HostTensor::fromAttr(*attr, INT64_MAX);
}

LogicalResult Importer::writeInitializers(
    ArrayRef<WeightPlacement> placement,
    llvm::raw_pwrite_stream &out) {
  if (failed(loadModel()))
    return failure();
  llvm::StringMap<const onnx::TensorProto *> byName;
  for (const onnx::TensorProto &t : model.graph().initializer())
    byName[t.name()] = &t;
  for (const WeightPlacement &place : placement) {
    const std::string &name = place.name;
    uint64_t offset = place.offset;
    const onnx::TensorProto *t = byName.lookup(name);
    if (!t) {
      modelError() << "initializer '" << name << "' is not in the model";
      return failure();
    }
    FailureOr<RankedTensorType> type = tensorType(*t);
    if (failed(type))
      return failure();
    int64_t bytes = type->getNumElements() * elementByteSize(t->data_type());
    // A float tensor's raw data is already the weights file's layout: copy
    // it without going through an attribute (uniquing gigabytes is slow).
    bool rawLayout =
        t->data_location() != onnx::TensorProto::EXTERNAL &&
        t->has_raw_data() &&
        static_cast<int64_t>(t->raw_data().size()) == bytes &&
        llvm::is_contained({onnx::TensorProto::FLOAT, onnx::TensorProto::DOUBLE,
                            onnx::TensorProto::FLOAT16,
                            onnx::TensorProto::BFLOAT16},
                           t->data_type());
    if (rawLayout && !place.write) {
      out.pwrite(t->raw_data().data(), bytes, offset);
      continue;
    }
    if (rawLayout) {
      place.write(t->raw_data(), out);
      continue;
    }
    if (place.write) {
      // The whole tensor in memory, for the placement to cut up.
      std::string whole;
      if (t->data_location() == onnx::TensorProto::EXTERNAL) {
        FailureOr<std::string> data = readExternalData(*t, bytes, 0, bytes);
        if (failed(data))
          return failure();
        whole = std::move(*data);
      } else {
        FailureOr<DenseElementsAttr> attr = readTensor(*t);
        if (failed(attr))
          return failure();
        ArrayRef<char> raw = attr->getRawData();
        int64_t width = elementByteSize(t->data_type());
        if (attr->isSplat())
          for (int64_t i = 0; i < attr->getNumElements(); ++i)
            whole.append(raw.data(), width);
        else
          whole.assign(raw.data(), raw.size());
      }
      if (static_cast<int64_t>(whole.size()) != bytes) {
        modelError() << "initializer '" << name << "' has " << whole.size()
                     << " bytes but " << bytes << " in the model";
        return failure();
      }
      place.write(whole, out);
      continue;
    }
    if (t->data_location() == onnx::TensorProto::EXTERNAL) {
      // Copy in chunks: a single weight may be gigabytes.
      constexpr int64_t kChunk = int64_t(64) << 20;
      for (int64_t done = 0; done < bytes; done += kChunk) {
        int64_t length = std::min(kChunk, bytes - done);
        FailureOr<std::string> data = readExternalData(*t, bytes, done, length);
        if (failed(data))
          return failure();
        out.pwrite(data->data(), length, offset + done);
      }
      continue;
    }
    FailureOr<DenseElementsAttr> attr = readTensor(*t);
    if (failed(attr))
      return failure();
    ArrayRef<char> raw = attr->getRawData();
    if (attr->isSplat() && attr->getNumElements() > 1) {
      // A splat attribute stores one element: write it out in full.
      int64_t width = elementByteSize(t->data_type());
      std::string full;
      full.reserve(bytes);
      for (int64_t i = 0; i < attr->getNumElements(); ++i)
        full.append(raw.data(), width);
      out.pwrite(full.data(), full.size(), offset);
    } else if (static_cast<int64_t>(raw.size()) == bytes) {
      out.pwrite(raw.data(), raw.size(), offset);
    } else {
      modelError() << "initializer '" << name << "' has " << raw.size()
                   << " bytes in memory but " << bytes << " in the model";
      return failure();
    }
  }
  return success();
}

} // namespace weft::onnx_import

using namespace weft::onnx_import;

LogicalResult weft::writeONNXInitializers(
    StringRef modelPath, ArrayRef<WeightPlacement> placement,
    llvm::raw_pwrite_stream &out, MLIRContext *ctx) {
  ONNXImportOptions options;
  return Importer(ctx, modelPath, options).writeInitializers(placement, out);
}

bool weft::ONNXImportOptions::bindDims(ArrayRef<std::string> bindings,
                                       std::string &error) {
  for (const std::string &binding : bindings) {
    auto [name, value] = StringRef(binding).split('=');
    int64_t parsed;
    if (name.empty() || value.getAsInteger(10, parsed) || parsed <= 0) {
      error = "--dim expects name=positive-integer, got '" + binding + "'";
      return false;
    }
    dims[name] = parsed;
  }
  return true;
}

FailureOr<HostTensor> weft::readONNXTensorFile(StringRef path,
                                               MLIRContext *ctx) {
  ONNXImportOptions options;
  return Importer(ctx, path, options).readTensorFile();
}

FailureOr<llvm::StringMap<HostTensor>>
weft::readONNXInitializers(StringRef modelPath, MLIRContext *ctx) {
  ONNXImportOptions options;
  return Importer(ctx, modelPath, options).readInitializers();
}

OwningOpRef<ModuleOp> weft::importONNXFile(StringRef path, MLIRContext *ctx,
                                           const ONNXImportOptions &options) {
  ctx->loadDialect<WeftDialect, func::FuncDialect>();
  Importer importer(ctx, path, options);
  return importer.run();
}

std::vector<std::string> weft::supportedONNXOps() {
  std::vector<std::string> ops;
  for (const auto &entry : handlers())
    ops.push_back(entry.getKey().str());
  llvm::sort(ops);
  return ops;
}
