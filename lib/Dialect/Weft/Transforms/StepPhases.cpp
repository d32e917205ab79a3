//===- StepPhases.cpp - How often an op of a step's loops runs ------------===//

#include "weft/Dialect/Weft/Transforms/StepPhases.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

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
