//===- EmulateLaunches.cpp - Test tool: kernels run on the CPU ------------===//

#include "weft/Target/CUDA/Passes.h"

#include "mlir/IR/IRMapping.h"

namespace weft {
#define GEN_PASS_DEF_WEFTGPUEMULATELAUNCHES
#include "weft/Target/CUDA/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// Ops whose meaning depends on threads running together.
bool synchronizesThreads(Operation *op) {
  return isa<gpu::BarrierOp, gpu::ShuffleOp, gpu::AllReduceOp,
             gpu::SubgroupReduceOp>(op);
}

LogicalResult emulate(gpu::LaunchOp launch) {
  if (!launch.getWorkgroupAttributions().empty() ||
      !launch.getPrivateAttributions().empty())
    return launch.emitError("weft-gpu-emulate-launches: a kernel with "
                            "shared memory needs threads that run together");
  WalkResult walk = launch.getBody().walk([](Operation *op) {
    if (!synchronizesThreads(op))
      return WalkResult::advance();
    op->emitError("weft-gpu-emulate-launches: this op synchronizes the "
                  "threads of a block, which the emulation runs one at a "
                  "time");
    return WalkResult::interrupt();
  });
  if (walk.wasInterrupted())
    return failure();
  OpBuilder b(launch);
  Location loc = launch.getLoc();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  IRMapping mapping;
  gpu::KernelDim3 blockIds = launch.getBlockIds();
  gpu::KernelDim3 threadIds = launch.getThreadIds();
  gpu::KernelDim3 gridArgs = launch.getGridSize();
  gpu::KernelDim3 blockArgs = launch.getBlockSize();
  for (auto [arg, value] : {std::pair{gridArgs.x, grid.x},
                            {gridArgs.y, grid.y},
                            {gridArgs.z, grid.z},
                            {blockArgs.x, block.x},
                            {blockArgs.y, block.y},
                            {blockArgs.z, block.z}})
    mapping.map(arg, value);
  // Blocks, then the threads of each block, z outermost.
  for (auto [id, bound] : {std::pair{blockIds.z, grid.z},
                           {blockIds.y, grid.y},
                           {blockIds.x, grid.x},
                           {threadIds.z, block.z},
                           {threadIds.y, block.y},
                           {threadIds.x, block.x}}) {
    auto loop = scf::ForOp::create(b, loc, zero, bound, one);
    mapping.map(id, loop.getInductionVar());
    b.setInsertionPoint(loop.getBody()->getTerminator());
  }
  for (Operation &op : launch.getBody().front().without_terminator())
    b.clone(op, mapping);
  launch.erase();
  return success();
}

struct WeftGpuEmulateLaunchesPass
    : public weft::impl::WeftGpuEmulateLaunchesBase<
          WeftGpuEmulateLaunchesPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<gpu::LaunchOp, gpu::AllocOp, gpu::DeallocOp, gpu::MemcpyOp>(op))
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : ops) {
      rewriter.setInsertionPoint(op);
      if (auto launch = dyn_cast<gpu::LaunchOp>(op)) {
        if (failed(emulate(launch)))
          return signalPassFailure();
      } else if (auto alloc = dyn_cast<gpu::AllocOp>(op)) {
        rewriter.replaceOpWithNewOp<memref::AllocOp>(
            alloc, alloc.getMemref().getType(), alloc.getDynamicSizes(),
            alloc.getSymbolOperands());
      } else if (auto dealloc = dyn_cast<gpu::DeallocOp>(op)) {
        rewriter.replaceOpWithNewOp<memref::DeallocOp>(dealloc,
                                                       dealloc.getMemref());
      } else if (auto copy = dyn_cast<gpu::MemcpyOp>(op)) {
        rewriter.replaceOpWithNewOp<memref::CopyOp>(copy, copy.getSrc(),
                                                    copy.getDst());
      }
    }
  }
};

} // namespace
