//===- PropagateSharding.cpp - Shardings to a fixpoint, with priorities ---===//
//
// Each tensor dim holds a DimSharding and the priority of the annotation it
// came from. An op's sharding rule ties dims together through factors; a
// factor takes the strongest sharding found on any of its dims and hands it
// to the dims that have none (or a weaker one). Rounds run from the
// strongest priority to the weakest, so a user's annotation decides before
// a preset, and a preset before anything inferred from it.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"
#include "weft/Dialect/Weft/Transforms/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace weft {
#define GEN_PASS_DEF_WEFTPROPAGATESHARDING
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

constexpr int64_t kUnset = INT64_MAX;

struct DimState {
  DimSharding sharding;
  int64_t priority = kUnset;
};

/// A dim of a tensor tied to a factor: the blocks the factor forms there.
struct FactorUse {
  Value value;
  int64_t dim;
  int64_t blocks;
};

class Propagation {
public:
  Propagation(const Mesh &mesh, bool padUneven)
      : mesh(mesh), padUneven(padUneven) {}

  SmallVector<DimState> &stateOf(Value value) {
    auto [it, inserted] = states.try_emplace(value);
    if (inserted)
      it->second.resize(
          llvm::cast<RankedTensorType>(value.getType()).getRank());
    return it->second;
  }

  /// Seeds `value` with an annotation; fails (with an error at `where`) on
  /// a dim that does not divide.
  LogicalResult seed(Value value, const TensorSharding &sharding,
                     int64_t priority, ArrayRef<int64_t> pinned,
                     Operation *where) {
    SmallVector<DimState> &state = stateOf(value);
    for (auto [dim, dimSharding] : llvm::enumerate(sharding.dims)) {
      if (dim >= state.size())
        continue;
      // A user's annotation also pins the dims it keeps whole; a preset's
      // pins the ones it lists.
      if (!dimSharding.isSplit()) {
        if ((priority == 0 || llvm::is_contained(pinned, int64_t(dim))) &&
            state[dim].priority > priority) {
          state[dim] = {dimSharding, priority};
          maxPriority = std::max(maxPriority, priority);
        }
        continue;
      }
      if (failed(checkDivisible(value, dim, dimSharding, where)))
        return failure();
      if (state[dim].priority <= priority)
        continue;
      state[dim] = {dimSharding, priority};
      maxPriority = std::max(maxPriority, priority);
    }
    return success();
  }

  LogicalResult run(func::FuncOp func) {
    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) {
      if (op != func && !isa<shard::ShardingOp, shard::ShardOp>(op))
        ops.push_back(op);
    });
    for (int64_t round = 0; round <= maxPriority; ++round) {
      bool changed = true;
      // Each change sets a dim that was unset or weaker, so this ends; the
      // bound only guards against a rule bug.
      for (int iteration = 0; changed && iteration < 64; ++iteration) {
        changed = false;
        for (Operation *op : ops)
          if (failed(propagate(op, round, changed)))
            return failure();
        for (Operation *op : llvm::reverse(ops))
          if (failed(propagate(op, round, changed)))
            return failure();
        for (auto [result, argument] : ties)
          tie(result, argument, round, changed);
      }
    }
    return success();
  }

  /// A training step's result `param:<name>` (or `state:<kind>:<name>`)
  /// replaces its argument: the two must be split alike, so that the
  /// runner can feed one back as the other.
  void collectTies(func::FuncOp func) {
    auto names = func->getAttrOfType<ArrayAttr>(WeftDialect::kOutputsAttrName);
    auto ret = dyn_cast<func::ReturnOp>(func.getBody().front().getTerminator());
    if (!names || !ret || names.size() != ret.getNumOperands())
      return;
    for (auto [index, attr] : llvm::enumerate(names)) {
      StringRef name = llvm::cast<StringAttr>(attr).getValue();
      StringRef argAttr;
      if (name.consume_front("param:"))
        argAttr = WeftDialect::kParamAttrName;
      else if (name.consume_front("state:"))
        argAttr = WeftDialect::kStateAttrName;
      else
        continue;
      for (BlockArgument arg : func.getArguments()) {
        auto argName =
            func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), argAttr);
        if (argName && argName.getValue() == name &&
            arg.getType() == ret.getOperand(index).getType())
          ties.emplace_back(ret.getOperand(index), arg);
      }
    }
  }

  void tie(Value result, Value argument, int64_t round, bool &changed) {
    SmallVector<DimState> &a = stateOf(result), &b = stateOf(argument);
    for (size_t dim = 0; dim < a.size(); ++dim) {
      // The stronger side wins; on a tie the argument does (the result is
      // what the runner feeds back into it).
      DimState &strong = a[dim].priority < b[dim].priority ? a[dim] : b[dim];
      DimState &weak = &strong == &a[dim] ? b[dim] : a[dim];
      if (strong.priority > round || strong.priority == kUnset ||
          weak.priority < strong.priority ||
          (weak.priority == strong.priority &&
           (&weak == &b[dim] || weak.sharding == strong.sharding)))
        continue;
      SmallVector<DimState> &weakTensor = &weak == &a[dim] ? a : b;
      bool axisTaken = false;
      for (size_t other = 0; other < weakTensor.size(); ++other)
        if (other != dim && weakTensor[other].priority != kUnset)
          for (MeshAxis axis : strong.sharding.axes)
            axisTaken |=
                llvm::is_contained(weakTensor[other].sharding.axes, axis);
      if (axisTaken)
        continue;
      weak = strong;
      changed = true;
    }
  }

  TensorSharding shardingOf(Value value) {
    TensorSharding sharding;
    for (DimState &dim : stateOf(value))
      sharding.dims.push_back(dim.sharding);
    return sharding;
  }

private:
  /// A split dim must divide by its mesh axes, or (with pad-uneven) be
  /// split over one axis into equal padded shards.
  LogicalResult checkDivisible(Value value, int64_t dim,
                               const DimSharding &sharding, Operation *where) {
    int64_t size =
        llvm::cast<RankedTensorType>(value.getType()).getDimSize(dim);
    if (mesh.isZigzag(sharding.axes))
      return checkZigzag(value, dim, size, sharding, where);
    int64_t parts = mesh.size(sharding.axes) * sharding.blocks;
    if (size % parts == 0)
      return success();
    if (padUneven && sharding.axes.size() == 1 && sharding.blocks == 1)
      return success();
    std::string blocks =
        sharding.blocks > 1
            ? " in " + std::to_string(sharding.blocks) + " interleaved parts"
            : "";
    InFlightDiagnostic diag = where->emitError()
                              << "cannot split dim " << dim << " (size " << size
                              << ") of " << describeTensor(value) << blocks
                              << " over mesh axis '"
                              << mesh.describe(sharding.axes) << "' (size "
                              << mesh.size(sharding.axes) << "): not divisible";
    if (padUneven)
      diag << ", and --pad-uneven pads only a dim split over one mesh axis";
    else
      diag << " (--pad-uneven pads it)";
    return diag;
  }

  /// The ring's head/tail pairs cut a dim into two chunks per rank of the
  /// context axis alone.
  LogicalResult checkZigzag(Value value, int64_t dim, int64_t size,
                            const DimSharding &sharding, Operation *where) {
    int64_t parts = mesh.size(sharding.axes);
    std::string what = "cannot split dim " + std::to_string(dim) + " (size " +
                       std::to_string(size) + ") of " + describeTensor(value) +
                       " over mesh axis '" + mesh.describe(sharding.axes) + "'";
    if (sharding.axes.size() > 1 || sharding.blocks > 1)
      return where->emitError()
             << what << ": the ring's head/tail chunk pairs split a dim over '"
             << mesh.names[*mesh.contextAxis]
             << "' alone (--cp-attention ring-contiguous splits it in one "
                "chunk per rank)";
    if (size % (2 * parts) == 0)
      return success();
    return where->emitError()
           << what << " (size " << parts
           << ") in head/tail chunk pairs: " << size
           << " is not divisible by 2 x " << parts
           << " (--cp-attention ring-contiguous cuts one chunk per rank)";
  }

  /// Padding a factor's dims is only sound when they all have the same
  /// size: a reshape that turns a padded dim into dims of other sizes
  /// would interleave real and padding elements.
  LogicalResult checkPaddable(Operation *op, ArrayRef<FactorUse> uses,
                              const DimSharding &sharding) {
    int64_t parts = mesh.size(sharding.axes) * sharding.blocks;
    bool padded = false;
    std::optional<int64_t> common;
    bool uniform = true;
    for (const FactorUse &use : uses) {
      int64_t size =
          llvm::cast<RankedTensorType>(use.value.getType()).getDimSize(use.dim);
      padded |= size % (parts * use.blocks) != 0;
      if (common && *common != size / use.blocks)
        uniform = false;
      common = size / use.blocks;
    }
    if (!padded || uniform)
      return success();
    return op->emitError()
           << "cannot pad the uneven split over mesh axis '"
           << mesh.describe(sharding.axes)
           << "' through this op: it maps the split dim to dims of other "
              "sizes";
  }

  LogicalResult propagate(Operation *op, int64_t round, bool &changed) {
    std::optional<OpShardingRule> rule = getShardingRule(op);
    if (!rule)
      return success();
    SmallVector<SmallVector<FactorUse>> uses(rule->kinds.size());
    for (auto [index, dims] : llvm::enumerate(rule->operandFactors))
      for (auto [dim, factor] : llvm::enumerate(dims))
        if (factor >= 0)
          uses[factor].push_back({op->getOperand(index), (int64_t)dim,
                                  rule->operandBlocks[index][dim]});
    for (auto [index, dims] : llvm::enumerate(rule->resultFactors))
      for (auto [dim, factor] : llvm::enumerate(dims))
        if (factor >= 0)
          uses[factor].push_back({op->getResult(index), (int64_t)dim,
                                  rule->resultBlocks[index][dim]});

    for (auto [factor, factorUses] : llvm::enumerate(uses)) {
      FactorKind kind = rule->kinds[factor];
      if (kind == FactorKind::Whole ||
          (kind == FactorKind::Context && !mesh.contextAxis))
        continue;
      // The strongest sharding of this factor, in factor terms (blocks
      // divided by what the dim itself contributes).
      std::optional<DimSharding> best;
      int64_t bestPriority = kUnset;
      for (const FactorUse &use : factorUses) {
        DimState &state = stateOf(use.value)[use.dim];
        if (!state.sharding.isSplit() || state.priority > round ||
            state.priority >= bestPriority ||
            state.sharding.blocks % use.blocks != 0)
          continue;
        // Attention's sequence splits over the context axis alone.
        if (kind == FactorKind::Context &&
            !(state.sharding.axes.size() == 1 &&
              state.sharding.axes[0] == *mesh.contextAxis))
          continue;
        best = DimSharding{state.sharding.axes,
                           state.sharding.blocks / use.blocks};
        bestPriority = state.priority;
      }
      if (!best)
        continue;
      if (padUneven && failed(checkPaddable(op, factorUses, *best)))
        return failure();
      for (const FactorUse &use : factorUses) {
        SmallVector<DimState> &state = stateOf(use.value);
        if (state[use.dim].priority <= bestPriority)
          continue;
        DimSharding target{best->axes, best->blocks * use.blocks};
        // A mesh axis splits at most one dim of a tensor: the dim takes the
        // axes up to the first that another dim holds (the batch split
        // over dp and ep keeps dp where the experts' dim holds ep).
        auto taken = [&](MeshAxis axis) {
          for (auto [dim, other] : llvm::enumerate(state))
            if ((int64_t)dim != use.dim && other.priority != kUnset &&
                llvm::is_contained(other.sharding.axes, axis))
              return true;
          return false;
        };
        target.axes.erase(llvm::find_if(target.axes, taken), target.axes.end());
        if (target.axes.empty())
          continue;
        if (failed(checkDivisible(use.value, use.dim, target, op)))
          return failure();
        state[use.dim] = {target, bestPriority};
        changed = true;
      }
    }
    return success();
  }

  const Mesh &mesh;
  bool padUneven;
  SmallVector<std::pair<Value, Value>> ties;
  llvm::DenseMap<Value, SmallVector<DimState>> states;
  int64_t maxPriority = 0;
};

struct WeftPropagateShardingPass
    : public weft::impl::WeftPropagateShardingBase<WeftPropagateShardingPass> {
  using WeftPropagateShardingBase::WeftPropagateShardingBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<Mesh> mesh = Mesh::find(module);
    if (!mesh)
      return; // Nothing to propagate without a mesh.
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(runOnFunction(func, *mesh)))
        return signalPassFailure();
  }

  LogicalResult runOnFunction(func::FuncOp func, const Mesh &mesh) {
    Propagation propagation(mesh, padUneven);
    FailureOr<SmallVector<Annotation>> annotations =
        readAnnotations(func, mesh);
    if (failed(annotations))
      return failure();
    for (const Annotation &annotation : *annotations)
      if (failed(propagation.seed(annotation.value, annotation.sharding,
                                  annotation.priority, annotation.pinnedDims,
                                  annotation.op)))
        return failure();
    // The annotations are folded into the state; drop them so that every
    // use sees the annotated value itself.
    dropAnnotations(*annotations);
    propagation.collectTies(func);
    if (failed(propagation.run(func)))
      return failure();

    auto annotate = [&](OpBuilder &builder, Value value) {
      if (!llvm::isa<RankedTensorType>(value.getType()))
        return;
      TensorSharding sharding = propagation.shardingOf(value);
      if (sharding.isReplicated())
        return;
      Location loc = value.getLoc();
      shard::ShardingOp shardingOp =
          createShardingOp(builder, loc, sharding, mesh);
      auto annotation = shard::ShardOp::create(builder, loc, value, shardingOp);
      value.replaceAllUsesExcept(annotation.getResult(), annotation);
    };
    OpBuilder builder = OpBuilder::atBlockBegin(&func.getBody().front());
    for (BlockArgument arg : func.getArguments())
      annotate(builder, arg);
    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) {
      if (op != func && op->getNumResults() > 0)
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      builder.setInsertionPointAfter(op);
      for (Value result : op->getResults())
        annotate(builder, result);
    }
    return success();
  }
};

} // namespace
