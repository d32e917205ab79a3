//===- DeviceMemory.cpp - Host code's buffers in device memory ------------===//

#include "weft/Lowering/Memrefs.h"
#include "weft/Target/GPU/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace weft {
#define GEN_PASS_DEF_WEFTGPUDEVICEMEMORY
#include "weft/Target/GPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

bool inKernel(Operation *op) {
  return op->getParentOfType<gpu::LaunchOp>() ||
         op->getParentOfType<gpu::GPUModuleOp>();
}

/// Gives each kernel that reads the constant `global` its own
/// memref.get_global, before the use: kernel outlining then copies the
/// global into the kernel's module, so it reaches the device with the
/// code, once. Returns whether the host code still uses it (a library call,
/// a copy): those uses get a device copy per call.
bool moveIntoKernels(memref::GetGlobalOp global, IRRewriter &rewriter) {
  for (OpOperand &use : llvm::make_early_inc_range(global->getUses())) {
    Operation *user = use.getOwner();
    if (!user->getParentOfType<gpu::LaunchOp>())
      continue;
    rewriter.setInsertionPoint(user);
    use.set(rewriter.clone(*global)->getResult(0));
  }
  if (!global->use_empty())
    return true;
  rewriter.eraseOp(global);
  return false;
}

/// Rewrites the buffer operations of one host function.
LogicalResult moveToDevice(func::FuncOp func) {
  IRRewriter rewriter(func.getContext());
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (!inKernel(op) &&
        isa<memref::AllocOp, memref::AllocaOp, memref::DeallocOp,
            memref::CopyOp, memref::GetGlobalOp>(op))
      ops.push_back(op);
  });
  // Constants the host code uses are copied to the device once per call,
  // at the start.
  Block &entry = func.getBody().front();
  llvm::erase_if(ops, [&](Operation *op) {
    auto global = dyn_cast<memref::GetGlobalOp>(op);
    return global && !moveIntoKernels(global, rewriter);
  });
  for (Operation *op : ops)
    if (isa<memref::GetGlobalOp>(op))
      op->moveBefore(&entry, entry.begin());
  SmallVector<Value> constants;
  for (Operation *op : ops) {
    rewriter.setInsertionPoint(op);
    Location loc = op->getLoc();
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      rewriter.replaceOpWithNewOp<gpu::AllocOp>(
          alloc, alloc.getType(), /*asyncToken=*/Type(), ValueRange(),
          alloc.getDynamicSizes(), alloc.getSymbolOperands());
    } else if (isa<memref::AllocaOp>(op)) {
      return op->emitError("weft-gpu-device-memory: a stack buffer of host "
                           "code cannot be read by a kernel");
    } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      gpu::DeallocOp::create(rewriter, loc, /*asyncToken=*/Type(), ValueRange(),
                             dealloc.getMemref());
      rewriter.eraseOp(dealloc);
    } else if (auto copy = dyn_cast<memref::CopyOp>(op)) {
      if (!weft::isContiguousMemRef(copy.getSource().getType()) ||
          !weft::isContiguousMemRef(copy.getTarget().getType()))
        return copy.emitError("weft-gpu-device-memory: a strided copy must "
                              "be a kernel (run weft-strided-copies-to-loops "
                              "first)");
      gpu::MemcpyOp::create(rewriter, loc, /*asyncToken=*/Type(), ValueRange(),
                            copy.getTarget(), copy.getSource());
      rewriter.eraseOp(copy);
    } else if (auto global = dyn_cast<memref::GetGlobalOp>(op)) {
      // The constant lives in host memory; kernels read a device copy.
      auto type = global.getType();
      if (!type.getLayout().isIdentity())
        return global.emitError("weft-gpu-device-memory: a constant with a "
                                "strided layout");
      rewriter.setInsertionPointAfter(global);
      auto copy =
          gpu::AllocOp::create(rewriter, loc, type, Type(), ValueRange(),
                               ValueRange(), ValueRange());
      rewriter.replaceAllUsesExcept(global.getResult(), copy.getMemref(), copy);
      gpu::MemcpyOp::create(rewriter, loc, Type(), ValueRange(),
                            copy.getMemref(), global.getResult());
      constants.push_back(copy.getMemref());
    }
  }
  if (constants.empty())
    return success();
  func.walk([&](func::ReturnOp ret) {
    rewriter.setInsertionPoint(ret);
    for (Value constant : constants)
      gpu::DeallocOp::create(rewriter, ret.getLoc(), Type(), ValueRange(),
                             constant);
  });
  return success();
}

struct WeftGpuDeviceMemoryPass
    : public weft::impl::WeftGpuDeviceMemoryBase<WeftGpuDeviceMemoryPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(moveToDevice(func)))
        return signalPassFailure();
  }
};

} // namespace
