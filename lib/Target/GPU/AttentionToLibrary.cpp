//===- AttentionToLibrary.cpp - bf16 attention as fused kernels -----------===//
//
// cuDNN's fused SDPA keeps the scores on chip and reads the forward's
// log-sum-exp in the backward; the decomposition writes [B, H, S, T]
// scores, probabilities and their gradients to memory several times over
// (docs/cuda-backend.md). This pass marks the bf16 attentions of shapes the
// kernels take (weft/runtime/Contract.h) and gives each backward the
// statistics its forward saves; they bufferize into the calls
// (lib/Conversion/WeftToLinalg/BufferizeAttention.cpp).
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/TargetAttrNames.h"
#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Target/GPU/Passes.h"
#include "weft/runtime/Contract.h"

#include "mlir/IR/BuiltinOps.h"

#include <cmath>

namespace weft {
#define GEN_PASS_DEF_WEFTATTENTIONTOLIBRARY
#include "weft/Target/GPU/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// A bf16 attention (or its backward) of a shape the kernels take: others
/// keep the decomposition.
bool runsFused(Operation *attention) {
  return getElementTypeOrSelf(attention->getOperand(0).getType()).isBF16() &&
         !fusedAttentionRefusal(attention, /*backward=*/false);
}

/// An i1 mask as the additive one the kernels read: 0 where it keeps a
/// key, -inf where it hides one.
Value additiveMask(OpBuilder &builder, Location loc, Value mask, Type element,
                   llvm::DenseMap<Value, Value> &converted) {
  if (!getElementTypeOrSelf(mask.getType()).isInteger(1))
    return mask;
  Value &additive = converted[mask];
  if (additive)
    return additive;
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointAfterValue(mask);
  additive = WhereOp::create(builder, loc, mask,
                             createScalar(builder, loc, element, 0.0),
                             createScalar(builder, loc, element, -INFINITY));
  return additive;
}

/// `<callee><suffix>bf16`, declared with the contract's signature: the
/// tensors as unranked memrefs (the log-sum-exp in f32), then the flags and
/// the scale.
FlatSymbolRefAttr declareKernel(ModuleOp module, StringRef callee,
                                const char *suffix, Type element,
                                unsigned tensorsBefore, unsigned tensorsAfter) {
  MLIRContext *ctx = module.getContext();
  std::string name = (callee + suffix + "bf16").str();
  if (!module.lookupSymbol(name)) {
    auto tensor = UnrankedMemRefType::get(element, 0);
    SmallVector<Type> inputs(tensorsBefore, tensor);
    inputs.push_back(UnrankedMemRefType::get(Float32Type::get(ctx), 0));
    inputs.append(tensorsAfter, tensor);
    inputs.push_back(IntegerType::get(ctx, 64));
    inputs.push_back(Float64Type::get(ctx));
    auto builder = OpBuilder::atBlockBegin(module.getBody());
    auto decl = func::FuncOp::create(builder, module.getLoc(), name,
                                     FunctionType::get(ctx, inputs, {}));
    decl.setPrivate();
    decl->setAttr(kFusedAttentionAttrName,
                  builder.getStringAttr(StringRef(suffix) ==
                                                runtime::kAttentionForwardSuffix
                                            ? "forward"
                                            : "backward"));
  }
  return FlatSymbolRefAttr::get(ctx, name);
}

struct WeftAttentionToLibraryPass
    : public weft::impl::WeftAttentionToLibraryBase<
          WeftAttentionToLibraryPass> {
  using WeftAttentionToLibraryBase::WeftAttentionToLibraryBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<AttentionGradOp> grads;
    module.walk([&](AttentionGradOp grad) {
      if (runsFused(grad))
        grads.push_back(grad);
    });
    for (AttentionGradOp grad : grads)
      readForwardLogSumExp(grad);

    llvm::DenseMap<Value, Value> additive;
    OpBuilder builder(module.getContext());
    module.walk([&](Operation *op) {
      if (!isa<AttentionOp, AttentionGradOp>(op) || !runsFused(op))
        return;
      Type element = getElementTypeOrSelf(op->getOperand(0).getType());
      bool forward = isa<AttentionOp>(op);
      if (auto attention = dyn_cast<AttentionOp>(op);
          attention && attention.getMask())
        attention.getMaskMutable().assign(additiveMask(
            builder, op->getLoc(), attention.getMask(), element, additive));
      if (auto grad = dyn_cast<AttentionGradOp>(op); grad && grad.getMask())
        grad.getMaskMutable().assign(additiveMask(
            builder, op->getLoc(), grad.getMask(), element, additive));
      // forward(q, k, v, bias, out, lse, ...) and backward(q, k, v, bias,
      // out, out_grad, lse, q_grad, k_grad, v_grad, ...).
      op->setAttr(
          kLibraryCallAttrName,
          forward
              ? declareKernel(module, callee, runtime::kAttentionForwardSuffix,
                              element, 5, 0)
              : declareKernel(module, callee, runtime::kAttentionBackwardSuffix,
                              element, 6, 3));
    });
  }
};

} // namespace
