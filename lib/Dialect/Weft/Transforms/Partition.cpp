//===- Partition.cpp - Per-rank code with explicit collectives ------------===//
//
// Every value has a desired sharding (its annotation, else replicated) and,
// once rewritten, an actual one. For each op the partitioner picks how to
// split its factors (from its results' desired shardings or from its
// operands' actual ones, whichever moves fewer bytes), reshards the operands
// to match, and emits the op on local shapes. A contraction over a split
// factor leaves a partial sum; it is reduced only where a user needs the
// value whole, and straight into a split (reduce-scatter) when the user
// wants that. Reshards of one value to one sharding are emitted once.
//
//===----------------------------------------------------------------------===//

#include "RingAttention.h"

#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"
#include "weft/Dialect/Weft/Transforms/Sharding.h"
#include "weft/runtime/ShardLayout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"

namespace weft {
#define GEN_PASS_DEF_WEFTPARTITION
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

RankedTensorType withShape(RankedTensorType type, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, type.getElementType());
}

int64_t bytesOf(RankedTensorType type) {
  return type.getNumElements() *
         std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

/// One collective (or local slice) of a reshard.
struct Step {
  enum Kind { AllReduce, ReduceScatter, AllGather, AllToAll, AllSlice } kind;
  SmallVector<MeshAxis> axes;
  int64_t dim = 0;       // scatter/gather/slice dim; all_to_all: split dim
  int64_t concatDim = 0; // all_to_all only
};

bool isPrefix(ArrayRef<MeshAxis> prefix, ArrayRef<MeshAxis> full) {
  return prefix.size() <= full.size() &&
         prefix == full.take_front(prefix.size());
}

/// The dim of `to` that takes `axis` next (cur's axes there are a prefix
/// of to's and `axis` follows), if any.
std::optional<int64_t> dimTakingNext(const TensorSharding &cur,
                                     const TensorSharding &to, MeshAxis axis) {
  for (auto [dim, target] : llvm::enumerate(to.dims)) {
    const DimSharding &now = cur.dims[dim];
    if (target.blocks == 1 && isPrefix(now.axes, target.axes) &&
        now.axes.size() < target.axes.size() &&
        target.axes[now.axes.size()] == axis)
      return dim;
  }
  return std::nullopt;
}

/// The collectives that turn `from` into `to`, or failure for a change
/// Weft cannot express (an interleaved dim that would move).
FailureOr<SmallVector<Step>> planReshard(TensorSharding cur,
                                         const TensorSharding &to) {
  SmallVector<Step> steps;
  SmallVector<MeshAxis> reduceAll, kept;
  for (MeshAxis axis : cur.partial) {
    // A partial sum the target keeps partial (a linear op carries it).
    if (llvm::is_contained(to.partial, axis)) {
      kept.push_back(axis);
      continue;
    }
    if (std::optional<int64_t> dim = dimTakingNext(cur, to, axis)) {
      steps.push_back({Step::ReduceScatter, {axis}, *dim});
      cur.dims[*dim].axes.push_back(axis);
      cur.dims[*dim].blocks = 1;
    } else {
      reduceAll.push_back(axis);
    }
  }
  if (!reduceAll.empty())
    steps.push_back({Step::AllReduce, reduceAll});
  cur.partial = kept;
  for (int64_t dim = 0; dim < static_cast<int64_t>(cur.dims.size()); ++dim) {
    DimSharding &now = cur.dims[dim];
    const DimSharding &target = to.dims[dim];
    while (now.isSplit() && !(isPrefix(now.axes, target.axes) &&
                              (now.blocks == target.blocks))) {
      if (now.blocks > 1)
        return failure();
      MeshAxis axis = now.axes.back();
      now.axes.pop_back();
      if (std::optional<int64_t> other = dimTakingNext(cur, to, axis);
          other && *other != dim) {
        steps.push_back({Step::AllToAll, {axis}, *other, dim});
        cur.dims[*other].axes.push_back(axis);
      } else {
        steps.push_back({Step::AllGather, {axis}, dim});
      }
    }
  }
  for (int64_t dim = 0; dim < static_cast<int64_t>(cur.dims.size()); ++dim) {
    DimSharding &now = cur.dims[dim];
    const DimSharding &target = to.dims[dim];
    if (now.axes.size() < target.axes.size() && target.blocks > 1)
      return failure();
    while (now.axes.size() < target.axes.size()) {
      MeshAxis axis = target.axes[now.axes.size()];
      steps.push_back({Step::AllSlice, {axis}, dim});
      now.axes.push_back(axis);
    }
    now.blocks = target.blocks;
  }
  return steps;
}

/// Bytes a rank moves for `steps`, starting from a local tensor of `type`.
int64_t costOf(ArrayRef<Step> steps, RankedTensorType type, const Mesh &mesh) {
  int64_t cost = 0;
  SmallVector<int64_t> shape(type.getShape());
  for (const Step &step : steps) {
    int64_t bytes = bytesOf(withShape(type, shape));
    int64_t parts = mesh.size(step.axes);
    switch (step.kind) {
    case Step::AllReduce:
      cost += 2 * bytes;
      break;
    case Step::ReduceScatter:
      cost += bytes;
      shape[step.dim] /= parts;
      break;
    case Step::AllGather:
      cost += bytes * parts;
      shape[step.dim] *= parts;
      break;
    case Step::AllToAll:
      cost += bytes;
      shape[step.dim] /= parts;
      shape[step.concatDim] *= parts;
      break;
    case Step::AllSlice:
      shape[step.dim] /= parts;
      break;
    }
  }
  return cost;
}

struct Local {
  Value value;
  TensorSharding sharding;
};

/// False when splitting reduction `factor` of `op` into `parts` pads one of
/// its dims and no parameter (zero-padded in the weights file) takes part.
bool sumsOverPaddingSafely(Operation *op, const OpShardingRule &rule,
                           int64_t factor, int64_t parts) {
  bool padded = false, weight = false;
  auto func = op->getParentOfType<func::FuncOp>();
  for (auto [index, operand] : llvm::enumerate(op->getOperands()))
    for (auto [dim, f] : llvm::enumerate(rule.operandFactors[index])) {
      if (f != factor)
        continue;
      padded |= tensorTypeOf(operand).getDimSize(dim) % parts != 0;
      auto arg = llvm::dyn_cast<BlockArgument>(operand);
      weight |=
          arg && func &&
          func.getArgAttr(arg.getArgNumber(), WeftDialect::kParamAttrName);
    }
  return !padded || weight;
}

/// Whether `cast` widens floats (bf16 to f32): exact, so a partial sum may
/// be reduced after it, in the wider type.
bool widensFloat(CastOp cast) {
  auto from =
      llvm::dyn_cast<FloatType>(tensorTypeOf(cast.getInput()).getElementType());
  auto to =
      llvm::dyn_cast<FloatType>(tensorTypeOf(cast.getResult()).getElementType());
  return from && to && from.getWidth() < to.getWidth();
}

/// A choice of how to split an op's factors, with what it implies.
struct OpPlan {
  SmallVector<std::optional<DimSharding>> factors;
  SmallVector<TensorSharding> operands;
  SmallVector<TensorSharding> results;
  int64_t cost = 0;
};

class Partitioner {
public:
  Partitioner(const Mesh &mesh, func::FuncOp func)
      : mesh(mesh), func(func), builder(func.getContext()) {}

  LogicalResult run();

private:
  TensorSharding desiredOf(Value global) {
    auto it = desired.find(global);
    if (it != desired.end())
      return it->second;
    return TensorSharding::replicated(tensorTypeOf(global).getRank());
  }

  FailureOr<Value> reshard(Value global, const TensorSharding &to,
                           Operation *user);
  Value emitStep(Value value, const Step &step, Location loc,
                 ArrayRef<int64_t> globalShape, TensorSharding &cur);
  Value padTo(Value value, int64_t dim, int64_t size, Location loc);
  Value truncateTo(Value value, int64_t dim, int64_t size, Location loc);
  Value zigzagOrder(Value value, int64_t dim, bool toRanks, Location loc);
  OpPlan planOp(Operation *op, const OpShardingRule &rule, bool resultsFirst);
  std::optional<OpPlan> planPartialPassThrough(Operation *op);
  LogicalResult partitionOp(Operation *op);
  LogicalResult partitionLinearWithSplitBias(LinearOp op, const OpPlan &plan,
                                             ArrayRef<Value> operands);
  Value firstRowTensor(ArrayRef<MeshAxis> axes, int64_t rows, Type indexType,
                       Location loc);
  LogicalResult partitionVocabGather(GatherOp op, const OpPlan &plan,
                                     ArrayRef<Value> operands);
  LogicalResult partitionVocabScatter(ScatterAddOp op, const OpPlan &plan,
                                      ArrayRef<Value> operands);
  LogicalResult partitionRingAttention(Operation *op, const OpPlan &plan,
                                       ArrayRef<Value> operands);
  LogicalResult checkContextHeads(Operation *op, const OpShardingRule &rule);
  void warnIfContextGathered(Operation *op, const OpShardingRule &rule);
  LogicalResult partitionReturn(func::ReturnOp op);
  bool isContextAxis(ArrayRef<MeshAxis> axes) const {
    return mesh.contextAxis && axes.size() == 1 && axes[0] == *mesh.contextAxis;
  }
  /// Whether a Context factor of `op` is split over the context axis in an
  /// operand or in a result's desired sharding.
  bool contextSplitReaches(Operation *op, const OpShardingRule &rule) {
    auto splitsContext = [&](const TensorSharding &sharding,
                             ArrayRef<int64_t> factors) {
      for (auto [dim, factor] : llvm::enumerate(factors))
        if (factor >= 0 && rule.kinds[factor] == FactorKind::Context &&
            llvm::is_contained(sharding.dims[dim].axes, *mesh.contextAxis))
          return true;
      return false;
    };
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      if (splitsContext(locals.at(operand).sharding,
                        rule.operandFactors[index]))
        return true;
    for (auto [index, result] : llvm::enumerate(op->getResults()))
      if (splitsContext(desiredOf(result), rule.resultFactors[index]))
        return true;
    return false;
  }
  SmallVector<NamedAttribute> shardingAttrs(const TensorSharding &sharding,
                                            RankedTensorType globalType);

  const Mesh &mesh;
  func::FuncOp func;
  OpBuilder builder;
  llvm::DenseMap<Value, TensorSharding> desired;
  llvm::DenseMap<Value, Local> locals;
  /// Reshards already emitted: (global value, target) -> local value.
  SmallVector<std::tuple<Value, TensorSharding, Value>> reshards;
};

/// Pads `value` with zeros along `dim` up to `size`.
Value Partitioner::padTo(Value value, int64_t dim, int64_t size, Location loc) {
  RankedTensorType type = tensorTypeOf(value);
  if (type.getDimSize(dim) == size)
    return value;
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = size - shape[dim];
  Value zeros = createSplat(builder, loc, withShape(type, shape), 0);
  return ConcatOp::create(builder, loc, ValueRange{value, zeros},
                          builder.getI64IntegerAttr(dim));
}

/// The first `size` elements of `value` along `dim`.
Value Partitioner::truncateTo(Value value, int64_t dim, int64_t size,
                              Location loc) {
  RankedTensorType type = tensorTypeOf(value);
  if (type.getDimSize(dim) == size)
    return value;
  SmallVector<int64_t> offsets(type.getRank(), 0), strides(type.getRank(), 1);
  SmallVector<int64_t> sizes(type.getShape());
  sizes[dim] = size;
  return SliceOp::create(builder, loc, value, offsets, sizes, strides);
}

/// Reorders the 2n chunks of whole dim `dim` between the sequence's order
/// and the ranks' order under the ring's head/tail pairs (rank r's two
/// chunks next to each other, rank by rank, as a contiguous collective over
/// the context axis splits or concatenates them); `toRanks` picks the way.
Value Partitioner::zigzagOrder(Value value, int64_t dim, bool toRanks,
                               Location loc) {
  int64_t parts = mesh.sizes[*mesh.contextAxis];
  RankedTensorType type = tensorTypeOf(value);
  int64_t chunk = type.getDimSize(dim) / (2 * parts);
  // ranksOrder[i]: the sequence chunk at position i in the ranks' order.
  SmallVector<int64_t> ranksOrder;
  for (int64_t position = 0; position < parts; ++position)
    for (int64_t half = 0; half < 2; ++half)
      ranksOrder.push_back(runtime::zigzagChunk(position, half, parts));
  SmallVector<int64_t> order(2 * parts);
  for (auto [index, sequenceChunk] : llvm::enumerate(ranksOrder)) {
    if (toRanks)
      order[index] = sequenceChunk;
    else
      order[sequenceChunk] = index;
  }
  SmallVector<Value> pieces;
  SmallVector<int64_t> offsets(type.getRank(), 0), strides(type.getRank(), 1);
  SmallVector<int64_t> sizes(type.getShape());
  sizes[dim] = chunk;
  for (int64_t source : order) {
    offsets[dim] = source * chunk;
    pieces.push_back(
        SliceOp::create(builder, loc, value, offsets, sizes, strides));
  }
  return ConcatOp::create(builder, loc, pieces, builder.getI64IntegerAttr(dim));
}

/// Emits one step. `cur` is the sharding `value` has, updated to the one
/// the result has; `globalShape` is the whole tensor's, for uneven splits
/// (pad-uneven): whole dims hold exactly the global size, split ones
/// ceil(size / parts) with padding at the end.
Value Partitioner::emitStep(Value value, const Step &step, Location loc,
                            ArrayRef<int64_t> globalShape,
                            TensorSharding &cur) {
  RankedTensorType type = tensorTypeOf(value);
  SmallVector<int64_t> shape(type.getShape());
  int64_t parts = mesh.size(step.axes);
  auto grid = FlatSymbolRefAttr::get(builder.getContext(), mesh.symbol);
  auto axes = builder.getDenseI16ArrayAttr(step.axes);
  auto padded = [&](int64_t dim) {
    return llvm::alignTo(globalShape[dim], parts);
  };
  // Propagation splits a dim over the context axis alone when the ring
  // pairs head and tail chunks, so the dim is whole on the other side of a
  // step over that axis.
  bool zigzag = mesh.isZigzag(step.axes);
  switch (step.kind) {
  case Step::AllReduce:
    for (MeshAxis axis : step.axes)
      llvm::erase(cur.partial, axis);
    return shard::AllReduceOp::create(builder, loc, type, grid, axes, value);
  case Step::ReduceScatter: {
    llvm::erase(cur.partial, step.axes.front());
    cur.dims[step.dim].axes.push_back(step.axes.front());
    if (zigzag)
      value = zigzagOrder(value, step.dim, /*toRanks=*/true, loc);
    value = padTo(value, step.dim, padded(step.dim), loc);
    shape[step.dim] = padded(step.dim) / parts;
    return shard::ReduceScatterOp::create(
        builder, loc, withShape(type, shape), grid, axes, value,
        shard::ReductionKindAttr::get(builder.getContext(),
                                      shard::ReductionKind::Sum),
        builder.getIndexAttr(step.dim));
  }
  case Step::AllGather: {
    cur.dims[step.dim].axes.pop_back();
    shape[step.dim] *= parts;
    Value gathered =
        shard::AllGatherOp::create(builder, loc, withShape(type, shape), grid,
                                   axes, value, builder.getIndexAttr(step.dim));
    if (zigzag)
      return zigzagOrder(gathered, step.dim, /*toRanks=*/false, loc);
    return cur.dims[step.dim].isSplit()
               ? gathered
               : truncateTo(gathered, step.dim, globalShape[step.dim], loc);
  }
  case Step::AllToAll:
    if (globalShape[step.dim] % parts || globalShape[step.concatDim] % parts) {
      // Uneven: gather one dim whole, then slice the other.
      value = emitStep(value, {Step::AllGather, step.axes, step.concatDim}, loc,
                       globalShape, cur);
      return emitStep(value, {Step::AllSlice, step.axes, step.dim}, loc,
                      globalShape, cur);
    }
    cur.dims[step.concatDim].axes.pop_back();
    cur.dims[step.dim].axes.push_back(step.axes.front());
    shape[step.dim] /= parts;
    shape[step.concatDim] *= parts;
    if (zigzag)
      value = zigzagOrder(value, step.dim, /*toRanks=*/true, loc);
    value = shard::AllToAllOp::create(
        builder, loc, withShape(type, shape), grid, axes, value,
        builder.getIndexAttr(step.dim), builder.getIndexAttr(step.concatDim));
    return zigzag ? zigzagOrder(value, step.concatDim, /*toRanks=*/false, loc)
                  : value;
  case Step::AllSlice: {
    bool wasWhole = !cur.dims[step.dim].isSplit();
    cur.dims[step.dim].axes.push_back(step.axes.front());
    if (wasWhole) {
      value = padTo(value, step.dim, padded(step.dim), loc);
      shape[step.dim] = padded(step.dim);
    }
    if (zigzag)
      value = zigzagOrder(value, step.dim, /*toRanks=*/true, loc);
    shape[step.dim] /= parts;
    return shard::AllSliceOp::create(builder, loc, withShape(type, shape), grid,
                                     axes, value,
                                     builder.getIndexAttr(step.dim));
  }
  }
  llvm_unreachable("unknown step");
}

FailureOr<Value> Partitioner::reshard(Value global, const TensorSharding &to,
                                      Operation *user) {
  const Local &local = locals.at(global);
  if (local.sharding == to)
    return local.value;
  // A split parameter (ZeRO-3) is gathered again right before each use, so
  // that no whole copy outlives its user: the forward and the backward pass
  // gather it separately (weft-bucket-collectives then groups a layer's
  // gathers). Other values are resharded once, for every user.
  auto arg = llvm::dyn_cast<BlockArgument>(global);
  bool perUse = arg && func.getArgAttr(arg.getArgNumber(),
                                       WeftDialect::kParamAttrName);
  if (!perUse)
    for (auto &[value, target, result] : reshards)
      if (value == global && target == to)
        return result;
  FailureOr<SmallVector<Step>> steps = planReshard(local.sharding, to);
  if (failed(steps))
    return user->emitError()
           << "cannot reshard " << describeTensor(global) << " from "
           << local.sharding.describe(mesh) << " to " << to.describe(mesh)
           << ": an interleaved dim would have to move";
  OpBuilder::InsertionGuard guard(builder);
  // Right after the value, so that every later user can share it.
  if (perUse)
    builder.setInsertionPoint(user);
  else if (Operation *def = local.value.getDefiningOp())
    builder.setInsertionPointAfter(def);
  else
    builder.setInsertionPointToStart(&func.getBody().front());
  Value value = local.value;
  TensorSharding cur = local.sharding;
  for (const Step &step : *steps)
    value = emitStep(value, step, global.getLoc(),
                     tensorTypeOf(global).getShape(), cur);
  if (!perUse)
    reshards.emplace_back(global, to, value);
  return value;
}

OpPlan Partitioner::planOp(Operation *op, const OpShardingRule &rule,
                           bool resultsFirst) {
  OpPlan plan;
  plan.factors.resize(rule.kinds.size());
  // A mesh axis splits at most one factor of an op: two factors on one
  // axis would pair shard r of one with shard r of the other only.
  SmallVector<MeshAxis> used;
  auto tryAssign = [&](int64_t factor, const DimSharding &sharding) {
    if (factor < 0 || plan.factors[factor] ||
        rule.kinds[factor] == FactorKind::Whole)
      return;
    // Attention's sequence splits over the context axis, as a ring.
    if (rule.kinds[factor] == FactorKind::Context &&
        !(mesh.contextRing && isContextAxis(sharding.axes)))
      return;
    // A sum over an uneven (padded) split would add the padding too; that
    // is sound only when a weight, whose padding is zeros, takes part.
    // Otherwise the operands are gathered first.
    if (rule.kinds[factor] == FactorKind::Reduction &&
        !sumsOverPaddingSafely(op, rule, factor, mesh.size(sharding.axes)))
      return;
    for (MeshAxis axis : sharding.axes)
      if (llvm::is_contained(used, axis))
        return;
    plan.factors[factor] = sharding;
    llvm::append_range(used, sharding.axes);
  };
  auto fromResults = [&] {
    for (auto [index, result] : llvm::enumerate(op->getResults())) {
      TensorSharding sharding = desiredOf(result);
      for (auto [dim, factor] : llvm::enumerate(rule.resultFactors[index])) {
        const DimSharding &dimSharding = sharding.dims[dim];
        int64_t blocks = rule.resultBlocks[index][dim];
        if (dimSharding.isSplit() && dimSharding.blocks % blocks == 0)
          tryAssign(factor,
                    DimSharding{dimSharding.axes, dimSharding.blocks / blocks});
      }
    }
  };
  auto fromOperands = [&] {
    for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
      const TensorSharding &sharding = locals.at(operand).sharding;
      for (auto [dim, factor] : llvm::enumerate(rule.operandFactors[index])) {
        const DimSharding &dimSharding = sharding.dims[dim];
        int64_t blocks = rule.operandBlocks[index][dim];
        if (dimSharding.isSplit() && dimSharding.blocks % blocks == 0)
          tryAssign(factor,
                    DimSharding{dimSharding.axes, dimSharding.blocks / blocks});
      }
    }
  };
  if (resultsFirst) {
    fromResults();
    fromOperands();
  } else {
    fromOperands();
    fromResults();
  }
  // All-to-all (Ulysses) context parallelism: where attention's sequence
  // arrives split over the context axis, the heads take that axis instead;
  // the operands and results move between the two by all-to-alls.
  if (mesh.contextAxis && !mesh.contextRing && rule.headFactor >= 0 &&
      !llvm::is_contained(used, *mesh.contextAxis) &&
      contextSplitReaches(op, rule)) {
    DimSharding heads = plan.factors[rule.headFactor].value_or(DimSharding{});
    heads.axes.push_back(*mesh.contextAxis);
    plan.factors[rule.headFactor] = heads;
    used.push_back(*mesh.contextAxis);
  }
  // Layout changes and widening casts are linear: a partial sum read by
  // nothing else goes through them partial, to be reduced where a user
  // needs it whole (a bf16 weight gradient is then reduced in f32).
  SmallVector<MeshAxis> carried;
  if (op->getNumOperands() == 1 && op->getOperand(0).hasOneUse() &&
      (isa<TransposeOp, ReshapeOp, SqueezeOp, UnsqueezeOp>(op) ||
       (isa<CastOp>(op) && widensFloat(cast<CastOp>(op))))) {
    carried = locals.at(op->getOperand(0)).sharding.partial;
    for (MeshAxis axis : carried)
      if (llvm::is_contained(used, axis))
        carried.clear();
  }
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    TensorSharding required =
        TensorSharding::replicated(tensorTypeOf(operand).getRank());
    for (auto [dim, factor] : llvm::enumerate(rule.operandFactors[index]))
      if (factor >= 0 && plan.factors[factor]) {
        required.dims[dim] = *plan.factors[factor];
        required.dims[dim].blocks *= rule.operandBlocks[index][dim];
      }
    required.partial = carried;
    FailureOr<SmallVector<Step>> steps =
        planReshard(locals.at(operand).sharding, required);
    plan.cost +=
        succeeded(steps)
            ? costOf(*steps, tensorTypeOf(locals.at(operand).value), mesh)
            : INT64_MAX / 4;
    plan.operands.push_back(required);
  }
  SmallVector<MeshAxis> partial(carried);
  for (auto [factor, sharding] : llvm::enumerate(plan.factors))
    if (sharding && rule.kinds[factor] == FactorKind::Reduction)
      llvm::append_range(partial, sharding->axes);
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    TensorSharding produced =
        TensorSharding::replicated(tensorTypeOf(result).getRank());
    for (auto [dim, factor] : llvm::enumerate(rule.resultFactors[index]))
      if (factor >= 0 && plan.factors[factor]) {
        produced.dims[dim] = *plan.factors[factor];
        produced.dims[dim].blocks *= rule.resultBlocks[index][dim];
      }
    produced.partial = partial;
    FailureOr<SmallVector<Step>> steps =
        planReshard(produced, desiredOf(result));
    SmallVector<int64_t> localShape =
        produced.localShape(tensorTypeOf(result).getShape(), mesh);
    plan.cost +=
        succeeded(steps)
            ? costOf(*steps, withShape(tensorTypeOf(result), localShape), mesh)
            : INT64_MAX / 4;
    plan.results.push_back(produced);
  }
  return plan;
}

/// Sets each result of `local` to its local shape under `shardings`.
void setLocalResultTypes(Operation *local, Operation *global,
                         ArrayRef<TensorSharding> shardings, const Mesh &mesh) {
  for (auto [index, result] : llvm::enumerate(global->getResults())) {
    RankedTensorType type = tensorTypeOf(result);
    local->getResult(index).setType(
        withShape(type, shardings[index].localShape(type.getShape(), mesh)));
  }
}

/// Sums are linear: partial sums added or subtracted with the same split
/// give the partial sum of the result, and so does a partial sum scaled by
/// a whole scalar. Keeping the result partial defers the reduction to the
/// user that needs it whole (gradient accumulation reduces once, not once
/// per micro-batch). Broadcasting operands are left to planOp: a partial
/// sum would grow; so are partial sums with other readers.
std::optional<OpPlan> Partitioner::planPartialPassThrough(Operation *op) {
  if (!isa<AddOp, SubOp, MulOp, DivOp>(op))
    return std::nullopt;
  Value result = op->getResult(0);
  const TensorSharding *partial = nullptr;
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    const TensorSharding &sharding = locals.at(operand).sharding;
    bool scalar = tensorTypeOf(operand).getNumElements() == 1 &&
                  sharding.isReplicated() && sharding.partial.empty();
    if (sharding.partial.empty()) {
      // A whole scalar factor (or divisor), only for a product.
      if (scalar && (isa<MulOp>(op) || (isa<DivOp>(op) && index == 1)))
        continue;
      return std::nullopt;
    }
    // A partial sum read elsewhere too is reduced anyway: reducing it here
    // as well would double the traffic.
    if (!operand.hasOneUse() ||
        tensorTypeOf(operand).getShape() != tensorTypeOf(result).getShape() ||
        (partial && !(*partial == sharding)) ||
        (partial && !isa<AddOp, SubOp>(op)))
      return std::nullopt;
    partial = &sharding;
  }
  if (!partial || (isa<DivOp>(op) &&
                   locals.at(op->getOperand(1)).sharding.partial.size()))
    return std::nullopt;
  OpPlan plan;
  for (Value operand : op->getOperands())
    plan.operands.push_back(locals.at(operand).sharding);
  plan.results.push_back(*partial);
  FailureOr<SmallVector<Step>> steps =
      planReshard(*partial, desiredOf(result));
  SmallVector<int64_t> localShape =
      partial->localShape(tensorTypeOf(result).getShape(), mesh);
  plan.cost = succeeded(steps) ? costOf(*steps,
                                        withShape(tensorTypeOf(result), localShape),
                                        mesh)
                               : INT64_MAX / 4;
  return plan;
}

LogicalResult Partitioner::partitionOp(Operation *op) {
  std::optional<OpShardingRule> rule = getShardingRule(op);
  OpPlan plan;
  if (rule) {
    if (failed(checkContextHeads(op, *rule)))
      return failure();
    warnIfContextGathered(op, *rule);
    OpPlan resultsFirst = planOp(op, *rule, true);
    OpPlan operandsFirst = planOp(op, *rule, false);
    plan =
        operandsFirst.cost < resultsFirst.cost ? operandsFirst : resultsFirst;
    if (std::optional<OpPlan> passThrough = planPartialPassThrough(op);
        passThrough && passThrough->cost <= plan.cost)
      plan = *passThrough;
  } else {
    for (Value operand : op->getOperands())
      plan.operands.push_back(
          TensorSharding::replicated(tensorTypeOf(operand).getRank()));
    for (Value result : op->getResults())
      plan.results.push_back(
          TensorSharding::replicated(tensorTypeOf(result).getRank()));
  }
  SmallVector<Value> operands;
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    FailureOr<Value> local = reshard(operand, plan.operands[index], op);
    if (failed(local))
      return failure();
    operands.push_back(*local);
  }
  builder.setInsertionPoint(op);

  // Ops whose local form differs from the global one.
  if (auto linear = dyn_cast<LinearOp>(op);
      linear && linear.getBias() && !plan.results[0].partial.empty())
    return partitionLinearWithSplitBias(linear, plan, operands);
  if (auto gather = dyn_cast<GatherOp>(op);
      gather && !plan.results[0].partial.empty())
    return partitionVocabGather(gather, plan, operands);
  if (auto scatter = dyn_cast<ScatterAddOp>(op);
      scatter && !plan.results[0].dims[0].axes.empty())
    return partitionVocabScatter(scatter, plan, operands);
  if (isa<AttentionOp, AttentionGradOp>(op) && rule)
    for (auto [factor, sharding] : llvm::enumerate(plan.factors))
      if (sharding && rule->kinds[factor] == FactorKind::Context)
        return partitionRingAttention(op, plan, operands);
  if (isa<ConstantOp, RangeOp>(op) && !plan.results[0].isReplicated()) {
    // Computed whole, then each rank keeps its slice.
    Operation *whole = builder.clone(*op);
    locals[op->getResult(0)] = {
        whole->getResult(0),
        TensorSharding::replicated(tensorTypeOf(op->getResult(0)).getRank())};
    FailureOr<Value> sliced = reshard(op->getResult(0), plan.results[0], op);
    if (failed(sliced))
      return failure();
    locals[op->getResult(0)] = {*sliced, plan.results[0]};
    return success();
  }

  IRMapping mapping;
  mapping.map(op->getOperands(), operands);
  Operation *local = builder.clone(*op, mapping);
  setLocalResultTypes(local, op, plan.results, mesh);
  if (auto split = dyn_cast<SplitOp>(local)) {
    int64_t axis = static_cast<int64_t>(split.getAxis());
    int64_t parts = mesh.size(plan.results[0].dims[axis].axes);
    SmallVector<int64_t> sizes;
    for (int64_t size : split.getSizes())
      sizes.push_back(size / parts);
    split.setSizes(sizes);
  }
  if (auto slice = dyn_cast<SliceOp>(local)) {
    SmallVector<int64_t> sizes(slice.getSizes());
    for (auto [dim, sharding] : llvm::enumerate(plan.operands[0].dims))
      sizes[dim] = llvm::divideCeil(sizes[dim], mesh.size(sharding.axes));
    slice.setSizes(sizes);
  }
  for (auto [index, result] : llvm::enumerate(op->getResults()))
    locals[result] = {local->getResult(index), plan.results[index]};
  return success();
}

/// A row-split linear with a bias: the local products are partial sums, so
/// the bias is added once, after the reduction.
LogicalResult
Partitioner::partitionLinearWithSplitBias(LinearOp op, const OpPlan &plan,
                                          ArrayRef<Value> operands) {
  Value global = op.getResult();
  TensorSharding partial = plan.results[0];
  auto product =
      LinearOp::create(builder, op.getLoc(), operands[0], operands[1], Value(),
                       op.getTransposeWeightAttr());
  product.getResult().setType(withShape(
      op.getType(), partial.localShape(op.getType().getShape(), mesh)));
  locals[global] = {product.getResult(), partial};
  TensorSharding whole = desiredOf(global);
  FailureOr<Value> reduced = reshard(global, whole, op);
  if (failed(reduced))
    return failure();
  // The bias follows the result's last dim.
  TensorSharding biasSharding = TensorSharding::replicated(1);
  biasSharding.dims[0] = whole.dims.back();
  FailureOr<Value> bias = reshard(op.getBias(), biasSharding, op);
  if (failed(bias))
    return failure();
  builder.setInsertionPoint(op);
  auto sum = AddOp::create(builder, op.getLoc(), *reduced, *bias);
  locals[global] = {sum.getResult(), whole};
  return success();
}

/// This rank's first row of a table split by rows over `axes` into parts of
/// `rows` rows, as a 0-D tensor of `indexType`.
Value Partitioner::firstRowTensor(ArrayRef<MeshAxis> axes, int64_t rows,
                                  Type indexType, Location loc) {
  // This rank's linear position along `axes` (major to minor).
  auto position = shard::ProcessMultiIndexOp::create(
      builder, loc, mesh.symbol, SmallVector<MeshAxis>(axes));
  Value linear = arith::ConstantIndexOp::create(builder, loc, 0);
  for (auto [index, axis] : llvm::enumerate(axes)) {
    Value scaled = arith::MulIOp::create(
        builder, loc, linear,
        arith::ConstantIndexOp::create(builder, loc, mesh.sizes[axis]));
    linear = arith::AddIOp::create(builder, loc, scaled,
                                   position.getResult()[index]);
  }
  Value first = arith::MulIOp::create(
      builder, loc, linear, arith::ConstantIndexOp::create(builder, loc, rows));
  Value firstScalar =
      arith::IndexCastOp::create(builder, loc, indexType, first);
  return tensor::FromElementsOp::create(
      builder, loc, RankedTensorType::get({}, indexType), firstScalar);
}

/// A gather from a table split by rows: each rank looks up the indices in
/// its row range and zeros the rest; the results are partial sums.
LogicalResult Partitioner::partitionVocabGather(GatherOp op, const OpPlan &plan,
                                                ArrayRef<Value> operands) {
  Location loc = op.getLoc();
  Value table = operands[0], indices = operands[1];
  int64_t rows = tensorTypeOf(table).getDimSize(0);
  Type indexType = tensorTypeOf(indices).getElementType();
  Value firstTensor =
      firstRowTensor(plan.operands[0].dims[0].axes, rows, indexType, loc);
  auto scalarConstant = [&](Type type, double value) {
    return createScalar(builder, loc, type, value);
  };
  Value offset = SubOp::create(builder, loc, indices, firstTensor);
  Value inRange = AndOp::create(
      builder, loc,
      GreaterEqualOp::create(builder, loc, offset,
                             scalarConstant(indexType, 0)),
      LessOp::create(builder, loc, offset, scalarConstant(indexType, rows)));
  Value safe = WhereOp::create(builder, loc, inRange, offset,
                               scalarConstant(indexType, 0));
  auto lookup = GatherOp::create(builder, loc, table, safe, op.getAxisAttr());
  // The mask gets trailing unit dims for the table's row dims.
  RankedTensorType maskType = tensorTypeOf(inRange);
  SmallVector<int64_t> maskShape(maskType.getShape());
  maskShape.append(tensorTypeOf(table).getRank() - 1, 1);
  Value mask =
      ReshapeOp::create(builder, loc, withShape(maskType, maskShape), inRange);
  Type element = tensorTypeOf(table).getElementType();
  auto masked =
      WhereOp::create(builder, loc, mask, lookup, scalarConstant(element, 0));
  locals[op.getResult()] = {masked.getResult(), plan.results[0]};
  return success();
}

/// A scatter-add into a table split by rows: each rank adds the updates
/// whose indices fall in its rows (the op skips the others), given the
/// indices shifted by its first row.
LogicalResult Partitioner::partitionVocabScatter(ScatterAddOp op,
                                                 const OpPlan &plan,
                                                 ArrayRef<Value> operands) {
  Location loc = op.getLoc();
  RankedTensorType local = withShape(
      op.getType(), plan.results[0].localShape(op.getType().getShape(), mesh));
  Value indices = operands[1];
  Value first =
      firstRowTensor(plan.results[0].dims[0].axes, local.getDimSize(0),
                     tensorTypeOf(indices).getElementType(), loc);
  auto scatter =
      ScatterAddOp::create(builder, loc, local, operands[0],
                           SubOp::create(builder, loc, indices, first));
  locals[op.getResult()] = {scatter.getResult(), plan.results[0]};
  return success();
}

/// Attention whose sequence is split over the context axis runs as a ring.
LogicalResult Partitioner::partitionRingAttention(Operation *op,
                                                  const OpPlan &plan,
                                                  ArrayRef<Value> operands) {
  Ring ring{mesh, *mesh.contextAxis, mesh.contextZigzag};
  SmallVector<Value, 3> results;
  if (auto attention = dyn_cast<AttentionOp>(op))
    results.push_back(buildRingAttention(
        builder, op->getLoc(), ring, operands[0], operands[1], operands[2],
        attention.getCausal(), attention.getEffectiveScale()));
  else {
    auto grad = cast<AttentionGradOp>(op);
    results = buildRingAttentionGrad(
        builder, op->getLoc(), ring, operands[0], operands[1], operands[2],
        operands[3], operands[4], grad.getCausal(), grad.getEffectiveScale());
  }
  for (auto [index, result] : llvm::enumerate(op->getResults()))
    locals[result] = {results[index], plan.results[index]};
  return success();
}

/// An attention whose sequence is not a Context factor (an explicit mask,
/// cross-attention) but arrives split over the context axis is computed
/// on the gathered sequence: correct, but neither a ring nor Ulysses, so
/// it is said.
void Partitioner::warnIfContextGathered(Operation *op,
                                        const OpShardingRule &rule) {
  if (!mesh.contextAxis || !isa<AttentionOp>(op) ||
      llvm::is_contained(rule.kinds, FactorKind::Context))
    return;
  for (Value operand : op->getOperands().take_front(3)) {
    const TensorSharding &sharding = locals.at(operand).sharding;
    if (llvm::is_contained(sharding.dims[2].axes, *mesh.contextAxis)) {
      op->emitWarning() << "context parallelism: this attention has "
                        << (cast<AttentionOp>(op).getMask()
                                ? "an explicit mask"
                                : "queries and keys of different lengths")
                        << ", so its sequence is gathered over '"
                        << mesh.names[*mesh.contextAxis]
                        << "' instead of passed around a ring or split by "
                           "heads";
      return;
    }
  }
}

/// All-to-all context parallelism gives every rank whole sequences of
/// fewer heads: each rank's share of the heads must divide by the context
/// axis (key/value heads too, under grouped-query attention).
LogicalResult Partitioner::checkContextHeads(Operation *op,
                                             const OpShardingRule &rule) {
  if (!mesh.contextAxis || mesh.contextRing || rule.headFactor < 0)
    return success();
  int64_t parts = mesh.sizes[*mesh.contextAxis];
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    const TensorSharding &sharding = locals.at(operand).sharding;
    for (auto [dim, factor] : llvm::enumerate(rule.operandFactors[index])) {
      if (factor != rule.headFactor)
        continue;
      // The heads each rank holds before the context axis joins them.
      SmallVector<MeshAxis> others;
      for (MeshAxis axis : sharding.dims[dim].axes)
        if (axis != *mesh.contextAxis)
          others.push_back(axis);
      int64_t local = tensorTypeOf(operand).getDimSize(dim) / mesh.size(others);
      if (local % parts == 0 || !contextSplitReaches(op, rule))
        continue;
      return op->emitError()
             << "context parallelism (all-to-all) splits the heads over mesh "
                "axis '"
             << mesh.names[*mesh.contextAxis] << "' (size " << parts
             << "), but operand " << index << " has " << local
             << " heads per rank: not divisible (--cp-attention ring "
                "splits the sequence instead)";
    }
  }
  return success();
}

/// `weft.sharding` for a split argument or result, and `weft.global_shape`
/// when an uneven split pads it (the local shapes alone do not tell).
SmallVector<NamedAttribute>
Partitioner::shardingAttrs(const TensorSharding &sharding,
                           RankedTensorType globalType) {
  if (sharding.isReplicated())
    return {};
  SmallVector<NamedAttribute> attrs{
      builder.getNamedAttr(WeftDialect::kShardingAttrName,
                           builder.getStringAttr(sharding.describe(mesh)))};
  for (auto [dim, split] : llvm::enumerate(sharding.dims))
    if (globalType.getDimSize(dim) % mesh.size(split.axes) != 0) {
      attrs.push_back(builder.getNamedAttr(
          WeftDialect::kGlobalShapeAttrName,
          builder.getDenseI64ArrayAttr(globalType.getShape())));
      break;
    }
  return attrs;
}

LogicalResult Partitioner::partitionReturn(func::ReturnOp op) {
  SmallVector<Value> results;
  SmallVector<Attribute> shardings;
  for (Value operand : op.getOperands()) {
    // A result takes the sharding propagation chose for it (a training
    // step's new parameters: their argument's).
    TensorSharding whole = desiredOf(operand);
    FailureOr<Value> local = reshard(operand, whole, op);
    if (failed(local))
      return failure();
    results.push_back(*local);
    shardings.push_back(
        builder.getDictionaryAttr(shardingAttrs(whole, tensorTypeOf(operand))));
  }
  builder.setInsertionPoint(op);
  func::ReturnOp::create(builder, op.getLoc(), results);
  for (auto [index, attrs] : llvm::enumerate(shardings))
    func.setResultAttrs(index, llvm::cast<DictionaryAttr>(attrs));
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  // The global return goes with the other global ops, at the end of run().
  return success();
}

LogicalResult Partitioner::run() {
  // Annotations become desired shardings; the IR loses them.
  FailureOr<SmallVector<Annotation>> annotations = readAnnotations(func, mesh);
  if (failed(annotations))
    return failure();
  for (const Annotation &annotation : *annotations)
    desired[annotation.value] = annotation.sharding;
  dropAnnotations(*annotations);
  SmallVector<shard::ShardingOp> shardingOps;
  func.walk([&](shard::ShardingOp op) { shardingOps.push_back(op); });
  for (shard::ShardingOp op : shardingOps)
    if (op->use_empty())
      op.erase();

  // Local arguments are appended, and the global ones dropped at the end:
  // the sharding rules read the global types while ops are rewritten.
  unsigned numGlobalArgs = func.getNumArguments();
  for (unsigned index = 0; index < numGlobalArgs; ++index) {
    BlockArgument arg = func.getArgument(index);
    auto type = llvm::dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return func.emitError("weft-partition needs ranked tensor arguments");
    TensorSharding sharding = desiredOf(arg);
    SmallVector<NamedAttribute> attrs(
        func.getArgAttrDict(index) ? func.getArgAttrDict(index).getValue()
                                   : ArrayRef<NamedAttribute>());
    llvm::append_range(attrs, shardingAttrs(sharding, type));
    unsigned position = func.getNumArguments();
    if (failed(func.insertArgument(
            position,
            withShape(type, sharding.localShape(type.getShape(), mesh)),
            builder.getDictionaryAttr(attrs), arg.getLoc())))
      return failure();
    locals[arg] = {func.getArgument(position), sharding};
  }
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front())
    ops.push_back(&op);
  for (Operation *op : ops) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      if (failed(partitionReturn(ret)))
        return failure();
      continue;
    }
    if (llvm::any_of(op->getOperandTypes(),
                     [](Type t) { return !llvm::isa<RankedTensorType>(t); }) ||
        llvm::any_of(op->getResultTypes(),
                     [](Type t) { return !llvm::isa<RankedTensorType>(t); }))
      return op->emitError("weft-partition handles ops on ranked tensors "
                           "only");
    if (failed(partitionOp(op)))
      return failure();
  }
  for (Operation *op : llvm::reverse(ops)) {
    op->dropAllUses();
    op->erase();
  }
  llvm::BitVector globalArgs(func.getNumArguments());
  globalArgs.set(0, numGlobalArgs);
  return func.eraseArguments(globalArgs);
}

struct WeftPartitionPass
    : public weft::impl::WeftPartitionBase<WeftPartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<Mesh> mesh = Mesh::find(module);
    if (!mesh)
      return;
    for (auto func : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      if (failed(Partitioner(*mesh, func).run()))
        return signalPassFailure();
  }
};

} // namespace
