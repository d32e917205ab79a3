//===- RingAttention.cpp - Attention with its sequence split over a ring --===//
//
// Ring attention (Liu et al., 2023) over the context-parallel axis: each
// rank keeps its query chunk and passes its key/value chunk to the next
// rank, n - 1 times for n ranks, folding each block into an online softmax.
//
// Under a causal mask, contiguous chunks leave the blocks of later chunks
// fully masked: rank 0 needs one block, rank n-1 all n, and the ring waits
// for the slowest. The load-balanced layout (zigzag, as in Megatron-LM's
// context parallelism) cuts the sequence into 2n chunks and gives rank r
// chunks r and 2n-1-r. Then every off-diagonal step needs exactly half a
// block: when the arriving chunks come from an earlier rank, both query
// chunks against its first key chunk; from a later rank, the second query
// chunk against both key chunks. Both cases include the quarter (second
// queries x first keys); the other quarter is picked by rank at run time.
// Contiguous chunks ("ring-contiguous") compute every block, masked ones
// too: in step, but twice the causal work. Without a mask every block is
// needed and the layout does not matter.
//
//===----------------------------------------------------------------------===//

#include "RingAttention.h"

#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
using namespace weft;

namespace {

/// The block computations, in weft ops on this rank's local shapes.
class Blocks {
public:
  Blocks(OpBuilder &b, Location loc, const Ring &ring, Value q, Value k,
         bool causal, double scale)
      : b(b), loc(loc), ring(ring), causal(causal), scale(scale) {
    RankedTensorType qt = tensorTypeOf(q), kt = tensorTypeOf(k);
    element = qt.getElementType();
    batch = qt.getDimSize(0);
    heads = qt.getDimSize(1);
    chunk = qt.getDimSize(2);
    kvHeads = kt.getDimSize(1);
    auto position = shard::ProcessMultiIndexOp::create(
        b, loc, ring.mesh.symbol, SmallVector<MeshAxis>{ring.axis});
    rank = position.getResult()[0];
  }

  Value scalar(double value) { return createScalar(b, loc, element, value); }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value exp(Value x) { return ExpOp::create(b, loc, x); }
  Value matmul(Value x, Value y) { return MatmulOp::create(b, loc, x, y); }
  Value transposeLast2(Value x) {
    return TransposeOp::create(b, loc, x, b.getDenseI64ArrayAttr({0, 1, 3, 2}));
  }
  Value rowMax(Value x) {
    return ReduceMaxOp::create(b, loc, x, b.getDenseI64ArrayAttr({3}),
                               b.getUnitAttr());
  }
  Value rowSum(Value x) {
    return ReduceSumOp::create(b, loc, x, b.getDenseI64ArrayAttr({3}),
                               b.getUnitAttr());
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    return ReshapeOp::create(
        b, loc, RankedTensorType::get(shape, tensorTypeOf(x).getElementType()),
        x);
  }

  /// Passes `x` to the next rank of the ring; returns the previous rank's.
  Value shift(Value x) {
    return shard::ShiftOp::create(
        b, loc, x.getType(), ring.mesh.symbol, SmallVector<MeshAxis>{ring.axis},
        x, APInt(64, ring.axis), /*offset=*/1, /*rotate=*/true);
  }

  /// Key/value heads seen per query head (grouped-query attention).
  Value perQueryHead(Value x) {
    if (kvHeads == heads)
      return x;
    RankedTensorType type = tensorTypeOf(x);
    int64_t group = heads / kvHeads, length = type.getDimSize(2),
            last = type.getDimSize(3);
    Value expanded = ExpandOp::create(
        b, loc,
        RankedTensorType::get({batch, kvHeads, group, length, last}, element),
        reshape(x, {batch, kvHeads, 1, length, last}));
    return reshape(expanded, {batch, heads, length, last});
  }
  /// A per-query-head gradient summed over each key/value head's group.
  Value perKvHead(Value x) {
    if (kvHeads == heads)
      return x;
    RankedTensorType type = tensorTypeOf(x);
    int64_t group = heads / kvHeads, length = type.getDimSize(2),
            last = type.getDimSize(3);
    return ReduceSumOp::create(
        b, loc, reshape(x, {batch, kvHeads, group, length, last}),
        b.getDenseI64ArrayAttr({2}), UnitAttr());
  }

  /// Half `index` (0 or 1) of a local chunk along the sequence.
  Value half(Value x, int64_t index) {
    RankedTensorType type = tensorTypeOf(x);
    SmallVector<int64_t> offsets(4, 0), sizes(type.getShape()), strides(4, 1);
    sizes[2] /= 2;
    offsets[2] = index * sizes[2];
    return SliceOp::create(b, loc, x, offsets, sizes, strides);
  }
  Value joinHalves(Value first, Value second) {
    return ConcatOp::create(b, loc, ValueRange{first, second},
                            b.getI64IntegerAttr(2));
  }
  Value select(Value condition, Value onTrue, Value onFalse) {
    return WhereOp::create(b, loc, condition, onTrue, onFalse);
  }
  /// Whether this rank's position on the ring is at least `step`: then the
  /// chunks arriving at that step come from an earlier rank.
  Value fromEarlierRank(int64_t step) {
    Value atLeast =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, rank,
                              arith::ConstantIndexOp::create(b, loc, step));
    return tensor::FromElementsOp::create(
        b, loc, RankedTensorType::get({}, b.getI1Type()), atLeast);
  }

  /// The scaled scores of `q` against `keysPerQueryHead`, unmasked.
  Value rawScores(Value q, Value keysPerQueryHead) {
    return mul(matmul(q, transposeLast2(keysPerQueryHead)), scalar(scale));
  }
  /// Scores masked so that key i is seen by query j when i <= j + offset:
  /// the diagonal blocks of the head/tail layout, whose two chunks keep
  /// their order.
  Value diagonalScores(Value q, Value keysPerQueryHead, int64_t offset) {
    Value s = rawScores(q, keysPerQueryHead);
    int64_t queries = tensorTypeOf(q).getDimSize(2),
            keys = tensorTypeOf(keysPerQueryHead).getDimSize(2);
    auto i64 = b.getI64Type();
    Value keyIndex =
        reshape(RangeOp::create(b, loc, RankedTensorType::get({keys}, i64),
                                b.getI64IntegerAttr(0), b.getI64IntegerAttr(1)),
                {1, keys});
    Value lastSeen = reshape(
        RangeOp::create(b, loc, RankedTensorType::get({queries}, i64),
                        b.getI64IntegerAttr(offset), b.getI64IntegerAttr(1)),
        {queries, 1});
    Value visible = LessEqualOp::create(b, loc, keyIndex, lastSeen);
    return WhereOp::create(b, loc, visible, s, scalar(-INFINITY));
  }

  /// The scaled scores of this rank's queries against the key chunk held
  /// at ring step `step` (chunk rank - step), causally masked.
  Value scores(Value q, Value keysPerQueryHead, int64_t step) {
    Value s = rawScores(q, keysPerQueryHead);
    if (!causal)
      return s;
    if (!queryPositions)
      queryPositions = positionsOf(rank, {chunk, 1});
    int64_t n = ring.mesh.sizes[ring.axis];
    // (rank - step) mod n, kept non-negative.
    Value source = arith::RemUIOp::create(
        b, loc,
        arith::AddIOp::create(b, loc, rank,
                              arith::ConstantIndexOp::create(b, loc, n - step)),
        arith::ConstantIndexOp::create(b, loc, n));
    Value keyPositions = positionsOf(source, {1, chunk});
    Value visible = LessEqualOp::create(b, loc, keyPositions, queryPositions);
    return WhereOp::create(b, loc, visible, s, scalar(-INFINITY));
  }

  OpBuilder &b;
  Location loc;
  const Ring &ring;
  bool causal;
  double scale;
  Type element;
  int64_t batch, heads, chunk, kvHeads;
  Value rank, queryPositions;

private:
  /// The global positions of chunk `index` (an index value), as i64
  /// `shape` ([chunk, 1] or [1, chunk]).
  Value positionsOf(Value index, ArrayRef<int64_t> shape) {
    auto i64 = b.getI64Type();
    Value local =
        reshape(RangeOp::create(b, loc, RankedTensorType::get({chunk}, i64),
                                b.getI64IntegerAttr(0), b.getI64IntegerAttr(1)),
                shape);
    Value first = arith::IndexCastOp::create(
        b, loc, i64,
        arith::MulIOp::create(b, loc, index,
                              arith::ConstantIndexOp::create(b, loc, chunk)));
    Value firstTensor = tensor::FromElementsOp::create(
        b, loc, RankedTensorType::get({}, i64), first);
    return AddOp::create(b, loc, local, firstTensor);
  }
};

/// The running maximum and sum of each query row after folding in the
/// block `scores` (the first block starts them).
void foldRow(Blocks &blocks, Value scores, Value &max, Value &sum,
             Value *rescale, Value *weights) {
  if (!max) {
    max = blocks.rowMax(scores);
    Value e = blocks.exp(blocks.sub(scores, max));
    sum = blocks.rowSum(e);
    if (weights)
      *weights = e;
    return;
  }
  // The diagonal block came first, so `max` is finite on every row.
  Value newMax =
      MaxOp::create(blocks.b, blocks.loc, max, blocks.rowMax(scores));
  Value alpha = blocks.exp(blocks.sub(max, newMax));
  Value e = blocks.exp(blocks.sub(scores, newMax));
  sum = blocks.add(blocks.mul(sum, alpha), blocks.rowSum(e));
  max = newMax;
  if (rescale)
    *rescale = alpha;
  if (weights)
    *weights = e;
}

/// One query chunk's online softmax: running row maximum, sum and, in
/// the forward pass, the output accumulator.
struct RowState {
  Value max, sum, acc;

  /// Folds in a block of `scores` (and the values they weigh, if any).
  void fold(Blocks &blocks, Value scores, Value values) {
    Value alpha, weights;
    foldRow(blocks, scores, max, sum, values ? &alpha : nullptr,
            values ? &weights : nullptr);
    if (!values)
      return;
    Value part = blocks.matmul(weights, blocks.perQueryHead(values));
    acc = acc ? blocks.add(blocks.mul(acc, alpha), part) : part;
  }
  RowState select(Blocks &blocks, Value condition, const RowState &other) {
    return {blocks.select(condition, max, other.max),
            blocks.select(condition, sum, other.sum),
            acc ? blocks.select(condition, acc, other.acc) : Value()};
  }
};

/// Folds the blocks of `keys`/`values` arriving at `step` into the two
/// query halves' states (values null: statistics only).
void foldZigzagStep(Blocks &blocks, int64_t step, Value q0, Value q1,
                    Value keys, Value values, RowState &first,
                    RowState &second) {
  auto valuesHalf = [&](int64_t index) {
    return values ? blocks.half(values, index) : Value();
  };
  if (step == 0) {
    first.fold(
        blocks,
        blocks.diagonalScores(q0, blocks.perQueryHead(blocks.half(keys, 0)), 0),
        valuesHalf(0));
    second.fold(
        blocks,
        blocks.diagonalScores(q1, blocks.perQueryHead(keys), blocks.chunk / 2),
        values);
    return;
  }
  Value k0 = blocks.half(keys, 0), k1 = blocks.half(keys, 1);
  // The tail queries see the arriving head keys at every step.
  second.fold(blocks, blocks.rawScores(q1, blocks.perQueryHead(k0)),
              valuesHalf(0));
  // From an earlier rank: head queries x head keys; from a later one: tail
  // queries x tail keys.
  Value early = blocks.fromEarlierRank(step);
  RowState picked = first.select(blocks, early, second);
  picked.fold(
      blocks,
      blocks.rawScores(blocks.select(early, q0, q1),
                       blocks.perQueryHead(blocks.select(early, k0, k1))),
      values ? blocks.select(early, valuesHalf(0), valuesHalf(1)) : Value());
  first = picked.select(blocks, early, first);
  second = second.select(blocks, early, picked);
}

Value zigzagAttention(Blocks &blocks, Value q, Value k, Value v) {
  int64_t n = blocks.ring.mesh.sizes[blocks.ring.axis];
  Value q0 = blocks.half(q, 0), q1 = blocks.half(q, 1);
  RowState first, second;
  for (int64_t step = 0; step < n; ++step) {
    if (step > 0) {
      k = blocks.shift(k);
      v = blocks.shift(v);
    }
    foldZigzagStep(blocks, step, q0, q1, k, v, first, second);
  }
  return blocks.joinHalves(
      DivOp::create(blocks.b, blocks.loc, first.acc, first.sum),
      DivOp::create(blocks.b, blocks.loc, second.acc, second.sum));
}

/// The gradients of one block: queries `q` (with their rows' log-sum-exp,
/// rowsum(dO * O) and output gradient) against `keysPerHead`, `values`.
struct BlockGrad {
  Value query, key, value;
};
BlockGrad blockGrad(Blocks &blocks, Value q, Value logSumExp, Value rowDot,
                    Value outGrad, Value scores, Value keysPerHead,
                    Value values) {
  Value probabilities = blocks.exp(blocks.sub(scores, logSumExp));
  Value valueGrad = blocks.perKvHead(
      blocks.matmul(blocks.transposeLast2(probabilities), outGrad));
  Value dp = blocks.matmul(outGrad,
                           blocks.transposeLast2(blocks.perQueryHead(values)));
  Value ds = blocks.mul(blocks.mul(probabilities, blocks.sub(dp, rowDot)),
                        blocks.scalar(blocks.scale));
  return {blocks.matmul(ds, keysPerHead),
          blocks.perKvHead(blocks.matmul(blocks.transposeLast2(ds), q)),
          valueGrad};
}

SmallVector<Value, 3> zigzagAttentionGrad(Blocks &blocks, Value q, Value k,
                                          Value v, Value out, Value outGrad) {
  int64_t n = blocks.ring.mesh.sizes[blocks.ring.axis];
  Value q0 = blocks.half(q, 0), q1 = blocks.half(q, 1);
  // The key chunks in ring order, and each query half's log-sum-exp.
  SmallVector<Value> keys{k};
  for (int64_t step = 1; step < n; ++step)
    keys.push_back(blocks.shift(keys.back()));
  RowState first, second;
  for (int64_t step = 0; step < n; ++step)
    foldZigzagStep(blocks, step, q0, q1, keys[step], Value(), first, second);
  auto logSumExp = [&](const RowState &state) {
    return blocks.add(state.max,
                      LogOp::create(blocks.b, blocks.loc, state.sum));
  };
  Value lse[2] = {logSumExp(first), logSumExp(second)};
  Value rowDot = blocks.rowSum(blocks.mul(outGrad, out));
  Value rowDots[2] = {blocks.half(rowDot, 0), blocks.half(rowDot, 1)};
  Value outGrads[2] = {blocks.half(outGrad, 0), blocks.half(outGrad, 1)};
  Value queries[2] = {q0, q1};
  auto grad = [&](int64_t queryHalf, Value scores, Value keysPerHead,
                  Value values) {
    return blockGrad(blocks, queries[queryHalf], lse[queryHalf],
                     rowDots[queryHalf], outGrads[queryHalf], scores,
                     keysPerHead, values);
  };
  // Gradients per query half, and per key half of the chunks travelling
  // with the values.
  Value queryGrad[2], keyGrad[2], valueGrad[2];
  for (int64_t step = 0; step < n; ++step) {
    if (step > 0) {
      v = blocks.shift(v);
      Value keysHome = blocks.shift(blocks.joinHalves(keyGrad[0], keyGrad[1]));
      Value valuesHome =
          blocks.shift(blocks.joinHalves(valueGrad[0], valueGrad[1]));
      keyGrad[0] = blocks.half(keysHome, 0);
      keyGrad[1] = blocks.half(keysHome, 1);
      valueGrad[0] = blocks.half(valuesHome, 0);
      valueGrad[1] = blocks.half(valuesHome, 1);
    }
    Value k0 = blocks.half(keys[step], 0), k1 = blocks.half(keys[step], 1);
    Value v0 = blocks.half(v, 0), v1 = blocks.half(v, 1);
    if (step == 0) {
      Value k0PerHead = blocks.perQueryHead(k0);
      BlockGrad head =
          grad(0, blocks.diagonalScores(q0, k0PerHead, 0), k0PerHead, v0);
      Value kPerHead = blocks.perQueryHead(keys[0]);
      BlockGrad tail =
          grad(1, blocks.diagonalScores(q1, kPerHead, blocks.chunk / 2),
               kPerHead, v);
      queryGrad[0] = head.query;
      queryGrad[1] = tail.query;
      keyGrad[0] = blocks.add(head.key, blocks.half(tail.key, 0));
      keyGrad[1] = blocks.half(tail.key, 1);
      valueGrad[0] = blocks.add(head.value, blocks.half(tail.value, 0));
      valueGrad[1] = blocks.half(tail.value, 1);
      continue;
    }
    Value k0PerHead = blocks.perQueryHead(k0);
    BlockGrad always = grad(1, blocks.rawScores(q1, k0PerHead), k0PerHead, v0);
    queryGrad[1] = blocks.add(queryGrad[1], always.query);
    keyGrad[0] = blocks.add(keyGrad[0], always.key);
    valueGrad[0] = blocks.add(valueGrad[0], always.value);
    // The picked block, as in the forward pass.
    Value early = blocks.fromEarlierRank(step);
    auto pick = [&](Value *halves) {
      return blocks.select(early, halves[0], halves[1]);
    };
    Value keysPerHead = blocks.perQueryHead(blocks.select(early, k0, k1));
    Value queryPicked = pick(queries);
    BlockGrad picked =
        blockGrad(blocks, queryPicked, pick(lse), pick(rowDots), pick(outGrads),
                  blocks.rawScores(queryPicked, keysPerHead), keysPerHead,
                  blocks.select(early, v0, v1));
    auto addToPicked = [&](Value *halves, Value part) {
      Value sum = blocks.add(pick(halves), part);
      halves[0] = blocks.select(early, sum, halves[0]);
      halves[1] = blocks.select(early, halves[1], sum);
    };
    addToPicked(queryGrad, picked.query);
    addToPicked(keyGrad, picked.key);
    addToPicked(valueGrad, picked.value);
  }
  Value keyGradient = blocks.joinHalves(keyGrad[0], keyGrad[1]);
  Value valueGradient = blocks.joinHalves(valueGrad[0], valueGrad[1]);
  // The accumulators of chunk r + 1 end on rank r: one more step home.
  if (n > 1) {
    keyGradient = blocks.shift(keyGradient);
    valueGradient = blocks.shift(valueGradient);
  }
  return {blocks.joinHalves(queryGrad[0], queryGrad[1]), keyGradient,
          valueGradient};
}

} // namespace

Value weft::buildRingAttention(OpBuilder &b, Location loc, const Ring &ring,
                               Value q, Value k, Value v, bool causal,
                               double scale) {
  Blocks blocks(b, loc, ring, q, k, causal, scale);
  if (causal && ring.zigzag)
    return zigzagAttention(blocks, q, k, v);
  int64_t n = ring.mesh.sizes[ring.axis];
  Value max, sum, acc;
  for (int64_t step = 0; step < n; ++step) {
    if (step > 0) {
      k = blocks.shift(k);
      v = blocks.shift(v);
    }
    Value scores = blocks.scores(q, blocks.perQueryHead(k), step);
    Value alpha, weights;
    foldRow(blocks, scores, max, sum, &alpha, &weights);
    Value part = blocks.matmul(weights, blocks.perQueryHead(v));
    acc = acc ? blocks.add(blocks.mul(acc, alpha), part) : part;
  }
  return DivOp::create(b, loc, acc, sum);
}

SmallVector<Value, 3> weft::buildRingAttentionGrad(OpBuilder &b, Location loc,
                                                   const Ring &ring, Value q,
                                                   Value k, Value v, Value out,
                                                   Value outGrad, bool causal,
                                                   double scale) {
  Blocks blocks(b, loc, ring, q, k, causal, scale);
  if (causal && ring.zigzag)
    return zigzagAttentionGrad(blocks, q, k, v, out, outGrad);
  int64_t n = ring.mesh.sizes[ring.axis];
  // The key chunks in ring order, and each row's log-sum-exp over them.
  SmallVector<Value> keys{k};
  for (int64_t step = 1; step < n; ++step)
    keys.push_back(blocks.shift(keys.back()));
  Value max, sum;
  for (int64_t step = 0; step < n; ++step)
    foldRow(blocks, blocks.scores(q, blocks.perQueryHead(keys[step]), step),
            max, sum, nullptr, nullptr);
  Value logSumExp = blocks.add(max, LogOp::create(b, loc, sum));
  // rowsum(dO * O): the softmax's Jacobian term, the same for every block.
  Value rowDot = blocks.rowSum(blocks.mul(outGrad, out));
  Value queryGrad, keyGrad, valueGrad;
  for (int64_t step = 0; step < n; ++step) {
    if (step > 0) {
      v = blocks.shift(v);
      keyGrad = blocks.shift(keyGrad);
      valueGrad = blocks.shift(valueGrad);
    }
    Value keysPerHead = blocks.perQueryHead(keys[step]);
    Value probabilities =
        blocks.exp(blocks.sub(blocks.scores(q, keysPerHead, step), logSumExp));
    Value valuePart = blocks.perKvHead(
        blocks.matmul(blocks.transposeLast2(probabilities), outGrad));
    Value dp =
        blocks.matmul(outGrad, blocks.transposeLast2(blocks.perQueryHead(v)));
    Value ds = blocks.mul(blocks.mul(probabilities, blocks.sub(dp, rowDot)),
                          blocks.scalar(scale));
    Value queryPart = blocks.matmul(ds, keysPerHead);
    Value keyPart =
        blocks.perKvHead(blocks.matmul(blocks.transposeLast2(ds), q));
    queryGrad = queryGrad ? blocks.add(queryGrad, queryPart) : queryPart;
    keyGrad = keyGrad ? blocks.add(keyGrad, keyPart) : keyPart;
    valueGrad = valueGrad ? blocks.add(valueGrad, valuePart) : valuePart;
  }
  // The accumulators of chunk r + 1 end on rank r: one more step home.
  if (n > 1) {
    keyGrad = blocks.shift(keyGrad);
    valueGrad = blocks.shift(valueGrad);
  }
  return {queryGrad, keyGrad, valueGrad};
}
