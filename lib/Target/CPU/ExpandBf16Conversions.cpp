//===- ExpandBf16Conversions.cpp - f32 <-> bf16 as integer arithmetic -----===//
//
// LLVM lowers `fptrunc float to bfloat` on x86 without AVX512-BF16 to a call
// of `__truncsfbf2`, which GCC 12's libgcc (Debian 12) does not have: a bf16
// program would not link with only the system compiler runtime. Expanded
// into shifts and adds, the conversions need no runtime at all.
//
//===----------------------------------------------------------------------===//

#include "weft/Target/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace weft {
#define GEN_PASS_DEF_WEFTEXPANDBF16CONVERSIONS
#include "weft/Target/CPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

struct WeftExpandBf16ConversionsPass
    : public weft::impl::WeftExpandBf16ConversionsBase<
          WeftExpandBf16ConversionsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    arith::populateExpandBFloat16Patterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
