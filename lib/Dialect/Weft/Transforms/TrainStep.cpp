//===- TrainStep.cpp - A model's training step: loss, gradients, update ---===//
//
// From `main` (token ids and parameters to logits) this derives
//   train_step(ids, labels, lr, bias1, bias2, params..., state...)
//     -> (loss, grad_norm, new params..., new state...)
// The loss is the mean cross-entropy of the logits against the labels
// (positions labelled `ignore-index` do not count), its gradient comes from
// weft-autodiff, and the optimizer update (AdamW or SGD with momentum, after
// clipping by the global gradient norm) is part of the same function, so the
// partitioner sees the whole step. `train_loss_grad` (loss and parameter
// gradients) is kept beside it. The learning rate and Adam's bias
// corrections (1 - beta^t) are inputs: the schedule is the runtime's.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/Flops.h"
#include "weft/Dialect/Weft/IR/Parameters.h"
#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Autodiff.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/GlobPattern.h"

namespace weft {
#define GEN_PASS_DEF_WEFTDERIVETRAINSTEP
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// Whether a gradient reaches an attention's mask: it is computed from a
/// float argument (a parameter, say a learned position bias) through float
/// values. A padding mask cast from integer ids needs none.
bool maskNeedsGradient(Value mask) {
  SmallVector<Value> worklist;
  if (mask)
    worklist.push_back(mask);
  llvm::DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    if (!seen.insert(value).second ||
        !isa<FloatType>(getElementTypeOrSelf(value.getType())))
      continue;
    Operation *producer = value.getDefiningOp();
    if (!producer) {
      // Inputs take no gradient; parameters and block arguments of other
      // regions may.
      auto arg = cast<BlockArgument>(value);
      auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      if (func &&
          func.getArgAttr(arg.getArgNumber(), WeftDialect::kInputAttrName))
        continue;
      return true;
    }
    llvm::append_range(worklist, producer->getOperands());
  }
  return false;
}

/// The contraction FLOPs of a function (see contractionFlops).
int64_t functionFlops(func::FuncOp func) {
  int64_t flops = 0;
  func.walk([&](Operation *op) { flops += contractionFlops(op); });
  return flops;
}

class StepBuilder {
public:
  StepBuilder(OpBuilder &b, Location loc, Type element)
      : b(b), loc(loc), element(element) {}

  Value scalar(double value) { return createScalar(b, loc, element, value); }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value sumAll(Value x) {
    int64_t rank = tensorTypeOf(x).getRank();
    if (rank == 0)
      return x;
    return ReduceSumOp::create(
        b, loc, x,
        b.getDenseI64ArrayAttr(llvm::to_vector(llvm::seq<int64_t>(0, rank))),
        UnitAttr());
  }
  Value castTo(Value x, Type to) {
    if (tensorTypeOf(x).getElementType() == to)
      return x;
    return CastOp::create(
        b, loc, RankedTensorType::get(tensorTypeOf(x).getShape(), to), x);
  }

  /// Mean cross-entropy of logits [..., V] against integer labels [...],
  /// over the positions whose label is not `ignoreIndex`: one fused op per
  /// position (no log-probabilities or one-hot of the logits' size).
  Value crossEntropy(Value logits, Value labels, int64_t ignoreIndex) {
    RankedTensorType logitsType = tensorTypeOf(logits);
    Type labelType = tensorTypeOf(labels).getElementType();
    auto perPosition = RankedTensorType::get(tensorTypeOf(labels).getShape(),
                                             logitsType.getElementType());
    // Logits a bf16 lm_head wrote are read as written (the loss computes in
    // f32 either way), so their gradient comes out in bf16 for the lm_head's
    // GEMMs: no f32 copy of the logits or of their gradient exists.
    auto widened = logits.getDefiningOp<CastOp>();
    if (widened) {
      auto narrow = dyn_cast<FloatType>(
          tensorTypeOf(widened.getInput()).getElementType());
      auto wide = dyn_cast<FloatType>(logitsType.getElementType());
      if (narrow && wide && wide.isF32() && narrow.getWidth() < wide.getWidth())
        logits = widened.getInput();
    }
    auto losses =
        SoftmaxCrossEntropyOp::create(b, loc, perPosition, perPosition, logits,
                                      labels, b.getI64IntegerAttr(ignoreIndex));
    if (widened && widened->use_empty())
      widened.erase();
    auto ignore = RankedTensorType::get({}, labelType);
    Value ignored = EqualOp::create(
        b, loc, labels,
        ConstantOp::create(
            b, loc,
            DenseElementsAttr::get(ignore,
                                   b.getIntegerAttr(labelType, ignoreIndex))));
    Value counted = castTo(NotOp::create(b, loc, ignored), element);
    return div(sumAll(castTo(losses.getLoss(), element)), sumAll(counted));
  }

  OpBuilder &b;
  Location loc;
  Type element;
};

/// Runs every f32 linear and matmul of `func` (and, with `attention`, each
/// attention the fused kernels take forward and backward: one they refuse
/// stays an f32 decomposition) on `narrow` operands: casts in, the op on
/// the narrow type, a cast of the result back to f32. An i1 mask stays as
/// it is.
void castContractions(func::FuncOp func, FloatType narrow, bool attention) {
  SmallVector<Operation *> contractions;
  func.walk([&](Operation *op) {
    bool fusedAttention = attention && isa<AttentionOp>(op) &&
                          !fusedAttentionRefusal(op, /*backward=*/true);
    if ((isa<LinearOp, MatmulOp>(op) || fusedAttention) &&
        llvm::cast<RankedTensorType>(op->getResult(0).getType())
            .getElementType()
            .isF32())
      contractions.push_back(op);
  });
  // A norm read only by these contractions rounds its own result, as it
  // writes it: no f32 copy of it is made to be cast.
  llvm::SmallPtrSet<Operation *, 16> narrowing(contractions.begin(),
                                               contractions.end());
  func.walk([&](Operation *norm) {
    if (!isa<LayerNormOp, RmsNormOp>(norm) || norm->use_empty() ||
        !llvm::all_of(norm->getUsers(), [&](Operation *user) {
          return narrowing.contains(user);
        }))
      return;
    Value result = norm->getResult(0);
    result.setType(
        llvm::cast<RankedTensorType>(result.getType()).clone(narrow));
  });
  for (Operation *op : contractions) {
    OpBuilder b(op);
    auto narrowed = [&](Value v) -> Value {
      auto type = llvm::cast<RankedTensorType>(v.getType());
      if (type.getElementType() == narrow)
        return v;
      return CastOp::create(b, op->getLoc(), type.clone(narrow), v).getResult();
    };
    for (OpOperand &operand : op->getOpOperands())
      if (isa<FloatType>(getElementTypeOrSelf(operand.get().getType())))
        operand.set(narrowed(operand.get()));
    Value result = op->getResult(0);
    auto wide = llvm::cast<RankedTensorType>(result.getType());
    result.setType(wide.clone(narrow));
    b.setInsertionPointAfter(op);
    auto back = CastOp::create(b, op->getLoc(), wide, result);
    result.replaceAllUsesExcept(back.getResult(), back);
  }
}

/// The terms of `value` when it is a tree of same-typed adds used only by
/// each other (the adjoint sums of a value read twice); the tree's adds are
/// erased. `value` itself otherwise.
SmallVector<Value> splitSum(Value value) {
  auto add = value.getDefiningOp<AddOp>();
  if (!add || add.getLhs().getType() != value.getType() ||
      add.getRhs().getType() != value.getType() || !value.use_empty())
    return {value};
  SmallVector<Value> terms, work{add.getLhs(), add.getRhs()};
  SmallVector<Operation *> adds{add};
  while (!work.empty()) {
    Value term = work.pop_back_val();
    auto inner = term.getDefiningOp<AddOp>();
    if (inner && term.hasOneUse() &&
        inner.getLhs().getType() == term.getType() &&
        inner.getRhs().getType() == term.getType()) {
      adds.push_back(inner);
      work.push_back(inner.getLhs());
      work.push_back(inner.getRhs());
      continue;
    }
    terms.push_back(term);
  }
  for (Operation *op : adds)
    op->erase();
  return terms;
}

struct WeftDeriveTrainStepPass
    : public weft::impl::WeftDeriveTrainStepBase<WeftDeriveTrainStepPass> {
  using WeftDeriveTrainStepBase::WeftDeriveTrainStepBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("weft-derive-train-step: no function 'main'");
      return signalPassFailure();
    }
    if (optimizer != "adamw" && optimizer != "sgd") {
      module.emitError() << "unknown optimizer '" << optimizer
                         << "' (expected adamw or sgd)";
      return signalPassFailure();
    }
    if (failed(derive(module, main)))
      signalPassFailure();
  }

  /// The name of the input holding the token ids: `token-input`, or the
  /// only integer input.
  FailureOr<StringAttr> findTokenInput(func::FuncOp main) {
    SmallVector<StringAttr> inputs, integers;
    for (BlockArgument arg : main.getArguments()) {
      auto name = main.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), WeftDialect::kInputAttrName);
      if (!name)
        continue;
      inputs.push_back(name);
      auto type = llvm::dyn_cast<RankedTensorType>(arg.getType());
      if (type && type.getRank() > 0 &&
          llvm::isa<IntegerType>(type.getElementType()))
        integers.push_back(name);
    }
    auto list = [](ArrayRef<StringAttr> names) {
      std::string text;
      for (StringAttr name : names)
        text += (text.empty() ? "'" : ", '") + name.str() + "'";
      return text.empty() ? std::string("none") : text;
    };
    if (!tokenInput.empty()) {
      for (StringAttr name : integers)
        if (name.getValue() == tokenInput)
          return name;
      return main.emitError()
             << "weft-derive-train-step: 'main' has no integer input '"
             << tokenInput
             << "' to take as the token ids (its inputs: " << list(inputs)
             << ")";
    }
    if (integers.size() == 1)
      return integers.front();
    return main.emitError()
           << "weft-derive-train-step: "
           << (integers.empty()
                   ? "'main' has no integer input to take as "
                     "the token ids"
                   : "'main' has several integer inputs (" + list(integers) +
                         "): name the token ids with --token-input")
           << " (its inputs: " << list(inputs) << ")";
  }

  /// The labels are the next tokens, one per token id: logits with another
  /// count of rows (a classifier's [batch, classes], a model returning only
  /// its last position) have no label per row.
  LogicalResult checkOneRowPerToken(func::FuncOp main, StringAttr tokens,
                                    RankedTensorType logitsType) {
    if (!logitsType.hasStaticShape())
      return success();
    int64_t rows = logitsType.getNumElements() / logitsType.getShape().back();
    for (BlockArgument arg : main.getArguments()) {
      if (main.getArgAttrOfType<StringAttr>(
              arg.getArgNumber(), WeftDialect::kInputAttrName) != tokens)
        continue;
      auto tokenType = llvm::cast<RankedTensorType>(arg.getType());
      if (!tokenType.hasStaticShape() || tokenType.getNumElements() == rows)
        return success();
      auto names =
          main->getAttrOfType<ArrayAttr>(WeftDialect::kOutputsAttrName);
      auto logitsName = names && !names.empty()
                            ? llvm::dyn_cast<StringAttr>(names[0])
                            : StringAttr();
      return main.emitError()
             << "weft-derive-train-step: the first result of 'main'"
             << (logitsName ? " ('" + logitsName.str() + "')" : "") << ", "
             << logitsType << ", holds " << rows
             << (rows == 1 ? " row" : " rows")
             << " of logits, and the token input '" << tokens.getValue()
             << "', " << tokenType << ", holds " << tokenType.getNumElements()
             << " tokens: training needs one row of logits per token (the "
                "next token is its label)";
    }
    return success();
  }

  /// Marks the parameters that `freeze` names, or that `train-only` does
  /// not, `weft.frozen`. A pattern that names no parameter is an error (a
  /// typo would otherwise train everything), and so is freezing them all.
  LogicalResult freezeParameters(func::FuncOp main) {
    auto compile =
        [&](ArrayRef<std::string> patterns, StringRef option,
            SmallVectorImpl<llvm::GlobPattern> &globs) -> LogicalResult {
      for (const std::string &pattern : patterns) {
        llvm::Expected<llvm::GlobPattern> glob =
            llvm::GlobPattern::create(pattern);
        if (!glob) {
          llvm::consumeError(glob.takeError());
          return main.emitError()
                 << "weft-derive-train-step: " << option << " pattern '"
                 << pattern << "' is not a valid glob";
        }
        globs.push_back(std::move(*glob));
      }
      return success();
    };
    SmallVector<llvm::GlobPattern> frozen, trained;
    if (failed(compile(freeze, "--freeze", frozen)) ||
        failed(compile(trainOnly, "--train-only", trained)))
      return failure();
    SmallVector<bool> frozenUsed(frozen.size()), trainedUsed(trained.size());
    auto matches = [](ArrayRef<llvm::GlobPattern> globs,
                      MutableArrayRef<bool> used, StringRef name) {
      bool any = false;
      for (auto [glob, hit] : llvm::zip(globs, used))
        if (glob.match(name))
          any = hit = true;
      return any;
    };
    bool anyTrained = false;
    for (unsigned i = 0; i < main.getNumArguments(); ++i) {
      if (!isTrainedParameter(main, i))
        continue;
      StringRef name =
          main.getArgAttrOfType<StringAttr>(i, WeftDialect::kParamAttrName)
              .getValue();
      bool isFrozen = matches(frozen, frozenUsed, name);
      if (!trained.empty() && !matches(trained, trainedUsed, name))
        isFrozen = true;
      if (isFrozen)
        main.setArgAttr(i, WeftDialect::kFrozenAttrName,
                        UnitAttr::get(main.getContext()));
      anyTrained |= !isFrozen;
    }
    for (auto [pattern, used] : llvm::zip(freeze, frozenUsed))
      if (!used)
        return main.emitError() << "weft-derive-train-step: --freeze '"
                                << pattern << "' names no trained parameter";
    for (auto [pattern, used] : llvm::zip(trainOnly, trainedUsed))
      if (!used)
        return main.emitError() << "weft-derive-train-step: --train-only '"
                                << pattern << "' names no trained parameter";
    if (!anyTrained)
      return main.emitError("weft-derive-train-step: no parameter is left to "
                            "train (every float weight is frozen or a "
                            "constant)");
    return success();
  }

  LogicalResult derive(ModuleOp module, func::FuncOp main) {
    auto logitsType =
        main.getNumResults()
            ? llvm::dyn_cast<RankedTensorType>(main.getResultTypes()[0])
            : RankedTensorType();
    if (!logitsType || !llvm::isa<FloatType>(logitsType.getElementType()) ||
        logitsType.getRank() < 2)
      return main.emitError("weft-derive-train-step: the first result of "
                            "'main' must be float logits [..., vocab]");
    Type element = logitsType.getElementType();
    MLIRContext *ctx = module.getContext();
    auto labelsType = RankedTensorType::get(logitsType.getShape().drop_back(),
                                            IntegerType::get(ctx, 64));

    FailureOr<StringAttr> tokens = findTokenInput(main);
    if (failed(tokens) || failed(freezeParameters(main)) ||
        failed(checkOneRowPerToken(main, *tokens, logitsType)))
      return failure();

    if (computeType != "f32" && computeType != "bf16")
      return main.emitError() << "weft-derive-train-step: compute-type must "
                                 "be f32 or bf16, not '"
                              << computeType << "'";
    if (computeType == "bf16")
      castContractions(main, BFloat16Type::get(module.getContext()),
                       attentionInComputeType);

    // loss(main's arguments..., labels) = cross_entropy(main(...), labels)
    OpBuilder b(ctx);
    b.setInsertionPointAfter(main);
    SmallVector<Type> lossInputs(main.getArgumentTypes());
    lossInputs.push_back(labelsType);
    auto loss = func::FuncOp::create(
        b, main.getLoc(), "train_loss",
        FunctionType::get(ctx, lossInputs,
                          {RankedTensorType::get({}, element)}));
    for (unsigned i = 0; i < main.getNumArguments(); ++i)
      loss.setArgAttrs(i, main.getArgAttrDict(i));
    loss.setArgAttr(main.getNumArguments(), WeftDialect::kInputAttrName,
                    b.getStringAttr("labels"));
    loss->setAttr(WeftDialect::kOutputsAttrName,
                  b.getArrayAttr({b.getStringAttr("loss")}));
    Block *body = loss.addEntryBlock();
    OpBuilder lb = OpBuilder::atBlockEnd(body);
    IRMapping mapping;
    mapping.map(main.getArguments(), body->getArguments().drop_back());
    Value logits;
    // A scalar result named `aux_loss` (a mixture of experts' load-balancing
    // loss, weighted by the model) is added to the cross-entropy.
    SmallVector<Value> auxLosses;
    auto outputNames =
        main->getAttrOfType<ArrayAttr>(WeftDialect::kOutputsAttrName);
    for (Operation &op : main.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        logits = mapping.lookup(ret.getOperand(0));
        for (unsigned i = 1;
             outputNames && i < ret.getNumOperands() && i < outputNames.size();
             ++i) {
          auto name = llvm::dyn_cast<StringAttr>(outputNames[i]);
          auto type =
              llvm::dyn_cast<RankedTensorType>(ret.getOperand(i).getType());
          if (name && name.getValue() == "aux_loss" && type &&
              type.getRank() == 0 && type.getElementType() == element)
            auxLosses.push_back(mapping.lookup(ret.getOperand(i)));
        }
        break;
      }
      lb.clone(op, mapping);
    }
    StepBuilder lossBuilder(lb, main.getLoc(), element);
    Value total = lossBuilder.crossEntropy(logits, body->getArguments().back(),
                                           ignoreIndex);
    for (Value aux : auxLosses)
      total = AddOp::create(lb, main.getLoc(), total, aux);
    func::ReturnOp::create(lb, main.getLoc(), total);
    if (fusedAttentionBackward)
      loss.walk([&](AttentionOp attention) {
        if (!maskNeedsGradient(attention.getMask()))
          attention->setAttr(WeftDialect::kFusedBackwardAttrName,
                             UnitAttr::get(attention.getContext()));
      });
    FailureOr<func::FuncOp> grad =
        buildGradientFunction(loss, "train_loss_grad");
    if (failed(grad))
      return failure();
    // The fused kernels' backward reads the statistics its forward saved;
    // linked here, they travel with the activations when the step is split
    // into functions (layers, micro-batches, pipeline stages).
    if (attentionInComputeType)
      (*grad)->walk([](AttentionGradOp attention) {
        if (getElementTypeOrSelf(attention.getQuery().getType()).isBF16())
          readForwardLogSumExp(attention);
      });

    // train_step: the gradient function's body, then the update. The
    // gradient function starts with a copy of the loss's ops (the forward
    // pass); the adjoints follow. With several micro-batches the step is a
    // template of two: weft-outline-microbatches makes one function of each
    // phase of the second and calls them in a loop over the micro-batches,
    // the second's sums with the first's giving the accumulation.
    size_t forwardOps = loss.getBody().front().getOperations().size() - 1;
    bool marked = markPhases || microBatches > 1;
    int64_t copies = std::min<int64_t>(microBatches, 2);
    auto mark = [&](Operation *op, int64_t microbatch, StringRef phase) {
      if (!marked)
        return;
      op->setAttr(WeftDialect::kMicrobatchAttrName,
                  b.getI64IntegerAttr(microbatch));
      op->setAttr(WeftDialect::kPhaseAttrName, b.getStringAttr(phase));
    };
    if (microBatches < 1)
      return main.emitError("weft-derive-train-step: micro-batches must be "
                            "positive");
    SmallVector<unsigned> params;
    for (unsigned i = 0; i < loss.getNumArguments(); ++i)
      if (isTrainedParameter(loss, i))
        params.push_back(i);
    SmallVector<Type> inputs(loss.getArgumentTypes());
    SmallVector<DictionaryAttr> inputAttrs;
    for (unsigned i = 0; i < loss.getNumArguments(); ++i) {
      inputAttrs.push_back(loss.getArgAttrDict(i));
      if (microBatches == 1 || !loss.getArgAttr(i, WeftDialect::kInputAttrName))
        continue;
      auto type = llvm::cast<RankedTensorType>(inputs[i]);
      SmallVector<int64_t> shape{microBatches};
      llvm::append_range(shape, type.getShape());
      inputs[i] = type.clone(shape);
      NamedAttrList attrs(inputAttrs.back());
      attrs.set(WeftDialect::kBatchDimAttrName, b.getI64IntegerAttr(1));
      inputAttrs.back() = attrs.getDictionary(ctx);
    }
    auto scalarType = RankedTensorType::get({}, element);
    auto addInput = [&](Type type, StringRef attr, StringRef name) {
      inputs.push_back(type);
      inputAttrs.push_back(
          b.getDictionaryAttr(b.getNamedAttr(attr, b.getStringAttr(name))));
      return inputs.size() - 1;
    };
    unsigned lrIndex = addInput(scalarType, WeftDialect::kInputAttrName, "lr");
    bool adam = optimizer == "adamw";
    unsigned bias1Index = 0, bias2Index = 0;
    if (adam) {
      bias1Index = addInput(scalarType, WeftDialect::kInputAttrName, "bias1");
      bias2Index = addInput(scalarType, WeftDialect::kInputAttrName, "bias2");
    }
    // Optimizer state: Adam's two moments, or SGD's momentum buffer.
    SmallVector<StringRef> stateKinds =
        adam ? SmallVector<StringRef>{"m", "v"}
             : SmallVector<StringRef>{"momentum"};
    SmallVector<SmallVector<unsigned>> stateIndex(stateKinds.size());
    for (auto [k, kind] : llvm::enumerate(stateKinds))
      for (unsigned p : params)
        stateIndex[k].push_back(addInput(
            loss.getArgumentTypes()[p], WeftDialect::kStateAttrName,
            (kind + ":" +
             loss.getArgAttrOfType<StringAttr>(p, WeftDialect::kParamAttrName)
                 .getValue())
                .str()));

    b.setInsertionPointAfter(*grad);
    auto step = func::FuncOp::create(b, main.getLoc(), "train_step",
                                     FunctionType::get(ctx, inputs, {}));
    for (auto [i, attrs] : llvm::enumerate(inputAttrs))
      step.setArgAttrs(i, attrs);
    Block *stepBody = step.addEntryBlock();
    OpBuilder sb = OpBuilder::atBlockEnd(stepBody);
    StepBuilder s(sb, main.getLoc(), element);
    // Sums of the loss and of each gradient over the micro-batches.
    // Per result, the sums over the micro-batches of its parts: one part,
    // or for pipelining each use's share of a parameter's gradient (GPT's
    // tied embedding and LM head), so that each stage sums its own share
    // and the shares meet once, at the update.
    SmallVector<SmallVector<Value>> partSums;
    for (int64_t k = 0; k < copies; ++k) {
      IRMapping stepMapping;
      for (auto [arg, stepArg] :
           llvm::zip((*grad).getArguments(), stepBody->getArguments())) {
        Value value = stepArg;
        if (stepArg.getType() != arg.getType()) {
          // Micro-batch k: [K, ...] -> [1, ...] -> [...].
          auto type = llvm::cast<RankedTensorType>(stepArg.getType());
          SmallVector<int64_t> offsets(type.getRank(), 0),
              strides(type.getRank(), 1);
          SmallVector<int64_t> sizes(type.getShape());
          offsets[0] = k;
          sizes[0] = 1;
          auto slice = SliceOp::create(sb, main.getLoc(), value, offsets, sizes,
                                       strides);
          auto reshape =
              ReshapeOp::create(sb, main.getLoc(), arg.getType(), slice);
          mark(slice, k, "forward");
          mark(reshape, k, "forward");
          value = reshape;
        }
        stepMapping.map(arg, value);
      }
      for (auto [index, op] : llvm::enumerate((*grad).getBody().front())) {
        if (auto ret = dyn_cast<func::ReturnOp>(op)) {
          for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
            SmallVector<Value> parts =
                marked ? splitSum(stepMapping.lookup(v))
                       : SmallVector<Value>{stepMapping.lookup(v)};
            if (k == 0) {
              partSums.push_back(parts);
              continue;
            }
            assert(parts.size() == partSums[i].size() &&
                   "every micro-batch's gradient has the same parts");
            for (auto [sum, part] : llvm::zip(partSums[i], parts)) {
              sum = s.add(sum, part);
              mark(sum.getDefiningOp(), k, "backward");
            }
          }
          break;
        }
        mark(sb.clone(op, stepMapping), k,
             index < forwardOps ? "forward" : "backward");
      }
    }
    SmallVector<Value> gradResults;
    for (ArrayRef<Value> sums : partSums) {
      Value total = sums.front();
      for (Value sum : sums.drop_front())
        total = s.add(total, sum);
      gradResults.push_back(total);
    }
    if (microBatches > 1)
      for (Value &sum : gradResults)
        sum = s.mul(sum, s.scalar(1.0 / double(microBatches)));
    Value lossValue = gradResults[0];
    ArrayRef<Value> grads = ArrayRef<Value>(gradResults).drop_front();

    // Global gradient norm; clipping scales every gradient by
    // min(1, clip / (norm + 1e-6)).
    // Every tensor's sum first, then their total: the sums do not depend on
    // one another, so a GPU runs them side by side (weft-gpu-merge-launches).
    SmallVector<Value> tensorSquares;
    for (Value g : grads)
      tensorSquares.push_back(s.sumAll(s.mul(g, g)));
    Value squares = tensorSquares.front();
    for (Value sq : ArrayRef<Value>(tensorSquares).drop_front())
      squares = s.add(squares, sq);
    Value norm = SqrtOp::create(sb, main.getLoc(), squares);
    Value clipScale;
    if (clipNorm > 0)
      clipScale =
          MinOp::create(sb, main.getLoc(), s.scalar(1.0),
                        s.div(s.scalar(clipNorm), s.add(norm, s.scalar(1e-6))));

    Value lr = stepBody->getArgument(lrIndex);
    SmallVector<Value> results{lossValue, norm};
    SmallVector<Attribute> names{b.getStringAttr("loss"),
                                 b.getStringAttr("grad_norm")};
    SmallVector<Value> newParams, newState[2];
    for (auto [j, p] : llvm::enumerate(params)) {
      Value param = stepBody->getArgument(p);
      Value g = clipScale ? s.mul(grads[j], clipScale) : grads[j];
      // Matrices decay; biases, norms and other vectors do not (as in GPT
      // training recipes).
      Value decayed = weightDecay != 0 && tensorTypeOf(param).getRank() >= 2
                          ? s.mul(param, s.scalar(weightDecay))
                          : Value();
      Value update;
      if (adam) {
        Value m = stepBody->getArgument(stateIndex[0][j]);
        Value v = stepBody->getArgument(stateIndex[1][j]);
        Value m2 =
            s.add(s.mul(m, s.scalar(beta1)), s.mul(g, s.scalar(1 - beta1)));
        Value v2 = s.add(s.mul(v, s.scalar(beta2)),
                         s.mul(s.mul(g, g), s.scalar(1 - beta2)));
        Value mHat = s.div(m2, stepBody->getArgument(bias1Index));
        Value vHat = s.div(v2, stepBody->getArgument(bias2Index));
        update = s.div(mHat, s.add(SqrtOp::create(sb, main.getLoc(), vHat),
                                   s.scalar(epsilon)));
        // Decoupled weight decay (AdamW).
        if (decayed)
          update = s.add(update, decayed);
        newState[0].push_back(m2);
        newState[1].push_back(v2);
      } else {
        Value buffer = stepBody->getArgument(stateIndex[0][j]);
        Value gd = decayed ? s.add(g, decayed) : g;
        Value buffer2 = s.add(s.mul(buffer, s.scalar(momentum)), gd);
        update = buffer2;
        newState[0].push_back(buffer2);
      }
      newParams.push_back(s.sub(param, s.mul(update, lr)));
    }
    for (auto [j, p] : llvm::enumerate(params)) {
      results.push_back(newParams[j]);
      names.push_back(b.getStringAttr(
          "param:" +
          loss.getArgAttrOfType<StringAttr>(p, WeftDialect::kParamAttrName)
              .getValue()));
    }
    for (auto [k, kind] : llvm::enumerate(stateKinds))
      for (auto [j, p] : llvm::enumerate(params)) {
        results.push_back(newState[k][j]);
        names.push_back(b.getStringAttr(
            "state:" + kind + ":" +
            loss.getArgAttrOfType<StringAttr>(p, WeftDialect::kParamAttrName)
                .getValue()));
      }
    func::ReturnOp::create(sb, main.getLoc(), results);
    // The update runs after the last micro-batch.
    if (marked) {
      for (Operation &op : stepBody->without_terminator())
        if (!op.hasAttr(WeftDialect::kPhaseAttrName))
          mark(&op, microBatches - 1, "update");
      step->setAttr(WeftDialect::kMicrobatchesAttrName,
                    b.getI64IntegerAttr(microBatches));
    }
    step.setType(
        FunctionType::get(ctx, inputs, ValueRange(results).getTypes()));
    step->setAttr(WeftDialect::kOutputsAttrName, b.getArrayAttr(names));
    step->setAttr(
        WeftDialect::kOptimizerAttrName,
        b.getDictionaryAttr(
            {b.getNamedAttr("name", b.getStringAttr(optimizer)),
             b.getNamedAttr("beta1", b.getF64FloatAttr(beta1)),
             b.getNamedAttr("beta2", b.getF64FloatAttr(beta2)),
             b.getNamedAttr("vocab",
                            b.getI64IntegerAttr(logitsType.getShape().back())),
             b.getNamedAttr("flops", b.getI64IntegerAttr(functionFlops(*grad) *
                                                         microBatches)),
             b.getNamedAttr("tokens", *tokens)}));
    // train_loss_grad stays: it is the loss and gradient program
    // (weftc --program=gradients).
    loss.erase();
    return success();
  }
};

} // namespace
