//===- ShardToWeftRuntime.cpp - Shard ops to Weft runtime calls -----------===//
//
// Upstream's convert-shard-to-mpi emits MPI calls into the program, which
// ties the executable to one MPI (its symbols differ between MPICH and Open
// MPI) and splits a communicator per op. Here the program calls the Weft
// runtime instead, which owns one communicator per group of mesh axes and
// talks to MPI (or, on GPUs, NCCL) through their C APIs.
//
//===----------------------------------------------------------------------===//

#include "weft/Conversion/NewBufferBufferization.h"
#include "weft/Conversion/Passes.h"
#include "weft/Dialect/Weft/IR/RuntimeTypes.h"
#include "weft/runtime/Contract.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace weft {
#define GEN_PASS_DEF_CONVERTSHARDTOWEFTRUNTIME
#include "weft/Conversion/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

using weft::runtime::CollectiveKind;

/// The runtime function `prefix<dtype>` (weft/runtime/Contract.h).
std::string runtimeFunction(const char *prefix, Type elementType) {
  return (prefix + weft::runtimeTypeName(elementType).value_or("unknown"))
      .str();
}

int64_t axesMask(ArrayRef<shard::GridAxis> axes) {
  int64_t mask = 0;
  for (shard::GridAxis axis : axes)
    mask |= int64_t(1) << axis;
  return mask;
}

/// Declares `name : type` at the top of `module` unless it exists.
void declare(ModuleOp module, StringRef name, FunctionType type) {
  if (module.lookupSymbol(name))
    return;
  OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
  auto func = func::FuncOp::create(builder, module.getLoc(), name, type);
  func.setPrivate();
}

/// `(in, out, i64...)`: a collective's kind, mask and two dims, or a
/// message's mask, peer and tag.
FunctionType runtimeFunctionType(MLIRContext *ctx, Type elementType,
                                 unsigned integers) {
  auto unranked = UnrankedMemRefType::get(elementType, 0);
  SmallVector<Type> inputs = {unranked, unranked};
  inputs.append(integers, IntegerType::get(ctx, 64));
  return FunctionType::get(ctx, inputs, {});
}

/// Every collective bufferizes the same way: its operand is read, its
/// result is a new buffer, and the runtime call fills it.
template <typename OpTy>
struct CollectiveBufferization
    : public weft::NewBufferBufferization<CollectiveBufferization<OpTy>, OpTy> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const bufferization::BufferizationOptions &options,
                          bufferization::BufferizationState &state) const {
    auto collective = cast<OpTy>(op);
    Location loc = op->getLoc();
    FailureOr<Value> input =
        bufferization::getBuffer(rewriter, op->getOperand(0), options, state);
    if (failed(input))
      return failure();
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    Type element = resultType.getElementType();
    auto module = op->getParentOfType<ModuleOp>();
    RuntimeCall call = describe(collective);
    auto callee = module.lookupSymbol<func::FuncOp>(
        runtimeFunction(call.prefix, element));
    if (!callee)
      return op->emitError("run convert-shard-to-weft-runtime before "
                           "bufferization (no runtime declaration for ")
             << element << ")";
    auto output = memref::AllocOp::create(
        rewriter, loc, MemRefType::get(resultType.getShape(), element),
        ValueRange{}, rewriter.getI64IntegerAttr(64));
    auto unranked = UnrankedMemRefType::get(element, 0);
    SmallVector<Value> operands = {
        memref::CastOp::create(rewriter, loc, unranked, *input),
        memref::CastOp::create(rewriter, loc, unranked, output)};
    for (int64_t value : call.integers)
      operands.push_back(
          arith::ConstantIntOp::create(rewriter, loc, value, 64));
    func::CallOp::create(rewriter, loc, callee, operands);
    bufferization::replaceOpWithBufferizedValues(rewriter, op, Value(output));
    return success();
  }

  /// The runtime function an op calls and its integer arguments.
  struct RuntimeCall {
    const char *prefix;
    SmallVector<int64_t, 4> integers;
  };
  template <typename CollectiveOp>
  static RuntimeCall collectiveCall(CollectiveOp op, CollectiveKind kind,
                                    int64_t dim = 0, int64_t concatDim = 0) {
    return {weft::runtime::kCollectiveFunctionPrefix,
            {static_cast<int64_t>(kind), axesMask(op.getGridAxes()), dim,
             concatDim}};
  }
  static RuntimeCall describe(shard::AllReduceOp op) {
    return collectiveCall(op, CollectiveKind::AllReduce);
  }
  static RuntimeCall describe(shard::AllGatherOp op) {
    return collectiveCall(op, CollectiveKind::AllGather,
                          op.getGatherAxis().getSExtValue());
  }
  static RuntimeCall describe(shard::ReduceScatterOp op) {
    return collectiveCall(op, CollectiveKind::ReduceScatter,
                          op.getScatterAxis().getSExtValue());
  }
  static RuntimeCall describe(shard::AllToAllOp op) {
    return collectiveCall(op, CollectiveKind::AllToAll,
                          op.getSplitAxis().getSExtValue(),
                          op.getConcatAxis().getSExtValue());
  }
  static RuntimeCall describe(shard::ShiftOp op) {
    return collectiveCall(op, CollectiveKind::Shift, op.getOffset());
  }
  static int64_t tagOf(Operation *op) {
    // WeftDialect::kTagAttrName, set by weft-pipeline-cut.
    auto tag = op->getAttrOfType<IntegerAttr>("weft.tag");
    return tag ? tag.getInt() : 0;
  }
  static RuntimeCall describe(shard::SendOp op) {
    return {
        weft::runtime::kSendFunctionPrefix,
        {axesMask(op.getGridAxes()), op.getDestination().front(), tagOf(op)}};
  }
  static RuntimeCall describe(shard::RecvOp op) {
    return {weft::runtime::kRecvFunctionPrefix,
            {axesMask(op.getGridAxes()),
             op.getSource() ? op.getSource()->front() : 0, tagOf(op)}};
  }
};

/// The rank's linear position along `axes` (major first), as an index.
Value linearPosition(OpBuilder &builder, Location loc, ModuleOp module,
                     ArrayRef<shard::GridAxis> axes, ArrayRef<int64_t> sizes) {
  auto callee =
      module.lookupSymbol<func::FuncOp>(weft::runtime::kMeshCoordinateFunction);
  Value position = arith::ConstantIndexOp::create(builder, loc, 0);
  for (shard::GridAxis axis : axes) {
    Value coordinate =
        func::CallOp::create(
            builder, loc, callee,
            ValueRange{arith::ConstantIntOp::create(builder, loc, axis, 64)})
            .getResult(0);
    Value index = arith::IndexCastOp::create(
        builder, loc, builder.getIndexType(), coordinate);
    position = arith::AddIOp::create(
        builder, loc,
        arith::MulIOp::create(
            builder, loc, position,
            arith::ConstantIndexOp::create(builder, loc, sizes[axis])),
        index);
  }
  return position;
}

struct ConvertShardToWeftRuntimePass
    : public weft::impl::ConvertShardToWeftRuntimeBase<
          ConvertShardToWeftRuntimePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    bool failed = false;
    SmallVector<Operation *> shardOps;
    module.walk([&](Operation *op) {
      if (isa<shard::ProcessMultiIndexOp, shard::AllSliceOp, shard::AllReduceOp,
              shard::AllGatherOp, shard::ReduceScatterOp, shard::AllToAllOp,
              shard::ShiftOp, shard::SendOp, shard::RecvOp>(op))
        shardOps.push_back(op);
    });
    auto i64 = IntegerType::get(ctx, 64);
    if (!shardOps.empty())
      declare(module, weft::runtime::kMeshCoordinateFunction,
              FunctionType::get(ctx, {i64}, {i64}));
    for (Operation *op : shardOps) {
      auto symbol = op->getAttrOfType<FlatSymbolRefAttr>("grid");
      auto grid = symbol ? module.lookupSymbol<shard::GridOp>(symbol) : nullptr;
      if (!grid || llvm::is_contained(grid.getShape(), ShapedType::kDynamic)) {
        op->emitError("needs a shard.grid of static shape");
        failed = true;
        continue;
      }
      OpBuilder builder(op);
      Location loc = op->getLoc();
      if (auto index = dyn_cast<shard::ProcessMultiIndexOp>(op)) {
        SmallVector<Value> coordinates;
        for (shard::GridAxis axis : index.getAxes())
          coordinates.push_back(
              linearPosition(builder, loc, module, {axis}, grid.getShape()));
        op->replaceAllUsesWith(coordinates);
        op->erase();
      } else if (auto slice = dyn_cast<shard::AllSliceOp>(op)) {
        auto type = cast<RankedTensorType>(slice.getResult().getType());
        int64_t dim = slice.getSliceAxis().getSExtValue();
        Value position = linearPosition(builder, loc, module,
                                        slice.getGridAxes(), grid.getShape());
        Value offset = arith::MulIOp::create(
            builder, loc, position,
            arith::ConstantIndexOp::create(builder, loc, type.getDimSize(dim)));
        SmallVector<OpFoldResult> offsets(type.getRank(),
                                          builder.getIndexAttr(0));
        offsets[dim] = offset;
        SmallVector<OpFoldResult> sizes, strides;
        for (int64_t size : type.getShape()) {
          sizes.push_back(builder.getIndexAttr(size));
          strides.push_back(builder.getIndexAttr(1));
        }
        Value local = tensor::ExtractSliceOp::create(
            builder, loc, type, slice.getInput(), offsets, sizes, strides);
        slice.getResult().replaceAllUsesWith(local);
        op->erase();
      } else {
        Type element =
            cast<ShapedType>(op->getResult(0).getType()).getElementType();
        if (!weft::runtimeTypeName(element)) {
          op->emitError() << "the runtime has no collectives on " << element;
          failed = true;
          continue;
        }
        auto reduction =
            op->getAttrOfType<shard::ReductionKindAttr>("reduction");
        if (auto shift = dyn_cast<shard::ShiftOp>(op);
            shift &&
            (!shift.getRotate() || shift.getGridAxes().size() != 1 ||
             shift.getGridAxes()[0] !=
                 static_cast<int64_t>(shift.getShiftAxis().getSExtValue()))) {
          op->emitError("the runtime shifts along one mesh axis, rotating");
          failed = true;
          continue;
        }
        if (reduction && reduction.getValue() != shard::ReductionKind::Sum) {
          op->emitError("the runtime's collectives reduce by sum only");
          failed = true;
          continue;
        }
        if (isa<shard::SendOp>(op))
          declare(module,
                  runtimeFunction(weft::runtime::kSendFunctionPrefix, element),
                  runtimeFunctionType(ctx, element, 3));
        else if (isa<shard::RecvOp>(op))
          declare(module,
                  runtimeFunction(weft::runtime::kRecvFunctionPrefix, element),
                  runtimeFunctionType(ctx, element, 3));
        else
          declare(module,
                  runtimeFunction(weft::runtime::kCollectiveFunctionPrefix,
                                  element),
                  runtimeFunctionType(ctx, element, 4));
      }
    }
    if (failed)
      return signalPassFailure();
    // After bufferization nothing refers to the mesh any more.
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      if (SymbolTable::symbolKnownUseEmpty(grid, module))
        grid.erase();
  }
};

} // namespace

void weft::registerShardBufferizationModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    shard::AllReduceOp::attachInterface<
        CollectiveBufferization<shard::AllReduceOp>>(*ctx);
    shard::AllGatherOp::attachInterface<
        CollectiveBufferization<shard::AllGatherOp>>(*ctx);
    shard::ReduceScatterOp::attachInterface<
        CollectiveBufferization<shard::ReduceScatterOp>>(*ctx);
    shard::AllToAllOp::attachInterface<
        CollectiveBufferization<shard::AllToAllOp>>(*ctx);
    shard::ShiftOp::attachInterface<CollectiveBufferization<shard::ShiftOp>>(
        *ctx);
    shard::SendOp::attachInterface<CollectiveBufferization<shard::SendOp>>(
        *ctx);
    shard::RecvOp::attachInterface<CollectiveBufferization<shard::RecvOp>>(
        *ctx);
  });
}
