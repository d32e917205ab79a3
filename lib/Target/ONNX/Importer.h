//===- Importer.h - ONNX importer internals ---------------------*- C++ -*-===//
//
// Shared by the importer's driver (ImportONNX.cpp) and its per-op handlers
// (ImportOps.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_TARGET_ONNX_IMPORTER_H
#define WEFT_LIB_TARGET_ONNX_IMPORTER_H

#include "weft/Dialect/Weft/IR/HostTensor.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Target/ONNX/ImportONNX.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"

#include <onnx/onnx_pb.h>

namespace weft::onnx_import {
using namespace mlir;
}

namespace weft::onnx_import {

constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = 21;

/// ONNX TensorProto.DataType to an MLIR element type; null if unsupported.
inline Type elementTypeFor(MLIRContext *ctx, int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    return Float32Type::get(ctx);
  case onnx::TensorProto::DOUBLE:
    return Float64Type::get(ctx);
  case onnx::TensorProto::FLOAT16:
    return Float16Type::get(ctx);
  case onnx::TensorProto::BFLOAT16:
    return BFloat16Type::get(ctx);
  case onnx::TensorProto::INT64:
    return IntegerType::get(ctx, 64);
  case onnx::TensorProto::INT32:
    return IntegerType::get(ctx, 32);
  case onnx::TensorProto::BOOL:
    return IntegerType::get(ctx, 1);
  default:
    return nullptr;
  }
}

inline std::string dataTypeName(int32_t dataType) {
  if (onnx::TensorProto::DataType_IsValid(dataType))
    return onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(dataType));
  return "data type " + std::to_string(dataType);
}

inline int64_t elementByteSize(int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
    return 8;
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
    return 4;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    return 2;
  default:
    return 1;
  }
}

class Importer;
using NodeHandler = LogicalResult (Importer::*)(const onnx::NodeProto &);
/// The handler of each supported default-domain op type.
const llvm::StringMap<NodeHandler> &handlers();

class Importer {
public:
  Importer(MLIRContext *ctx, StringRef path, const ONNXImportOptions &options)
      : ctx(ctx), builder(ctx), path(path.str()), options(options) {}

  OwningOpRef<ModuleOp> run();
  FailureOr<llvm::StringMap<HostTensor>> readInitializers();
  FailureOr<HostTensor> readTensorFile();
  LogicalResult
  writeInitializers(ArrayRef<WeightPlacement> placement,
                    llvm::raw_pwrite_stream &out);

  // Node handlers (one per ONNX op type or family).
  LogicalResult importElementwiseBinary(const onnx::NodeProto &node);
  LogicalResult importVariadic(const onnx::NodeProto &node);
  LogicalResult importUnary(const onnx::NodeProto &node);
  LogicalResult importGelu(const onnx::NodeProto &node);
  LogicalResult importClip(const onnx::NodeProto &node);
  LogicalResult importLeakyRelu(const onnx::NodeProto &node);
  LogicalResult importWhere(const onnx::NodeProto &node);
  LogicalResult importCast(const onnx::NodeProto &node);
  LogicalResult importIdentity(const onnx::NodeProto &node);
  LogicalResult importDropout(const onnx::NodeProto &node);
  LogicalResult importMatMul(const onnx::NodeProto &node);
  LogicalResult importGemm(const onnx::NodeProto &node);
  LogicalResult importEinsum(const onnx::NodeProto &node);
  LogicalResult importConv(const onnx::NodeProto &node);
  LogicalResult importReduce(const onnx::NodeProto &node);
  LogicalResult importSoftmax(const onnx::NodeProto &node);
  LogicalResult importLayerNorm(const onnx::NodeProto &node);
  LogicalResult importGather(const onnx::NodeProto &node);
  LogicalResult importReshape(const onnx::NodeProto &node);
  LogicalResult importFlatten(const onnx::NodeProto &node);
  LogicalResult importTranspose(const onnx::NodeProto &node);
  LogicalResult importConcat(const onnx::NodeProto &node);
  LogicalResult importSplit(const onnx::NodeProto &node);
  LogicalResult importSlice(const onnx::NodeProto &node);
  LogicalResult importExpand(const onnx::NodeProto &node);
  LogicalResult importSqueeze(const onnx::NodeProto &node);
  LogicalResult importUnsqueeze(const onnx::NodeProto &node);
  LogicalResult importConstant(const onnx::NodeProto &node);
  LogicalResult importConstantOfShape(const onnx::NodeProto &node);
  LogicalResult importRange(const onnx::NodeProto &node);
  LogicalResult importShape(const onnx::NodeProto &node);
  LogicalResult importSize(const onnx::NodeProto &node);
  LogicalResult importTrilu(const onnx::NodeProto &node);
  LogicalResult importCumSum(const onnx::NodeProto &node);
  LogicalResult importTile(const onnx::NodeProto &node);
  LogicalResult importGatherElements(const onnx::NodeProto &node);
  LogicalResult importScatterND(const onnx::NodeProto &node);

private:
  // Model loading.
  LogicalResult loadModel();
  LogicalResult checkOpsets();
  FailureOr<SmallVector<const onnx::NodeProto *>> sortNodes();
  LogicalResult declareGraphInputs(func::FuncOp &func);
  std::optional<int64_t> evaluateDimParam(StringRef param);
  FailureOr<RankedTensorType> valueInfoType(const onnx::ValueInfoProto &info);
  /// With `widenNarrowInts`, 8- and 16-bit integer tensors read as i32 (for
  /// mask buffers, which only feed casts).
  FailureOr<RankedTensorType> tensorType(const onnx::TensorProto &tensor,
                                         bool widenNarrowInts = false);
  FailureOr<DenseElementsAttr> readTensor(const onnx::TensorProto &tensor,
                                          bool widenNarrowInts = false);
  /// The checked file and offset of a tensor's external data.
  FailureOr<std::pair<std::string, int64_t>>
  resolveExternalData(const onnx::TensorProto &tensor, int64_t byteSize);
  /// Reads `length` bytes (all by default) from `start` of the tensor's
  /// external data.
  FailureOr<std::string> readExternalData(const onnx::TensorProto &tensor,
                                          int64_t byteSize, int64_t start = 0,
                                          int64_t length = -1);
  bool isMaskOnly(const std::string &name, int depth = 0);
  /// The bytes of a float tensor's elements, wherever the model keeps them
  /// (nullopt for a layout it does not keep as raw bytes or f32 values).
  std::optional<std::string> floatBytes(const onnx::TensorProto &tensor);
  bool holdsNonFinite(const onnx::TensorProto &tensor);
  /// Whether a contraction reads `name` as its weight or a Gather as its
  /// table (through data movement): a weight, whatever its values.
  bool readAsWeight(const std::string &name, int depth = 0);
  /// Element `index` of a tensor as bytes, read alone.
  std::optional<std::string> elementBytes(const onnx::TensorProto &tensor,
                                          int64_t index);
  /// Initializers that are the transpose of another ([C, V] beside [V, C]),
  /// each mapped to that other: a tied LM head folded by the exporter.
  llvm::StringMap<std::string> findTransposedCopies();

  // Diagnostics.
  InFlightDiagnostic nodeError();
  InFlightDiagnostic modelError() {
    return emitError(FileLineColLoc::get(ctx, path, 0, 0));
  }

  // Operands and attributes of the current node.
  Value input(int index);
  FailureOr<Value> requiredInput(int index);
  FailureOr<HostTensor> constantInput(int index, StringRef role);
  const onnx::AttributeProto *attr(StringRef name);
  int64_t intAttr(StringRef name, int64_t defaultValue);
  float floatAttr(StringRef name, float defaultValue);
  std::optional<SmallVector<int64_t>> intsAttr(StringRef name);
  std::string stringAttr(StringRef name, StringRef defaultValue);
  FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                   StringRef what = "axis");
  LogicalResult setOutput(int index, Value value);
  bool outputUsed(int index) const;

  // Op construction: every op is verified, then folded.
  template <typename OpTy>
  FailureOr<Value> create(ValueRange operands,
                          ArrayRef<NamedAttribute> attrs = {});
  template <typename OpTy>
  FailureOr<Value> createTyped(Type resultType, ValueRange operands,
                               ArrayRef<NamedAttribute> attrs = {});
  /// create<OpTy> over operands that may have failed to build: a failure
  /// passes through, so a composition of ops checks once, at its end.
  template <typename OpTy>
  FailureOr<Value> compose(std::initializer_list<FailureOr<Value>> operands,
                           ArrayRef<NamedAttribute> attrs = {});
  FailureOr<Value> finish(Operation *op);
  Value constant(const HostTensor &tensor);
  Value scalarConstant(Type elementType, double value);
  FailureOr<Value> reshape(Value value, ArrayRef<int64_t> shape);
  FailureOr<Value> castTo(Value value, Type elementType);
  NamedAttribute named(StringRef name, Attribute value) {
    return builder.getNamedAttr(name, value);
  }

  MLIRContext *ctx;
  OpBuilder builder;
  std::string path;
  std::string modelDir;
  const ONNXImportOptions &options;
  onnx::ModelProto model;
  int64_t opset = 0;
  llvm::StringMap<Value> values;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringMap<SmallVector<const onnx::NodeProto *>> consumers;
  llvm::StringSet<> graphOutputs;
  const onnx::NodeProto *node = nullptr;
  std::string nodeName;
  Location loc = UnknownLoc::get(ctx);
};

template <typename OpTy>
FailureOr<Value> Importer::create(ValueRange operands,
                                  ArrayRef<NamedAttribute> attrs) {
  OperationState state(loc, OpTy::getOperationName());
  state.addOperands(operands);
  state.addAttributes(attrs);
  if (!attrs.empty()) {
    OpaqueProperties props =
        &state.getOrAddProperties<typename OpTy::Properties>();
    if (failed(state.name.getRegisteredInfo()->setOpPropertiesFromAttribute(
            state.name, props, state.attributes.getDictionary(ctx), nullptr)))
      return failure();
  }
  SmallVector<Type> types;
  if (failed(OpTy::inferReturnTypes(ctx, loc, state.operands,
                                    state.attributes.getDictionary(ctx),
                                    state.getRawProperties(), state.regions,
                                    types)))
    return failure();
  state.addTypes(types);
  return finish(builder.create(state));
}

template <typename OpTy>
FailureOr<Value> Importer::createTyped(Type resultType, ValueRange operands,
                                       ArrayRef<NamedAttribute> attrs) {
  return finish(OpTy::create(builder, loc, TypeRange{resultType}, operands,
                             attrs));
}

template <typename OpTy>
FailureOr<Value>
Importer::compose(std::initializer_list<FailureOr<Value>> operands,
                  ArrayRef<NamedAttribute> attrs) {
  SmallVector<Value> values;
  for (const FailureOr<Value> &operand : operands) {
    if (failed(operand))
      return failure();
    values.push_back(*operand);
  }
  return create<OpTy>(values, attrs);
}

} // namespace weft::onnx_import

#endif // WEFT_LIB_TARGET_ONNX_IMPORTER_H
