//===- LaunchLoops.cpp - Host loop nests as GPU kernels -------------------===//

#include "weft/Target/CUDA/Passes.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace weft {
#define GEN_PASS_DEF_WEFTGPULAUNCHLOOPS
#include "weft/Target/CUDA/Passes.h.inc"
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

class LoopLauncher {
public:
  LoopLauncher(int64_t threadsPerBlock) : threadsPerBlock(threadsPerBlock) {}

  /// Moves every computation of `region` (and of the host loops in it)
  /// into launches.
  LogicalResult launchIn(Region &region);

private:
  int64_t threadsPerBlock;

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
  for (int64_t d = loop.getNumLoops() - 1; d >= 0; --d) {
    Value index = d ? arith::RemUIOp::create(b, loc, rest, trips[d]) : rest;
    if (d)
      rest = arith::DivUIOp::create(b, loc, rest, trips[d]);
    Value scaled = arith::MulIOp::create(b, loc, index, loop.getStep()[d]);
    mapping.map(loop.getInductionVars()[d],
                arith::AddIOp::create(b, loc, loop.getLowerBound()[d], scaled));
  }
  for (Operation &op : loop.getBody()->without_terminator())
    b.clone(op, mapping);
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
    LoopLauncher launcher(threadsPerBlock);
    if (failed(launcher.launchIn(getOperation().getBody())))
      signalPassFailure();
  }
};

} // namespace
