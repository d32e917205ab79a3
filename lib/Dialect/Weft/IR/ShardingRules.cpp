//===- ShardingRules.cpp - Each weft op's sharding rule -------------------===//
//
// The ShardingRuleOpInterface of every weft op. Propagation and the
// partitioner (Transforms/) read these rules and nothing else about an op.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"

using namespace mlir;
using namespace weft;

namespace {

int64_t rankOf(Value v) {
  return llvm::cast<ShapedType>(v.getType()).getRank();
}

ArrayRef<int64_t> shapeOf(Value v) {
  return llvm::cast<ShapedType>(v.getType()).getShape();
}

/// Per-dim factor lists (all -1) and block counts (all 1) for every
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

/// Every dim of every operand and result not yet assigned gets its own
/// whole factor.
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

/// The leading dims of operand 0 and result 0 share parallel factors; dims
/// from `firstWhole` on are left unassigned.
OpShardingRule rowRule(Operation *op, int64_t firstWhole) {
  OpShardingRule rule = emptyRule(op);
  for (int64_t d = 0; d < firstWhole; ++d) {
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    rule.operandFactors[0][d] = factor;
    rule.resultFactors[0][d] = factor;
  }
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

/// Every dim but the normalized `axis` is parallel.
OpShardingRule softmaxRule(Operation *op, int64_t axis) {
  OpShardingRule rule = emptyRule(op);
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

/// Rows are parallel; the normalized dims from `axis` on stay whole, and
/// the scale and bias run over them.
OpShardingRule normRule(Operation *op, int64_t axis) {
  OpShardingRule rule = rowRule(op, axis);
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

/// The kept dims are parallel; the reduced ones are `reducedKind`.
OpShardingRule reduceRule(Operation *op, ArrayRef<int64_t> axes, bool keepdims,
                          FactorKind reducedKind) {
  OpShardingRule rule = emptyRule(op);
  int64_t resultDim = 0;
  for (int64_t d = 0; d < rankOf(op->getOperand(0)); ++d) {
    bool reduced = llvm::is_contained(axes, d);
    if (!reduced) {
      int64_t factor = rule.addFactor(FactorKind::Parallel);
      rule.operandFactors[0][d] = factor;
      rule.resultFactors[0][resultDim] = factor;
    } else {
      rule.operandFactors[0][d] = rule.addFactor(reducedKind);
    }
    if (!reduced || keepdims)
      ++resultDim;
  }
  wholeForTheRest(rule);
  return rule;
}

} // namespace

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

OpShardingRule ConstantOp::getShardingRule() { return sourceRule(*this); }
OpShardingRule RangeOp::getShardingRule() { return sourceRule(*this); }

//===----------------------------------------------------------------------===//
// Elementwise ops: numpy broadcasting
//===----------------------------------------------------------------------===//

OpShardingRule SqrtOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule RsqrtOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule ExpOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule LogOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule TanhOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule ErfOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule SigmoidOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule SiluOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule ReciprocalOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule SinOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule CosOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule NegOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule AbsOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule ReluOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule GeluOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule GeluGradOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule NotOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule CastOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule AddOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule SubOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule MulOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule DivOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule PowOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule MaxOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule MinOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule AndOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule OrOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule XorOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule EqualOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule LessOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule LessEqualOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule GreaterOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule GreaterEqualOp::getShardingRule() {
  return broadcastRule(*this);
}
OpShardingRule WhereOp::getShardingRule() { return broadcastRule(*this); }
OpShardingRule ExpandOp::getShardingRule() { return broadcastRule(*this); }

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

OpShardingRule MatmulOp::getShardingRule() {
  OpShardingRule rule = emptyRule(*this);
  int64_t lhsRank = rankOf(getLhs()), rhsRank = rankOf(getRhs());
  int64_t resultRank = rankOf(getResult());
  if (lhsRank < 2 || rhsRank < 2) {
    wholeForTheRest(rule);
    return rule;
  }
  ArrayRef<int64_t> resultShape = shapeOf(getResult());
  for (int64_t d = 0; d + 2 < resultRank; ++d)
    rule.resultFactors[0][d] = rule.addFactor(FactorKind::Parallel);
  auto mapBatch = [&](int64_t operand, int64_t rank) {
    ArrayRef<int64_t> shape = shapeOf(getOperand(operand));
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

OpShardingRule LinearOp::getShardingRule() {
  OpShardingRule rule = emptyRule(*this);
  int64_t rank = rankOf(getInput());
  for (int64_t d = 0; d + 1 < rank; ++d) {
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    rule.operandFactors[0][d] = factor;
    rule.resultFactors[0][d] = factor;
  }
  int64_t k = rule.addFactor(FactorKind::Reduction);
  int64_t n = rule.addFactor(FactorKind::Parallel);
  rule.operandFactors[0][rank - 1] = k;
  bool transposed = getTransposeWeight();
  rule.operandFactors[1][transposed ? 1 : 0] = k;
  rule.operandFactors[1][transposed ? 0 : 1] = n;
  if (getBias())
    rule.operandFactors[2][0] = n;
  rule.resultFactors[0][rank - 1] = n;
  return rule;
}

/// Only the batch splits.
OpShardingRule ConvOp::getShardingRule() {
  OpShardingRule rule = emptyRule(*this);
  int64_t batch = rule.addFactor(FactorKind::Parallel);
  rule.operandFactors[0][0] = batch;
  rule.resultFactors[0][0] = batch;
  wholeForTheRest(rule);
  return rule;
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

// A sum over a split dim leaves partial sums; the other reductions (a mean
// divides by the local count) need their reduced dims whole.
OpShardingRule ReduceSumOp::getShardingRule() {
  return reduceRule(*this, getAxes(), getKeepdims(), FactorKind::Reduction);
}
OpShardingRule ReduceMeanOp::getShardingRule() {
  return reduceRule(*this, getAxes(), getKeepdims(), FactorKind::Whole);
}
OpShardingRule ReduceMaxOp::getShardingRule() {
  return reduceRule(*this, getAxes(), getKeepdims(), FactorKind::Whole);
}
OpShardingRule ReduceMinOp::getShardingRule() {
  return reduceRule(*this, getAxes(), getKeepdims(), FactorKind::Whole);
}
OpShardingRule ReduceProdOp::getShardingRule() {
  return reduceRule(*this, getAxes(), getKeepdims(), FactorKind::Whole);
}

OpShardingRule SoftmaxOp::getShardingRule() {
  return softmaxRule(*this, static_cast<int64_t>(getAxis()));
}
OpShardingRule LogSoftmaxOp::getShardingRule() {
  return softmaxRule(*this, static_cast<int64_t>(getAxis()));
}

/// The positions (every dim but the logits' last) are parallel and shared
/// by every operand and result; the classes stay whole (the log-sum-exp is
/// over all of them).
static OpShardingRule crossEntropyRule(Operation *op) {
  OpShardingRule rule = emptyRule(op);
  int64_t positions = rankOf(op->getOperand(0)) - 1;
  for (int64_t d = 0; d < positions; ++d) {
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    for (auto &dims : rule.operandFactors)
      dims[d] = factor;
    for (auto &dims : rule.resultFactors)
      dims[d] = factor;
  }
  wholeForTheRest(rule);
  return rule;
}

OpShardingRule SoftmaxCrossEntropyOp::getShardingRule() {
  return crossEntropyRule(*this);
}
OpShardingRule SoftmaxCrossEntropyGradOp::getShardingRule() {
  return crossEntropyRule(*this);
}

/// Rows parallel in the input, its gradients (and the addend) and the
/// per-row statistics; the normalized dims whole (in the statistics, where
/// they are 1, each a whole factor of its own).
OpShardingRule NormGradOp::getShardingRule() {
  OpShardingRule rule = emptyRule(*this);
  int64_t axis = getAxis(), rank = rankOf(getInput());
  for (int64_t d = 0; d < rank; ++d) {
    bool row = d < axis;
    int64_t factor =
        rule.addFactor(row ? FactorKind::Parallel : FactorKind::Whole);
    rule.operandFactors[0][d] = factor;
    rule.operandFactors[2][d] = factor;
    if (getAddend())
      rule.operandFactors[3][d] = factor;
    rule.resultFactors[0][d] = factor;
    if (row) {
      rule.resultFactors[1][d] = factor;
      rule.resultFactors[2][d] = factor;
    } else {
      rule.operandFactors[1][d - axis] = factor;
    }
  }
  wholeForTheRest(rule);
  return rule;
}

OpShardingRule LayerNormOp::getShardingRule() {
  return normRule(*this, static_cast<int64_t>(getAxis()));
}
OpShardingRule RmsNormOp::getShardingRule() {
  return normRule(*this, static_cast<int64_t>(getAxis()));
}

/// q [B, H, S, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv], mask broadcastable
/// to [B, H, S, T]: batch and heads split (kv heads with the query heads,
/// which keeps each rank's query heads with their shared kv head; a single
/// kv head stays whole); D is contracted and stays whole. A mask-free
/// self-attention (S == T) has its sequence as a Context factor: the
/// partitioner splits it over the context-parallel axis only, as a ring or an
/// all-to-all over the heads (softmax runs over T and the causal mask needs
/// global positions, so a plain split would be wrong). `operands` are q, k, v
/// followed by tensors whose leading dims are the result's (the mask is handled
/// here, the gradient op's out, out_grad and log-sum-exp are the rest);
/// `results` likewise.
static OpShardingRule attentionRule(Operation *op, Value query, Value key,
                                    Value mask) {
  OpShardingRule rule = emptyRule(op);
  int64_t batch = rule.addFactor(FactorKind::Parallel);
  int64_t heads = rule.addFactor(FactorKind::Parallel);
  int64_t length = shapeOf(query)[2];
  std::optional<int64_t> sequence;
  if (!mask && length == shapeOf(key)[2])
    sequence = rule.addFactor(FactorKind::Context);
  rule.headFactor = heads;
  auto shareDims = [&](SmallVector<int64_t> &dims) {
    dims[0] = batch;
    dims[1] = heads;
    if (sequence)
      dims[2] = *sequence;
  };
  for (auto [index, operand] : llvm::enumerate(op->getOperands()))
    if (operand != mask)
      shareDims(rule.operandFactors[index]);
  for (auto &dims : rule.resultFactors)
    shareDims(dims);
  // One key/value head read by every query head (multi-query attention)
  // is broadcast: whole on every rank that holds some query heads. (The
  // gradient op sums that head's gradient over the query heads: it keeps
  // the shared factor, so a split of the heads reaches it whole.)
  if (isa<AttentionOp>(op) && shapeOf(key)[1] == 1 && shapeOf(query)[1] > 1)
    for (int64_t index : {1, 2})
      rule.operandFactors[index][1] = -1;
  if (mask) {
    auto maskIndex =
        std::distance(op->operand_begin(), llvm::find(op->getOperands(), mask));
    ArrayRef<int64_t> shape = shapeOf(mask);
    ArrayRef<int64_t> scores = shapeOf(query);
    int64_t offset = 4 - shape.size();
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      int64_t full = offset + d;
      if (full < 2 && shape[d] == scores[full] && shape[d] != 1)
        rule.operandFactors[maskIndex][d] = full == 0 ? batch : heads;
    }
  }
  // Size-1 mask dims, the head dims and a cross-attention's S and T stay
  // whole.
  wholeForTheRest(rule);
  return rule;
}

OpShardingRule AttentionOp::getShardingRule() {
  return attentionRule(*this, getQuery(), getKey(), getMask());
}

OpShardingRule AttentionGradOp::getShardingRule() {
  return attentionRule(*this, getQuery(), getKey(), getMask());
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// table [V, ...] gathered by indices [...] on axis 0: index dims and the
/// table's row dims are parallel; V is a reduction: a rank holding a slice
/// of the rows looks up only the indices it owns and zeros the others, and
/// the partial results sum to the full lookup (vocab-parallel embedding).
OpShardingRule GatherOp::getShardingRule() {
  OpShardingRule rule = emptyRule(*this);
  int64_t axis = static_cast<int64_t>(getAxis());
  int64_t indexRank = rankOf(getIndices());
  int64_t dataRank = rankOf(getData());
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

/// updates [indices..., k...] summed into result [rows, k...]: the index
/// dims are a reduction (each rank's lookups give a partial table); k is
/// parallel; the rows are parallel too, in the result only: a rank holding
/// a slice of them adds the updates whose indices fall in it (the
/// partitioner shifts the indices by the slice's first row).
OpShardingRule ScatterAddOp::getShardingRule() {
  OpShardingRule rule = emptyRule(*this);
  int64_t indexRank = rankOf(getIndices());
  for (int64_t d = 0; d < indexRank; ++d) {
    int64_t factor = rule.addFactor(FactorKind::Reduction);
    rule.operandFactors[0][d] = factor;
    rule.operandFactors[1][d] = factor;
  }
  rule.resultFactors[0][0] = rule.addFactor(FactorKind::Parallel);
  for (int64_t d = 1; d < rankOf(getResult()); ++d) {
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    rule.operandFactors[0][indexRank + d - 1] = factor;
    rule.resultFactors[0][d] = factor;
  }
  return rule;
}

OpShardingRule ReshapeOp::getShardingRule() { return reshapeRule(*this); }
OpShardingRule SqueezeOp::getShardingRule() { return reshapeRule(*this); }
OpShardingRule UnsqueezeOp::getShardingRule() { return reshapeRule(*this); }

OpShardingRule TransposeOp::getShardingRule() {
  OpShardingRule rule = emptyRule(*this);
  for (auto [d, source] : llvm::enumerate(getPermutation())) {
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    rule.resultFactors[0][d] = factor;
    rule.operandFactors[0][source] = factor;
  }
  return rule;
}

OpShardingRule ConcatOp::getShardingRule() {
  int64_t axis = static_cast<int64_t>(getAxis());
  SmallVector<bool> touched(rankOf(getResult()), false);
  touched[axis] = true;
  OpShardingRule rule = sharedExceptRule(*this, touched);
  // Equal parts (the gradient of a fused projection's split) share the
  // axis: the result holds them as interleaved blocks, as a split's
  // operand does.
  if (getNumOperands() > 1 &&
      llvm::all_equal(llvm::map_range(
          getOperands(), [&](Value v) { return shapeOf(v)[axis]; }))) {
    int64_t factor = rule.addFactor(FactorKind::Parallel);
    for (auto &operand : rule.operandFactors)
      operand[axis] = factor;
    rule.resultFactors[0][axis] = factor;
    rule.resultBlocks[0][axis] = getNumOperands();
  }
  return rule;
}

/// Split along `axis`: the other dims are shared. Equal parts also share
/// the axis: the operand holds the parts as interleaved blocks, so a split
/// over the mesh gives each rank its slice of every part.
OpShardingRule SplitOp::getShardingRule() {
  OpShardingRule rule = emptyRule(*this);
  int64_t rank = rankOf(getInput());
  int64_t axis = static_cast<int64_t>(getAxis());
  ArrayRef<int64_t> sizes = getSizes();
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

OpShardingRule SliceOp::getShardingRule() {
  ArrayRef<int64_t> shape = shapeOf(getInput());
  SmallVector<bool> touched;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    touched.push_back(getOffsets()[d] != 0 || getSizes()[d] != shape[d] ||
                      getStrides()[d] != 1);
  return sharedExceptRule(*this, touched);
}

/// The matrix dims stay whole: which elements are kept depends on their
/// global row and column.
OpShardingRule TriluOp::getShardingRule() {
  OpShardingRule rule = rowRule(*this, rankOf(getResult()) - 2);
  wholeForTheRest(rule);
  return rule;
}
