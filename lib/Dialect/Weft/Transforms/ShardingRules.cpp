//===- ShardingRules.cpp - Meshes, shardings and per-op rules -------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Sharding.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace weft;

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

int64_t Mesh::size(ArrayRef<MeshAxis> axes) const {
  int64_t product = 1;
  for (MeshAxis axis : axes)
    product *= sizes[axis];
  return product;
}

std::optional<MeshAxis> Mesh::axisNamed(StringRef name) const {
  for (auto [index, axisName] : llvm::enumerate(names))
    if (axisName == name)
      return static_cast<MeshAxis>(index);
  return std::nullopt;
}

std::string Mesh::describe(ArrayRef<MeshAxis> axes) const {
  SmallVector<StringRef> parts;
  for (MeshAxis axis : axes)
    parts.push_back(names[axis]);
  return llvm::join(parts, ",");
}

std::optional<Mesh> Mesh::parse(StringRef text, std::string &error) {
  Mesh mesh;
  mesh.symbol = "mesh";
  SmallVector<StringRef> items;
  text.split(items, ',', -1, false);
  if (items.empty()) {
    error = "empty mesh (expected e.g. 'dp=2,tp=2')";
    return std::nullopt;
  }
  for (StringRef item : items) {
    auto [name, sizeText] = item.trim().split('=');
    int64_t size = 0;
    if (name.empty() || sizeText.trim().getAsInteger(10, size) || size < 1) {
      error = ("bad mesh axis '" + item.trim() +
               "' (expected NAME=SIZE with SIZE >= 1)")
                  .str();
      return std::nullopt;
    }
    if (mesh.axisNamed(name)) {
      error = ("mesh axis '" + name + "' appears twice").str();
      return std::nullopt;
    }
    mesh.names.push_back(name.str());
    mesh.sizes.push_back(size);
  }
  return mesh;
}

std::optional<Mesh> Mesh::find(ModuleOp module) {
  for (auto grid : module.getOps<shard::GridOp>()) {
    Mesh mesh;
    mesh.symbol = grid.getSymName().str();
    mesh.sizes.assign(grid.getShape().begin(), grid.getShape().end());
    auto names = grid->getAttrOfType<ArrayAttr>("weft.axis_names");
    for (int64_t axis = 0; axis < grid.getRank(); ++axis) {
      StringAttr name = names && axis < static_cast<int64_t>(names.size())
                            ? llvm::dyn_cast<StringAttr>(names[axis])
                            : StringAttr();
      mesh.names.push_back(name ? name.str() : "axis" + std::to_string(axis));
    }
    return mesh;
  }
  return std::nullopt;
}

void Mesh::materialize(ModuleOp module) const {
  OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
  auto grid = shard::GridOp::create(builder, module.getLoc(), symbol, sizes);
  SmallVector<Attribute> nameAttrs;
  for (const std::string &name : names)
    nameAttrs.push_back(builder.getStringAttr(name));
  grid->setAttr("weft.axis_names", builder.getArrayAttr(nameAttrs));
}

//===----------------------------------------------------------------------===//
// TensorSharding
//===----------------------------------------------------------------------===//

bool TensorSharding::isReplicated() const {
  return partial.empty() &&
         llvm::none_of(dims, [](const DimSharding &d) { return d.isSplit(); });
}

bool TensorSharding::usesAxis(MeshAxis axis) const {
  return llvm::is_contained(partial, axis) ||
         llvm::any_of(dims, [&](const DimSharding &d) {
           return llvm::is_contained(d.axes, axis);
         });
}

std::string TensorSharding::describe(const Mesh &mesh) const {
  SmallVector<std::string> parts;
  for (const DimSharding &dim : dims) {
    std::string part = "[" + mesh.describe(dim.axes) + "]";
    if (dim.isSplit() && dim.blocks > 1)
      part += "x" + std::to_string(dim.blocks);
    parts.push_back(part);
  }
  std::string text = llvm::join(parts, ", ");
  if (!partial.empty())
    text += " partial(" + mesh.describe(partial) + ")";
  return text;
}

std::optional<TensorSharding> TensorSharding::parse(StringRef text,
                                                    const Mesh &mesh) {
  TensorSharding sharding;
  text = text.trim();
  while (!text.empty()) {
    if (!text.consume_front("["))
      return std::nullopt;
    auto [inside, rest] = text.split(']');
    DimSharding dim;
    SmallVector<StringRef> names;
    inside.split(names, ',', -1, false);
    for (StringRef name : names) {
      std::optional<MeshAxis> axis = mesh.axisNamed(name.trim());
      if (!axis)
        return std::nullopt;
      dim.axes.push_back(*axis);
    }
    text = rest;
    if (text.consume_front("x")) {
      size_t digits = text.find_first_not_of("0123456789");
      if (text.take_front(digits).getAsInteger(10, dim.blocks))
        return std::nullopt;
      text = text.drop_front(digits);
    }
    sharding.dims.push_back(dim);
    text = text.ltrim();
    if (!text.empty() && !text.consume_front(","))
      return std::nullopt;
    text = text.ltrim();
  }
  return sharding;
}

std::string TensorSharding::runtimeSpec() const {
  SmallVector<std::string> parts;
  for (const DimSharding &dim : dims) {
    if (!dim.isSplit()) {
      parts.push_back("-");
      continue;
    }
    SmallVector<std::string> axes;
    for (MeshAxis axis : dim.axes)
      axes.push_back(std::to_string(axis));
    std::string part = llvm::join(axes, ".");
    if (dim.blocks > 1)
      part += "x" + std::to_string(dim.blocks);
    parts.push_back(part);
  }
  return llvm::join(parts, ",");
}

SmallVector<int64_t> TensorSharding::localShape(ArrayRef<int64_t> shape,
                                                const Mesh &mesh) const {
  // Uneven splits (pad-uneven) round up: the last shards end in padding.
  SmallVector<int64_t> local(shape);
  for (auto [index, dim] : llvm::enumerate(dims))
    local[index] = llvm::divideCeil(local[index], mesh.size(dim.axes));
  return local;
}

TensorSharding weft::readSharding(shard::ShardingOp op, int64_t rank) {
  TensorSharding sharding = TensorSharding::replicated(rank);
  auto blocks = op->getAttrOfType<DenseI64ArrayAttr>("weft.blocks");
  for (auto [index, axes] : llvm::enumerate(op.getSplitAxes().getAxes())) {
    if (static_cast<int64_t>(index) >= rank)
      break;
    sharding.dims[index].axes.assign(axes.asArrayRef().begin(),
                                     axes.asArrayRef().end());
    if (blocks && static_cast<int64_t>(index) < blocks.size())
      sharding.dims[index].blocks = blocks[index];
  }
  return sharding;
}

shard::ShardingOp weft::createShardingOp(OpBuilder &builder, Location loc,
                                         const TensorSharding &sharding,
                                         const Mesh &mesh) {
  SmallVector<shard::GridAxesAttr> splitAxes;
  SmallVector<int64_t> blocks;
  bool blocked = false;
  for (const DimSharding &dim : sharding.dims) {
    splitAxes.push_back(builder.getDenseI16ArrayAttr(dim.axes));
    blocks.push_back(dim.isSplit() ? dim.blocks : 1);
    blocked |= dim.isSplit() && dim.blocks > 1;
  }
  // Trailing unsplit dims are left out, as upstream prints them; at least
  // one (possibly empty) entry must remain.
  while (splitAxes.size() > 1 && splitAxes.back().empty())
    splitAxes.pop_back();
  if (splitAxes.empty())
    splitAxes.push_back(builder.getDenseI16ArrayAttr({}));
  auto op = shard::ShardingOp::create(builder, loc, mesh.symbol, splitAxes);
  if (blocked)
    op->setAttr("weft.blocks", builder.getDenseI64ArrayAttr(blocks));
  return op;
}

std::string weft::describeTensor(Value value) {
  if (auto arg = llvm::dyn_cast<BlockArgument>(value)) {
    if (auto func = llvm::dyn_cast<FunctionOpInterface>(
            arg.getOwner()->getParentOp())) {
      if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        "weft.param"))
        return ("parameter '" + name.getValue() + "'").str();
      if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        "weft.input"))
        return ("input '" + name.getValue() + "'").str();
    }
    return "argument " + std::to_string(arg.getArgNumber());
  }
  auto result = llvm::cast<OpResult>(value);
  return "result " + std::to_string(result.getResultNumber()) + " of '" +
         result.getOwner()->getName().getStringRef().str() + "'";
}

//===----------------------------------------------------------------------===//
// Sharding rules
//===----------------------------------------------------------------------===//

namespace {

int64_t rankOf(Value v) {
  return llvm::cast<ShapedType>(v.getType()).getRank();
}

ArrayRef<int64_t> shapeOf(Value v) {
  return llvm::cast<ShapedType>(v.getType()).getShape();
}

/// Appends per-dim factor lists (all -1) and block counts for every
/// operand and result of `op`.
OpShardingRule emptyRule(Operation *op) {
  OpShardingRule rule;
  for (Value operand : op->getOperands()) {
    rule.operandFactors.emplace_back(rankOf(operand), -1);
    rule.operandBlocks.emplace_back(rankOf(operand), 1);
  }
  for (Value result : op->getResults()) {
    rule.resultFactors.emplace_back(rankOf(result), -1);
    rule.resultBlocks.emplace_back(rankOf(result), 1);
  }
  return rule;
}

/// Every dim of every operand and result gets its own factor of `kind`,
/// except the ones already assigned.
void wholeForTheRest(OpShardingRule &rule) {
  for (auto &dims : rule.operandFactors)
    for (int64_t &factor : dims)
      if (factor < 0)
        factor = rule.addFactor(FactorKind::Whole);
  for (auto &dims : rule.resultFactors)
    for (int64_t &factor : dims)
      if (factor < 0)
        factor = rule.addFactor(FactorKind::Whole);
}

/// Numpy broadcasting: a factor per result dim; an operand dim of size 1
/// against a larger result dim is a broadcast (no factor).
OpShardingRule broadcastRule(Operation *op) {
  OpShardingRule rule = emptyRule(op);
  ArrayRef<int64_t> resultShape = shapeOf(op->getResult(0));
  int64_t rank = resultShape.size();
  for (int64_t d = 0; d < rank; ++d)
    rule.resultFactors[0][d] = rule.addFactor(FactorKind::Parallel);
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    ArrayRef<int64_t> shape = shapeOf(operand);
    int64_t offset = rank - shape.size();
    for (auto [d, size] : llvm::enumerate(shape))
      if (size == resultShape[offset + d])
        rule.operandFactors[index][d] = rule.resultFactors[0][offset + d];
  }
  return rule;
}

/// Leading dims of operand `operand` and result 0 share parallel factors;
/// dims from `firstWhole` on stay whole.
OpShardingRule rowRule(Operation *op, int64_t firstWhole) {
  OpShardingRule rule = emptyRule(op);
  for (int64_t d = 0; d < firstWhole; ++d) {
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    rule.operandFactors[0][d] = factor;
    rule.resultFactors[0][d] = factor;
  }
  return rule;
}

OpShardingRule linearRule(LinearOp op) {
  OpShardingRule rule = emptyRule(op);
  int64_t rank = rankOf(op.getInput());
  for (int64_t d = 0; d + 1 < rank; ++d) {
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    rule.operandFactors[0][d] = factor;
    rule.resultFactors[0][d] = factor;
  }
  int64_t k = rule.addFactor(FactorKind::Reduction);
  int64_t n = rule.addFactor(FactorKind::Parallel);
  rule.operandFactors[0][rank - 1] = k;
  bool transposed = op.getTransposeWeight();
  rule.operandFactors[1][transposed ? 1 : 0] = k;
  rule.operandFactors[1][transposed ? 0 : 1] = n;
  if (op.getBias())
    rule.operandFactors[2][0] = n;
  rule.resultFactors[0][rank - 1] = n;
  return rule;
}

OpShardingRule matmulRule(MatmulOp op) {
  OpShardingRule rule = emptyRule(op);
  int64_t lhsRank = rankOf(op.getLhs()), rhsRank = rankOf(op.getRhs());
  int64_t resultRank = rankOf(op.getResult());
  if (lhsRank < 2 || rhsRank < 2) {
    wholeForTheRest(rule);
    return rule;
  }
  ArrayRef<int64_t> resultShape = shapeOf(op.getResult());
  for (int64_t d = 0; d + 2 < resultRank; ++d)
    rule.resultFactors[0][d] = rule.addFactor(FactorKind::Parallel);
  auto mapBatch = [&](int64_t operand, int64_t rank) {
    ArrayRef<int64_t> shape = shapeOf(op->getOperand(operand));
    int64_t offset = (resultRank - 2) - (rank - 2);
    for (int64_t d = 0; d + 2 < rank; ++d)
      if (shape[d] == resultShape[offset + d])
        rule.operandFactors[operand][d] = rule.resultFactors[0][offset + d];
  };
  mapBatch(0, lhsRank);
  mapBatch(1, rhsRank);
  int64_t m = rule.addFactor(FactorKind::Parallel);
  int64_t k = rule.addFactor(FactorKind::Reduction);
  int64_t n = rule.addFactor(FactorKind::Parallel);
  rule.operandFactors[0][lhsRank - 2] = m;
  rule.operandFactors[0][lhsRank - 1] = k;
  rule.operandFactors[1][rhsRank - 2] = k;
  rule.operandFactors[1][rhsRank - 1] = n;
  rule.resultFactors[0][resultRank - 2] = m;
  rule.resultFactors[0][resultRank - 1] = n;
  return rule;
}

/// q [B, H, S, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv], mask broadcastable
/// to [B, H, S, T]: batch and heads split (kv heads with the query heads,
/// which keeps each rank's query heads with their shared kv head); the
/// sequence and head dims stay whole (softmax runs over T, the causal mask
/// needs global positions, and D is contracted).
OpShardingRule attentionRule(AttentionOp op) {
  OpShardingRule rule = emptyRule(op);
  int64_t batch = rule.addFactor(FactorKind::Parallel);
  int64_t heads = rule.addFactor(FactorKind::Parallel);
  for (int64_t operand = 0; operand < 3; ++operand) {
    rule.operandFactors[operand][0] = batch;
    rule.operandFactors[operand][1] = heads;
  }
  rule.resultFactors[0][0] = batch;
  rule.resultFactors[0][1] = heads;
  if (Value mask = op.getMask()) {
    ArrayRef<int64_t> shape = shapeOf(mask);
    ArrayRef<int64_t> scores = shapeOf(op.getQuery());
    int64_t offset = 4 - shape.size();
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      int64_t full = offset + d;
      if (full < 2 && shape[d] == scores[full] && shape[d] != 1)
        rule.operandFactors[3][d] = full == 0 ? batch : heads;
    }
  }
  // Size-1 mask dims and the S, T and head dims stay whole.
  wholeForTheRest(rule);
  return rule;
}

/// table [V, ...] gathered by indices [...] on axis 0: index dims and the
/// table's row dims are parallel; V is a reduction: a rank holding a slice
/// of the rows looks up only the indices it owns and zeros the others, and
/// the partial results sum to the full lookup (vocab-parallel embedding).
OpShardingRule gatherRule(GatherOp op) {
  OpShardingRule rule = emptyRule(op);
  int64_t axis = static_cast<int64_t>(op.getAxis());
  int64_t indexRank = rankOf(op.getIndices());
  int64_t dataRank = rankOf(op.getData());
  for (int64_t d = 0; d < indexRank; ++d) {
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    rule.operandFactors[1][d] = factor;
    rule.resultFactors[0][axis + d] = factor;
  }
  for (int64_t d = 0; d < dataRank; ++d) {
    if (d == axis)
      continue;
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    rule.operandFactors[0][d] = factor;
    rule.resultFactors[0][d < axis ? d : d - 1 + indexRank] = factor;
  }
  rule.operandFactors[0][axis] =
      rule.addFactor(axis == 0 ? FactorKind::Reduction : FactorKind::Whole);
  return rule;
}

/// Reshape (and squeeze/unsqueeze): dims are grouped where the running
/// products of the two shapes meet; in each group the major dims share a
/// factor (splitting the major dim of a contiguous group splits its flat
/// range into equal contiguous chunks on both sides); the other dims of a
/// group stay whole. Size-1 dims are skipped.
OpShardingRule reshapeRule(Operation *op) {
  OpShardingRule rule = emptyRule(op);
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    while (i < in.size() && in[i] == 1)
      ++i;
    while (j < out.size() && out[j] == 1)
      ++j;
    if (i >= in.size() || j >= out.size())
      break;
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    rule.operandFactors[0][i] = factor;
    rule.resultFactors[0][j] = factor;
    int64_t inProduct = in[i++], outProduct = out[j++];
    while (inProduct != outProduct) {
      if (inProduct < outProduct)
        inProduct *= in[i++];
      else
        outProduct *= out[j++];
    }
  }
  wholeForTheRest(rule);
  return rule;
}

OpShardingRule transposeRule(TransposeOp op) {
  OpShardingRule rule = emptyRule(op);
  for (auto [d, source] : llvm::enumerate(op.getPermutation())) {
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    rule.resultFactors[0][d] = factor;
    rule.operandFactors[0][source] = factor;
  }
  return rule;
}

/// Split along `axis`: the other dims are shared. Equal parts also share
/// the axis: the operand holds the parts as interleaved blocks, so a split
/// over the mesh gives each rank its slice of every part.
OpShardingRule splitRule(SplitOp op) {
  OpShardingRule rule = emptyRule(op);
  int64_t rank = rankOf(op.getInput());
  int64_t axis = static_cast<int64_t>(op.getAxis());
  ArrayRef<int64_t> sizes = op.getSizes();
  bool equalParts = llvm::all_equal(sizes);
  for (int64_t d = 0; d < rank; ++d) {
    if (d == axis && !equalParts)
      continue;
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    rule.operandFactors[0][d] = factor;
    for (auto &result : rule.resultFactors)
      result[d] = factor;
  }
  if (equalParts)
    rule.operandBlocks[0][axis] = sizes.size();
  wholeForTheRest(rule);
  return rule;
}

/// Dims a slice or concat does not touch are shared; the others stay whole.
OpShardingRule sharedExceptRule(Operation *op, ArrayRef<bool> touched) {
  OpShardingRule rule = emptyRule(op);
  for (int64_t d = 0; d < static_cast<int64_t>(touched.size()); ++d) {
    if (touched[d])
      continue;
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    for (auto &operand : rule.operandFactors)
      operand[d] = factor;
    rule.resultFactors[0][d] = factor;
  }
  wholeForTheRest(rule);
  return rule;
}

/// Only the result's dims exist (constants, ranges): each is parallel, and
/// the partitioner slices the value locally.
OpShardingRule sourceRule(Operation *op) {
  OpShardingRule rule = emptyRule(op);
  for (int64_t &factor : rule.resultFactors[0])
    factor = rule.addFactor(FactorKind::Parallel);
  return rule;
}

} // namespace

FailureOr<SmallVector<Annotation>> weft::readAnnotations(Operation *function,
                                                       const Mesh &mesh) {
  SmallVector<Annotation> annotations;
  SmallVector<shard::ShardOp> ops;
  function->walk([&](shard::ShardOp op) { ops.push_back(op); });
  for (shard::ShardOp op : ops) {
    auto shardingOp = op.getSharding().getDefiningOp<shard::ShardingOp>();
    if (!shardingOp)
      return op.emitError(
          "the sharding of a shard.shard must come from shard.sharding");
    if (shardingOp.getGrid() != mesh.symbol)
      return op.emitError() << "annotation on grid '" << shardingOp.getGrid()
                            << "', but the module's mesh is '" << mesh.symbol
                            << "'";
    Annotation annotation;
    annotation.op = op;
    annotation.sharding = readSharding(shardingOp, op.getType().getRank());
    for (const DimSharding &dim : annotation.sharding.dims)
      for (MeshAxis axis : dim.axes)
        if (axis < 0 || axis >= static_cast<int64_t>(mesh.sizes.size()))
          return op.emitError() << "mesh axis " << axis
                                << " does not exist in '" << mesh.symbol
                                << "'";
    annotation.value = op.getSrc();
    while (auto inner = annotation.value.getDefiningOp<shard::ShardOp>())
      annotation.value = inner.getSrc();
    if (auto priority =
            op->getAttrOfType<IntegerAttr>(WeftDialect::kPriorityAttrName))
      annotation.priority = priority.getInt();
    if (auto pinned = op->getAttrOfType<DenseI64ArrayAttr>(
            WeftDialect::kPinnedDimsAttrName))
      llvm::append_range(annotation.pinnedDims, pinned.asArrayRef());
    annotations.push_back(std::move(annotation));
  }
  return annotations;
}

void weft::dropAnnotations(ArrayRef<Annotation> annotations) {
  for (const Annotation &annotation : annotations) {
    shard::ShardOp op = annotation.op;
    op.getResult().replaceAllUsesWith(op.getSrc());
    Value sharding = op.getSharding();
    op.erase();
    if (sharding.use_empty())
      sharding.getDefiningOp()->erase();
  }
}

std::optional<OpShardingRule> weft::getShardingRule(Operation *op) {
  if (op->getNumResults() == 0 ||
      llvm::any_of(op->getOperandTypes(),
                   [](Type t) { return !llvm::isa<RankedTensorType>(t); }) ||
      llvm::any_of(op->getResultTypes(),
                   [](Type t) { return !llvm::isa<RankedTensorType>(t); }))
    return std::nullopt;
  if (op->hasTrait<OpTrait::Elementwise>() ||
      isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, AndOp, OrOp, XorOp,
          EqualOp, LessOp, LessEqualOp, GreaterOp, GreaterEqualOp, WhereOp,
          ExpandOp>(op))
    return broadcastRule(op);
  if (auto linear = dyn_cast<LinearOp>(op))
    return linearRule(linear);
  if (auto matmul = dyn_cast<MatmulOp>(op))
    return matmulRule(matmul);
  if (auto attention = dyn_cast<AttentionOp>(op))
    return attentionRule(attention);
  if (auto gather = dyn_cast<GatherOp>(op))
    return gatherRule(gather);
  if (isa<ReshapeOp, SqueezeOp, UnsqueezeOp>(op))
    return reshapeRule(op);
  if (auto transpose = dyn_cast<TransposeOp>(op))
    return transposeRule(transpose);
  if (auto split = dyn_cast<SplitOp>(op))
    return splitRule(split);
  if (isa<ConstantOp, RangeOp>(op))
    return sourceRule(op);
  if (isa<SoftmaxOp, LogSoftmaxOp>(op)) {
    OpShardingRule rule = emptyRule(op);
    int64_t axis =
        static_cast<int64_t>(op->getAttrOfType<IntegerAttr>("axis").getInt());
    for (int64_t d = 0; d < rankOf(op->getResult(0)); ++d) {
      if (d == axis)
        continue;
      int64_t factor = rule.addFactor(FactorKind::Parallel);
      rule.operandFactors[0][d] = factor;
      rule.resultFactors[0][d] = factor;
    }
    wholeForTheRest(rule);
    return rule;
  }
  if (isa<LayerNormOp, RmsNormOp>(op)) {
    int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
    OpShardingRule rule = rowRule(op, axis);
    // scale and bias run over the normalized dims, which stay whole; they
    // share those factors with the input.
    int64_t rank = rankOf(op->getResult(0));
    for (int64_t d = axis; d < rank; ++d) {
      int64_t factor = rule.addFactor(FactorKind::Whole);
      rule.operandFactors[0][d] = factor;
      rule.resultFactors[0][d] = factor;
      for (size_t operand = 1; operand < op->getNumOperands(); ++operand)
        rule.operandFactors[operand][d - axis] = factor;
    }
    return rule;
  }
  if (isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp, ReduceProdOp>(
          op)) {
    // A sum over a split dim leaves partial sums; the other reductions (a
    // mean divides by the local count) need their reduced dims whole.
    OpShardingRule rule = emptyRule(op);
    FactorKind reducedKind =
        isa<ReduceSumOp>(op) ? FactorKind::Reduction : FactorKind::Whole;
    ArrayRef<int64_t> axes =
        op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
    bool keepdims = op->hasAttr("keepdims");
    int64_t resultDim = 0;
    for (int64_t d = 0; d < rankOf(op->getOperand(0)); ++d) {
      bool reduced = llvm::is_contained(axes, d);
      if (!reduced) {
        int64_t factor = rule.addFactor(FactorKind::Parallel);
        rule.operandFactors[0][d] = factor;
        rule.resultFactors[0][resultDim] = factor;
      } else
        rule.operandFactors[0][d] = rule.addFactor(reducedKind);
      if (!reduced || keepdims)
        ++resultDim;
    }
    wholeForTheRest(rule);
    return rule;
  }
  if (auto slice = dyn_cast<SliceOp>(op)) {
    ArrayRef<int64_t> shape = shapeOf(slice.getInput());
    SmallVector<bool> touched;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      touched.push_back(slice.getOffsets()[d] != 0 ||
                        slice.getSizes()[d] != shape[d] ||
                        slice.getStrides()[d] != 1);
    return sharedExceptRule(op, touched);
  }
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    int64_t axis = static_cast<int64_t>(concat.getAxis());
    SmallVector<bool> touched(rankOf(concat.getResult()), false);
    touched[axis] = true;
    OpShardingRule rule = sharedExceptRule(op, touched);
    // Equal parts (the gradient of a fused projection's split) share the
    // axis: the result holds them as interleaved blocks, as a split's
    // operand does.
    if (op->getNumOperands() > 1 &&
        llvm::all_equal(llvm::map_range(op->getOperands(), [&](Value v) {
          return shapeOf(v)[axis];
        }))) {
      int64_t factor = rule.addFactor(FactorKind::Parallel);
      for (auto &operand : rule.operandFactors)
        operand[axis] = factor;
      rule.resultFactors[0][axis] = factor;
      rule.resultBlocks[0][axis] = op->getNumOperands();
    }
    return rule;
  }
  if (auto conv = dyn_cast<ConvOp>(op)) {
    // Only the batch splits.
    OpShardingRule rule = emptyRule(op);
    int64_t batch = rule.addFactor(FactorKind::Parallel);
    rule.operandFactors[0][0] = batch;
    rule.resultFactors[0][0] = batch;
    wholeForTheRest(rule);
    return rule;
  }
  if (isa<TriluOp>(op)) {
    int64_t rank = rankOf(op->getResult(0));
    OpShardingRule rule = rowRule(op, rank - 2);
    wholeForTheRest(rule);
    return rule;
  }
  return std::nullopt;
}
