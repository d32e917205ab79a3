//===- Profile.cpp - What a training step costs, read from its IR ---------===//

#include "weft/Planner/Profile.h"

#include "weft/Dialect/Weft/IR/Experts.h"
#include "weft/Dialect/Weft/IR/Flops.h"
#include "weft/Dialect/Weft/IR/Layers.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"
#include "weft/Support/CrashGuard.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace weft::planner {

const TensorParallelProfile *ModelProfile::find(int64_t tp,
                                                bool sequenceParallel) const {
  for (const TensorParallelProfile &p : tensorParallel)
    if (p.tp == tp && p.sequenceParallel == sequenceParallel)
      return &p;
  return nullptr;
}

namespace {

double elementsOf(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  return double(shaped.getNumElements());
}

/// Ops that move no data: views, and values the compiler folds.
bool isFree(Operation *op) {
  return isa<ReshapeOp, SqueezeOp, UnsqueezeOp, ConstantOp, RangeOp>(op);
}

/// The collective an op is, with the elements collectiveTime counts.
std::optional<CollectiveWork> collectiveOf(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<CollectiveWork>>(op)
      .Case<shard::AllReduceOp>([](auto c) {
        return CollectiveWork{Collective::AllReduce,
                              elementsOf(c.getInput().getType())};
      })
      .Case<shard::AllGatherOp>([](auto c) {
        return CollectiveWork{Collective::AllGather,
                              elementsOf(c.getResult().getType())};
      })
      .Case<shard::ReduceScatterOp>([](auto c) {
        return CollectiveWork{Collective::ReduceScatter,
                              elementsOf(c.getInput().getType())};
      })
      .Case<shard::AllToAllOp>([](auto c) {
        return CollectiveWork{Collective::AllToAll,
                              elementsOf(c.getInput().getType())};
      })
      .Case<shard::ShiftOp>([](auto c) {
        return CollectiveWork{Collective::SendRecv,
                              elementsOf(c.getInput().getType())};
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// Elementwise ops, broadcasting or not: chains of them run as one kernel.
bool isFusible(Operation *op) {
  return op && (op->hasTrait<OpTrait::Elementwise>() ||
                isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, AndOp,
                    OrOp, XorOp, EqualOp, LessOp, LessEqualOp, GreaterOp,
                    GreaterEqualOp, WhereOp>(op));
}

/// Work of a weft op: contraction FLOPs, or one FLOP per result element
/// (elementwise work is memory-bound: its FLOPs never decide its time).
/// An elementwise op reads what another elementwise op made from registers,
/// and writes its result only for a user that is not elementwise.
/// The (query length, key length) pairs of a function's attentions: the
/// last two dims of their score tensors.
using ScoreShapes = llvm::SmallVector<std::pair<int64_t, int64_t>, 2>;
ScoreShapes scoreShapesOf(Operation *root) {
  ScoreShapes shapes;
  root->walk([&](AttentionOp attention) {
    ArrayRef<int64_t> query =
        cast<ShapedType>(attention.getQuery().getType()).getShape();
    ArrayRef<int64_t> key =
        cast<ShapedType>(attention.getKey().getType()).getShape();
    std::pair<int64_t, int64_t> shape{query[query.size() - 2],
                                      key[key.size() - 2]};
    if (!llvm::is_contained(shapes, shape))
      shapes.push_back(shape);
  });
  return shapes;
}

bool isScoreTensor(Type type, const ScoreShapes &scores) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasRank() || shaped.getRank() < 2)
    return false;
  ArrayRef<int64_t> dims = shaped.getShape();
  return llvm::is_contained(scores,
                            std::make_pair(dims[dims.size() - 2], dims.back()));
}

/// The local types of a rank's stacked expert weights: values of these
/// types (the weights, their gradients) are the experts' own.
using ExpertTypes = llvm::SmallVector<Type, 2>;

OpWork workOf(Operation *op, const ScoreShapes &scores,
              const ExpertTypes &experts) {
  OpWork work;
  if (int64_t flops = contractionFlops(op)) {
    work.flops = double(flops);
    work.contraction = true;
  }
  bool fusible = isFusible(op);
  auto count = [&](Value v) {
    double elements = elementsOf(v.getType());
    work.elements += elements;
    if (isScoreTensor(v.getType(), scores))
      work.scoreElements += elements;
    if (llvm::is_contained(experts, v.getType()))
      work.expertWeightElements += elements;
  };
  for (Value v : op->getOperands())
    if (!fusible || !isFusible(v.getDefiningOp()))
      count(v);
  for (Value v : op->getResults()) {
    if (!work.contraction)
      work.flops += elementsOf(v.getType());
    if (!fusible || llvm::any_of(v.getUsers(), [](Operation *user) {
          return !isFusible(user);
        }))
      count(v);
  }
  return work;
}

enum class Part { Layer, Pre, Post, Update };

struct Reader {
  explicit Reader(const llvm::StringSet<> &expertNames)
      : expertNames(expertNames) {}

  TensorParallelProfile profile;
  /// The parameters that are stacked expert weights.
  const llvm::StringSet<> &expertNames;
  llvm::StringSet<> layerNames;
  llvm::DenseMap<Operation *, Part> partOf;

  /// Layers repeat: the first one the forward pass meets stands for all
  /// (averaging would spread one layer's collectives over many smaller
  /// ones, each paying the latency).
  void read(func::FuncOp step) {
    std::string phase = "forward";
    bool seenLayerForward = false, seenLayerBackward = false;
    std::optional<std::string> firstLayer;
    Work layerForward, layerBackward, layerAttention;
    ScoreShapes scores = scoreShapesOf(step);
    ExpertTypes experts;
    for (BlockArgument arg : step.getArguments())
      if (auto name = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        "weft.param");
          name && expertNames.contains(name.getValue()) &&
          !llvm::is_contained(experts, arg.getType()))
        experts.push_back(arg.getType());
    step.walk([&](Operation *op) {
      if (auto tag = op->getAttrOfType<StringAttr>("weft.phase"))
        phase = tag.getValue().str();
      std::optional<CollectiveWork> collective = collectiveOf(op);
      if (!collective && (!isa<WeftDialect>(op->getDialect()) || isFree(op)))
        return;
      std::optional<std::string> layer = numberedLayerOf(op->getLoc());
      Part part;
      if (phase == "update") {
        part = Part::Update;
      } else if (layer) {
        part = Part::Layer;
        layerNames.insert(*layer);
        (phase == "forward" ? seenLayerForward : seenLayerBackward) = true;
      } else if (phase == "forward") {
        part = seenLayerForward ? Part::Post : Part::Pre;
      } else {
        part = seenLayerBackward ? Part::Pre : Part::Post;
      }
      partOf[op] = part;
      bool forward = phase == "forward";
      if (part == Part::Layer && !firstLayer)
        firstLayer = *layer;
      Work scratch;
      Work *into = nullptr;
      switch (part) {
      case Part::Layer:
        into = *layer != *firstLayer ? &scratch
               : forward             ? &layerForward
                                     : &layerBackward;
        break;
      case Part::Pre:
        into = forward ? &profile.preForward : &profile.preBackward;
        break;
      case Part::Post:
        into = forward ? &profile.postForward : &profile.postBackward;
        break;
      case Part::Update:
        into = &profile.update;
        break;
      }
      if (collective) {
        into->collectives.push_back(*collective);
        return;
      }
      into->ops.push_back(workOf(op, scores, experts));
      if (into == &layerForward && isa<AttentionOp>(op))
        layerAttention.ops.push_back(workOf(op, scores, experts));
    });
    double perLayer = layerNames.empty() ? 0 : 1.0 / layerNames.size();
    profile.layerForward = std::move(layerForward);
    profile.layerBackward = std::move(layerBackward);
    profile.layerAttention = std::move(layerAttention);

    for (BlockArgument arg : step.getArguments()) {
      auto name =
          step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "weft.param");
      if (!name)
        continue;
      double elements = elementsOf(arg.getType());
      profile.updateParameters += elements;
      if (numberedLayerOf(name.getValue())) {
        profile.layerParameters += elements * perLayer;
        if (expertNames.contains(name.getValue()))
          profile.layerExpertParameters += elements * perLayer;
        continue;
      }
      profile.otherParameters += elements;
      bool pre = false, post = false;
      for (Operation *user : arg.getUsers()) {
        auto it = partOf.find(user);
        if (it == partOf.end())
          continue;
        pre |= it->second == Part::Pre;
        post |= it->second == Part::Post;
      }
      if (pre)
        profile.preParameters += elements;
      if (post || !pre)
        profile.postParameters += elements;
    }
  }
};

/// The first error a pass pipeline reports, on one line.
class ErrorCapture {
public:
  explicit ErrorCapture(MLIRContext *context)
      : handler(context, [this](Diagnostic &diag) {
          if (diag.getSeverity() == DiagnosticSeverity::Error &&
              message.empty())
            message = diag.str();
          return success();
        }) {}
  std::string message;

private:
  ScopedDiagnosticHandler handler;
};

} // namespace

std::optional<ModelProfile> profileModel(ModuleOp module,
                                         const std::vector<int64_t> &degrees,
                                         int64_t modelLayers,
                                         std::string &error) {
  MLIRContext *context = module.getContext();
  auto forward = module.lookupSymbol<func::FuncOp>("main");
  if (!forward || forward.isDeclaration()) {
    error = "the model has no function 'main'";
    return std::nullopt;
  }
  ModelProfile model;
  llvm::StringSet<> layers;
  forward.walk([&](Operation *op) {
    model.forwardFlops += double(contractionFlops(op));
    if (std::optional<std::string> layer = numberedLayerOf(op->getLoc()))
      layers.insert(*layer);
    if (auto attention = dyn_cast<AttentionOp>(op)) {
      auto query = cast<ShapedType>(attention.getQuery().getType());
      model.heads = query.getDimSize(1);
      model.kvHeads =
          cast<ShapedType>(attention.getKey().getType()).getDimSize(1);
      model.seq = query.getDimSize(2);
      model.hidden = query.getDimSize(1) * query.getDimSize(3);
      model.causal = attention.getCausal();
    }
  });
  llvm::StringSet<> expertNames;
  for (BlockArgument arg : forward.getArguments()) {
    auto name =
        forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "weft.param");
    if (!name || !isStackedExpertWeight(arg))
      continue;
    expertNames.insert(name.getValue());
    model.experts = cast<ShapedType>(arg.getType()).getDimSize(0);
  }
  if (forward.getNumArguments() == 0 || forward.getNumResults() == 0) {
    error = "'main' must take the token ids and return the logits";
    return std::nullopt;
  }
  auto tokens = dyn_cast<ShapedType>(forward.getArgument(0).getType());
  auto logits = dyn_cast<ShapedType>(forward.getResultTypes()[0]);
  if (!tokens || !logits || !tokens.hasStaticShape() ||
      !logits.hasStaticShape() || tokens.getRank() != 2 ||
      !tokens.getElementType().isInteger()) {
    std::string got;
    llvm::raw_string_ostream os(got);
    os << "its first input is " << forward.getArgument(0).getType()
       << " and its first result " << forward.getResultTypes()[0];
    error = "the planner plans language models, whose first input is token "
            "ids [batch, seq] and first result the logits: " +
            got;
    return std::nullopt;
  }
  if (model.heads == 0) {
    error = "the model has no attention (weft.attention): run the fusions "
            "first (weft-translate --fuse)";
    return std::nullopt;
  }
  model.batch = tokens.getDimSize(0);
  model.vocab = logits.getShape().back();
  int64_t irLayers = std::max<int64_t>(1, layers.size());
  model.layers = std::max(modelLayers, irLayers);

  // The training step, partitioned by `presets` (none: one rank); the
  // partitioner's error in `failure`.
  auto trainStep = [&](const WeftShardPresetsOptions *presets,
                       std::string &failure) -> OwningOpRef<ModuleOp> {
    OwningOpRef<ModuleOp> copy = module.clone();
    ErrorCapture capture(context);
    PassManager training(context);
    weft::guardPasses(training);
    WeftDeriveTrainStepOptions options;
    options.markPhases = true;
    training.addPass(createWeftDeriveTrainStep(options));
    if (failed(training.run(*copy))) {
      error = "deriving the training step: " + capture.message;
      return nullptr;
    }
    for (auto func : llvm::make_early_inc_range(copy->getOps<func::FuncOp>()))
      if (func.getSymName() != "train_step")
        func.erase();
    if (!presets)
      return copy;
    PassManager spmd(context);
    weft::guardPasses(spmd);
    spmd.addPass(createWeftShardPresets(*presets));
    spmd.addPass(createWeftPropagateSharding());
    spmd.addPass(createWeftPartition());
    // As weftc compiles it: small collectives travel in buckets.
    spmd.addPass(createWeftBucketCollectives());
    if (failed(spmd.run(*copy))) {
      failure = capture.message;
      return nullptr;
    }
    return copy;
  };

  for (int64_t tp : degrees) {
    for (bool sequenceParallel : {false, true}) {
      if (sequenceParallel && tp == 1)
        continue;
      WeftShardPresetsOptions presets;
      presets.mesh = "tp=" + std::to_string(tp);
      presets.parallel = {"megatron"};
      presets.sequenceParallel = sequenceParallel;
      std::string failure;
      OwningOpRef<ModuleOp> step =
          trainStep(tp > 1 ? &presets : nullptr, failure);
      if (!error.empty())
        return std::nullopt;
      if (!step) {
        model.rejectedDegrees.push_back(
            "tp=" + std::to_string(tp) +
            (sequenceParallel ? " with sequence parallelism: " : ": ") +
            failure);
        continue;
      }
      Reader reader(expertNames);
      reader.profile.tp = tp;
      reader.profile.sequenceParallel = sequenceParallel;
      reader.read(*step->getOps<func::FuncOp>().begin());
      model.tensorParallel.push_back(std::move(reader.profile));
    }
  }
  // Expert parallelism's all-to-alls, as ep=2 partitions the step: each
  // rank holds half the batch, so twice its messages are the whole batch's.
  if (model.experts > 0) {
    WeftShardPresetsOptions presets;
    presets.mesh = "ep=2";
    presets.parallel = {"ep"};
    std::string failure;
    OwningOpRef<ModuleOp> step = trainStep(&presets, failure);
    if (!error.empty())
      return std::nullopt;
    if (!step) {
      model.expertError = failure;
      model.rejectedDegrees.push_back("ep=2: " + failure);
    } else {
      Reader reader(expertNames);
      reader.read(*step->getOps<func::FuncOp>().begin());
      for (auto [from, into] :
           {std::make_pair(&reader.profile.layerForward, &model.expertForward),
            std::make_pair(&reader.profile.layerBackward,
                           &model.expertBackward)})
        for (const CollectiveWork &c : from->collectives)
          if (c.kind == Collective::AllToAll)
            into->collectives.push_back({c.kind, 2 * c.elements});
    }
  }
  const TensorParallelProfile *whole = model.find(1, false);
  if (!whole) {
    error = "the model could not be profiled without tensor parallelism";
    return std::nullopt;
  }
  model.parameters =
      whole->layerParameters * model.layers + whole->otherParameters;
  if (modelLayers > irLayers)
    model.forwardFlops += (modelLayers - irLayers) * [&] {
      double flops = 0;
      for (const OpWork &op : whole->layerForward.ops)
        flops += op.contraction ? op.flops : 0;
      return flops;
    }();
  return model;
}

} // namespace weft::planner
