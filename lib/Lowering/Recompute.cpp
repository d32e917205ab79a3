//===- Recompute.cpp - Recompute forward activations in the backward pass -===//

#include "weft/Dialect/Weft/IR/Layers.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Lowering/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseMap.h"

namespace weft {
#define GEN_PASS_DEF_WEFTRECOMPUTE
#include "weft/Lowering/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// The layer an op belongs to ("" outside layers).
std::string layerOf(Operation *op) {
  return weft::numberedLayerOf(op->getLoc()).value_or("");
}

/// Elementwise work and views: cheap to redo, and what holds most of the
/// activation memory between a layer's contractions.
bool isCheap(Operation *op) {
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    return linalgOp.getNumReductionLoops() == 0;
  return isa<tensor::EmptyOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             tensor::ExtractSliceOp, tensor::CastOp>(op);
}

class Recomputer {
public:
  Recomputer(func::FuncOp func, bool full) : func(func), full(full) {}

  void run() {
    Block &body = func.getBody().front();
    Operation *terminator = body.getTerminator();
    // Everything the loss depends on, through operands and through values
    // that regions (row kernels) read from above.
    llvm::SetVector<Operation *> forward;
    SmallVector<Value> worklist{terminator->getOperand(0)};
    while (!worklist.empty()) {
      Operation *def = worklist.pop_back_val().getDefiningOp();
      if (!def || def->getBlock() != &body || !forward.insert(def))
        continue;
      llvm::append_range(worklist, def->getOperands());
      llvm::SetVector<Value> captured;
      getUsedValuesDefinedAbove(def->getRegions(), captured);
      llvm::append_range(worklist, captured);
    }
    for (Operation *op : forward)
      if (isRecomputable(op, forward))
        recomputable.insert(op);

    SmallVector<Operation *> backward;
    for (Operation &op : body.without_terminator())
      if (!forward.contains(&op))
        backward.push_back(&op);
    for (Operation *user : backward)
      for (OpOperand &operand : user->getOpOperands())
        if (Value copy = recompute(operand.get(), user))
          operand.set(copy);
  }

private:
  bool isRecomputable(Operation *op,
                      const llvm::SetVector<Operation *> &forward) {
    if (op->getNumResults() == 0 || !isMemoryEffectFree(op) ||
        op->hasTrait<OpTrait::ConstantLike>())
      return false;
    if (!full)
      return isCheap(op);
    std::string layer = layerOf(op);
    if (layer.empty())
      return false;
    // A layer's outputs (what later layers read) are its checkpoints.
    for (Operation *user : op->getUsers())
      if (forward.contains(user) && layerOf(user) != layer)
        return false;
    return true;
  }

  /// A copy of `value` computed right before `user`, or null when `value`
  /// is kept (or a copy could not read what it needs there).
  Value recompute(Value value, Operation *user) {
    Operation *def = value.getDefiningOp();
    if (!def || !recomputable.contains(def))
      return Value();
    auto it = copies.find(value);
    if (it != copies.end())
      return it->second;
    IRMapping mapping;
    for (Value operand : def->getOperands()) {
      Value source = operand;
      if (Value copy = recompute(operand, user))
        source = copy;
      else if (Operation *producer = operand.getDefiningOp();
               producer && !producer->isBeforeInBlock(user))
        return Value();
      mapping.map(operand, source);
    }
    OpBuilder builder(user);
    Operation *clone = builder.clone(*def, mapping);
    for (auto [original, copy] :
         llvm::zip(def->getResults(), clone->getResults()))
      copies[original] = copy;
    return copies.lookup(value);
  }

  func::FuncOp func;
  bool full;
  llvm::DenseSet<Operation *> recomputable;
  llvm::DenseMap<Value, Value> copies;
};

struct WeftRecomputePass
    : public weft::impl::WeftRecomputeBase<WeftRecomputePass> {
  using WeftRecomputeBase::WeftRecomputeBase;

  void runOnOperation() override {
    if (mode != "none" && mode != "selective" && mode != "full") {
      getOperation().emitError()
          << "weft-recompute: unknown mode '" << mode
          << "' (expected none, selective or full)";
      return signalPassFailure();
    }
    if (mode == "none")
      return;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      auto outputs = func->getAttrOfType<ArrayAttr>(
          weft::WeftDialect::kOutputsAttrName);
      bool lossFirst =
          func.getSymName() == lossFunction ||
          (outputs && !outputs.empty() &&
           llvm::cast<StringAttr>(outputs[0]).getValue() == "loss");
      if (func.isExternal() || !lossFirst || func.getNumResults() == 0)
        continue;
      Recomputer(func, mode == "full").run();
    }
  }
};

} // namespace
