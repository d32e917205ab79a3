//===- RowReductions.cpp - One block per row of a reduction ---------------===//

#include "weft/Target/CUDA/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <limits>

namespace weft {
#define GEN_PASS_DEF_WEFTGPUROWREDUCTIONS
#include "weft/Target/CUDA/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

constexpr int64_t kWarpSize = 32;

/// A reduction generic: `out = combiner(out, partial(ins...))` over one
/// reduction loop, with `combiner` associative and commutative.
struct RowReduction {
  unsigned reductionLoop;
  Operation *combiner;
  /// The combiner's operand computed from the inputs.
  Value partial;
};

bool isCombiner(Operation *op) {
  return isa<arith::AddFOp, arith::MulFOp, arith::MaximumFOp, arith::MinimumFOp,
             arith::MaxNumFOp, arith::MinNumFOp>(op);
}

/// The value `combiner(identity, x)` leaves as x.
double identityOf(Operation *combiner) {
  constexpr double infinity = std::numeric_limits<double>::infinity();
  if (isa<arith::AddFOp>(combiner))
    return 0.0;
  if (isa<arith::MulFOp>(combiner))
    return 1.0;
  if (isa<arith::MaximumFOp, arith::MaxNumFOp>(combiner))
    return -infinity;
  return infinity;
}

std::optional<RowReduction> matchRowReduction(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() != 1)
    return std::nullopt;
  auto outType = cast<MemRefType>(op.getDpsInits()[0].getType());
  if (!outType.getElementType().isF32())
    return std::nullopt;
  Block &body = op.getRegion().front();
  BlockArgument accumulator = body.getArguments().back();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Operation *combiner = yield.getValues()[0].getDefiningOp();
  if (!combiner || !isCombiner(combiner) || !accumulator.hasOneUse() ||
      accumulator.getUses().begin()->getOwner() != combiner)
    return std::nullopt;
  Value partial = combiner->getOperand(0) == accumulator
                      ? combiner->getOperand(1)
                      : combiner->getOperand(0);
  if (partial == accumulator)
    return std::nullopt;
  unsigned reductionLoop = 0;
  for (auto [i, type] : llvm::enumerate(op.getIteratorTypesArray()))
    if (type == utils::IteratorType::reduction)
      reductionLoop = i;
  return RowReduction{reductionLoop, combiner, partial};
}

Value combine(OpBuilder &b, Location loc, Operation *combiner, Value lhs,
              Value rhs) {
  OperationState state(loc, combiner->getName(), ValueRange{lhs, rhs},
                       lhs.getType(), combiner->getAttrs());
  return b.create(state)->getResult(0);
}

/// Combines `value` over the 32 lanes of each warp: every lane ends with
/// the warp's total (butterfly shuffles).
Value reduceWarp(OpBuilder &b, Location loc, Operation *combiner, Value value) {
  for (int32_t offset = kWarpSize / 2; offset > 0; offset /= 2) {
    auto shuffle = gpu::ShuffleOp::create(b, loc, value, offset, kWarpSize,
                                          gpu::ShuffleMode::XOR);
    value = combine(b, loc, combiner, value, shuffle.getShuffleResult());
  }
  return value;
}

/// Shared memory for one block reduction: a float per warp.
MemRefType warpTotalsType(MLIRContext *context, int64_t threadsPerBlock) {
  return MemRefType::get(
      {threadsPerBlock / kWarpSize}, Float32Type::get(context),
      MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup));
}

/// Combines `value` over the threads of the block; every thread gets the
/// total. Each warp reduces with shuffles, lane 0 writes the warp's total to
/// `warpTotals`, and after a barrier every warp reduces those totals.
Value reduceBlock(OpBuilder &b, Location loc, Operation *combiner, Value value,
                  Value identity, Value warpTotals, Value thread) {
  int64_t warps = cast<MemRefType>(warpTotals.getType()).getDimSize(0);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value warpSize = arith::ConstantIndexOp::create(b, loc, kWarpSize);
  Value lane = arith::RemUIOp::create(b, loc, thread, warpSize);
  Value warp = arith::DivUIOp::create(b, loc, thread, warpSize);
  Value warpTotal = reduceWarp(b, loc, combiner, value);
  Value isLaneZero =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, zero);
  auto publish = scf::IfOp::create(b, loc, isLaneZero, false);
  {
    OpBuilder::InsertionGuard inIf(b);
    b.setInsertionPointToStart(publish.thenBlock());
    memref::StoreOp::create(b, loc, warpTotal, warpTotals, warp);
  }
  gpu::BarrierOp::create(b, loc);
  Value hasTotal =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, lane,
                            arith::ConstantIndexOp::create(b, loc, warps));
  auto gather =
      scf::IfOp::create(b, loc, TypeRange{value.getType()}, hasTotal, true);
  {
    OpBuilder::InsertionGuard inIf(b);
    b.setInsertionPointToStart(gather.thenBlock());
    scf::YieldOp::create(
        b, loc, memref::LoadOp::create(b, loc, warpTotals, lane).getResult());
    b.setInsertionPointToStart(gather.elseBlock());
    scf::YieldOp::create(b, loc, identity);
  }
  return reduceWarp(b, loc, combiner, gather.getResult(0));
}

/// The loads of one iteration of `op`'s body at loop indices `ivs`, then
/// its computation up to (not including) the combiner: the partial.
Value emitPartial(OpBuilder &b, Location loc, linalg::GenericOp op,
                  const RowReduction &reduction, ValueRange ivs) {
  Block &body = op.getRegion().front();
  IRMapping mapping;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    SmallVector<Value> indices;
    for (AffineExpr expr : map.getResults())
      indices.push_back(affine::AffineApplyOp::create(
          b, loc, AffineMap::get(map.getNumDims(), 0, expr), ivs));
    Value element;
    if (isa<MemRefType>(input->get().getType()))
      element = memref::LoadOp::create(b, loc, input->get(), indices);
    else
      element = input->get(); // a scalar input
    mapping.map(body.getArgument(input->getOperandNumber()), element);
  }
  for (Operation &nested : body.without_terminator()) {
    if (&nested == reduction.combiner)
      continue;
    if (auto index = dyn_cast<linalg::IndexOp>(nested)) {
      mapping.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    b.clone(nested, mapping);
  }
  return mapping.lookupOrDefault(reduction.partial);
}

/// Replaces `op` by a launch with one block per row (the parallel loops,
/// linearized) whose threads stride over the reduction loop, then combine
/// their partials with warp shuffles and, across warps, shared memory.
void launchRows(linalg::GenericOp op, const RowReduction &reduction,
                int64_t threadsPerBlock) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  SmallVector<Range, 4> ranges =
      cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(b, loc);
  SmallVector<Value> sizes;
  for (Range range : ranges)
    sizes.push_back(getValueOrCreateConstantIndexOp(b, loc, range.size));
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value rows = one;
  for (auto [loop, size] : llvm::enumerate(sizes))
    if (loop != reduction.reductionLoop)
      rows = arith::MulIOp::create(b, loc, rows, size);
  Value length = sizes[reduction.reductionLoop];
  Value threads = arith::ConstantIndexOp::create(b, loc, threadsPerBlock);
  // An empty launch is an error in CUDA.
  Value any =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, rows, zero);
  auto guard = scf::IfOp::create(b, loc, any, /*withElseRegion=*/false);
  b.setInsertionPointToStart(guard.thenBlock());
  Type f32 = b.getF32Type();
  auto sharedType = warpTotalsType(b.getContext(), threadsPerBlock);
  auto launch = gpu::LaunchOp::create(
      b, loc, rows, one, one, threads, one, one, /*dynamicSharedMemorySize=*/
      nullptr, /*asyncTokenType=*/nullptr, /*asyncDependencies=*/{},
      /*workgroupAttributions=*/TypeRange{sharedType});
  Block &kernel = launch.getBody().front();
  b.setInsertionPointToStart(&kernel);
  Value row = launch.getBlockIds().x;
  Value thread = launch.getThreadIds().x;
  // The row's indices: the last parallel loop varies fastest.
  SmallVector<Value> ivs(sizes.size());
  Value rest = row;
  for (int64_t loop = sizes.size() - 1; loop >= 0; --loop) {
    if (unsigned(loop) == reduction.reductionLoop)
      continue;
    ivs[loop] = arith::RemUIOp::create(b, loc, rest, sizes[loop]);
    rest = arith::DivUIOp::create(b, loc, rest, sizes[loop]);
  }
  Value identity = arith::ConstantOp::create(
      b, loc, f32, b.getF32FloatAttr(identityOf(reduction.combiner)));
  // Each thread's partial over the columns thread, thread + threads, ...
  auto columns =
      scf::ForOp::create(b, loc, thread, length, threads, ValueRange{identity});
  {
    OpBuilder::InsertionGuard inLoop(b);
    b.setInsertionPointToStart(columns.getBody());
    ivs[reduction.reductionLoop] = columns.getInductionVar();
    Value partial = emitPartial(b, loc, op, reduction, ivs);
    scf::YieldOp::create(b, loc,
                         combine(b, loc, reduction.combiner,
                                 columns.getRegionIterArgs()[0], partial));
  }
  // The output is indexed by the row alone.
  ivs[reduction.reductionLoop] = zero;
  Value total =
      reduceBlock(b, loc, reduction.combiner, columns.getResult(0), identity,
                  launch.getWorkgroupAttributions()[0], thread);
  // Thread 0 folds the total into the output's initial value.
  Value isFirst =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, thread, zero);
  auto store = scf::IfOp::create(b, loc, isFirst, false);
  {
    OpBuilder::InsertionGuard inIf(b);
    b.setInsertionPointToStart(store.thenBlock());
    OpOperand *init = op.getDpsInitOperand(0);
    AffineMap map = op.getMatchingIndexingMap(init);
    SmallVector<Value> indices;
    for (AffineExpr expr : map.getResults())
      indices.push_back(affine::AffineApplyOp::create(
          b, loc, AffineMap::get(map.getNumDims(), 0, expr), ivs));
    Value initial = memref::LoadOp::create(b, loc, init->get(), indices);
    memref::StoreOp::create(b, loc,
                            combine(b, loc, reduction.combiner, initial, total),
                            init->get(), indices);
  }
  gpu::TerminatorOp::create(b, loc);
  op.erase();
}

/// The reductions a column loop of a row kernel carries: for each
/// iter_arg, `combiner(iter_arg, partial)` yielded and used nowhere else (a
/// scan, which also uses the running value, is not one).
std::optional<SmallVector<Operation *>> columnReductions(scf::ForOp loop) {
  SmallVector<Operation *> combiners;
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  for (auto [arg, yielded] :
       llvm::zip(loop.getRegionIterArgs(), yield.getOperands())) {
    Operation *combiner = yielded.getDefiningOp();
    if (!combiner || !isCombiner(combiner) || !arg.getType().isF32() ||
        !arg.hasOneUse() || arg.getUses().begin()->getOwner() != combiner ||
        !yielded.hasOneUse())
      return std::nullopt;
    combiners.push_back(combiner);
  }
  return combiners;
}

/// Whether `forall` is a row kernel (convert-weft-to-linalg's rowKernel,
/// bufferized): one loop over rows whose body makes passes over the row's
/// columns (scf.for loops, each writing only its own column and carrying
/// only reductions) between pure computations on their results.
bool isRowKernel(scf::ForallOp forall) {
  if (forall.getRank() != 1 || forall.getNumResults() != 0)
    return false;
  for (Operation &op : forall.getBody()->without_terminator()) {
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      if (!columnReductions(loop))
        return false;
      continue;
    }
    // Reads are fine: every thread reads the same value.
    auto effects = dyn_cast<MemoryEffectOpInterface>(&op);
    if (op.getNumRegions() || !effects ||
        effects.hasEffect<MemoryEffects::Write>() ||
        effects.hasEffect<MemoryEffects::Allocate>() ||
        effects.hasEffect<MemoryEffects::Free>())
      return false;
  }
  return true;
}

/// Replaces a row kernel by a launch with one block per row: each column
/// loop's threads stride over the columns, and each reduction it carries is
/// combined over the block (reduceBlock), so that every thread goes on with
/// the row's total. A barrier separates consecutive passes.
void launchRowKernel(scf::ForallOp forall, int64_t threadsPerBlock) {
  // No more threads than the longest pass has columns, in whole warps.
  int64_t columns = 0;
  for (auto loop : forall.getBody()->getOps<scf::ForOp>()) {
    std::optional<llvm::APInt> trips = loop.getStaticTripCount();
    columns =
        std::max(columns, trips ? trips->getSExtValue() : threadsPerBlock);
  }
  threadsPerBlock = std::clamp<int64_t>(llvm::alignTo(columns, kWarpSize),
                                        kWarpSize, threadsPerBlock);
  OpBuilder b(forall);
  Location loc = forall.getLoc();
  Value rows =
      getValueOrCreateConstantIndexOp(b, loc, forall.getMixedUpperBound()[0]);
  Value lower =
      getValueOrCreateConstantIndexOp(b, loc, forall.getMixedLowerBound()[0]);
  Value step =
      getValueOrCreateConstantIndexOp(b, loc, forall.getMixedStep()[0]);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value count = arith::CeilDivUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, rows, lower), step);
  Value threads = arith::ConstantIndexOp::create(b, loc, threadsPerBlock);
  Value any =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, count, zero);
  auto guard = scf::IfOp::create(b, loc, any, /*withElseRegion=*/false);
  b.setInsertionPointToStart(guard.thenBlock());
  SmallVector<Type> shared;
  for (auto loop : forall.getBody()->getOps<scf::ForOp>())
    shared.append(loop.getNumRegionIterArgs(),
                  warpTotalsType(b.getContext(), threadsPerBlock));
  auto launch = gpu::LaunchOp::create(
      b, loc, count, one, one, threads, one, one, /*dynamicSharedMemorySize=*/
      nullptr, /*asyncTokenType=*/nullptr, /*asyncDependencies=*/{}, shared);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value thread = launch.getThreadIds().x;
  IRMapping mapping;
  mapping.map(forall.getInductionVar(0),
              arith::AddIOp::create(
                  b, loc, lower,
                  arith::MulIOp::create(b, loc, launch.getBlockIds().x, step)));
  unsigned nextShared = 0;
  bool afterPass = false;
  for (Operation &op : forall.getBody()->without_terminator()) {
    auto loop = dyn_cast<scf::ForOp>(op);
    if (!loop) {
      b.clone(op, mapping);
      continue;
    }
    // The previous pass's writes are seen by every thread of this one.
    if (afterPass)
      gpu::BarrierOp::create(b, loc);
    afterPass = true;
    SmallVector<Operation *> combiners = *columnReductions(loop);
    SmallVector<Value> identities;
    for (Operation *combiner : combiners)
      identities.push_back(arith::ConstantOp::create(
          b, loc, b.getF32Type(), b.getF32FloatAttr(identityOf(combiner))));
    Value columnStep = mapping.lookupOrDefault(loop.getStep());
    Value first = arith::AddIOp::create(
        b, loc, mapping.lookupOrDefault(loop.getLowerBound()),
        arith::MulIOp::create(b, loc, thread, columnStep));
    auto strided = scf::ForOp::create(
        b, loc, first, mapping.lookupOrDefault(loop.getUpperBound()),
        arith::MulIOp::create(b, loc, columnStep, threads), identities);
    {
      OpBuilder::InsertionGuard inLoop(b);
      Block *stridedBody = strided.getBody();
      // A loop without iter_args comes with its yield.
      if (stridedBody->mightHaveTerminator())
        b.setInsertionPoint(stridedBody->getTerminator());
      else
        b.setInsertionPointToEnd(stridedBody);
      IRMapping body = mapping;
      body.map(loop.getInductionVar(), strided.getInductionVar());
      for (auto [from, to] :
           llvm::zip(loop.getRegionIterArgs(), strided.getRegionIterArgs()))
        body.map(from, to);
      for (Operation &nested : loop.getBody()->without_terminator())
        b.clone(nested, body);
      if (!stridedBody->mightHaveTerminator())
        b.clone(*loop.getBody()->getTerminator(), body);
    }
    for (auto [i, combiner] : llvm::enumerate(combiners)) {
      Value total =
          reduceBlock(b, loc, combiner, strided.getResult(i), identities[i],
                      launch.getWorkgroupAttributions()[nextShared++], thread);
      mapping.map(loop.getResult(i),
                  combine(b, loc, combiner,
                          mapping.lookupOrDefault(loop.getInitArgs()[i]),
                          total));
    }
  }
  gpu::TerminatorOp::create(b, loc);
  forall.erase();
}

struct WeftGpuRowReductionsPass
    : public weft::impl::WeftGpuRowReductionsBase<WeftGpuRowReductionsPass> {
  using WeftGpuRowReductionsBase::WeftGpuRowReductionsBase;
  void runOnOperation() override {
    if (threadsPerBlock < kWarpSize || threadsPerBlock > 1024 ||
        threadsPerBlock % kWarpSize) {
      getOperation().emitError("weft-gpu-row-reductions: threads-per-block "
                               "must be a multiple of 32 in [32, 1024]");
      return signalPassFailure();
    }
    SmallVector<std::pair<linalg::GenericOp, RowReduction>> reductions;
    getOperation().walk([&](linalg::GenericOp op) {
      if (std::optional<RowReduction> reduction = matchRowReduction(op))
        reductions.emplace_back(op, *reduction);
    });
    for (auto &[op, reduction] : reductions)
      launchRows(op, reduction, threadsPerBlock);
    SmallVector<scf::ForallOp> rowKernels;
    getOperation().walk([&](scf::ForallOp forall) {
      if (isRowKernel(forall))
        rowKernels.push_back(forall);
    });
    for (scf::ForallOp forall : rowKernels)
      launchRowKernel(forall, threadsPerBlock);
  }
};

} // namespace
