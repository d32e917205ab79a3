//===- BufferizeAttention.cpp - Fused attention as a runtime call ---------===//
//
// An attention that a target runs as one fused kernel (weft.library_call,
// set by weft-attention-to-library) stays a weft op through
// convert-weft-to-linalg and bufferizes here into a call of that runtime
// function (weft/runtime/Contract.h): its operands' buffers as they are,
// the mask as a view broadcast to the scores, new buffers for the results
// and the log-sum-exp.
//
//===----------------------------------------------------------------------===//

#include "Bufferizations.h"

#include "weft/Conversion/NewBufferBufferization.h"
#include "weft/Dialect/Weft/IR/TargetAttrNames.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/runtime/Contract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace {

MemRefType identityType(RankedTensorType type) {
  return MemRefType::get(type.getShape(), type.getElementType());
}

Value newBuffer(RewriterBase &rewriter, Location loc, MemRefType type) {
  return memref::AllocOp::create(rewriter, loc, type, ValueRange{},
                                 rewriter.getI64IntegerAttr(64));
}

/// `buffer`, or a packed copy of it unless its last stride is 1: the fused
/// kernels read each head's vectors as contiguous rows.
Value withUnitLastStride(RewriterBase &rewriter, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (succeeded(type.getStridesAndOffset(strides, offset)) &&
      strides.back() == 1)
    return buffer;
  Value copy = newBuffer(
      rewriter, loc, MemRefType::get(type.getShape(), type.getElementType()));
  memref::CopyOp::create(rewriter, loc, buffer, copy);
  return copy;
}

/// `mask` read as the scores' [B, Hq, S, T]: a dim it lacks, or has as 1,
/// is read with stride 0. A buffer of unknown layout is copied first.
Value broadcastMask(RewriterBase &rewriter, Location loc, Value mask,
                    ArrayRef<int64_t> scores) {
  auto type = cast<MemRefType>(mask.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset) ||
      llvm::any_of(strides, ShapedType::isDynamic)) {
    Value copy = newBuffer(
        rewriter, loc, MemRefType::get(type.getShape(), type.getElementType()));
    memref::CopyOp::create(rewriter, loc, mask, copy);
    return broadcastMask(rewriter, loc, copy, scores);
  }
  int64_t missing = int64_t(scores.size()) - type.getRank();
  SmallVector<int64_t> viewStrides;
  for (int64_t d = 0; d < int64_t(scores.size()); ++d) {
    int64_t own = d - missing;
    viewStrides.push_back(own < 0 || type.getDimSize(own) == 1 ? 0
                                                               : strides[own]);
  }
  auto viewType = MemRefType::get(
      scores, type.getElementType(),
      StridedLayoutAttr::get(rewriter.getContext(), offset, viewStrides));
  return memref::ReinterpretCastOp::create(rewriter, loc, viewType, mask,
                                           offset, scores, viewStrides);
}

/// Calls the op's runtime function with `buffers` (as unranked memrefs),
/// the flags and the scale.
LogicalResult callKernel(Operation *op, RewriterBase &rewriter,
                         ArrayRef<Value> buffers, bool causal, bool masked,
                         double scale) {
  auto symbol =
      op->getAttrOfType<FlatSymbolRefAttr>(weft::kLibraryCallAttrName);
  auto module = op->getParentOfType<ModuleOp>();
  auto callee =
      symbol ? module.lookupSymbol<func::FuncOp>(symbol) : func::FuncOp();
  if (!callee)
    return op->emitError("no declaration of the fused attention kernel ")
           << symbol << " (run weft-attention-to-library)";
  Location loc = op->getLoc();
  SmallVector<Value> operands;
  for (Value buffer : buffers)
    operands.push_back(memref::CastOp::create(
        rewriter, loc,
        UnrankedMemRefType::get(getElementTypeOrSelf(buffer.getType()), 0),
        buffer));
  int64_t flags = (causal ? weft::runtime::kAttentionCausal : 0) |
                  (masked ? weft::runtime::kAttentionBias : 0);
  operands.push_back(arith::ConstantIntOp::create(rewriter, loc, flags, 64));
  operands.push_back(arith::ConstantFloatOp::create(
      rewriter, loc, rewriter.getF64Type(), APFloat(scale)));
  if (TypeRange(ValueRange(operands)) != callee.getFunctionType().getInputs())
    return op->emitError("the fused attention kernel ")
           << symbol << " takes " << callee.getFunctionType()
           << ", not these operands";
  func::CallOp::create(rewriter, loc, callee, operands);
  return success();
}

/// The buffers of q, k, v (each with a last stride of 1) and the mask
/// (broadcast; q when there is none: the kernel does not read it).
FailureOr<SmallVector<Value>>
inputBuffers(RewriterBase &rewriter, Operation *op, ValueRange qkv, Value mask,
             const bufferization::BufferizationOptions &options,
             bufferization::BufferizationState &state) {
  SmallVector<Value> buffers;
  for (Value tensor : qkv) {
    FailureOr<Value> buffer =
        bufferization::getBuffer(rewriter, tensor, options, state);
    if (failed(buffer))
      return failure();
    buffers.push_back(withUnitLastStride(rewriter, op->getLoc(), *buffer));
  }
  if (!mask) {
    buffers.push_back(buffers[0]);
    return buffers;
  }
  FailureOr<Value> buffer =
      bufferization::getBuffer(rewriter, mask, options, state);
  if (failed(buffer))
    return failure();
  auto q = cast<RankedTensorType>(qkv[0].getType());
  auto k = cast<RankedTensorType>(qkv[1].getType());
  buffers.push_back(broadcastMask(
      rewriter, op->getLoc(), *buffer,
      {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2), k.getDimSize(2)}));
  return buffers;
}

struct AttentionBufferization
    : public weft::NewBufferBufferization<AttentionBufferization,
                                          weft::AttentionOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const bufferization::BufferizationOptions &options,
                          bufferization::BufferizationState &state) const {
    auto attention = cast<weft::AttentionOp>(op);
    Location loc = op->getLoc();
    FailureOr<SmallVector<Value>> buffers = inputBuffers(
        rewriter, op,
        {attention.getQuery(), attention.getKey(), attention.getValue()},
        attention.getMask(), options, state);
    if (failed(buffers))
      return failure();
    RankedTensorType outType = attention.getResult().getType();
    auto lseType =
        MemRefType::get(outType.getShape().drop_back(), rewriter.getF32Type());
    Value out = newBuffer(rewriter, loc, identityType(outType));
    Value lse = newBuffer(rewriter, loc, lseType);
    buffers->append({out, lse});
    if (failed(callKernel(op, rewriter, *buffers, attention.getCausal(),
                          bool(attention.getMask()),
                          attention.getEffectiveScale())))
      return failure();
    SmallVector<Value> results{out};
    if (attention.getSaveLogSumExp())
      results.push_back(lse);
    bufferization::replaceOpWithBufferizedValues(rewriter, op, results);
    return success();
  }
};

struct AttentionGradBufferization
    : public weft::NewBufferBufferization<AttentionGradBufferization,
                                          weft::AttentionGradOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const bufferization::BufferizationOptions &options,
                          bufferization::BufferizationState &state) const {
    auto grad = cast<weft::AttentionGradOp>(op);
    Location loc = op->getLoc();
    if (!grad.getLogSumExp())
      return op->emitError("a fused attention backward needs the forward's "
                           "log-sum-exp (weft-attention-to-library)");
    FailureOr<SmallVector<Value>> buffers = inputBuffers(
        rewriter, op, {grad.getQuery(), grad.getKey(), grad.getValue()},
        grad.getMask(), options, state);
    if (failed(buffers))
      return failure();
    for (Value tensor : SmallVector<Value, 3>{grad.getOut(), grad.getOutGrad(),
                                              grad.getLogSumExp()}) {
      FailureOr<Value> buffer =
          bufferization::getBuffer(rewriter, tensor, options, state);
      if (failed(buffer))
        return failure();
      buffers->push_back(withUnitLastStride(rewriter, loc, *buffer));
    }
    SmallVector<Value> results;
    for (Value result : op->getResults())
      results.push_back(
          newBuffer(rewriter, loc,
                    identityType(cast<RankedTensorType>(result.getType()))));
    buffers->append(results);
    if (failed(callKernel(op, rewriter, *buffers, grad.getCausal(),
                          bool(grad.getMask()), grad.getEffectiveScale())))
      return failure();
    bufferization::replaceOpWithBufferizedValues(rewriter, op, results);
    return success();
  }
};

} // namespace

void weft::attachAttentionBufferization(MLIRContext &context) {
  weft::AttentionOp::attachInterface<AttentionBufferization>(context);
  weft::AttentionGradOp::attachInterface<AttentionGradBufferization>(context);
}
