//===- Autodiff.cpp - Reverse-mode differentiation of weft functions ------===//
//
// The gradient function replays the forward ops, then walks them backwards
// applying each op's vector-Jacobian product (its GradientOpInterface,
// Dialect/Weft/IR/Gradients.cpp) to the adjoint of its results and summing
// what reaches each operand.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/Transforms/Autodiff.h"
#include "weft/Dialect/Weft/IR/Parameters.h"
#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "llvm/ADT/DenseMap.h"

namespace weft {
#define GEN_PASS_DEF_WEFTAUTODIFF
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// The adjoints of `op`'s operands from those of its results, by the op's
/// own rule (its GradientOpInterface).
LogicalResult buildOperandAdjoints(OpBuilder &builder, Operation *op,
                                   ArrayRef<Value> resultAdjoints,
                                   SmallVectorImpl<Value> &operandAdjoints) {
  auto differentiable = dyn_cast<GradientOpInterface>(op);
  if (!differentiable)
    return op->emitError() << "autodiff: no gradient rule for '"
                           << op->getName() << "'";
  if (failed(differentiable.buildAdjoints(builder, resultAdjoints,
                                          operandAdjoints)))
    return failure();
  assert(operandAdjoints.size() == op->getNumOperands() &&
         "a gradient rule sets one adjoint (or null) per operand");
  return success();
}

/// `sum + contribution`, two adjoints of one value. A norm's input gradient
/// just built adds `sum` as it writes its rows (the residual stream's
/// gradient meets the norm's there), instead of another pass over both.
Value accumulate(OpBuilder &b, Location loc, Value sum, Value contribution) {
  auto norm = contribution.getDefiningOp<NormGradOp>();
  if (norm && contribution == norm.getInputGrad() && !norm.getAddend() &&
      contribution.use_empty() && sum.getType() == contribution.getType()) {
    norm.getAddendMutable().assign(sum);
    return contribution;
  }
  return AddOp::create(b, loc, sum, contribution);
}

} // namespace

FailureOr<func::FuncOp> weft::buildGradientFunction(func::FuncOp func,
                                                    StringRef name) {
  auto lossType =
      func.getNumResults()
          ? llvm::dyn_cast<RankedTensorType>(func.getResultTypes()[0])
          : RankedTensorType();
  if (!lossType || !llvm::isa<FloatType>(lossType.getElementType()) ||
      lossType.getNumElements() != 1)
    return func.emitError("autodiff: the first result must be a scalar "
                          "float loss");
  if (!func.getBody().hasOneBlock())
    return func.emitError("autodiff: needs a single-block function");
  OpBuilder b(func);
  b.setInsertionPointAfter(func);
  auto grad = cast<func::FuncOp>(b.clone(*func));
  grad.setSymName(name);
  Block &body = grad.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // Only ops that read a value depending on a parameter need adjoints:
  // the rest (masks, RoPE tables, shapes computed from constants) are
  // constants of the differentiation and have no rule to follow.
  llvm::DenseSet<Value> varied;
  for (BlockArgument arg : grad.getArguments())
    if (isTrainedParameter(grad, arg.getArgNumber()))
      varied.insert(arg);
  auto isVaried = [&](Value v) { return varied.contains(v); };
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator()) {
    if (llvm::none_of(op.getOperands(), isVaried))
      continue;
    forward.push_back(&op);
    for (Value result : op.getResults())
      if (isFloatTensor(result))
        varied.insert(result);
  }

  // Adjoints start at d loss / d loss = 1 and flow backwards.
  llvm::DenseMap<Value, Value> adjoint;
  b.setInsertionPoint(ret);
  Value loss = ret.getOperand(0);
  adjoint[loss] = ConstantOp::create(
      b, loss.getLoc(),
      DenseElementsAttr::get(lossType,
                             b.getFloatAttr(lossType.getElementType(), 1.0)));
  for (Operation *op : llvm::reverse(forward)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value result : op->getResults()) {
      resultGrads.push_back(adjoint.lookup(result));
      any |= resultGrads.back() != nullptr;
    }
    if (!any)
      continue;
    SmallVector<Value> operandGrads;
    b.setInsertionPoint(ret);
    if (failed(buildOperandAdjoints(b, op, resultGrads, operandGrads))) {
      grad.erase();
      return failure();
    }
    for (auto [operand, operandGrad] :
         llvm::zip(op->getOperands(), operandGrads)) {
      if (!operandGrad || !isVaried(operand))
        continue;
      Value &slot = adjoint[operand];
      slot =
          slot ? accumulate(b, op->getLoc(), slot, operandGrad) : operandGrad;
    }
  }

  // Results: the original ones, then the gradient of every parameter.
  SmallVector<Value> results(ret.getOperands());
  SmallVector<Attribute> names;
  if (auto outputs =
          grad->getAttrOfType<ArrayAttr>(WeftDialect::kOutputsAttrName))
    names.append(outputs.begin(), outputs.end());
  else
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      names.push_back(b.getStringAttr("result" + std::to_string(i)));
  for (BlockArgument arg : grad.getArguments()) {
    auto param = grad.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   WeftDialect::kParamAttrName);
    if (!isTrainedParameter(grad, arg.getArgNumber()))
      continue;
    Value g = adjoint.lookup(arg);
    if (!g)
      g = ConstantOp::create(
          b, grad.getLoc(),
          DenseElementsAttr::get(
              tensorTypeOf(arg), b.getFloatAttr(tensorTypeOf(arg).getElementType(), 0)));
    results.push_back(g);
    names.push_back(b.getStringAttr("grad:" + param.getValue()));
  }
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  grad.setType(FunctionType::get(func.getContext(), grad.getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  grad.removeResAttrsAttr();
  grad->setAttr(WeftDialect::kOutputsAttrName, b.getArrayAttr(names));
  return grad;
}

namespace {

struct WeftAutodiffPass
    : public weft::impl::WeftAutodiffBase<WeftAutodiffPass> {
  using WeftAutodiffBase::WeftAutodiffBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(function);
    if (!func) {
      module.emitError() << "autodiff: no function '" << function << "'";
      return signalPassFailure();
    }
    if (failed(buildGradientFunction(func, function + "_grad")))
      signalPassFailure();
  }
};

} // namespace
