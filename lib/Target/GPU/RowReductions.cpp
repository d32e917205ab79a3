//===- RowReductions.cpp - One block per row of a reduction ---------------===//

#include "weft/Lowering/BufferFills.h"
#include "weft/Target/GPU/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <limits>

namespace weft {
#define GEN_PASS_DEF_WEFTGPUROWREDUCTIONS
#include "weft/Target/GPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

constexpr int64_t kWarpSize = 32;

/// A reduction generic: `out = combiner(out, partial(ins...))` over its
/// reduction loops (linearized into one column index, the last loop
/// fastest), with `combiner` associative and commutative.
struct RowReduction {
  SmallVector<unsigned> reductionLoops;
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
      op.getNumReductionLoops() < 1)
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
  SmallVector<unsigned> reductionLoops;
  for (auto [i, type] : llvm::enumerate(op.getIteratorTypesArray()))
    if (type == utils::IteratorType::reduction)
      reductionLoops.push_back(i);
  return RowReduction{reductionLoops, combiner, partial};
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

/// The block's total of `partialAt(i)` for i = first, first + threads, ...
/// below end: each thread combines its strided columns, then the block
/// combines the threads' partials (reduceBlock); the total is valid in
/// thread 0.
Value reduceStrided(OpBuilder &b, Location loc, Operation *combiner,
                    Value first, Value end, Value threads, Value identity,
                    Value warpTotals, Value thread,
                    function_ref<Value(OpBuilder &, Value)> partialAt) {
  auto columns =
      scf::ForOp::create(b, loc, first, end, threads, ValueRange{identity});
  {
    OpBuilder::InsertionGuard inLoop(b);
    b.setInsertionPointToStart(columns.getBody());
    Value partial = partialAt(b, columns.getInductionVar());
    scf::YieldOp::create(
        b, loc,
        combine(b, loc, combiner, columns.getRegionIterArgs()[0], partial));
  }
  return reduceBlock(b, loc, combiner, columns.getResult(0), identity,
                     warpTotals, thread);
}

/// Leaves `b` inside an `if` that only thread 0 enters.
void enterThreadZero(OpBuilder &b, Location loc, Value thread) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value isFirst =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, thread, zero);
  auto store = scf::IfOp::create(b, loc, isFirst, false);
  b.setInsertionPointToStart(store.thenBlock());
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

/// The product of `values` where all are constants.
std::optional<int64_t> staticProduct(ArrayRef<Value> values) {
  int64_t product = 1;
  for (Value value : values) {
    std::optional<int64_t> constant = getConstantIntValue(value);
    if (!constant)
      return std::nullopt;
    product *= *constant;
  }
  return product;
}

/// Sets `ivs[loops[i]]` to the digits of `linear` over `sizes` of those
/// loops (the last fastest).
void delinearize(OpBuilder &b, Location loc, Value linear,
                 ArrayRef<unsigned> loops, ArrayRef<Value> sizes,
                 SmallVectorImpl<Value> &ivs) {
  for (int64_t i = loops.size() - 1; i >= 0; --i) {
    Value size = sizes[loops[i]];
    ivs[loops[i]] = i ? arith::RemUIOp::create(b, loc, linear, size) : linear;
    if (i)
      linear = arith::DivUIOp::create(b, loc, linear, size);
  }
}

/// Stores `combiner(out, total)` into `op`'s output at `ivs` (the
/// reduction loops' indices ignored); `out` is `filled` where the output's
/// fill was taken in, else the output's element.
void foldIntoOutput(OpBuilder &b, Location loc, linalg::GenericOp op,
                    Operation *combiner, ValueRange ivs, Value total,
                    TypedAttr filled) {
  OpOperand *init = op.getDpsInitOperand(0);
  AffineMap map = op.getMatchingIndexingMap(init);
  SmallVector<Value> indices;
  for (AffineExpr expr : map.getResults())
    indices.push_back(affine::AffineApplyOp::create(
        b, loc, AffineMap::get(map.getNumDims(), 0, expr), ivs));
  Value initial =
      filled ? Value(arith::ConstantOp::create(b, loc, filled))
             : Value(memref::LoadOp::create(b, loc, init->get(), indices));
  memref::StoreOp::create(b, loc, combine(b, loc, combiner, initial, total),
                          init->get(), indices);
}

/// The fill of `op`'s output that the reduction can take in (its value
/// becomes each output's initial value): every output element is written
/// (one per row), and the fill's constant is the output's type.
linalg::FillOp fillTakenIn(linalg::GenericOp op) {
  OpOperand *init = op.getDpsInitOperand(0);
  AffineMap map = op.getMatchingIndexingMap(init);
  if (!map.isProjectedPermutation() ||
      map.getNumResults() != op.getNumParallelLoops())
    return {};
  linalg::FillOp fill = weft::constantFillBefore(op, init->get());
  if (!fill || weft::fillConstant(fill).getType() !=
                   getElementTypeOrSelf(init->get().getType()))
    return {};
  return fill;
}

/// Replaces `op` by a launch with one block per row (the parallel loops,
/// linearized) whose threads stride over the row's columns (the reduction
/// loops, linearized), then combine their partials with warp shuffles and,
/// across warps, shared memory. A few long rows (fewer rows than
/// `minBlocks`, each of at least 64 K columns) are cut into chunks, one
/// block each, whose totals a second launch of one block per row combines.
void launchRows(linalg::GenericOp op, const RowReduction &reduction,
                int64_t threadsPerBlock, int64_t minBlocks) {
  linalg::FillOp fill = fillTakenIn(op);
  TypedAttr filled = fill ? weft::fillConstant(fill) : TypedAttr();
  OpBuilder b(op);
  Location loc = op.getLoc();
  SmallVector<Range, 4> ranges =
      cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(b, loc);
  SmallVector<Value> sizes;
  for (Range range : ranges)
    sizes.push_back(getValueOrCreateConstantIndexOp(b, loc, range.size));
  SmallVector<unsigned> rowLoops;
  SmallVector<Value> rowSizes, columnSizes;
  for (auto [loop, size] : llvm::enumerate(sizes)) {
    if (llvm::is_contained(reduction.reductionLoops, loop)) {
      columnSizes.push_back(size);
    } else {
      rowLoops.push_back(loop);
      rowSizes.push_back(size);
    }
  }
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value rows = one;
  for (Value size : rowSizes)
    rows = arith::MulIOp::create(b, loc, rows, size);
  Value length = columnSizes.front();
  for (Value size : ArrayRef<Value>(columnSizes).drop_front())
    length = arith::MulIOp::create(b, loc, length, size);
  int64_t chunks = 1;
  std::optional<int64_t> staticRows = staticProduct(rowSizes),
                         staticLength = staticProduct(columnSizes);
  constexpr int64_t kLongRow = 64 * 1024;
  if (staticRows && staticLength && *staticRows > 0 &&
      *staticRows < minBlocks && *staticLength >= kLongRow)
    chunks = std::min(llvm::divideCeil(minBlocks, *staticRows),
                      llvm::divideCeil(*staticLength, threadsPerBlock * 4));
  Value chunkCount = arith::ConstantIndexOp::create(b, loc, chunks);
  Value threads = arith::ConstantIndexOp::create(b, loc, threadsPerBlock);
  // An empty launch is an error in CUDA.
  Value any =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, rows, zero);
  auto guard = scf::IfOp::create(b, loc, any, /*withElseRegion=*/false);
  b.setInsertionPointToStart(guard.thenBlock());
  Type f32 = b.getF32Type();
  auto identityIn = [&](OpBuilder &b) {
    return arith::ConstantOp::create(
        b, loc, f32, b.getF32FloatAttr(identityOf(reduction.combiner)));
  };
  // Each chunk's total, for the second launch.
  Value partials;
  if (chunks > 1)
    partials = memref::AllocOp::create(
        b, loc, MemRefType::get({*staticRows * chunks}, f32));
  auto sharedType = warpTotalsType(b.getContext(), threadsPerBlock);
  Value blocks =
      partials ? Value(arith::MulIOp::create(b, loc, rows, chunkCount)) : rows;
  auto launch = gpu::LaunchOp::create(
      b, loc, blocks, one, one, threads, one, one,
      /*dynamicSharedMemorySize=*/nullptr,
      /*asyncTokenType=*/nullptr, /*asyncDependencies=*/{},
      /*workgroupAttributions=*/TypeRange{sharedType});
  {
    OpBuilder::InsertionGuard inLaunch(b);
    b.setInsertionPointToStart(&launch.getBody().front());
    Value blockId = launch.getBlockIds().x;
    Value thread = launch.getThreadIds().x;
    Value identity = identityIn(b);
    // The block's row, and its chunk's columns [begin, end).
    Value row = blockId, begin = zero, end = length;
    if (partials) {
      row = arith::DivUIOp::create(b, loc, blockId, chunkCount);
      Value chunkLength =
          arith::CeilDivUIOp::create(b, loc, length, chunkCount);
      begin = arith::MulIOp::create(
          b, loc, arith::RemUIOp::create(b, loc, blockId, chunkCount),
          chunkLength);
      end = arith::MinUIOp::create(
          b, loc, length, arith::AddIOp::create(b, loc, begin, chunkLength));
    }
    SmallVector<Value> ivs(sizes.size(), zero);
    delinearize(b, loc, row, rowLoops, sizes, ivs);
    // Each thread's partial over the columns begin + thread, + threads, ...
    Value first =
        partials ? Value(arith::AddIOp::create(b, loc, begin, thread)) : thread;
    Value total =
        reduceStrided(b, loc, reduction.combiner, first, end, threads, identity,
                      launch.getWorkgroupAttributions()[0], thread,
                      [&](OpBuilder &nb, Value column) {
                        SmallVector<Value> columnIvs = ivs;
                        delinearize(nb, loc, column, reduction.reductionLoops,
                                    sizes, columnIvs);
                        return emitPartial(nb, loc, op, reduction, columnIvs);
                      });
    // Thread 0 folds the total into the output's initial value, or keeps
    // its chunk's total for the second launch.
    enterThreadZero(b, loc, thread);
    if (partials)
      memref::StoreOp::create(b, loc, total, partials, blockId);
    else
      foldIntoOutput(b, loc, op, reduction.combiner, ivs, total, filled);
    b.setInsertionPointToEnd(&launch.getBody().front());
    gpu::TerminatorOp::create(b, loc);
  }
  if (partials) {
    int64_t combineThreads = std::clamp<int64_t>(
        llvm::alignTo(chunks, kWarpSize), kWarpSize, threadsPerBlock);
    Value combiners = arith::ConstantIndexOp::create(b, loc, combineThreads);
    auto combineShared = warpTotalsType(b.getContext(), combineThreads);
    auto second = gpu::LaunchOp::create(
        b, loc, rows, one, one, combiners, one, one,
        /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
        /*asyncDependencies=*/{},
        /*workgroupAttributions=*/TypeRange{combineShared});
    OpBuilder::InsertionGuard inLaunch(b);
    b.setInsertionPointToStart(&second.getBody().front());
    Value row = second.getBlockIds().x;
    Value thread = second.getThreadIds().x;
    Value identity = identityIn(b);
    Value first = arith::MulIOp::create(b, loc, row, chunkCount);
    Value total = reduceStrided(
        b, loc, reduction.combiner, thread, chunkCount, combiners, identity,
        second.getWorkgroupAttributions()[0], thread,
        [&](OpBuilder &nb, Value chunk) -> Value {
          return memref::LoadOp::create(
              nb, loc, partials,
              ValueRange{arith::AddIOp::create(nb, loc, first, chunk)});
        });
    enterThreadZero(b, loc, thread);
    SmallVector<Value> ivs(sizes.size(), zero);
    delinearize(b, loc, row, rowLoops, sizes, ivs);
    foldIntoOutput(b, loc, op, reduction.combiner, ivs, total, filled);
    b.setInsertionPointToEnd(&second.getBody().front());
    gpu::TerminatorOp::create(b, loc);
    b.setInsertionPointAfter(second);
    memref::DeallocOp::create(b, loc, partials);
  }
  op.erase();
  if (fill)
    fill.erase();
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
/// only reductions) between pure computations on their results, then
/// stores of per-row values.
bool isRowKernel(scf::ForallOp forall) {
  if (forall.getRank() != 1 || forall.getNumResults() != 0)
    return false;
  // Per-row values are stored after the last pass: thread 0 stores them
  // with no barrier after.
  bool stored = false;
  for (Operation &op : forall.getBody()->without_terminator()) {
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      if (stored || !columnReductions(loop))
        return false;
      continue;
    }
    if (isa<memref::StoreOp>(op)) {
      stored = true;
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

/// Clones `loop`, a pass over a row's columns, into a kernel whose
/// `threads` threads stride over the columns; each reduction it carries is
/// combined over the block (through the next of `shared`, a float per warp
/// each) and folded into the loop's initial value, and the loop's results
/// map to those totals, which every thread then holds.
void emitColumnLoop(OpBuilder &b, Location loc, scf::ForOp loop,
                    IRMapping &mapping, Value thread, Value threads,
                    ValueRange shared, unsigned &nextShared) {
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
    Value total = reduceBlock(b, loc, combiner, strided.getResult(i),
                              identities[i], shared[nextShared++], thread);
    mapping.map(loop.getResult(i),
                combine(b, loc, combiner,
                        mapping.lookupOrDefault(loop.getInitArgs()[i]), total));
  }
}

/// As many threads as the longest of `loops` has columns (a loop without a
/// static trip count counts as `threadsPerBlock`), in whole warps, at most
/// `threadsPerBlock`.
template <typename Loops>
int64_t threadsForColumns(Loops loops, int64_t threadsPerBlock) {
  int64_t columns = 0;
  for (scf::ForOp loop : loops) {
    std::optional<llvm::APInt> trips = loop.getStaticTripCount();
    columns =
        std::max(columns, trips ? trips->getSExtValue() : threadsPerBlock);
  }
  return std::clamp<int64_t>(llvm::alignTo(columns, kWarpSize), kWarpSize,
                             threadsPerBlock);
}

/// Replaces a row kernel by a launch with one block per row: each column
/// loop's threads stride over the columns, and each reduction it carries is
/// combined over the block (reduceBlock), so that every thread goes on with
/// the row's total. A barrier separates consecutive passes. Every thread
/// holds a per-row value; thread 0 stores it.
void launchRowKernel(scf::ForallOp forall, int64_t threadsPerBlock) {
  threadsPerBlock = threadsForColumns(forall.getBody()->getOps<scf::ForOp>(),
                                      threadsPerBlock);
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
    if (isa<memref::StoreOp>(op)) {
      OpBuilder::InsertionGuard store(b);
      enterThreadZero(b, loc, thread);
      b.clone(op, mapping);
      continue;
    }
    if (!loop) {
      b.clone(op, mapping);
      continue;
    }
    // The previous pass's writes are seen by every thread of this one.
    if (afterPass)
      gpu::BarrierOp::create(b, loc);
    afterPass = true;
    emitColumnLoop(b, loc, loop, mapping, thread, threads,
                   launch.getWorkgroupAttributions(), nextShared);
  }
  gpu::TerminatorOp::create(b, loc);
  forall.erase();
}

/// Whether `op` is a row generic (convert-weft-to-linalg's cross-entropy,
/// bufferized): parallel loops only, one iteration per row, whose body
/// makes passes over the row's columns (scf.for loops that write nothing
/// and carry only reductions) between pure computations, and yields the
/// row's values.
bool isRowGeneric(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumReductionLoops() != 0)
    return false;
  bool anyPass = false;
  for (Operation &nested : op.getRegion().front().without_terminator()) {
    if (auto loop = dyn_cast<scf::ForOp>(nested)) {
      bool writes =
          loop.getBody()
              ->walk([](Operation *inner) {
                auto effects = dyn_cast<MemoryEffectOpInterface>(inner);
                return effects && effects.hasEffect<MemoryEffects::Write>()
                           ? WalkResult::interrupt()
                           : WalkResult::advance();
              })
              .wasInterrupted();
      if (writes || !columnReductions(loop))
        return false;
      anyPass = true;
      continue;
    }
    auto effects = dyn_cast<MemoryEffectOpInterface>(&nested);
    if (nested.getNumRegions() || !effects ||
        effects.hasEffect<MemoryEffects::Write>() ||
        effects.hasEffect<MemoryEffects::Allocate>() ||
        effects.hasEffect<MemoryEffects::Free>())
      return false;
  }
  return anyPass;
}

/// The indices of `map`'s results at loop indices `ivs`.
SmallVector<Value> indicesAt(OpBuilder &b, Location loc, AffineMap map,
                             ValueRange ivs) {
  SmallVector<Value> indices;
  for (AffineExpr expr : map.getResults())
    indices.push_back(affine::AffineApplyOp::create(
        b, loc, AffineMap::get(map.getNumDims(), 0, expr), ivs));
  return indices;
}

/// Replaces a row generic by a launch with one block per iteration (its
/// loops linearized, the last fastest): the column loops stride over the
/// block's threads and reduce over the block, as in a row kernel, and
/// thread 0 stores the yielded values.
void launchRowGeneric(linalg::GenericOp op, int64_t threadsPerBlock) {
  Block &body = op.getRegion().front();
  threadsPerBlock =
      threadsForColumns(body.getOps<scf::ForOp>(), threadsPerBlock);
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
  for (Value size : sizes)
    rows = arith::MulIOp::create(b, loc, rows, size);
  Value threads = arith::ConstantIndexOp::create(b, loc, threadsPerBlock);
  Value any =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, rows, zero);
  auto guard = scf::IfOp::create(b, loc, any, /*withElseRegion=*/false);
  b.setInsertionPointToStart(guard.thenBlock());
  SmallVector<Type> shared;
  for (auto loop : body.getOps<scf::ForOp>())
    shared.append(loop.getNumRegionIterArgs(),
                  warpTotalsType(b.getContext(), threadsPerBlock));
  auto launch = gpu::LaunchOp::create(
      b, loc, rows, one, one, threads, one, one, /*dynamicSharedMemorySize=*/
      nullptr, /*asyncTokenType=*/nullptr, /*asyncDependencies=*/{}, shared);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value thread = launch.getThreadIds().x;
  SmallVector<Value> ivs(sizes.size());
  Value rest = launch.getBlockIds().x;
  for (int64_t loop = sizes.size() - 1; loop >= 0; --loop) {
    ivs[loop] = loop ? arith::RemUIOp::create(b, loc, rest, sizes[loop]) : rest;
    if (loop)
      rest = arith::DivUIOp::create(b, loc, rest, sizes[loop]);
  }
  IRMapping mapping;
  for (OpOperand &operand : op->getOpOperands()) {
    Value element = operand.get();
    if (body.getArgument(operand.getOperandNumber()).use_empty())
      continue;
    if (isa<MemRefType>(element.getType()))
      element = memref::LoadOp::create(
          b, loc, element,
          indicesAt(b, loc, op.getMatchingIndexingMap(&operand), ivs));
    mapping.map(body.getArgument(operand.getOperandNumber()), element);
  }
  unsigned nextShared = 0;
  bool afterPass = false;
  for (Operation &nested : body.without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(nested)) {
      mapping.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    auto loop = dyn_cast<scf::ForOp>(nested);
    if (!loop) {
      b.clone(nested, mapping);
      continue;
    }
    // The shared memory of the previous pass's reductions is read.
    if (afterPass)
      gpu::BarrierOp::create(b, loc);
    afterPass = true;
    emitColumnLoop(b, loc, loop, mapping, thread, threads,
                   launch.getWorkgroupAttributions(), nextShared);
  }
  {
    OpBuilder::InsertionGuard inIf(b);
    enterThreadZero(b, loc, thread);
    auto yield = cast<linalg::YieldOp>(body.getTerminator());
    for (auto [value, init] :
         llvm::zip(yield.getValues(), op.getDpsInitsMutable()))
      memref::StoreOp::create(
          b, loc, mapping.lookupOrDefault(value), init.get(),
          indicesAt(b, loc, op.getMatchingIndexingMap(&init), ivs));
  }
  gpu::TerminatorOp::create(b, loc);
  op.erase();
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
      launchRows(op, reduction, threadsPerBlock, minBlocks);
    SmallVector<linalg::GenericOp> rowGenerics;
    getOperation().walk([&](linalg::GenericOp op) {
      if (isRowGeneric(op))
        rowGenerics.push_back(op);
    });
    for (linalg::GenericOp op : rowGenerics)
      launchRowGeneric(op, threadsPerBlock);
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
