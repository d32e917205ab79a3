//===- BufferizeScatterAdd.cpp - weft.scatter_add as atomic adds ----------===//
//
// A scatter writes where its indices say, which no linalg op on tensors
// expresses; it stays a weft op through convert-weft-to-linalg and
// bufferizes here into a zeroed table and one parallel loop over every
// (lookup, column) whose body adds its element into the table's row with an
// atomic add: one launch on a GPU (lookups of the same row collide only
// there), and an OpenMP loop on the CPU.
//
//===----------------------------------------------------------------------===//

#include "Bufferizations.h"

#include "weft/Conversion/NewBufferBufferization.h"
#include "weft/Conversion/Passes.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace {

struct ScatterAddBufferization
    : public weft::NewBufferBufferization<ScatterAddBufferization,
                                          weft::ScatterAddOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const bufferization::BufferizationOptions &options,
                          bufferization::BufferizationState &state) const {
    auto scatter = cast<weft::ScatterAddOp>(op);
    Location loc = op->getLoc();
    FailureOr<Value> updates =
        bufferization::getBuffer(rewriter, scatter.getUpdates(), options, state);
    FailureOr<Value> indices =
        bufferization::getBuffer(rewriter, scatter.getIndices(), options, state);
    if (failed(updates) || failed(indices))
      return failure();
    RankedTensorType resultType = scatter.getType();
    Type element = resultType.getElementType();
    int64_t rows = resultType.getDimSize(0);
    auto table = memref::AllocOp::create(
        rewriter, loc, MemRefType::get(resultType.getShape(), element),
        ValueRange{}, rewriter.getI64IntegerAttr(64));
    Value zero = arith::ConstantOp::create(
        rewriter, loc, rewriter.getFloatAttr(element, 0.0));
    linalg::FillOp::create(rewriter, loc, ValueRange{zero},
                           ValueRange{table.getResult()});

    // One loop dim per index dim, then one per column dim.
    auto indicesType = cast<MemRefType>(indices->getType());
    SmallVector<Value> lower, upper, steps;
    Value c0 = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(rewriter, loc, 1);
    for (int64_t size : cast<MemRefType>(updates->getType()).getShape()) {
      lower.push_back(c0);
      upper.push_back(arith::ConstantIndexOp::create(rewriter, loc, size));
      steps.push_back(c1);
    }
    int64_t indexRank = indicesType.getRank();
    Value rowCount = arith::ConstantIndexOp::create(rewriter, loc, rows);
    scf::ParallelOp::create(
        rewriter, loc, lower, upper, steps,
        [&](OpBuilder &b, Location loc, ValueRange ivs) {
          Value index = memref::LoadOp::create(b, loc, *indices,
                                               ivs.take_front(indexRank));
          Value row =
              arith::IndexCastOp::create(b, loc, b.getIndexType(), index);
          // An index outside the rows adds nothing (another rank's rows).
          Value atLeastZero =
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, row, c0);
          Value belowRows = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::slt, row, rowCount);
          Value inside = arith::AndIOp::create(b, loc, atLeastZero, belowRows);
          auto guard = scf::IfOp::create(b, loc, inside, false);
          b.setInsertionPointToStart(guard.thenBlock());
          Value value = memref::LoadOp::create(b, loc, *updates, ivs);
          SmallVector<Value> target{row};
          llvm::append_range(target, ivs.drop_front(indexRank));
          memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addf,
                                      value, table, target);
          b.setInsertionPointAfter(guard);
          scf::ReduceOp::create(b, loc);
        });
    bufferization::replaceOpWithBufferizedValues(rewriter, op,
                                                 Value(table.getResult()));
    return success();
  }
};

} // namespace

void weft::registerWeftBufferizationModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, weft::WeftDialect *) {
    weft::ScatterAddOp::attachInterface<ScatterAddBufferization>(*ctx);
    weft::attachAttentionBufferization(*ctx);
  });
}
