//===- MarkLaunches.cpp - The runtime learns each launch's report id ------===//

#include "weft/Dialect/Weft/IR/TargetAttrNames.h"
#include "weft/Target/GPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace weft {
#define GEN_PASS_DEF_WEFTGPUMARKLAUNCHES
#include "weft/Target/GPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

struct WeftGpuMarkLaunchesPass
    : public weft::impl::WeftGpuMarkLaunchesBase<WeftGpuMarkLaunchesPass> {
  using WeftGpuMarkLaunchesBase::WeftGpuMarkLaunchesBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> numbered;
    module.walk([&](Operation *op) {
      if (op->hasAttr(weft::kLaunchIdAttrName) &&
          !op->getParentOfType<gpu::LaunchOp>())
        numbered.push_back(op);
    });
    if (numbered.empty())
      return;
    OpBuilder b(module.getContext());
    if (!module.lookupSymbol(callee)) {
      b.setInsertionPointToStart(module.getBody());
      auto mark = func::FuncOp::create(b, module.getLoc(), callee,
                                       b.getFunctionType({b.getI64Type()}, {}));
      mark.setPrivate();
    }
    for (Operation *op : numbered) {
      b.setInsertionPoint(op);
      auto id = op->getAttrOfType<IntegerAttr>(weft::kLaunchIdAttrName);
      Value number = arith::ConstantIntOp::create(b, op->getLoc(),
                                                  b.getI64Type(), id.getInt());
      func::CallOp::create(b, op->getLoc(), callee, TypeRange(),
                           ValueRange{number});
    }
  }
};

} // namespace
