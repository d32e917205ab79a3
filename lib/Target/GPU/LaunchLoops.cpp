//===- LaunchLoops.cpp - Host loop nests as GPU kernels -------------------===//

#include "weft/Lowering/BufferAliases.h"
#include "weft/Lowering/Memrefs.h"
#include "weft/Target/GPU/Passes.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <map>

namespace weft {
#define GEN_PASS_DEF_WEFTGPULAUNCHLOOPS
#include "weft/Target/GPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// Whether `op` or an op nested in it calls a function: such a loop is the
/// host's control flow, not a kernel.
bool calls(Operation *op) {
  return op
      ->walk([](Operation *nested) {
        return isa<CallOpInterface, gpu::LaunchOp>(nested)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Whether `op` reads or writes the contents of a buffer (not just its
/// address or shape).
bool touchesMemory(Operation *op) {
  return op
      ->walk([](Operation *nested) {
        auto effects = dyn_cast<MemoryEffectOpInterface>(nested);
        if (!effects)
          return nested->hasTrait<OpTrait::HasRecursiveMemoryEffects>()
                     ? WalkResult::advance()
                     : WalkResult::interrupt();
        return effects.hasEffect<MemoryEffects::Read>() ||
                       effects.hasEffect<MemoryEffects::Write>()
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Allocation, deallocation and copies stay on the host as device calls
/// (weft-gpu-device-memory).
bool isBufferManagement(Operation *op) {
  return isa<memref::AllocOp, memref::DeallocOp, memref::CopyOp,
             memref::GetGlobalOp>(op);
}

/// Elements of the innermost dim of `loop` each thread takes: neighbours in
/// memory, which NVPTX's load-store vectorizer merges into one 64- or
/// 128-bit access where their buffer's alignment is stated
/// (weft-gpu-assume-alignment). As many as make 16 bytes of the narrowest
/// element the innermost index reaches (at most 8), fewer where the
/// innermost trip count or `minBlocks` blocks of `threadsPerBlock` threads
/// do not allow them; 1 unless the body is straight-line code whose loads
/// all come before its stores (each thread then loads for all its elements
/// before it stores: the iterations are independent) and the innermost
/// index is only ever the last index of a buffer whose last dim has unit
/// stride.
int64_t elementsPerThread(scf::ParallelOp loop, ArrayRef<Value> trips,
                          Value total, int64_t threadsPerBlock,
                          int64_t minBlocks) {
  std::optional<int64_t> innerTrips = getConstantIntValue(trips.back());
  std::optional<int64_t> work = getConstantIntValue(total);
  if (!innerTrips || !work ||
      getConstantIntValue(loop.getLowerBound().back()) != 0 ||
      getConstantIntValue(loop.getStep().back()) != 1)
    return 1;
  bool stored = false;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (op.getNumRegions())
      return 1;
    if (isa<memref::StoreOp>(op))
      stored = true;
    else if (isa<memref::LoadOp>(op) ? stored : !isMemoryEffectFree(&op))
      return 1;
  }
  Value inner = loop.getInductionVars().back();
  int64_t narrowest = 0;
  for (OpOperand &use : inner.getUses()) {
    Operation *access = use.getOwner();
    Value buffer = isa<memref::LoadOp>(access)
                       ? cast<memref::LoadOp>(access).getMemRef()
                   : isa<memref::StoreOp>(access)
                       ? cast<memref::StoreOp>(access).getMemRef()
                       : Value();
    if (!buffer || use.getOperandNumber() + 1 != access->getNumOperands())
      return 1;
    auto type = cast<MemRefType>(buffer.getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(type.getStridesAndOffset(strides, offset)) ||
        strides.back() != 1)
      return 1;
    int64_t bytes = weft::elementBytes(type);
    narrowest = narrowest ? std::min(narrowest, bytes) : bytes;
  }
  if (!narrowest)
    return 1;
  for (int64_t elements = std::min<int64_t>(8, 16 / narrowest); elements > 1;
       elements /= 2) {
    int64_t threads = *work / elements;
    if (*innerTrips % elements == 0 &&
        (threads + threadsPerBlock - 1) / threadsPerBlock >= minBlocks)
      return elements;
  }
  return 1;
}

/// Orders the straight-line code of `block` (a thread's elements, loads
/// before stores) as: what does not depend on loaded values (the loads and
/// their indices), what does, the stores (by buffer). Neighbours' loads are
/// then next to one another, and so are their stores, in one basic block
/// each even where the computation branches (libdevice's erf).
void groupAccesses(Block *block) {
  Operation *end = block->getTerminator();
  llvm::DenseSet<Value> loaded;
  SmallVector<Operation *> computations, stores;
  for (Operation &op : block->without_terminator()) {
    if (isa<memref::StoreOp>(op)) {
      stores.push_back(&op);
      continue;
    }
    bool readsLoaded = llvm::any_of(
        op.getOperands(), [&](Value v) { return loaded.contains(v); });
    if (readsLoaded)
      computations.push_back(&op);
    if (readsLoaded || isa<memref::LoadOp>(op))
      loaded.insert(op.getResults().begin(), op.getResults().end());
  }
  for (Operation *op : computations)
    op->moveBefore(end);
  // A buffer's stores together where the buffers stored to cannot share
  // bytes: NVPTX does not move a store past one that may alias it.
  auto bufferOf = [&](Operation *store) -> Value {
    Value buffer = cast<memref::StoreOp>(store).getMemRef();
    if (auto view = buffer.getDefiningOp<memref::SubViewOp>();
        view && view->getBlock() == block)
      return view.getSource();
    return buffer;
  };
  SmallVector<Value> buffers;
  for (Operation *op : stores)
    if (!llvm::is_contained(buffers, bufferOf(op)))
      buffers.push_back(bufferOf(op));
  bool distinct = true;
  for (auto [i, a] : llvm::enumerate(buffers))
    for (Value b : llvm::drop_begin(buffers, i + 1))
      distinct = distinct && !weft::buffersMayAlias(a, b);
  if (distinct)
    llvm::stable_sort(stores, [&](Operation *x, Operation *y) {
      return llvm::find(buffers, bufferOf(x)) <
             llvm::find(buffers, bufferOf(y));
    });
  // A view only stored to comes with its stores: LLVM recomputes the
  // address of a store in the block that holds it and forgets what it knew
  // of the address's alignment in another (after libdevice's branches).
  llvm::SmallPtrSet<Operation *, 8> movedViews;
  for (Operation *op : stores) {
    op->moveBefore(end);
    auto view = cast<memref::StoreOp>(op)
                    .getMemRef()
                    .getDefiningOp<memref::SubViewOp>();
    if (view && view->getBlock() == block &&
        llvm::all_of(
            view->getUsers(),
            [](Operation *user) { return isa<memref::StoreOp>(user); }) &&
        movedViews.insert(view).second)
      view->moveBefore(op);
  }
}

class LoopLauncher {
public:
  LoopLauncher(int64_t threadsPerBlock, int64_t minBlocks)
      : threadsPerBlock(threadsPerBlock), minBlocks(minBlocks) {}

  /// Moves every computation of `region` (and of the host loops in it)
  /// into launches.
  LogicalResult launchIn(Region &region);

private:
  int64_t threadsPerBlock;
  int64_t minBlocks;

  LogicalResult launchSerial(ArrayRef<Operation *> run);
  void launchParallel(scf::ParallelOp loop);
};

bool isPureScalar(Operation *op) {
  return op->getNumRegions() == 0 && !op->hasTrait<OpTrait::IsTerminator>() &&
         isMemoryEffectFree(op);
}

LogicalResult LoopLauncher::launchIn(Region &region) {
  for (Block &block : region) {
    // Consecutive computations that are not parallel loops (scalar code,
    // sequential reductions), and the pure ops that read their results,
    // run together on one thread.
    SmallVector<Operation *> run;
    llvm::SmallPtrSet<Operation *, 16> inRun;
    auto flush = [&]() -> LogicalResult {
      LogicalResult result = launchSerial(run);
      run.clear();
      inRun.clear();
      return result;
    };
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (isPureScalar(&op)) {
        if (llvm::any_of(op.getOperands(), [&](Value v) {
              return v.getDefiningOp() && inRun.contains(v.getDefiningOp());
            })) {
          run.push_back(&op);
          inRun.insert(&op);
        }
        continue;
      }
      // A kernel made earlier (weft-gpu-row-reductions) is left as it is.
      bool hostControl =
          op.getNumRegions() && !isa<gpu::LaunchOp>(op) && calls(&op);
      if (op.hasTrait<OpTrait::IsTerminator>() || isBufferManagement(&op) ||
          isa<CallOpInterface, gpu::LaunchOp>(op) || hostControl ||
          !touchesMemory(&op)) {
        if (failed(flush()))
          return failure();
        if (hostControl)
          for (Region &nested : op.getRegions())
            if (failed(launchIn(nested)))
              return failure();
        continue;
      }
      // A parallel loop that reads a scalar of the run joins it: the value
      // lives in the run's thread, not in memory.
      bool readsRun = false;
      op.walk([&](Operation *nested) {
        for (Value v : nested->getOperands())
          if (Operation *def = v.getDefiningOp();
              def && inRun.contains(block.findAncestorOpInBlock(*def)))
            readsRun = true;
      });
      auto loop = dyn_cast<scf::ParallelOp>(op);
      if (loop && loop.getNumReductions() == 0 && !readsRun) {
        if (failed(flush()))
          return failure();
        launchParallel(loop);
        continue;
      }
      run.push_back(&op);
      inRun.insert(&op);
    }
    if (failed(flush()))
      return failure();
  }
  return success();
}

/// A one-dimensional launch (one block of one thread where `blocks` and
/// `threads` are null) whose body ends in gpu.terminator; `b` is left at
/// the start of the body.
gpu::LaunchOp createLaunch(OpBuilder &b, Location loc, Value blocks = {},
                           Value threads = {}) {
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto launch = gpu::LaunchOp::create(b, loc, blocks ? blocks : one, one, one,
                                      threads ? threads : one, one, one);
  b.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&launch.getBody().front());
  return launch;
}

void LoopLauncher::launchParallel(scf::ParallelOp loop) {
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  // Iterations per dim, and in all.
  // Folded where the bounds are constants: the grid is then a constant, as
  // the kernel report and weft-gpu-merge-launches need it.
  SmallVector<Value> trips;
  Value total = arith::ConstantIndexOp::create(b, loc, 1);
  for (auto [lower, upper, step] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    Value span = b.createOrFold<arith::SubIOp>(loc, upper, lower);
    trips.push_back(b.createOrFold<arith::CeilDivUIOp>(loc, span, step));
    total = b.createOrFold<arith::MulIOp>(loc, total, trips.back());
  }
  // Each thread takes `elements` neighbours of the innermost dim.
  int64_t elements =
      elementsPerThread(loop, trips, total, threadsPerBlock, minBlocks);
  if (elements > 1) {
    Value perThread = arith::ConstantIndexOp::create(b, loc, elements);
    trips.back() = b.createOrFold<arith::DivUIOp>(loc, trips.back(), perThread);
    total = b.createOrFold<arith::DivUIOp>(loc, total, perThread);
  }
  Value threads = arith::ConstantIndexOp::create(b, loc, threadsPerBlock);
  Value blocks = b.createOrFold<arith::CeilDivUIOp>(loc, total, threads);
  // An empty launch is an error in CUDA: launch only when there is work.
  std::optional<int64_t> work = getConstantIntValue(total);
  if (!work || *work == 0) {
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value any =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, total, zero);
    auto guard = scf::IfOp::create(b, loc, any, /*withElseRegion=*/false);
    b.setInsertionPointToStart(guard.thenBlock());
  }
  gpu::LaunchOp launch = createLaunch(b, loc, blocks, threads);
  Value id = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, launch.getBlockIds().x, threads),
      launch.getThreadIds().x);
  Value inside =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, id, total);
  auto body = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
  b.setInsertionPointToStart(body.thenBlock());
  // Row-major delinearization: the last dim varies fastest, so neighbouring
  // threads touch neighbouring elements.
  IRMapping mapping;
  Value rest = id;
  SmallVector<Value> indices(loop.getNumLoops());
  for (int64_t d = loop.getNumLoops() - 1; d >= 0; --d) {
    indices[d] = d ? arith::RemUIOp::create(b, loc, rest, trips[d]) : rest;
    if (d)
      rest = arith::DivUIOp::create(b, loc, rest, trips[d]);
  }
  auto mapIndex = [&](int64_t d, Value index) {
    Value scaled = arith::MulIOp::create(b, loc, index, loop.getStep()[d]);
    mapping.map(loop.getInductionVars()[d],
                arith::AddIOp::create(b, loc, loop.getLowerBound()[d], scaled));
  };
  int64_t last = loop.getNumLoops() - 1;
  for (int64_t d = 0; d < last; ++d)
    mapIndex(d, indices[d]);
  if (elements == 1) {
    mapIndex(last, indices[last]);
    for (Operation &op : loop.getBody()->without_terminator())
      b.clone(op, mapping);
    loop.erase();
    return;
  }
  // The thread's elements one after another (the innermost dim counts from
  // 0 by 1), each of its accesses of them through a view of the thread's
  // elements at a constant index: their addresses then differ by constants
  // NVPTX sees, which LLVM's reassociation of the index arithmetic hides
  // otherwise.
  Value first = arith::MulIOp::create(
      b, loc, indices[last], arith::ConstantIndexOp::create(b, loc, elements));
  SmallVector<Value> offsets, positions;
  for (int64_t k = 0; k < elements; ++k) {
    positions.push_back(arith::ConstantIndexOp::create(b, loc, k));
    offsets.push_back(k ? arith::AddIOp::create(b, loc, first, positions[k])
                        : first);
  }
  for (int64_t k = 0; k < elements; ++k) {
    mapping.map(loop.getInductionVars()[last], offsets[k]);
    for (Operation &op : loop.getBody()->without_terminator())
      b.clone(op, mapping);
  }
  // One view per buffer and leading indices, where its first access is.
  std::map<SmallVector<const void *>, Value> views;
  for (Operation &op :
       llvm::make_early_inc_range(body.thenBlock()->without_terminator())) {
    auto load = dyn_cast<memref::LoadOp>(op);
    auto store = dyn_cast<memref::StoreOp>(op);
    if (!load && !store)
      continue;
    Value buffer = load ? load.getMemRef() : store.getMemRef();
    ValueRange at = load ? load.getIndices() : store.getIndices();
    auto k = at.empty() ? offsets.end() : llvm::find(offsets, at.back());
    if (k == offsets.end())
      continue;
    SmallVector<const void *> key{buffer.getAsOpaquePointer()};
    for (Value index : at.drop_back())
      key.push_back(index.getAsOpaquePointer());
    Value &view = views[key];
    if (!view) {
      b.setInsertionPoint(&op);
      auto type = cast<MemRefType>(buffer.getType());
      SmallVector<OpFoldResult> start(at.begin(), at.end());
      start.back() = first;
      SmallVector<OpFoldResult> sizes(type.getRank(), b.getIndexAttr(1));
      sizes.back() = b.getIndexAttr(elements);
      SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
      auto viewType = memref::SubViewOp::inferRankReducedResultType(
          {elements}, type, start, sizes, strides);
      view = memref::SubViewOp::create(b, op.getLoc(), viewType, buffer, start,
                                       sizes, strides);
    }
    if (load)
      load.getMemrefMutable().assign(view);
    else
      store.getMemrefMutable().assign(view);
    op.setOperands(op.getNumOperands() - at.size(), at.size(),
                   positions[k - offsets.begin()]);
  }
  // The innermost index was only ever the last index of an access.
  for (Value offset : llvm::drop_begin(offsets)) {
    assert(offset.use_empty() && "an element's index is still read");
    offset.getDefiningOp()->erase();
  }
  groupAccesses(body.thenBlock());
  loop.erase();
}

LogicalResult LoopLauncher::launchSerial(ArrayRef<Operation *> run) {
  if (run.empty())
    return success();
  // A result read by the host would have to come back from the device.
  llvm::SmallPtrSet<Operation *, 16> moved(run.begin(), run.end());
  Block *block = run.front()->getBlock();
  for (Operation *op : run)
    for (Operation *user : op->getUsers())
      if (!moved.contains(block->findAncestorOpInBlock(*user)))
        return user->emitError("weft-gpu-launch-loops: the host reads a "
                               "value computed from device memory here; it "
                               "cannot run in a kernel");
  OpBuilder b(run.front());
  gpu::LaunchOp launch = createLaunch(b, run.front()->getLoc());
  Operation *terminator = launch.getBody().front().getTerminator();
  for (Operation *op : run)
    op->moveBefore(terminator);
  return success();
}

struct WeftGpuLaunchLoopsPass
    : public weft::impl::WeftGpuLaunchLoopsBase<WeftGpuLaunchLoopsPass> {
  using WeftGpuLaunchLoopsBase::WeftGpuLaunchLoopsBase;
  void runOnOperation() override {
    if (threadsPerBlock < 1 || threadsPerBlock > 1024) {
      getOperation().emitError("weft-gpu-launch-loops: threads-per-block "
                               "must be in [1, 1024]");
      return signalPassFailure();
    }
    // Whether two buffers may share bytes is asked of the calls of the
    // functions they are arguments of: one function at a time.
    weft::CallSitesCache cacheCallSites;
    LoopLauncher launcher(threadsPerBlock, minBlocks);
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() &&
          failed(launcher.launchIn(function.getBody())))
        return signalPassFailure();
  }
};

} // namespace
