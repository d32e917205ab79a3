//===- WeftDialect.cpp - Weft dialect -------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/Experts.h"
#include "weft/Dialect/Weft/IR/Flops.h"
#include "weft/Dialect/Weft/IR/Layers.h"
#include "weft/Dialect/Weft/IR/Parameters.h"
#include "weft/Dialect/Weft/IR/RuntimeTypes.h"
#include "weft/Dialect/Weft/IR/TargetAttrNames.h"
#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "llvm/ADT/StringExtras.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace weft;

#include "weft/Dialect/Weft/IR/WeftInterfaces.cpp.inc"
#include "weft/Dialect/Weft/IR/WeftOpsDialect.cpp.inc"

void WeftDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "weft/Dialect/Weft/IR/WeftOps.cpp.inc"
      >();
}

Operation *WeftDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

LogicalResult WeftDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kWeightsAttrName) {
    if (!isa<ModuleOp>(op) || !llvm::isa<StringAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be a string attribute on a module";
    return success();
  }
  if (name == kMemoryPlanAttrName || name == kKernelReportAttrName) {
    if (!isa<ModuleOp>(op) || !llvm::isa<DictionaryAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be a dictionary on a module";
    return success();
  }
  if (name == kLibraryCallAttrName) {
    if (!isa<AttentionOp, AttentionGradOp>(op) ||
        !llvm::isa<FlatSymbolRefAttr>(attr.getValue()))
      return op->emitError() << "'" << name
                             << "' must be a function symbol on "
                                "weft.attention or weft.attention_grad";
    return success();
  }
  if (name == kLaunchIdAttrName) {
    if (!llvm::isa<IntegerAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be an integer";
    return success();
  }
  if (name == kFusedAttentionAttrName) {
    auto kind = llvm::dyn_cast<StringAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !kind ||
        (kind.getValue() != "forward" && kind.getValue() != "backward"))
      return op->emitError() << "'" << name
                             << "' must be \"forward\" or \"backward\" on a "
                                "function";
    return success();
  }
  if (name == kGemmAttrName) {
    if (!isa<FunctionOpInterface>(op) || !llvm::isa<UnitAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be a unit attribute on a function";
    return success();
  }
  if (name == kBlockSegmentsAttrName) {
    auto starts = llvm::dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (op->getName().getStringRef() != "gpu.launch" || !starts ||
        starts.empty() || starts[0] != 0 ||
        !llvm::is_sorted(starts.asArrayRef()))
      return op->emitError() << "'" << name
                             << "' must be an ascending i64 array starting "
                                "at 0 on a gpu.launch";
    return success();
  }
  if (name == kOutputsAttrName) {
    auto func = dyn_cast<FunctionOpInterface>(op);
    auto names = llvm::dyn_cast<ArrayAttr>(attr.getValue());
    if (!func || !names ||
        !llvm::all_of(names, [](Attribute a) { return isa<StringAttr>(a); }))
      return op->emitError()
             << "'" << name << "' must be an array of strings on a function";
    if (names.size() != func.getNumResults())
      return op->emitError()
             << "'" << name << "' names " << names.size()
             << " results but the function has " << func.getNumResults();
    return success();
  }
  if (name == kOptimizerAttrName) {
    if (!isa<FunctionOpInterface>(op) ||
        !llvm::isa<DictionaryAttr>(attr.getValue()))
      return op->emitError() << "'" << name
                             << "' must be a dictionary on a function";
    return success();
  }
  if (name == kAxisNamesAttrName) {
    auto names = llvm::dyn_cast<ArrayAttr>(attr.getValue());
    if (!names ||
        !llvm::all_of(names, [](Attribute a) { return isa<StringAttr>(a); }))
      return op->emitError() << "'" << name << "' must be an array of strings";
    return success();
  }
  if (name == kPhaseAttrName) {
    auto phase = llvm::dyn_cast<StringAttr>(attr.getValue());
    if (!phase || !llvm::is_contained(
                      {"forward", "backward", "backward-weight", "update"},
                      phase.getValue()))
      return op->emitError() << "'" << name
                             << "' must be \"forward\", \"backward\", "
                                "\"backward-weight\" or \"update\"";
    return success();
  }
  if (name == kStageAttrName || name == kMicrobatchAttrName ||
      name == kTagAttrName) {
    auto value = llvm::dyn_cast<IntegerAttr>(attr.getValue());
    if (!value || value.getInt() < 0)
      return op->emitError() << "'" << name
                             << "' must be a non-negative integer";
    return success();
  }
  if (name == kMicrobatchesAttrName) {
    auto value = llvm::dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !value || value.getInt() < 1)
      return op->emitError()
             << "'" << name << "' must be a positive integer on a function";
    return success();
  }
  if (name == kPipelineAttrName) {
    if (!isa<FunctionOpInterface>(op) ||
        !llvm::isa<DictionaryAttr>(attr.getValue()))
      return op->emitError() << "'" << name
                             << "' must be a dictionary on a function";
    return success();
  }
  if (name == kPriorityAttrName) {
    if (!llvm::isa<IntegerAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be an integer";
    return success();
  }
  if (name == kCaseRunsAttrName) {
    auto runs = llvm::dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!runs || op->getNumRegions() != runs.size() + 1)
      return op->emitError() << "'" << name
                             << "' must be an i64 array with one count per "
                                "case region";
    return success();
  }
  if (name == kBlocksAttrName || name == kPinnedDimsAttrName) {
    if (!llvm::isa<DenseI64ArrayAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be an i64 array";
    return success();
  }
  if (name == kContextAxisAttrName) {
    if (op->getName().getStringRef() != "shard.grid" ||
        !isa<StringAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be a string on a shard.grid";
    return success();
  }
  if (name == kContextAttentionAttrName) {
    auto mode = llvm::dyn_cast<StringAttr>(attr.getValue());
    if (op->getName().getStringRef() != "shard.grid" || !mode ||
        !llvm::is_contained({"ring", "ring-contiguous", "all-to-all"},
                            mode.getValue()))
      return op->emitError() << "'" << name
                             << "' must be \"ring\", \"ring-contiguous\" or "
                                "\"all-to-all\" on a shard.grid";
    return success();
  }
  if (name == kFusedBackwardAttrName) {
    if (!isa<AttentionOp>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be a unit attribute on weft.attention";
    return success();
  }
  return op->emitError() << "unknown weft attribute '" << name << "'";
}

/// `weft.global_shape` on an argument or a result of a partitioned
/// function: the whole tensor's shape.
static LogicalResult verifyGlobalShape(Operation *op, NamedAttribute attr) {
  if (!llvm::isa<DenseI64ArrayAttr>(attr.getValue()))
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' must be an i64 array";
  return success();
}

LogicalResult WeftDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kGlobalShapeAttrName)
    return verifyGlobalShape(op, attr);
  if (name == kBatchDimAttrName) {
    auto dim = llvm::dyn_cast<IntegerAttr>(attr.getValue());
    auto type = llvm::dyn_cast<RankedTensorType>(
        op->getRegion(regionIndex).getArgument(argIndex).getType());
    if (!dim || !type || dim.getInt() < 0 || dim.getInt() >= type.getRank())
      return op->emitError() << "'" << name
                             << "' must be an integer naming a dim of the "
                                "argument";
    return success();
  }
  if (name == kFrozenAttrName) {
    auto function = llvm::dyn_cast<FunctionOpInterface>(op);
    if (!llvm::isa<UnitAttr>(attr.getValue()) || !function ||
        !function.getArgAttr(argIndex, kParamAttrName))
      return op->emitError()
             << "'" << name << "' must be a unit attribute beside '"
             << kParamAttrName << "'";
    return success();
  }
  if (name == kIndexBoundAttrName) {
    auto bound = llvm::dyn_cast<IntegerAttr>(attr.getValue());
    if (!bound || bound.getInt() < 1)
      return op->emitError() << "'" << name << "' must be a positive integer";
    return success();
  }
  if (name != kParamAttrName && name != kInputAttrName &&
      name != kShardingAttrName && name != kStateAttrName)
    return op->emitError() << "unknown weft argument attribute '" << name
                           << "'";
  if (!llvm::isa<StringAttr>(attr.getValue()))
    return op->emitError() << "'" << name << "' on argument #" << argIndex
                           << " must be a string";
  return success();
}

bool weft::isTrainedParameter(FunctionOpInterface function, unsigned index) {
  auto type =
      llvm::dyn_cast<RankedTensorType>(function.getArgumentTypes()[index]);
  return function.getArgAttr(index, WeftDialect::kParamAttrName) &&
         !function.getArgAttr(index, WeftDialect::kFrozenAttrName) && type &&
         llvm::isa<FloatType>(type.getElementType());
}

LogicalResult WeftDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned regionIndex,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kGlobalShapeAttrName)
    return verifyGlobalShape(op, attr);
  if (name != kShardingAttrName)
    return op->emitError() << "unknown weft result attribute '" << name << "'";
  if (!llvm::isa<StringAttr>(attr.getValue()))
    return op->emitError() << "'" << name << "' on result #" << resultIndex
                           << " must be a string";
  return success();
}

std::optional<weft_dtype> weft::runtimeDtype(Type element) {
  if (element.isF32())
    return WEFT_F32;
  if (element.isF64())
    return WEFT_F64;
  if (element.isF16())
    return WEFT_F16;
  if (element.isBF16())
    return WEFT_BF16;
  if (element.isInteger(64))
    return WEFT_I64;
  if (element.isInteger(32))
    return WEFT_I32;
  if (element.isInteger(1))
    return WEFT_BOOL;
  return std::nullopt;
}

std::optional<llvm::StringRef> weft::runtimeTypeName(Type element) {
  if (std::optional<weft_dtype> dtype = runtimeDtype(element))
    return llvm::StringRef(weft_dtype_name(*dtype));
  return std::nullopt;
}

Value weft::createSplat(OpBuilder &builder, Location loc, RankedTensorType type,
                        double value) {
  Type element = type.getElementType();
  Attribute attr =
      llvm::isa<FloatType>(element)
          ? Attribute(builder.getFloatAttr(element, value))
          : Attribute(
                builder.getIntegerAttr(element, static_cast<int64_t>(value)));
  return ConstantOp::create(builder, loc, DenseElementsAttr::get(type, attr));
}

Value weft::createScalar(OpBuilder &builder, Location loc, Type element,
                         double value) {
  return createSplat(builder, loc, RankedTensorType::get({}, element), value);
}

std::optional<std::string> weft::numberedLayerOf(llvm::StringRef name) {
  for (size_t start = 0; start < name.size();) {
    size_t end = name.find_first_of("/.", start);
    if (end == llvm::StringRef::npos)
      end = name.size();
    llvm::StringRef part = name.slice(start, end);
    if (!part.empty() && llvm::all_of(part, llvm::isDigit))
      return name.take_front(end).str();
    start = end + 1;
  }
  return std::nullopt;
}

std::optional<std::string> weft::numberedLayerOf(Location loc) {
  std::optional<std::string> layer;
  loc->walk([&](Location inner) {
    auto name = llvm::dyn_cast<NameLoc>(inner);
    if (!name)
      return WalkResult::advance();
    layer = numberedLayerOf(name.getName().getValue());
    return WalkResult::interrupt();
  });
  return layer;
}

/// Whether `value` reaches a weft.matmul through views.
static bool readByBatchedMatmul(Value value) {
  for (Operation *user : value.getUsers()) {
    if (isa<MatmulOp>(user))
      return true;
    if (isa<UnsqueezeOp, ReshapeOp, CastOp, ExpandOp>(user) &&
        readByBatchedMatmul(user->getResult(0)))
      return true;
  }
  return false;
}

bool weft::isStackedExpertWeight(Value parameter) {
  auto type = llvm::dyn_cast<RankedTensorType>(parameter.getType());
  return type && type.getRank() == 3 && readByBatchedMatmul(parameter);
}

int64_t weft::contractionFlops(Operation *op) {
  auto lastDim = [](Value v) { return tensorTypeOf(v).getShape().back(); };
  if (auto linear = dyn_cast<LinearOp>(op))
    return 2 * tensorTypeOf(linear.getResult()).getNumElements() *
           lastDim(linear.getInput());
  if (auto matmul = dyn_cast<MatmulOp>(op))
    return 2 * tensorTypeOf(matmul.getResult()).getNumElements() *
           lastDim(matmul.getLhs());
  // Attention: q k^T and p v forward; the backward's four products (dv,
  // dp, dq, dk) reuse the forward's probabilities, as the decomposition
  // does, so a fused backward counts as much.
  auto attentionFlops = [&](Value query, Value key, Value value) {
    int64_t rows = tensorTypeOf(query).getNumElements() / lastDim(query);
    ArrayRef<int64_t> keyShape = tensorTypeOf(key).getShape();
    int64_t scores = rows * keyShape[keyShape.size() - 2];
    return 2 * scores * (lastDim(query) + lastDim(value));
  };
  if (auto attention = dyn_cast<AttentionOp>(op))
    return attentionFlops(attention.getQuery(), attention.getKey(),
                          attention.getValue());
  if (auto grad = dyn_cast<AttentionGradOp>(op))
    return 2 * attentionFlops(grad.getQuery(), grad.getKey(), grad.getValue());
  return 0;
}
