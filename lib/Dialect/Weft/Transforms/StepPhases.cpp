//===- StepPhases.cpp - How often an op of a step's loops runs ------------===//

#include "weft/Dialect/Weft/Transforms/StepPhases.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <functional>

using namespace mlir;

int64_t weft::runsPerCall(Operation *op) {
  int64_t runs = 1;
  for (Operation *parent = op->getParentOp();
       parent && !isa<FunctionOpInterface>(parent);
       op = parent, parent = parent->getParentOp()) {
    if (auto cases = dyn_cast<scf::IndexSwitchOp>(parent)) {
      auto counts = cases->getAttrOfType<DenseI64ArrayAttr>(
          WeftDialect::kCaseRunsAttrName);
      unsigned region = op->getParentRegion()->getRegionNumber();
      if (!counts || region == 0)
        continue;
      runs *= counts[region - 1];
      // The schedule loop around the switch is counted by the case.
      if (isa_and_nonnull<scf::ForOp>(parent->getParentOp()))
        parent = parent->getParentOp();
      continue;
    }
    if (auto loop = dyn_cast<scf::ForOp>(parent)) {
      std::optional<int64_t> lower = getConstantIntValue(loop.getLowerBound()),
                             upper = getConstantIntValue(loop.getUpperBound()),
                             step = getConstantIntValue(loop.getStep());
      if (lower && upper && step && *step > 0)
        runs *= std::max<int64_t>(0, (*upper - *lower + *step - 1) / *step);
    }
  }
  return runs;
}

llvm::StringMap<int64_t> weft::runsPerEntryCall(ModuleOp module) {
  // A call in the micro-batch loop runs once per micro-batch, one in a case
  // of a pipeline rank's schedule once per instruction of that case, a
  // stage's layer calls once per run of the stage.
  llvm::StringMap<SmallVector<std::pair<StringRef, int64_t>>> callers;
  module.walk([&](func::CallOp call) {
    callers[call.getCallee()].push_back(
        {call->getParentOfType<func::FuncOp>().getSymName(),
         runsPerCall(call)});
  });
  llvm::StringMap<int64_t> runs;
  std::function<int64_t(StringRef, unsigned)> runsOf = [&](StringRef function,
                                                           unsigned depth) {
    if (auto it = runs.find(function); it != runs.end())
      return it->second;
    int64_t total = 0;
    for (auto [caller, times] : callers.lookup(function))
      total += times * (depth < 64 ? runsOf(caller, depth + 1) : 1);
    return runs[function] = std::max<int64_t>(total, 1);
  };
  for (auto func : module.getOps<func::FuncOp>())
    runsOf(func.getSymName(), 0);
  return runs;
}
