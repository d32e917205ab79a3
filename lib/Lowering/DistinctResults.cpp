//===- DistinctResults.cpp - Return each buffer once ----------------------===//

#include "weft/Lowering/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/DenseSet.h"

namespace weft {
#define GEN_PASS_DEF_WEFTDISTINCTRESULTS
#include "weft/Lowering/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

struct WeftDistinctResultsPass
    : public weft::impl::WeftDistinctResultsBase<WeftDistinctResultsPass> {
  void runOnOperation() override {
    getOperation()->walk([](func::ReturnOp ret) {
      llvm::SmallDenseSet<Value> returned;
      OpBuilder builder(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        Value value = operand.get();
        // Function boundaries are bufferized with identity layouts.
        auto type = llvm::dyn_cast<MemRefType>(value.getType());
        if (!type || !type.getLayout().isIdentity() ||
            returned.insert(value).second)
          continue;
        SmallVector<Value> sizes;
        for (int64_t dim = 0; dim < type.getRank(); ++dim)
          if (type.isDynamicDim(dim))
            sizes.push_back(
                memref::DimOp::create(builder, ret.getLoc(), value, dim));
        auto copy = memref::AllocOp::create(builder, ret.getLoc(), type, sizes);
        memref::CopyOp::create(builder, ret.getLoc(), value, copy);
        operand.set(copy);
      }
    });
  }
};

} // namespace
