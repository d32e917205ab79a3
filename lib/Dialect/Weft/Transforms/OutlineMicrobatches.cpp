//===- OutlineMicrobatches.cpp - One function per stage and phase ---------===//
//
// weft-derive-train-step builds a step of K micro-batches as a template of
// two: micro-batch 0, then micro-batch 1 whose loss and gradients are added
// to micro-batch 0's. This pass makes a function of each (stage, phase) of
// the second copy and rebuilds the step as a loop over the K micro-batches
// whose iteration calls them, so that the program's size does not grow
// with K. The sums of the second copy become running sums, carried by the
// loop: a backward takes the sum so far and returns it with its part
// added.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"
#include "weft/Dialect/Weft/Transforms/StepPhases.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <map>

namespace weft {
#define GEN_PASS_DEF_WEFTOUTLINEMICROBATCHES
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

using Phase = StepPhase;

struct Placement {
  int64_t stage = 0;
  int64_t microbatch = 0;
  Phase phase = Phase::Forward;
};

/// The ops of one stage and phase of the template's last micro-batch, and
/// the function they become.
struct Group {
  int64_t stage;
  Phase phase;
  /// In block order; a backward's list starts with the forward ops it
  /// recomputes.
  SmallVector<Operation *> ops;
  llvm::DenseSet<Operation *> members;
  llvm::SetVector<Value> inputs, outputs;
  func::FuncOp callee;
};

/// Cheap to redo and what holds most of the activation memory between
/// contractions: elementwise work and views.
bool isCheap(Operation *op) {
  if (!isa<WeftDialect>(op->getDialect()) || !isMemoryEffectFree(op))
    return false;
  return !isa<MatmulOp, LinearOp, ConvOp, AttentionOp, ReduceSumOp,
              ReduceMeanOp, ReduceMaxOp, ReduceMinOp, ReduceProdOp, SoftmaxOp,
              LogSoftmaxOp, LayerNormOp, RmsNormOp, NormGradOp, GatherOp,
              ScatterAddOp, SoftmaxCrossEntropyOp, SoftmaxCrossEntropyGradOp>(
      op);
}

/// Values an op reads: its operands and what its regions use from above.
SmallVector<Value> readValues(Operation *op) {
  SmallVector<Value> values(op->getOperands());
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(op->getRegions(), captured);
  llvm::append_range(values, captured);
  return values;
}

struct WeftOutlineMicrobatchesPass
    : public weft::impl::WeftOutlineMicrobatchesBase<
          WeftOutlineMicrobatchesPass> {
  using WeftOutlineMicrobatchesBase::WeftOutlineMicrobatchesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>(function);
    if (!step || step.isExternal()) {
      module.emitError() << "weft-outline-microbatches: no function '"
                         << std::string(function) << "'";
      return signalPassFailure();
    }
    if (recompute != "none" && recompute != "selective" &&
        recompute != "full") {
      module.emitError() << "weft-outline-microbatches: unknown recompute "
                            "mode '"
                         << std::string(recompute)
                         << "' (expected none, selective or full)";
      return signalPassFailure();
    }
    if (failed(outline(module, step)))
      signalPassFailure();
  }

  LogicalResult outline(ModuleOp module, func::FuncOp step) {
    auto count =
        step->getAttrOfType<IntegerAttr>(WeftDialect::kMicrobatchesAttrName);
    if (!count || count.getInt() < 1)
      return step.emitError(
          "weft-outline-microbatches: the step is not a micro-batch template "
          "(derive it with weft-derive-train-step micro-batches or "
          "mark-phases)");
    int64_t microbatches = count.getInt();
    int64_t last = std::min<int64_t>(microbatches, 2) - 1;
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    // Sources: constants, and slices and views of arguments (the
    // micro-batch's inputs) or what the partitioner adds on them alone
    // (ZeRO-3 gathers). A source of a micro-batch is redone per call round;
    // the others run once.
    llvm::DenseSet<Operation *> sources, constants, roundSourceSet;
    SmallVector<Operation *> roundSources;
    // Ops of the earlier copy, and the last copy's running sums.
    llvm::DenseSet<Operation *> earlier;
    llvm::MapVector<Value, Value> sumOfPart; // earlier part -> running sum
    llvm::DenseSet<Value> sums;
    llvm::DenseMap<Operation *, Placement> placement;
    std::map<std::pair<int64_t, Phase>, Group> groups;
    SmallVector<Operation *> update;
    for (Operation &op : body.without_terminator()) {
      auto microbatch =
          op.getAttrOfType<IntegerAttr>(WeftDialect::kMicrobatchAttrName);
      // What is computed from constants and mesh coordinates alone (ring
      // attention's positions and masks) is redone in each function, like
      // a constant, rather than passed in.
      bool fromConstants =
          isMemoryEffectFree(&op) && op.getNumRegions() == 0 &&
          llvm::all_of(op.getOperands(), [&](Value v) {
            return v.getDefiningOp() && constants.count(v.getDefiningOp());
          });
      if (op.hasTrait<OpTrait::ConstantLike>() || fromConstants) {
        sources.insert(&op);
        constants.insert(&op);
        continue;
      }
      if (isStepSource(&op, readValues(&op),
                       [&](Operation *p) { return sources.count(p) > 0; })) {
        // A source of a micro-batch is one that reads one, or is marked.
        bool ofRound = false, ofEarlier = false;
        for (Value v : readValues(&op))
          if (Operation *producer = v.getDefiningOp()) {
            ofRound |= roundSourceSet.count(producer) > 0;
            ofEarlier |= earlier.count(producer) > 0;
          }
        if (!ofRound && !ofEarlier && microbatch) {
          ofRound = microbatch.getInt() == last;
          ofEarlier = microbatch.getInt() < last;
        }
        sources.insert(&op);
        if (ofEarlier) {
          earlier.insert(&op);
        } else if (ofRound) {
          roundSources.push_back(&op);
          roundSourceSet.insert(&op);
        }
        continue;
      }
      Placement where;
      if (auto stage =
              op.getAttrOfType<IntegerAttr>(WeftDialect::kStageAttrName))
        where.stage = stage.getInt();
      auto phase = op.getAttrOfType<StringAttr>(WeftDialect::kPhaseAttrName);
      bool readsSum = llvm::any_of(op.getOperands(),
                                   [&](Value v) { return sums.count(v); });
      if (phase && microbatch) {
        where.phase = parseStepPhase(phase.getValue());
        where.microbatch = microbatch.getInt();
      } else if (readsSum) {
        // What the partitioner adds on a running sum (data parallelism's
        // reduction) runs once, with the update.
        where.phase = Phase::Update;
      } else {
        // Other ops the partitioner added take their latest producer's.
        for (Value v : op.getOperands()) {
          if (roundSourceSet.count(v.getDefiningOp()))
            where.microbatch = last;
          auto it = placement.find(v.getDefiningOp());
          if (it == placement.end())
            continue;
          where.phase = std::max(where.phase, it->second.phase);
          where.microbatch = std::max(where.microbatch, it->second.microbatch);
        }
      }
      if (where.phase != Phase::Update && where.microbatch > last)
        return op.emitError()
               << "weft-outline-microbatches: micro-batch " << where.microbatch
               << " in a template of " << last + 1;
      if (where.phase != Phase::Update && readsSum)
        return op.emitError("weft-outline-microbatches: a running sum is read "
                            "before the update");
      placement[&op] = where;
      if (where.phase == Phase::Update) {
        update.push_back(&op);
        continue;
      }
      if (where.microbatch < last) {
        earlier.insert(&op);
        continue;
      }
      // The last copy adds its part to the earlier copy's: a running sum.
      for (Value v : op.getOperands()) {
        Operation *producer = v.getDefiningOp();
        if (!producer || !earlier.count(producer) || sources.count(producer))
          continue;
        if (!isa<AddOp>(op) || op.getNumResults() != 1)
          return op.emitError("weft-outline-microbatches: reads micro-batch ")
                 << last - 1 << " other than to sum it";
        sumOfPart[v] = op.getResult(0);
        sums.insert(op.getResult(0));
      }
      Group &group = groups[{where.stage, where.phase}];
      group.stage = where.stage;
      group.phase = where.phase;
      group.ops.push_back(&op);
    }
    for (Operation *op : update)
      for (Value v : readValues(op))
        if (Operation *producer = v.getDefiningOp();
            producer && earlier.count(producer))
          return op->emitError("weft-outline-microbatches: the update reads "
                               "micro-batch ")
                 << last - 1;

    // Recomputation: a backward redoes forward ops of its stage instead of
    // reading their results.
    for (auto &[key, group] : groups) {
      for (Operation *op : group.ops)
        group.members.insert(op);
      if (group.phase != Phase::Backward || recompute == "none")
        continue;
      auto forward = groups.find({group.stage, Phase::Forward});
      if (forward == groups.end())
        continue;
      llvm::DenseSet<Operation *> forwardOps(forward->second.ops.begin(),
                                             forward->second.ops.end());
      SmallVector<Operation *> work(group.ops);
      llvm::DenseSet<Operation *> redo;
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        for (Value v : readValues(op)) {
          Operation *producer = v.getDefiningOp();
          if (!producer || !forwardOps.count(producer) ||
              redo.count(producer) ||
              (recompute == "selective" && !isCheap(producer)))
            continue;
          redo.insert(producer);
          work.push_back(producer);
        }
      }
      SmallVector<Operation *> ops;
      for (Operation *op : forward->second.ops)
        if (redo.count(op))
          ops.push_back(op);
      llvm::append_range(ops, group.ops);
      group.ops = std::move(ops);
      group.members.insert(redo.begin(), redo.end());
    }

    // Zero-bubble schedules: a backward's weight-gradient part, the ops
    // that feed only the gradient sums and the update, becomes a group of
    // its own, run later; the rest is what the previous stage waits for.
    if (splitBackward) {
      llvm::DenseSet<Operation *> updateSet(update.begin(), update.end());
      SmallVector<std::pair<int64_t, Group *>> backwards;
      for (auto &[key, group] : groups)
        if (group.phase == Phase::Backward)
          backwards.push_back({group.stage, &group});
      for (auto [stage, group] : backwards) {
        SmallVector<Operation *> work;
        for (Operation *op : group->ops)
          for (Value result : op->getResults()) {
            bool waitedFor =
                !sums.count(result) &&
                llvm::any_of(result.getUsers(), [&](Operation *u) {
                  Operation *user =
                      step.getBody().front().findAncestorOpInBlock(*u);
                  return user && !group->members.count(user) &&
                         !updateSet.count(user) && user != ret;
                });
            if (waitedFor) {
              work.push_back(op);
              break;
            }
          }
        llvm::DenseSet<Operation *> inputPart(work.begin(), work.end());
        while (!work.empty()) {
          Operation *op = work.pop_back_val();
          for (Value v : readValues(op)) {
            Operation *producer = v.getDefiningOp();
            if (producer && group->members.count(producer) &&
                inputPart.insert(producer).second)
              work.push_back(producer);
          }
        }
        if (inputPart.size() == group->members.size())
          continue;
        Group &weights = groups[{stage, Phase::BackwardWeight}];
        weights.stage = stage;
        weights.phase = Phase::BackwardWeight;
        SmallVector<Operation *> kept;
        for (Operation *op : group->ops)
          (inputPart.count(op) ? kept : weights.ops).push_back(op);
        group->ops = std::move(kept);
        group->members =
            llvm::DenseSet<Operation *>(group->ops.begin(), group->ops.end());
        weights.members =
            llvm::DenseSet<Operation *>(weights.ops.begin(), weights.ops.end());
      }
    }

    // Each group's inputs, and the outputs others read from it.
    llvm::DenseMap<Operation *, Group *> home;
    for (auto &[key, group] : groups)
      for (Operation *op : group.ops)
        home.try_emplace(op, &group);
    for (auto &[key, group] : groups)
      if (group.phase == Phase::Forward)
        for (Operation *op : group.ops)
          home[op] = &group;
    auto exported = [&](Value v) {
      if (Operation *producer = v.getDefiningOp())
        if (Group *from = home.lookup(producer))
          from->outputs.insert(v);
    };
    for (auto &[key, group] : groups)
      for (Operation *op : group.ops)
        for (Value v : readValues(op)) {
          Operation *producer = v.getDefiningOp();
          if (producer &&
              (group.members.count(producer) || constants.count(producer)))
            continue;
          group.inputs.insert(v);
          exported(v);
        }
    for (Operation *op : update)
      for (Value v : readValues(op))
        exported(v);
    for (Value v : ret.getOperands())
      exported(v);

    // The call order of a round: forwards by stage, then backwards from
    // the last stage, as far as what each reads allows.
    SmallVector<Group *> order;
    {
      SmallVector<Group *> pending;
      for (auto &[key, group] : groups)
        pending.push_back(&group);
      auto rank = [](Group *g) {
        return g->phase == Phase::Forward    ? g->stage
               : g->phase == Phase::Backward ? (int64_t(1) << 40) - g->stage
                                             : (int64_t(1) << 41) - g->stage;
      };
      llvm::sort(pending,
                 [&](Group *a, Group *b) { return rank(a) < rank(b); });
      llvm::DenseSet<Group *> done;
      while (!pending.empty()) {
        auto ready = llvm::find_if(pending, [&](Group *g) {
          return llvm::all_of(g->inputs, [&](Value v) {
            Operation *producer = v.getDefiningOp();
            Group *from = producer ? home.lookup(producer) : nullptr;
            return !from || from == g || done.count(from);
          });
        });
        if (ready == pending.end())
          return step.emitError("weft-outline-microbatches: the stages' "
                                "phases read each other in a cycle");
        done.insert(*ready);
        order.push_back(*ready);
        pending.erase(ready);
      }
    }

    // The functions.
    MLIRContext *ctx = module.getContext();
    OpBuilder moduleBuilder(ctx);
    moduleBuilder.setInsertionPointAfter(step);
    for (Group *group : order) {
      SmallVector<Type> inputTypes, outputTypes;
      for (Value v : group->inputs)
        inputTypes.push_back(v.getType());
      for (Value v : group->outputs)
        outputTypes.push_back(v.getType());
      std::string name =
          (step.getSymName() + "_stage" + llvm::Twine(group->stage) +
           (group->phase == Phase::Forward    ? "_forward"
            : group->phase == Phase::Backward ? "_backward"
                                              : "_weights"))
              .str();
      auto callee =
          func::FuncOp::create(moduleBuilder, step.getLoc(), name,
                               FunctionType::get(ctx, inputTypes, outputTypes));
      callee.setPrivate();
      Block *entry = callee.addEntryBlock();
      OpBuilder b = OpBuilder::atBlockEnd(entry);
      IRMapping mapping;
      mapping.map(group->inputs.getArrayRef(), entry->getArguments());
      auto cloneUnmarked = [&](Operation *op) {
        Operation *copy = b.clone(*op, mapping);
        copy->removeAttr(WeftDialect::kMicrobatchAttrName);
        copy->removeAttr(WeftDialect::kPhaseAttrName);
      };
      // A constant is cloned with the constants it is computed from.
      std::function<void(Operation *)> cloneConstantsRead = [&](Operation *op) {
        for (Value v : readValues(op))
          if (Operation *producer = v.getDefiningOp();
              producer && constants.count(producer) && !mapping.contains(v)) {
            cloneConstantsRead(producer);
            cloneUnmarked(producer);
          }
      };
      for (Operation *op : group->ops) {
        cloneConstantsRead(op);
        cloneUnmarked(op);
      }
      SmallVector<Value> results;
      for (Value v : group->outputs)
        results.push_back(mapping.lookup(v));
      func::ReturnOp::create(b, step.getLoc(), results);
      group->callee = callee;
      moduleBuilder.setInsertionPointAfter(callee);
    }

    // The step: a loop over the micro-batches whose iteration slices the
    // inputs and calls the round, then the update. The loop carries the
    // running sums and what else the update reads of a micro-batch (with
    // one micro-batch, its gradients), the last iteration's. Each starts in
    // a buffer of its own: sums of one shape would otherwise start from one
    // constant.
    OpBuilder b(ret);
    Location loc = step.getLoc();
    Builder attrs(ctx);
    SmallVector<Value> carried, inits;
    for (auto [part, sum] : sumOfPart) {
      Value zero = createSplat(b, sum.getLoc(), tensorTypeOf(sum), 0.0);
      carried.push_back(sum);
      inits.push_back(bufferization::AllocTensorOp::create(
          b, sum.getLoc(), tensorTypeOf(sum), ValueRange{}, zero));
    }
    auto carryLast = [&](Value v) {
      Operation *producer = v.getDefiningOp();
      if (!producer || !home.count(producer) || sums.count(v) ||
          llvm::is_contained(carried, v))
        return;
      carried.push_back(v);
      inits.push_back(bufferization::AllocTensorOp::create(
          b, v.getLoc(), tensorTypeOf(v), ValueRange{}));
    };
    for (Operation *op : update)
      for (Value v : op->getOperands())
        carryLast(v);
    for (Value v : ret.getOperands())
      carryLast(v);
    auto index = [&](int64_t value) -> Value {
      return arith::ConstantIndexOp::create(b, loc, value);
    };
    auto loop = scf::ForOp::create(b, loc, index(0), index(microbatches),
                                   index(1), inits);
    {
      OpBuilder body = OpBuilder::atBlockBegin(loop.getBody());
      Value k = loop.getInductionVar();
      IRMapping round;
      for (auto [i, part] : llvm::enumerate(sumOfPart))
        round.map(part.first, loop.getRegionIterArg(i));
      for (Operation *op : roundSources) {
        auto slice = dyn_cast<SliceOp>(op);
        auto input = slice ? llvm::dyn_cast<BlockArgument>(slice.getInput())
                           : BlockArgument();
        if (!input || !step.getArgAttr(input.getArgNumber(),
                                       WeftDialect::kInputAttrName)) {
          Operation *copy = body.clone(*op, round);
          copy->removeAttr(WeftDialect::kMicrobatchAttrName);
          continue;
        }
        // The micro-batch's slice of an input, at the loop's offset.
        ArrayRef<int64_t> offsets = slice.getOffsets();
        if (offsets.empty() || offsets[0] != last || slice.getSizes()[0] != 1 ||
            tensorTypeOf(input).getDimSize(0) != microbatches)
          return op->emitError("weft-outline-microbatches: expected the "
                               "slice of micro-batch ")
                 << last << " of an input of " << microbatches;
        SmallVector<OpFoldResult> dynamicOffsets{k};
        for (int64_t offset : offsets.drop_front())
          dynamicOffsets.push_back(body.getIndexAttr(offset));
        auto extracted = tensor::ExtractSliceOp::create(
            body, slice.getLoc(), tensorTypeOf(slice.getResult()),
            slice.getInput(), dynamicOffsets,
            getAsIndexOpFoldResult(ctx, slice.getSizes()),
            getAsIndexOpFoldResult(ctx, slice.getStrides()));
        round.map(slice.getResult(), extracted.getResult());
      }
      for (Group *group : order) {
        SmallVector<Value> operands;
        for (Value v : group->inputs)
          operands.push_back(round.lookupOrDefault(v));
        auto call = func::CallOp::create(body, loc, group->callee, operands);
        call->setAttr(WeftDialect::kStageAttrName,
                      attrs.getI64IntegerAttr(group->stage));
        call->setAttr(WeftDialect::kPhaseAttrName,
                      attrs.getStringAttr(stepPhaseName(group->phase)));
        round.map(group->outputs.getArrayRef(), call.getResults());
      }
      // Each is written over the one carried in, so that the loop keeps
      // the same buffers from iteration to iteration.
      SmallVector<Value> next;
      for (auto [i, value] : llvm::enumerate(carried))
        next.push_back(
            bufferization::MaterializeInDestinationOp::create(
                body, loc, round.lookup(value), loop.getRegionIterArg(i))
                .getResult());
      scf::YieldOp::create(body, loc, next);
    }
    // After the loop only what it carries is known.
    llvm::DenseMap<Value, Value> total;
    for (auto [i, value] : llvm::enumerate(carried))
      total[value] = loop.getResult(i);
    auto afterLoop = [&](OpOperand &operand) -> LogicalResult {
      Value v = operand.get();
      if (Value last = total.lookup(v)) {
        operand.set(last);
        return success();
      }
      Operation *producer = v.getDefiningOp();
      if (producer && roundSourceSet.count(producer))
        return operand.getOwner()->emitError(
                   "weft-outline-microbatches: the update reads a "
                   "micro-batch's input slice (at ")
               << v.getLoc() << ")";
      return success();
    };
    for (Operation *op : update) {
      op->moveBefore(ret);
      for (OpOperand &operand : op->getOpOperands())
        if (failed(afterLoop(operand)))
          return failure();
    }
    for (OpOperand &operand : ret->getOpOperands())
      if (failed(afterLoop(operand)))
        return failure();

    // The template's copies go.
    llvm::DenseSet<Operation *> dead(earlier.begin(), earlier.end());
    dead.insert(roundSources.begin(), roundSources.end());
    for (auto &[key, group] : groups)
      dead.insert(group.ops.begin(), group.ops.end());
    SmallVector<Operation *> erased;
    for (Operation &op : body.without_terminator())
      if (dead.count(&op))
        erased.push_back(&op);
    for (Operation *op : llvm::reverse(erased)) {
      if (!op->use_empty())
        return op->emitError("weft-outline-microbatches: still used after "
                             "outlining");
      op->erase();
    }
    step->removeAttr(WeftDialect::kMicrobatchesAttrName);
    return success();
  }
};

} // namespace
