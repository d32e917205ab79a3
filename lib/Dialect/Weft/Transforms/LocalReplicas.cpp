//===- LocalReplicas.cpp - Data-parallel replicas that step alone ---------===//
//
// weftc --dp-sync every=K: the replicas of the dp axis each train on their
// own batch between the runtime's parameter averages. Rewriting the
// all-reduces over the axis "as if every replica held this one's data"
// keeps every formula of the step (a mean's all-reduced sum over an
// all-reduced count, gradients scaled for the global batch) and makes it
// the replica's own.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"
#include "weft/Dialect/Weft/Transforms/Sharding.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace weft {
#define GEN_PASS_DEF_WEFTLOCALREPLICAS
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

bool spans(ArrayRef<shard::GridAxis> axes, int64_t axis) {
  return llvm::is_contained(axes, shard::GridAxis(axis));
}

struct LocalReplicasPass
    : public weft::impl::WeftLocalReplicasBase<LocalReplicasPass> {
  using WeftLocalReplicasBase::WeftLocalReplicasBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<Mesh> mesh = Mesh::find(module);
    std::optional<MeshAxis> found =
        mesh ? mesh->axisNamed(axis) : std::optional<MeshAxis>();
    if (!found) {
      module.emitError() << "replicas that step alone need a mesh axis '"
                         << axis << "'";
      return signalPassFailure();
    }
    int64_t index = int64_t(*found), size = mesh->sizes[index];
    SmallVector<shard::AllReduceOp> reductions;
    WalkResult walk = module.walk([&](Operation *op) {
      if (auto reduce = dyn_cast<shard::AllReduceOp>(op)) {
        if (spans(reduce.getGridAxes(), index))
          reductions.push_back(reduce);
        return WalkResult::advance();
      }
      auto collective = dyn_cast<shard::ReduceScatterOp>(op);
      auto gather = dyn_cast<shard::AllGatherOp>(op);
      auto toAll = dyn_cast<shard::AllToAllOp>(op);
      auto shift = dyn_cast<shard::ShiftOp>(op);
      ArrayRef<shard::GridAxis> axes = collective ? collective.getGridAxes()
                                       : gather   ? gather.getGridAxes()
                                       : toAll    ? toAll.getGridAxes()
                                       : shift    ? shift.getGridAxes()
                                                  : ArrayRef<shard::GridAxis>();
      if (spans(axes, index)) {
        op->emitError() << "'" << op->getName() << "' over mesh axis '" << axis
                        << "' shares state between its replicas, which "
                           "step alone between averages (ZeRO shards over "
                           "it: drop --zero)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    for (shard::AllReduceOp reduce : reductions) {
      OpBuilder builder(reduce);
      SmallVector<shard::GridAxis> others;
      for (shard::GridAxis a : reduce.getGridAxes())
        if (a != index)
          others.push_back(a);
      Value value = reduce.getInput();
      if (!others.empty())
        value = shard::AllReduceOp::create(builder, reduce.getLoc(), value,
                                           reduce.getGrid(), others,
                                           reduce.getReduction());
      if (value.getType() != reduce.getType()) {
        reduce.emitError() << "an all-reduce over '" << axis
                           << "' that changes its element type";
        return signalPassFailure();
      }
      if (reduce.getReduction() == shard::ReductionKind::Sum) {
        auto type = cast<RankedTensorType>(value.getType());
        Value count = createScalar(builder, reduce.getLoc(),
                                   type.getElementType(), double(size));
        value = MulOp::create(builder, reduce.getLoc(), value, count);
      } else if (reduce.getReduction() != shard::ReductionKind::Max &&
                 reduce.getReduction() != shard::ReductionKind::Min) {
        reduce.emitError() << "an all-reduce over '" << axis
                           << "' that neither sums nor takes an extremum";
        return signalPassFailure();
      }
      reduce.replaceAllUsesWith(value);
      reduce.erase();
    }
  }
};

} // namespace
