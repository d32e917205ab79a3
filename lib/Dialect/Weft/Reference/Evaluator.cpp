//===- Evaluator.cpp - Runs a function through its ops' semantics ---------===//
//
// Each op's semantics is its EvaluableOpInterface (Dialect/Weft/IR/
// Semantics.cpp); this file only walks a function's body.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/Reference/Evaluator.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace weft {

FailureOr<SmallVector<HostTensor>>
evaluateFunction(func::FuncOp func, ArrayRef<HostTensor> arguments) {
  if (!func.getBody().hasOneBlock())
    return func.emitError("the reference evaluator needs a single-block body");
  if (arguments.size() != func.getNumArguments())
    return func.emitError("expected ")
           << func.getNumArguments() << " arguments, got " << arguments.size();
  llvm::DenseMap<Value, HostTensor> values;
  for (auto [arg, value] : llvm::zip(func.getArguments(), arguments)) {
    if (llvm::cast<RankedTensorType>(arg.getType()).getShape() !=
        ArrayRef<int64_t>(value.shape))
      return func.emitError("argument #")
             << arg.getArgNumber() << " has the wrong shape";
    values[arg] = value;
  }
  auto valuesOf = [&](ValueRange range) {
    SmallVector<const HostTensor *> operands;
    for (Value v : range)
      operands.push_back(&values.find(v)->second);
    return operands;
  };
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      SmallVector<HostTensor> results;
      for (const HostTensor *result : valuesOf(ret.getOperands()))
        results.push_back(*result);
      return results;
    }
    auto evaluable = dyn_cast<EvaluableOpInterface>(op);
    if (!evaluable)
      return op.emitError("the reference evaluator does not support '")
             << op.getName() << "'";
    SmallVector<HostTensor> results;
    if (failed(evaluable.evaluate(valuesOf(op.getOperands()), results)))
      return failure();
    if (results.size() != op.getNumResults())
      return op.emitError("the reference semantics gave ")
             << results.size() << " results for " << op.getNumResults();
    for (auto [result, value] : llvm::zip(op.getResults(), results)) {
      if (llvm::cast<RankedTensorType>(result.getType()).getShape() !=
          ArrayRef<int64_t>(value.shape))
        return op.emitError("the reference semantics gave result #")
               << result.getResultNumber() << " the wrong shape";
      values[result] = std::move(value);
    }
  }
  return func.emitError("the reference evaluator needs a func.return");
}

} // namespace weft
