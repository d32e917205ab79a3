//===- HostTensor.h - Small tensors evaluated at compile time ---*- C++ -*-===//
//
// Folders and the ONNX importer evaluate shape arithmetic on constants. A
// HostTensor holds such a constant in a form that is easy to compute with:
// integers as int64, floats as double (rounded to the element type when
// turned back into an attribute).
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_HOSTTENSOR_H
#define WEFT_DIALECT_WEFT_IR_HOSTTENSOR_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include <functional>
#include <optional>
#include <vector>

namespace weft {

/// Constants larger than this are not folded: folding them would bloat the IR.
constexpr int64_t kMaxFoldedElements = int64_t(1) << 22;

struct HostTensor {
  llvm::SmallVector<int64_t> shape;
  mlir::Type elementType;
  /// Exactly one of these holds the elements, row-major.
  std::vector<double> floats;
  std::vector<int64_t> ints;

  bool isFloat() const { return llvm::isa<mlir::FloatType>(elementType); }
  int64_t size() const;
  double asDouble(int64_t i) const { return isFloat() ? floats[i] : ints[i]; }
  int64_t asInt(int64_t i) const {
    return isFloat() ? static_cast<int64_t>(floats[i]) : ints[i];
  }

  /// Reads a dense attribute; nullopt for non-dense ones and for ones with
  /// more than `maxElements` elements.
  static std::optional<HostTensor>
  fromAttr(mlir::Attribute attr, int64_t maxElements = kMaxFoldedElements);
  /// An empty tensor of the given shape and element type.
  static HostTensor zeros(llvm::ArrayRef<int64_t> shape, mlir::Type elementType);
  mlir::DenseElementsAttr toAttr() const;
  mlir::RankedTensorType type() const;
};

/// Row-major strides of `shape`.
llvm::SmallVector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape);

/// Elementwise map over operands broadcast to `resultShape`. `fn` receives
/// the operands' values at one position (as doubles or int64 per `inputs`).
HostTensor mapBroadcast(
    llvm::ArrayRef<const HostTensor *> inputs,
    llvm::ArrayRef<int64_t> resultShape, mlir::Type resultElementType,
    const std::function<double(llvm::ArrayRef<double>)> &floatFn,
    const std::function<int64_t(llvm::ArrayRef<int64_t>)> &intFn);

/// Copies the elements of `input` at the source positions `sourceIndex`
/// computes for each result position (given as a multi-index).
HostTensor gatherElements(
    const HostTensor &input, llvm::ArrayRef<int64_t> resultShape,
    const std::function<int64_t(llvm::ArrayRef<int64_t>)> &sourceIndex);

/// Converts to another element type with Cast semantics.
HostTensor castTo(const HostTensor &input, mlir::Type elementType);

// Array operations shared by the folders and the reference evaluator. Their
// operands are assumed valid (the op verifiers check them).

enum class ReduceKind { Sum, Mean, Max, Min, Prod };
HostTensor reduce(const HostTensor &input, llvm::ArrayRef<int64_t> axes,
                  bool keepdims, ReduceKind kind);
HostTensor transpose(const HostTensor &input,
                     llvm::ArrayRef<int64_t> permutation);
HostTensor slice(const HostTensor &input, llvm::ArrayRef<int64_t> offsets,
                 llvm::ArrayRef<int64_t> sizes,
                 llvm::ArrayRef<int64_t> strides);
HostTensor concat(llvm::ArrayRef<const HostTensor *> inputs, int64_t axis);
/// Negative indices count from the end; all indices must be in range.
HostTensor gather(const HostTensor &data, const HostTensor &indices,
                  int64_t axis);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_HOSTTENSOR_H
