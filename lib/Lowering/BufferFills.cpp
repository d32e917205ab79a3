//===- BufferFills.cpp - The fill an op overwrites ------------------------===//

#include "weft/Lowering/BufferFills.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace {

/// `value` with the views that keep every element (reshapes, casts) looked
/// through: the buffer they all name.
Value wholeBuffer(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    if (!isa<memref::CollapseShapeOp, memref::ExpandShapeOp, memref::CastOp>(
            op))
      break;
    value = op->getOperand(0);
  }
  return value;
}

} // namespace

TypedAttr weft::fillConstant(linalg::FillOp fill) {
  TypedAttr value;
  if (matchPattern(fill.getInputs()[0], m_Constant(&value)))
    return value;
  return {};
}

linalg::FillOp weft::constantFillBefore(Operation *user, Value buffer) {
  Value whole = wholeBuffer(buffer);
  // Every view of the buffer, which an op between the fill and `user`
  // could read or write it through.
  llvm::SetVector<Value> views;
  views.insert(whole);
  for (unsigned i = 0; i < views.size(); ++i)
    for (Operation *viewer : views[i].getUsers())
      if (auto view = dyn_cast<ViewLikeOpInterface>(viewer);
          view && view.getViewSource() == views[i])
        views.insert(viewer->getResults().begin(), viewer->getResults().end());
  for (Operation *op = user->getPrevNode(); op; op = op->getPrevNode()) {
    auto fill = dyn_cast<linalg::FillOp>(op);
    if (fill && fill.hasPureBufferSemantics() &&
        wholeBuffer(fill.getOutputs()[0]) == whole)
      return fillConstant(fill) ? fill : linalg::FillOp();
    bool touches = false;
    op->walk([&](Operation *nested) {
      if (!isa<ViewLikeOpInterface>(nested))
        touches |= llvm::any_of(nested->getOperands(), [&](Value operand) {
          return views.contains(operand);
        });
    });
    if (touches)
      return {};
  }
  return {};
}
