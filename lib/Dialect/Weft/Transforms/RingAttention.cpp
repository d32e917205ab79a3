//===- RingAttention.cpp - Attention with its sequence split over a ring --===//
//
// Ring attention (Liu et al., 2023) over the context-parallel axis: each
// rank keeps its query chunk and passes its key/value chunk to the next
// rank, n - 1 times for n ranks, folding each block into an online softmax.
// The sequence stays in contiguous chunks, so under a causal mask the
// blocks of later chunks are fully masked; every rank still computes all n
// blocks, which keeps the ranks in step but does not skip the masked half.
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
    queryPositions = positionsOf(rank, {chunk, 1});
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
    int64_t group = heads / kvHeads, last = tensorTypeOf(x).getDimSize(3);
    Value expanded = ExpandOp::create(
        b, loc,
        RankedTensorType::get({batch, kvHeads, group, chunk, last}, element),
        reshape(x, {batch, kvHeads, 1, chunk, last}));
    return reshape(expanded, {batch, heads, chunk, last});
  }
  /// A per-query-head gradient summed over each key/value head's group.
  Value perKvHead(Value x) {
    if (kvHeads == heads)
      return x;
    int64_t group = heads / kvHeads, last = tensorTypeOf(x).getDimSize(3);
    return ReduceSumOp::create(b, loc,
                               reshape(x, {batch, kvHeads, group, chunk, last}),
                               b.getDenseI64ArrayAttr({2}), UnitAttr());
  }

  /// The scaled scores of this rank's queries against the key chunk held
  /// at ring step `step` (chunk rank - step), causally masked.
  Value scores(Value q, Value keysPerQueryHead, int64_t step) {
    Value s = mul(matmul(q, transposeLast2(keysPerQueryHead)), scalar(scale));
    if (!causal)
      return s;
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

} // namespace

Value weft::buildRingAttention(OpBuilder &b, Location loc, const Ring &ring,
                               Value q, Value k, Value v, bool causal,
                               double scale) {
  Blocks blocks(b, loc, ring, q, k, causal, scale);
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
