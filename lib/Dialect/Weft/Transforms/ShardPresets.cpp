//===- ShardPresets.cpp - Mesh creation and strategy annotations ----------===//

#include "weft/Dialect/Weft/IR/Experts.h"
#include "weft/Dialect/Weft/IR/Layers.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"
#include "weft/Dialect/Weft/Transforms/Sharding.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace weft {
#define GEN_PASS_DEF_WEFTSHARDPRESETS
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// Presets rank below a user's annotations (0); sequence parallelism yields
/// to the weight splits where the two meet (a linear's input).
constexpr int64_t kWeightPriority = 1;
constexpr int64_t kActivationPriority = 2;

/// `value` without the preset annotations already placed on it.
Value unannotated(Value value) {
  while (auto annotation = value.getDefiningOp<shard::ShardOp>())
    value = annotation.getSrc();
  return value;
}

/// The parameter `value` is, through annotations and a cast (the bf16
/// copy a mixed-precision step computes with), or null.
BlockArgument parameterOf(Value value) {
  value = unannotated(value);
  if (auto cast = value.getDefiningOp<CastOp>())
    value = unannotated(cast.getInput());
  auto arg = llvm::dyn_cast<BlockArgument>(value);
  if (!arg)
    return nullptr;
  auto func = llvm::dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return func && func.getArgAttr(arg.getArgNumber(), "weft.param") ? arg
                                                                    : nullptr;
}

bool isParameter(Value value) { return bool(parameterOf(value)); }

/// Ops through which a tensor-parallel region runs from a column-split
/// linear to a row-split one without needing the whole hidden dim.
bool isHeadLocal(Operation *op) {
  // A gather of a fused projection picks q, k or v out of each head
  // (Bloom's [heads, 3, head_dim] view); a gathered parameter is a lookup.
  if (auto gather = dyn_cast<GatherOp>(op))
    return !isParameter(gather.getData());
  return op->hasTrait<OpTrait::Elementwise>() ||
         isa<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, WhereOp, CastOp, ReshapeOp,
             TransposeOp, SplitOp, AttentionOp, SliceOp, ConcatOp, ExpandOp,
             SqueezeOp, UnsqueezeOp>(op);
}

/// The ops `closes` accepts that `result` reaches as their first operand
/// through ops `passes` lets through only. Empty if the region escapes,
/// with `escape` (when given) set to the op it escapes through. Only users
/// in `forward` count when it is given: in a training step the backward
/// pass also reads the activations, and it follows whatever split they get.
template <typename OpT, typename Closes, typename Passes>
SmallVector<OpT>
partnersThrough(Value result, const llvm::SetVector<Operation *> *forward,
                Closes closes, Passes passes, Operation **escape = nullptr) {
  SmallVector<OpT> partners;
  llvm::SetVector<Operation *> visited;
  SmallVector<Value> worklist{result};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (forward && !forward->contains(user))
        continue;
      if (auto partner = dyn_cast<OpT>(user);
          partner && use.getOperandNumber() == 0 && closes(partner)) {
        if (!llvm::is_contained(partners, partner))
          partners.push_back(partner);
        continue;
      }
      if (!passes(user)) {
        if (escape)
          *escape = user;
        return {};
      }
      if (visited.insert(user))
        llvm::append_range(worklist, user->getResults());
    }
  }
  return partners;
}

/// The head dim of the first attention `result` reaches through head-local
/// ops, if any.
std::optional<int64_t> headDimReached(Value result) {
  std::optional<int64_t> headDim;
  partnersThrough<AttentionOp>(
      result, nullptr, [](AttentionOp) { return false; },
      [&](Operation *op) {
        if (auto attention = dyn_cast<AttentionOp>(op); attention && !headDim)
          headDim = llvm::cast<RankedTensorType>(attention.getQuery().getType())
                        .getDimSize(3);
        return isHeadLocal(op);
      });
  return headDim;
}

/// The row-split partners of `column`: the param linears its result reaches
/// through head-local ops only (not a norm, a softmax over the hidden dim,
/// a model output...).
SmallVector<LinearOp> rowPartners(LinearOp column,
                                  const llvm::SetVector<Operation *> *forward,
                                  Operation **escape = nullptr) {
  return partnersThrough<LinearOp>(
      column.getResult(), forward,
      [](LinearOp row) { return isParameter(row.getWeight()); }, isHeadLocal,
      escape);
}

/// The expert products (of `products`) that close the expert MLP `column`
/// opens: reached through elementwise ops only.
SmallVector<MatmulOp>
expertRowPartners(MatmulOp column, ArrayRef<MatmulOp> products,
                  const llvm::SetVector<Operation *> *forward) {
  return partnersThrough<MatmulOp>(
      column.getResult(), forward,
      [&](MatmulOp row) { return llvm::is_contained(products, row); },
      [](Operation *op) {
        return op->hasTrait<OpTrait::Elementwise>() ||
               isa<AddOp, SubOp, MulOp, DivOp, CastOp>(op);
      });
}

/// True if `value` reaches a function result through layout ops only.
bool feedsOutput(Value value) {
  for (Operation *user : value.getUsers()) {
    if (isa<func::ReturnOp>(user))
      return true;
    if (isa<ReshapeOp, TransposeOp, CastOp, SqueezeOp, UnsqueezeOp>(user) &&
        feedsOutput(user->getResult(0)))
      return true;
  }
  return false;
}

struct WeftShardPresetsPass
    : public weft::impl::WeftShardPresetsBase<WeftShardPresetsPass> {
  using WeftShardPresetsBase::WeftShardPresetsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool annotated = false;
    module.walk([&](shard::ShardOp) { annotated = true; });
    std::optional<Mesh> existing = Mesh::find(module);
    std::optional<Mesh> meshOrNone = existing;
    if (!mesh.empty()) {
      std::string error;
      meshOrNone = Mesh::parse(mesh, error);
      if (!meshOrNone) {
        module.emitError() << "--mesh: " << error;
        return signalPassFailure();
      }
      if (existing) {
        module.emitError() << "the module already has a mesh ('"
                           << existing->symbol << "'); drop --mesh";
        return signalPassFailure();
      }
      meshOrNone->materialize(module);
    }
    if (!meshOrNone) {
      if (parallel.empty() && !sequenceParallel)
        return;
      module.emitError("a parallel strategy needs a mesh (--mesh dp=2,tp=2)");
      return signalPassFailure();
    }
    const Mesh &theMesh = *meshOrNone;
    auto axisFor = [&](StringRef name,
                       StringRef strategy) -> std::optional<MeshAxis> {
      std::optional<MeshAxis> axis = theMesh.axisNamed(name);
      if (!axis)
        module.emitError() << "strategy '" << strategy
                           << "' needs a mesh axis named '" << name << "'";
      return axis;
    };
    for (const std::string &strategy : parallel) {
      if (strategy != "dp" && strategy != "megatron" && strategy != "cp" &&
          strategy != "ep") {
        module.emitError() << "unknown parallel strategy '" << strategy
                           << "' (expected dp, megatron, cp or ep)";
        return signalPassFailure();
      }
      if (strategy == "cp") {
        std::optional<MeshAxis> cp = axisFor("cp", "cp");
        if (!cp)
          return signalPassFailure();
        if (!llvm::is_contained({"ring", "ring-contiguous", "all-to-all"},
                                contextAttention)) {
          module.emitError()
              << "unknown context attention '" << contextAttention
              << "' (expected ring, ring-contiguous or all-to-all)";
          return signalPassFailure();
        }
        for (auto grid : module.getOps<shard::GridOp>()) {
          OpBuilder builder(grid);
          grid->setAttr(WeftDialect::kContextAxisAttrName,
                        builder.getStringAttr("cp"));
          grid->setAttr(WeftDialect::kContextAttentionAttrName,
                        builder.getStringAttr(contextAttention));
        }
      }
    }
    // A layer is named once, though every function of a training step
    // holds it.
    llvm::StringSet<> unsplitLayers, unsplitWeights;
    // Data and expert parallelism both split the batch: with both, over dp
    // and ep together (the experts' ranks are a part of the data-parallel
    // group, as in Megatron-LM and DeepSpeed-MoE).
    SmallVector<MeshAxis, 2> batchAxes;
    for (StringRef strategy : {"dp", "ep"}) {
      if (!llvm::is_contained(parallel, strategy))
        continue;
      std::optional<MeshAxis> axis = axisFor(strategy, strategy);
      if (!axis)
        return signalPassFailure();
      batchAxes.push_back(*axis);
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      Annotator annotator{theMesh, func};
      if (!batchAxes.empty())
        annotateDataParallel(annotator, func, batchAxes);
      for (const std::string &strategy : parallel) {
        if (strategy == "dp")
          continue;
        if (strategy == "ep") {
          if (failed(
                  annotateExperts(annotator, func, *theMesh.axisNamed("ep"))))
            return signalPassFailure();
        } else if (strategy == "cp") {
          if (failed(annotateContextParallel(annotator, func,
                                             *theMesh.axisNamed("cp"))))
            return signalPassFailure();
        } else {
          std::optional<MeshAxis> tp = axisFor("tp", "megatron");
          if (!tp)
            return signalPassFailure();
          for (auto [layer, linear] :
               annotateMegatron(annotator, func, *tp, unsplitWeights))
            if (unsplitLayers.insert(layer).second)
              linear.emitWarning()
                  << "megatron: layer '" << layer
                  << "' has contractions by parameters but no column/row "
                     "pair to split; its weights stay replicated on every "
                     "'tp' rank";
        }
      }
      if (sequenceParallel) {
        std::optional<MeshAxis> tp = axisFor("tp", "sequence-parallel");
        if (!tp)
          return signalPassFailure();
        annotateSequenceParallel(annotator, func, *tp);
      }
      if (zero > 0) {
        std::optional<MeshAxis> dp = axisFor("dp", "zero");
        if (!dp)
          return signalPassFailure();
        annotateZero(annotator, func, *dp, zero >= 3);
      }
    }
    if (!annotated && failed(checkEveryAxisUsed(module, theMesh)))
      return signalPassFailure();
  }

  /// A mesh axis no strategy splits by would make its ranks compute the
  /// same step: an error, not a silent replica (unless the module carries
  /// its own annotations, or the axis is the pipeline's).
  LogicalResult checkEveryAxisUsed(ModuleOp module, const Mesh &theMesh) {
    auto uses = [&](StringRef strategy) {
      return llvm::is_contained(parallel, strategy);
    };
    for (auto [name, size] : llvm::zip(theMesh.names, theMesh.sizes)) {
      bool used = name == "pp" || (name == "dp" && (uses("dp") || zero > 0)) ||
                  (name == "tp" && (uses("megatron") || sequenceParallel)) ||
                  (name == "cp" && uses("cp")) || (name == "ep" && uses("ep"));
      if (size > 1 && !used)
        return module.emitError()
               << "mesh axis '" << name << "' (size " << size
               << ") is used by no strategy, so its ranks would all compute "
                  "the same step: add its strategy to --parallel (dp: dp, "
                  "tp: megatron, cp: cp, ep: ep; pp pipelines) or drop the "
                  "axis";
    }
    return success();
  }

  /// Inserts `shard.shard` annotations, marked with their priority.
  struct Annotator {
    const Mesh &mesh;
    func::FuncOp func;

    /// Keeps dim `dim` of `value` whole at `priority` (a weaker split
    /// cannot reach it).
    void pinWhole(Value value, int64_t dim, int64_t priority) {
      auto type = llvm::cast<RankedTensorType>(value.getType());
      annotate(value, TensorSharding::replicated(type.getRank()), priority)
          ->setAttr(WeftDialect::kPinnedDimsAttrName,
                    OpBuilder(func.getContext()).getDenseI64ArrayAttr({dim}));
    }

    void split(Value value, int64_t dim, ArrayRef<MeshAxis> axes,
               int64_t priority, int64_t blocks = 1) {
      auto type = llvm::cast<RankedTensorType>(value.getType());
      TensorSharding sharding = TensorSharding::replicated(type.getRank());
      llvm::append_range(sharding.dims[dim].axes, axes);
      sharding.dims[dim].blocks = blocks;
      annotate(value, sharding, priority);
    }

    Operation *annotate(Value value, const TensorSharding &sharding,
                        int64_t priority) {
      OpBuilder builder(func.getContext());
      if (auto arg = llvm::dyn_cast<BlockArgument>(value))
        builder.setInsertionPointToStart(arg.getOwner());
      else
        builder.setInsertionPointAfterValue(value);
      shard::ShardingOp shardingOp =
          createShardingOp(builder, value.getLoc(), sharding, mesh);
      auto annotation =
          shard::ShardOp::create(builder, value.getLoc(), value, shardingOp);
      annotation->setAttr("weft.priority", builder.getI64IntegerAttr(priority));
      value.replaceAllUsesExcept(annotation.getResult(), annotation);
      return annotation;
    }
  };

  /// The batch is dim 0 of the first model input (token ids, pixels), or
  /// the dim its `weft.batch_dim` names (micro-batched inputs have it
  /// second); propagation carries the split to the other inputs through the
  /// ops that combine them, wherever their batch dim is (a KV cache has it
  /// second).
  static void annotateDataParallel(Annotator &annotator, func::FuncOp func,
                                   ArrayRef<MeshAxis> axes) {
    for (BlockArgument arg : func.getArguments())
      if (func.getArgAttr(arg.getArgNumber(), WeftDialect::kInputAttrName) &&
          llvm::cast<RankedTensorType>(arg.getType()).getRank() > 0) {
        auto batchDim = func.getArgAttrOfType<IntegerAttr>(
            arg.getArgNumber(), WeftDialect::kBatchDimAttrName);
        annotator.split(arg, batchDim ? batchDim.getInt() : 0, axes,
                        kWeightPriority);
        return;
      }
  }

  /// Expert parallelism: the experts' stacked weights split on their
  /// first dim over ep; the tokens are split over ep too, as data
  /// parallelism splits them, and where the two meet, around the experts,
  /// the partitioner moves the dispatched tokens by all-to-alls.
  static LogicalResult annotateExperts(Annotator &annotator, func::FuncOp func,
                                       MeshAxis ep) {
    int64_t parts = annotator.mesh.sizes[ep];
    bool any = false;
    for (BlockArgument arg : func.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), WeftDialect::kParamAttrName);
      if (!name || !isStackedExpertWeight(arg))
        continue;
      int64_t experts =
          llvm::cast<RankedTensorType>(arg.getType()).getDimSize(0);
      if (experts % parts != 0)
        return func.emitError()
               << "ep: cannot split the " << experts
               << " experts of parameter '" << name.getValue()
               << "' over mesh axis 'ep' (size " << parts << "): not divisible";
      annotator.split(arg, 0, ep, kWeightPriority);
      any = true;
    }
    if (!any)
      return func.emitError(
          "ep: the model has no experts (3-D parameters [experts, ...] read "
          "by a batched matmul) to split over 'ep'");
    return success();
  }

  /// The sequence is the dim after the batch of the first model input
  /// (token ids [batch, seq]); propagation carries the split to the labels
  /// and positions.
  static LogicalResult annotateContextParallel(Annotator &annotator,
                                               func::FuncOp func, MeshAxis cp) {
    for (BlockArgument arg : func.getArguments()) {
      if (!func.getArgAttr(arg.getArgNumber(), WeftDialect::kInputAttrName))
        continue;
      auto type = llvm::cast<RankedTensorType>(arg.getType());
      auto batchDim = func.getArgAttrOfType<IntegerAttr>(
          arg.getArgNumber(), WeftDialect::kBatchDimAttrName);
      int64_t sequence = (batchDim ? batchDim.getInt() : 0) + 1;
      if (type.getRank() <= sequence)
        return func.emitError()
               << "cp splits the sequence, the dim after the batch, of the "
                  "first model input, which has "
               << type.getRank() << " dims";
      annotator.split(arg, sequence, cp, kWeightPriority);
      return success();
    }
    return success();
  }

  /// Returns the numbered layers with contractions by parameters of which
  /// none is split, each with its first such linear. In a layer that splits
  /// some, each contraction weight left whole is named in a warning with
  /// the reason, once per name in `warned`.
  static SmallVector<std::pair<std::string, LinearOp>>
  annotateMegatron(Annotator &annotator, func::FuncOp func, MeshAxis tp,
                   llvm::StringSet<> &warned) {
    llvm::SetVector<Value> done;
    auto splitOnce = [&](Value value, int64_t dim, int64_t blocks = 1) {
      if (BlockArgument param = parameterOf(value))
        value = param;
      value = unannotated(value);
      if (done.insert(value))
        annotator.split(value, dim, tp, kWeightPriority, blocks);
    };
    SmallVector<LinearOp> linears;
    func.walk([&](LinearOp linear) {
      if (isParameter(linear.getWeight()))
        linears.push_back(linear);
    });
    // A loss function (gradients, training step) returns the loss first:
    // its forward pass is what the loss depends on.
    std::optional<llvm::SetVector<Operation *>> forward;
    auto outputs = func->getAttrOfType<ArrayAttr>(WeftDialect::kOutputsAttrName);
    if (outputs && !outputs.empty() &&
        llvm::cast<StringAttr>(outputs[0]).getValue() == "loss") {
      forward.emplace();
      Operation *terminator = func.getBody().front().getTerminator();
      BackwardSliceOptions options;
      options.omitBlockArguments = true;
      (void)getBackwardSlice(terminator->getOperand(0), &*forward, options);
    }
    llvm::SetVector<Operation *> rowSplit, keptWhole;
    llvm::DenseMap<Operation *, Operation *> escapes;
    for (LinearOp column : linears) {
      if (rowSplit.contains(column))
        continue;
      Operation *escape = nullptr;
      SmallVector<LinearOp> rows =
          rowPartners(column, forward ? &*forward : nullptr, &escape);
      if (rows.empty()) {
        if (escape)
          escapes[column] = escape;
        continue;
      }
      // The one key/value head of multi-query attention stays whole, as
      // Megatron-LM keeps it: a split would cut the head, and every rank's
      // query heads read it whole.
      int64_t outputs = column.getType().getShape().back();
      if (std::optional<int64_t> headDim = headDimReached(column.getResult());
          headDim && outputs == *headDim) {
        keptWhole.insert(column);
        continue;
      }
      // A fused projection split into equal parts is split part by part.
      int64_t blocks = 1;
      Value projected = column.getResult();
      // (Through the cast back to f32 of a bf16 step.)
      if (projected.hasOneUse())
        if (auto cast = dyn_cast<CastOp>(*projected.getUsers().begin()))
          projected = cast.getResult();
      if (projected.hasOneUse())
        if (auto split = dyn_cast<SplitOp>(*projected.getUsers().begin()))
          if (split.getAxis() ==
                  static_cast<uint64_t>(column.getType().getRank() - 1) &&
              llvm::all_equal(split.getSizes()))
            blocks = split.getSizes().size();
      bool transposed = column.getTransposeWeight();
      splitOnce(column.getWeight(), transposed ? 0 : 1, blocks);
      if (Value bias = column.getBias(); bias && isParameter(bias))
        splitOnce(bias, 0, blocks);
      for (LinearOp row : rows) {
        rowSplit.insert(row);
        splitOnce(row.getWeight(), row.getTransposeWeight() ? 1 : 0);
      }
    }
    // Expert tensor parallelism: each expert's MLP is split as a dense one
    // is, the products by stacked weights [experts, in, out] that open it
    // by columns (out), the one that closes it by rows (in).
    SmallVector<MatmulOp> expertProducts;
    func.walk([&](MatmulOp product) {
      if (BlockArgument weight = parameterOf(product.getRhs());
          weight && isStackedExpertWeight(weight))
        expertProducts.push_back(product);
    });
    llvm::SetVector<Operation *> expertRows;
    for (MatmulOp column : expertProducts) {
      if (expertRows.contains(column) ||
          (forward && !forward->contains(column)))
        continue;
      SmallVector<MatmulOp> rows = expertRowPartners(
          column, expertProducts, forward ? &*forward : nullptr);
      if (rows.empty())
        continue;
      splitOnce(column.getRhs(), 2);
      for (MatmulOp row : rows) {
        expertRows.insert(row);
        splitOnce(row.getRhs(), 1);
      }
    }
    // Vocab-parallel embedding: the largest gathered table (position and
    // token-type tables stay whole). The LM head is split by columns.
    SmallVector<GatherOp> lookups;
    int64_t vocab = 0;
    func.walk([&](GatherOp gather) {
      if (gather.getAxis() == 0 && isParameter(gather.getData())) {
        lookups.push_back(gather);
        vocab = std::max(vocab, gather.getData().getType().getDimSize(0));
      }
    });
    for (GatherOp gather : lookups)
      if (gather.getData().getType().getDimSize(0) == vocab)
        splitOnce(gather.getData(), 0);
    for (LinearOp linear : linears)
      if (!rowSplit.contains(linear) && feedsOutput(linear.getResult()))
        splitOnce(linear.getWeight(), linear.getTransposeWeight() ? 0 : 1);

    llvm::StringMap<LinearOp> firstOfLayer;
    llvm::StringSet<> splitLayers;
    SmallVector<std::string> order;
    for (LinearOp linear : linears) {
      if (forward && !forward->contains(linear))
        continue;
      std::optional<std::string> layer = numberedLayerOf(linear.getLoc());
      if (!layer)
        continue;
      if (firstOfLayer.try_emplace(*layer, linear).second)
        order.push_back(*layer);
      if (done.contains(parameterOf(linear.getWeight())))
        splitLayers.insert(*layer);
    }
    SmallVector<std::pair<std::string, LinearOp>> unsplit;
    for (const std::string &layer : order)
      if (!splitLayers.contains(layer))
        unsplit.emplace_back(layer, firstOfLayer[layer]);
    for (LinearOp linear : linears) {
      BlockArgument weight = parameterOf(linear.getWeight());
      std::optional<std::string> layer = numberedLayerOf(linear.getLoc());
      // A layer with nothing split is named once (`unsplit`); a contraction
      // outside the layers (BERT's head transform) is named when the model
      // splits anything.
      if ((forward && !forward->contains(linear)) || done.contains(weight) ||
          (layer && !splitLayers.contains(*layer)) || (!layer && done.empty()))
        continue;
      StringRef name =
          func.getArgAttrOfType<StringAttr>(weight.getArgNumber(), "weft.param")
              .getValue();
      if (!warned.insert(name).second)
        continue;
      if (keptWhole.contains(linear)) {
        linear.emitRemark()
            << "megatron: parameter '" << name
            << "' stays whole on every 'tp' rank: it projects the one "
               "key/value head that every rank's query heads read";
        continue;
      }
      InFlightDiagnostic warning = linear.emitWarning()
                                   << "megatron: parameter '" << name
                                   << "' stays replicated on every 'tp' rank: ";
      // It could have split as a column or as a row: say why neither.
      if (Operation *escape = escapes.lookup(linear))
        warning << "as a column, its product reaches '" << escape->getName()
                << "' before any row-split linear";
      else
        warning << "as a column, its product reaches no row-split linear";
      warning << "; as a row, no column-split linear reaches its input "
                 "through head-local ops";
    }
    return unsplit;
  }

  /// Splits each optimizer state (and with stage 3 each parameter) over
  /// dp on the first dim that divides and that its parameter's other
  /// splits leave whole.
  static void annotateZero(Annotator &annotator, func::FuncOp func, MeshAxis dp,
                           bool parameters) {
    int64_t parts = annotator.mesh.sizes[dp];
    llvm::StringMap<BlockArgument> params;
    for (BlockArgument arg : func.getArguments())
      if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        "weft.param"))
        params[name.getValue()] = arg;
    // The dims a parameter's existing annotation splits.
    auto splitDims = [&](BlockArgument param) {
      SmallVector<bool> split(
          llvm::cast<RankedTensorType>(param.getType()).getRank(), false);
      for (Operation *user : param.getUsers())
        if (auto annotation = dyn_cast<shard::ShardOp>(user))
          if (auto sharding =
                  annotation.getSharding().getDefiningOp<shard::ShardingOp>())
            for (auto [dim, axes] :
                 llvm::enumerate(sharding.getSplitAxes().getAxes()))
              if (dim < split.size() && !axes.empty())
                split[dim] = true;
      return split;
    };
    // The dim of a parameter's shape the ZeRO split takes, if any.
    auto zeroDim = [&](BlockArgument param) -> std::optional<int64_t> {
      auto type = llvm::cast<RankedTensorType>(param.getType());
      SmallVector<bool> taken = splitDims(param);
      for (int64_t dim = 0; dim < type.getRank(); ++dim)
        if (!taken[dim] && type.getDimSize(dim) % parts == 0)
          return dim;
      return std::nullopt;
    };
    llvm::StringMap<std::optional<int64_t>> dims;
    for (auto &entry : params)
      dims[entry.getKey()] = zeroDim(entry.second);
    for (BlockArgument arg : func.getArguments()) {
      auto state =
          func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "weft.state");
      if (!state)
        continue;
      StringRef param = state.getValue().split(':').second;
      if (dims.count(param) && dims[param])
        annotator.split(arg, *dims[param], dp, kWeightPriority);
    }
    // Stage 3 splits the parameters the same way; below it they stay whole
    // there (the update is gathered instead).
    for (auto &entry : params)
      if (std::optional<int64_t> dim = dims[entry.getKey()]) {
        if (parameters)
          annotator.split(entry.second, *dim, dp, kWeightPriority);
        else
          annotator.pinWhole(entry.second, *dim, kWeightPriority);
      }
  }

  static void annotateSequenceParallel(Annotator &annotator, func::FuncOp func,
                                       MeshAxis tp) {
    SmallVector<Operation *> norms;
    func.walk([&](Operation *op) {
      if (isa<LayerNormOp, RmsNormOp>(op) &&
          llvm::cast<RankedTensorType>(op->getResult(0).getType()).getRank() >=
              3)
        norms.push_back(op);
    });
    llvm::SetVector<Value> done;
    for (Operation *norm : norms) {
      int64_t seqDim =
          llvm::cast<RankedTensorType>(norm->getResult(0).getType()).getRank() -
          2;
      for (Value value :
           {unannotated(norm->getOperand(0)), Value(norm->getResult(0))})
        if (done.insert(value))
          annotator.split(value, seqDim, tp, kActivationPriority);
    }
  }
};

} // namespace
