//===- SplitStages.cpp - Assign ops to pipeline stages by layer -----------===//

#include "weft/Dialect/Weft/IR/Flops.h"
#include "weft/Dialect/Weft/IR/Layers.h"
#include "weft/Dialect/Weft/IR/Parameters.h"
#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace weft {
#define GEN_PASS_DEF_WEFTSPLITSTAGES
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// The first layer of each stage after the first, cutting `costs` into
/// `stages` contiguous runs whose largest total is as small as it can be.
SmallVector<int64_t> balancedBoundaries(ArrayRef<int64_t> costs,
                                        int64_t stages) {
  int64_t layers = costs.size();
  SmallVector<int64_t> prefix{0};
  for (int64_t cost : costs)
    prefix.push_back(prefix.back() + cost);
  // best[s][l]: the smallest largest stage cost of layers [0, l) in s
  // stages; cut[s][l]: where the last of them starts.
  constexpr int64_t kInfinity = INT64_MAX / 4;
  std::vector<std::vector<int64_t>> best(
      stages + 1, std::vector<int64_t>(layers + 1, kInfinity));
  std::vector<std::vector<int64_t>> cut = best;
  best[0][0] = 0;
  for (int64_t s = 1; s <= stages; ++s)
    for (int64_t l = s; l <= layers; ++l)
      for (int64_t start = s - 1; start < l; ++start) {
        int64_t cost = std::max(best[s - 1][start], prefix[l] - prefix[start]);
        if (cost < best[s][l]) {
          best[s][l] = cost;
          cut[s][l] = start;
        }
      }
  SmallVector<int64_t> boundaries(stages - 1);
  for (int64_t s = stages, l = layers; s > 1; --s) {
    l = cut[s][l];
    boundaries[s - 2] = l;
  }
  return boundaries;
}

struct WeftSplitStagesPass
    : public weft::impl::WeftSplitStagesBase<WeftSplitStagesPass> {
  using WeftSplitStagesBase::WeftSplitStagesBase;

  void runOnOperation() override {
    if (stages < 1) {
      getOperation().emitError("weft-split-stages: stages must be positive");
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(split(func)))
        return signalPassFailure();
  }

  LogicalResult split(func::FuncOp func) {
    Block &body = func.getBody().front();
    // The layers in the order the forward pass meets them, with their
    // contraction FLOPs (forward and backward ops carry the layer's names).
    std::vector<std::pair<std::string, int64_t>> layerCost;
    llvm::StringMap<int64_t> layerIndex;
    for (Operation &op : body.without_terminator())
      if (std::optional<std::string> layer = numberedLayerOf(op.getLoc())) {
        auto [it, fresh] = layerIndex.try_emplace(*layer, layerCost.size());
        if (fresh)
          layerCost.push_back({*layer, 0});
        layerCost[it->second].second += contractionFlops(&op);
      }
    int64_t layers = layerCost.size();
    int64_t stageCount = stages;
    if (stageCount > std::max<int64_t>(layers, 1))
      return func.emitError() << "weft-split-stages: cannot split " << layers
                              << " layers into " << stageCount << " stages";
    SmallVector<int64_t> cuts(boundaries.begin(), boundaries.end());
    if (!cuts.empty()) {
      if (static_cast<int64_t>(cuts.size()) != stageCount - 1)
        return func.emitError()
               << "weft-split-stages: " << stageCount << " stages need "
               << stageCount - 1 << " boundaries, not " << cuts.size();
      for (auto [i, cut] : llvm::enumerate(cuts)) {
        if (cut >= layers)
          return func.emitError() << "weft-split-stages: stage boundary " << cut
                                  << " is beyond the " << layers << " layers ("
                                  << layerCost.front().first << " .. "
                                  << layerCost.back().first << ")";
        if (cut <= (i ? cuts[i - 1] : 0))
          return func.emitError()
                 << "weft-split-stages: stage boundaries must increase "
                    "from 1 (got "
                 << cut << " after " << (i ? cuts[i - 1] : 0) << ")";
      }
    } else if (stageCount > 1) {
      SmallVector<int64_t> costs;
      for (auto &entry : layerCost)
        costs.push_back(entry.second);
      cuts = balancedBoundaries(costs, stageCount);
    }
    auto stageOfLayer = [&](const std::string &layer) -> int64_t {
      int64_t index = layerIndex.lookup(layer);
      return llvm::count_if(cuts, [&](int64_t cut) { return cut <= index; });
    };

    // An op in a layer takes the layer's stage. Another op takes the
    // latest stage among its operands' producers (the head follows the last
    // layer); one that reads only arguments and such ops (the embedding,
    // the labels' mask) the earliest stage among its users. An optimizer
    // update (what a state feeds) takes the stage of its parameter's first
    // use, and so does what feeds only updates (weight decay, the clipped
    // gradient).
    OpBuilder builder(func.getContext());
    llvm::MapVector<StringRef, llvm::SmallSetVector<int64_t, 2>> paramStages;
    auto argAttr = [&](Value value, StringRef attr) -> StringAttr {
      auto arg = llvm::dyn_cast<BlockArgument>(value);
      if (!arg || arg.getOwner() != &body)
        return nullptr;
      return func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr);
    };
    llvm::DenseMap<Operation *, int64_t> stageOf;
    llvm::SetVector<Operation *> updates;
    for (Operation &op : body.without_terminator()) {
      std::optional<std::string> layer = numberedLayerOf(op.getLoc());
      if (layer)
        stageOf[&op] = stageOfLayer(*layer);
      bool update = llvm::any_of(op.getOperands(), [&](Value operand) {
        return argAttr(operand, WeftDialect::kStateAttrName) ||
               updates.contains(operand.getDefiningOp());
      });
      if (update)
        updates.insert(&op);
      if (layer || update)
        continue;
      for (Value operand : op.getOperands())
        if (Operation *producer = operand.getDefiningOp();
            producer && !producer->hasTrait<OpTrait::ConstantLike>() &&
            stageOf.count(producer))
          stageOf[&op] = std::max(stageOf.lookup(&op), stageOf[producer]);
    }
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      if (stageOf.count(&op) || updates.contains(&op))
        continue;
      std::optional<int64_t> earliest;
      for (Operation *user : op.getUsers())
        if (auto it = stageOf.find(user); it != stageOf.end())
          earliest = std::min(earliest.value_or(it->second), it->second);
      if (earliest)
        stageOf[&op] = *earliest;
    }
    llvm::StringMap<int64_t> paramStage;
    for (Operation &op : body.without_terminator())
      if (auto it = stageOf.find(&op); it != stageOf.end())
        for (Value operand : op.getOperands())
          if (StringAttr param = argAttr(operand, WeftDialect::kParamAttrName))
            paramStage.try_emplace(param.getValue(), it->second);
    for (Operation *op : updates) {
      if (stageOf.count(op))
        continue;
      for (Value operand : op->getOperands()) {
        if (StringAttr state = argAttr(operand, WeftDialect::kStateAttrName))
          stageOf[op] = paramStage.lookup(state.getValue().split(':').second);
        else if (Operation *producer = operand.getDefiningOp();
                 producer && updates.contains(producer))
          stageOf[op] = stageOf.lookup(producer);
        if (stageOf.count(op))
          break;
      }
    }
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      if (updates.contains(&op) || numberedLayerOf(op.getLoc()) ||
          op.use_empty())
        continue;
      std::optional<int64_t> stage;
      bool onlyUpdates = llvm::all_of(op.getUsers(), [&](Operation *user) {
        if (!updates.contains(user) ||
            (stage && *stage != stageOf.lookup(user)))
          return false;
        stage = stageOf.lookup(user);
        return true;
      });
      if (!onlyUpdates)
        continue;
      updates.insert(&op);
      stageOf[&op] = *stage;
    }
    // What is left (unused ops) stays with the op before it.
    int64_t previous = 0;
    for (Operation &op : body.without_terminator()) {
      if (auto it = stageOf.find(&op); it != stageOf.end())
        previous = it->second;
      op.setAttr(WeftDialect::kStageAttrName,
                 builder.getI64IntegerAttr(previous));
    }
    // Frozen parameters have no gradient to sum.
    for (Operation &op : body.without_terminator())
      for (Value operand : op.getOperands())
        if (StringAttr param = argAttr(operand, WeftDialect::kParamAttrName);
            param &&
            isTrainedParameter(
                func, llvm::cast<BlockArgument>(operand).getArgNumber()))
          paramStages[param.getValue()].insert(
              op.getAttrOfType<IntegerAttr>(WeftDialect::kStageAttrName)
                  .getInt());
    // A parameter read in two stages has its gradient summed between them.
    llvm::SetVector<StringRef> tied;
    for (auto &[param, used] : paramStages)
      if (used.size() > 1)
        tied.insert(param);
    SmallVector<Attribute> tiedNames;
    for (StringRef name : tied)
      tiedNames.push_back(builder.getStringAttr(name));
    func->setAttr(
        WeftDialect::kPipelineAttrName,
        builder.getDictionaryAttr(
            {builder.getNamedAttr("stages",
                                  builder.getI64IntegerAttr(stageCount)),
             builder.getNamedAttr("boundaries",
                                  builder.getDenseI64ArrayAttr(cuts)),
             builder.getNamedAttr("tied", builder.getArrayAttr(tiedNames))}));
    return success();
  }
};

} // namespace
