//===- PipelineCut.cpp - One pipeline rank's program from a training step -===//
//
// The training step (derived with mark-phases, partitioned over the other
// mesh axes, split into stages) holds every stage and micro-batch. For one
// rank of the `pp` axis this keeps the ops of its stages, orders them as
// its instruction list (PipelineSchedule.h) says, and replaces each value
// that crosses ranks by a `shard.send` after its producer and a
// `shard.recv` before its first use there. Every rank cuts the same
// function the same way, so each message has one tag on both sides.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"
#include "weft/Dialect/Weft/Transforms/PipelineSchedule.h"
#include "weft/Dialect/Weft/Transforms/Sharding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/BitVector.h"

namespace weft {
#define GEN_PASS_DEF_WEFTPIPELINECUT
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;
using pipeline::Instruction;

namespace {

enum class Phase { Forward = 0, Backward = 1, Update = 2 };

/// The runtime function that timestamps the start of an instruction
/// (kind: 0 forward, 1 backward, 2 optimizer) for --trace.
constexpr llvm::StringLiteral kMarkFunction = "weft_pipeline_mark";
/// Whether the runtime traces (an i1).
constexpr llvm::StringLiteral kTracingFunction = "weft_tracing";

/// Where an op of the step runs and when.
struct Placement {
  int64_t rank = 0;
  int64_t chunk = 0;
  int64_t microbatch = 0;
  Phase phase = Phase::Forward;
};

/// A message sent or received, in a rank's order.
struct Event {
  bool send;
  int64_t message;
};

/// A value computed on one rank and used on another.
struct Message {
  Value value;
  int64_t from, to;
  int64_t tag;
};

struct WeftPipelineCutPass
    : public weft::impl::WeftPipelineCutBase<WeftPipelineCutPass> {
  using WeftPipelineCutBase::WeftPipelineCutBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>(function);
    if (!main || main.isExternal()) {
      module.emitError() << "weft-pipeline-cut: no function '"
                         << std::string(function) << "'";
      return signalPassFailure();
    }
    if (failed(cut(module, main)))
      signalPassFailure();
  }

  LogicalResult cut(ModuleOp module, func::FuncOp func) {
    std::optional<Mesh> mesh = Mesh::find(module);
    std::optional<MeshAxis> ppAxis =
        mesh ? mesh->axisNamed("pp") : std::nullopt;
    if (!ppAxis)
      return func.emitError("weft-pipeline-cut: the module needs a mesh with "
                            "a 'pp' axis");
    int64_t ranks = mesh->sizes[*ppAxis];
    if (rank < 0 || rank >= ranks)
      return func.emitError() << "weft-pipeline-cut: rank " << int64_t(rank)
                              << " is not on the pp axis of size " << ranks;
    std::optional<pipeline::ScheduleKind> kind =
        pipeline::parseScheduleKind(schedule);
    if (!kind)
      return func.emitError() << "weft-pipeline-cut: unknown schedule '"
                              << std::string(schedule) << "'";
    std::string error;
    std::optional<pipeline::Schedule> plan = pipeline::buildSchedule(
        *kind, ranks, microbatches, virtualStages, error);
    if (!plan || !pipeline::checkSchedule(*plan, error))
      return func.emitError() << "weft-pipeline-cut: " << error;
    auto stages =
        func->getAttrOfType<DictionaryAttr>(WeftDialect::kPipelineAttrName);
    auto stageCount =
        stages ? stages.getAs<IntegerAttr>("stages") : IntegerAttr();
    if (!stageCount || stageCount.getInt() != ranks * virtualStages)
      return func.emitError()
             << "weft-pipeline-cut: run weft-split-stages with "
             << ranks * virtualStages << " stages first";

    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    SmallVector<Operation *> ops = llvm::to_vector(llvm::make_pointer_range(
        body.without_terminator()));

    // Constants, the micro-batch slices of the inputs and what the
    // partitioner adds on arguments alone (ZeRO-3 gathers) run on every
    // rank that needs them.
    llvm::DenseSet<Operation *> sourceOnly;
    llvm::DenseMap<Operation *, Placement> placement;
    for (Operation *op : ops) {
      bool fromSources = llvm::all_of(op->getOperands(), [&](Value v) {
        Operation *producer = v.getDefiningOp();
        return !producer || sourceOnly.count(producer);
      });
      bool movesData = isa<SliceOp, ReshapeOp>(op) ||
                       !op->hasAttr(WeftDialect::kPhaseAttrName);
      if (op->hasTrait<OpTrait::ConstantLike>() || (fromSources && movesData)) {
        sourceOnly.insert(op);
        continue;
      }
      auto stage = op->getAttrOfType<IntegerAttr>(WeftDialect::kStageAttrName);
      if (!stage)
        return op->emitError("weft-pipeline-cut: op has no weft.stage");
      Placement where;
      where.rank = stage.getInt() % ranks;
      where.chunk = stage.getInt() / ranks;
      // Ops the partitioner added carry no phase: they take their latest
      // producer's.
      auto phase = op->getAttrOfType<StringAttr>(WeftDialect::kPhaseAttrName);
      auto microbatch =
          op->getAttrOfType<IntegerAttr>(WeftDialect::kMicrobatchAttrName);
      if (phase && microbatch) {
        where.phase = phase.getValue() == "forward"    ? Phase::Forward
                      : phase.getValue() == "backward" ? Phase::Backward
                                                       : Phase::Update;
        where.microbatch = microbatch.getInt();
      } else {
        for (Value v : op->getOperands()) {
          auto it = placement.find(v.getDefiningOp());
          if (it == placement.end())
            continue;
          where.phase = std::max(where.phase, it->second.phase);
          where.microbatch = std::max(where.microbatch, it->second.microbatch);
        }
      }
      if (where.microbatch >= microbatches)
        return op->emitError() << "weft-pipeline-cut: micro-batch "
                               << where.microbatch << " of " << microbatches;
      placement[op] = where;
    }

    // Each rank's ops in its instruction order: an op runs in the
    // instruction of its chunk, micro-batch and phase (the update after the
    // last one), and never before an op of its rank it reads.
    std::vector<std::map<std::tuple<int64_t, int64_t, Phase>, int64_t>>
        instructionIndex(ranks);
    for (int64_t r = 0; r < ranks; ++r)
      for (auto [i, instruction] : llvm::enumerate(plan->ranks[r]))
        if (instruction.kind == Instruction::Forward ||
            instruction.kind == Instruction::Backward)
          instructionIndex[r][{instruction.chunk, instruction.microbatch,
                               instruction.kind == Instruction::Forward
                                   ? Phase::Forward
                                   : Phase::Backward}] = i;
    llvm::DenseMap<Operation *, int64_t> slot;
    for (Operation *op : ops) {
      auto it = placement.find(op);
      if (it == placement.end())
        continue;
      const Placement &where = it->second;
      int64_t key = int64_t(plan->ranks[where.rank].size());
      if (where.phase != Phase::Update) {
        auto found = instructionIndex[where.rank].find(
            {where.chunk, where.microbatch, where.phase});
        if (found == instructionIndex[where.rank].end())
          return op->emitError()
                 << "weft-pipeline-cut: no instruction runs chunk "
                 << where.chunk << " of micro-batch " << where.microbatch
                 << " on rank " << where.rank;
        key = found->second;
      }
      for (Value v : op->getOperands())
        if (Operation *producer = v.getDefiningOp();
            producer && placement.count(producer) &&
            placement[producer].rank == where.rank)
          key = std::max(key, slot[producer]);
      slot[op] = key;
    }
    std::vector<SmallVector<Operation *>> order(ranks);
    for (Operation *op : ops)
      if (placement.count(op))
        order[placement[op].rank].push_back(op);
    for (auto &list : order)
      llvm::stable_sort(
          list, [&](Operation *a, Operation *b) { return slot[a] < slot[b]; });

    // What each rank returns: a parameter where it is read, optimizer state
    // where it is updated, the loss and the norm everywhere.
    auto outputs =
        func->getAttrOfType<ArrayAttr>(WeftDialect::kOutputsAttrName);
    if (!outputs || outputs.size() != ret.getNumOperands())
      return func.emitError("weft-pipeline-cut: the step needs weft.outputs");
    std::vector<llvm::DenseSet<Operation *>> needsSource(ranks);
    std::vector<llvm::DenseSet<unsigned>> usesArgument(ranks);
    auto markSources = [&](int64_t r, Value v) {
      SmallVector<Value> work{v};
      while (!work.empty()) {
        Value value = work.pop_back_val();
        if (auto arg = llvm::dyn_cast<BlockArgument>(value)) {
          usesArgument[r].insert(arg.getArgNumber());
          continue;
        }
        Operation *producer = value.getDefiningOp();
        if (!sourceOnly.count(producer) ||
            !needsSource[r].insert(producer).second)
          continue;
        llvm::append_range(work, producer->getOperands());
      }
    };
    for (int64_t r = 0; r < ranks; ++r)
      for (Operation *op : order[r])
        for (Value v : op->getOperands())
          markSources(r, v);
    std::vector<SmallVector<unsigned>> returned(ranks);
    for (auto [i, name] :
         llvm::enumerate(outputs.getAsValueRange<StringAttr>())) {
      Value value = ret.getOperand(i);
      Operation *producer = value.getDefiningOp();
      for (int64_t r = 0; r < ranks; ++r) {
        bool wanted = true;
        if (name.starts_with("param:")) {
          wanted = llvm::any_of(usesArgument[r], [&](unsigned arg) {
            auto param = func.getArgAttrOfType<StringAttr>(
                arg, WeftDialect::kParamAttrName);
            return param && param.getValue() == name.drop_front(6);
          });
        } else if (name.starts_with("state:")) {
          wanted = producer && placement.count(producer)
                       ? placement[producer].rank == r
                       : r == 0;
        }
        if (!wanted)
          continue;
        returned[r].push_back(i);
        markSources(r, value);
      }
    }

    // The messages, tagged in op order (the same on every rank).
    std::vector<Message> messages;
    llvm::DenseMap<std::pair<Value, int64_t>, int64_t> messageTo;
    auto need = [&](Value value, int64_t r) {
      Operation *producer = value.getDefiningOp();
      if (!producer || !placement.count(producer) ||
          placement[producer].rank == r || messageTo.count({value, r}))
        return;
      messageTo[{value, r}] = messages.size();
      messages.push_back(
          {value, placement[producer].rank, r, int64_t(messages.size())});
    };
    for (Operation *op : ops) {
      if (!placement.count(op))
        continue;
      for (Value v : op->getOperands())
        need(v, placement[op].rank);
    }
    for (int64_t r = 0; r < ranks; ++r)
      for (unsigned i : returned[r])
        need(ret.getOperand(i), r);

    // Each rank's events: a send right after its value is computed, a
    // receive right before its first use (or the return).
    std::vector<std::vector<Event>> events(ranks);
    std::vector<llvm::DenseMap<Operation *, SmallVector<int64_t>>> sendsAfter(
        ranks),
        recvsBefore(ranks);
    std::vector<SmallVector<int64_t>> recvsAtEnd(ranks);
    llvm::DenseMap<Value, SmallVector<int64_t>> messagesOf;
    for (const Message &message : messages)
      messagesOf[message.value].push_back(message.tag);
    for (int64_t r = 0; r < ranks; ++r) {
      llvm::DenseSet<int64_t> received;
      for (Operation *op : order[r]) {
        for (Value v : op->getOperands()) {
          auto it = messageTo.find({v, r});
          if (it != messageTo.end() && received.insert(it->second).second) {
            recvsBefore[r][op].push_back(it->second);
            events[r].push_back({false, it->second});
          }
        }
        for (Value result : op->getResults())
          for (int64_t tag : messagesOf.lookup(result)) {
            sendsAfter[r][op].push_back(tag);
            events[r].push_back({true, tag});
          }
      }
      for (unsigned i : returned[r]) {
        auto it = messageTo.find({ret.getOperand(i), r});
        if (it != messageTo.end() && received.insert(it->second).second) {
          recvsAtEnd[r].push_back(it->second);
          events[r].push_back({false, it->second});
        }
      }
    }
    if (failed(checkNoDeadlock(func, events, messages, placement)))
      return failure();

    return rewrite(module, func, *mesh, *ppAxis, order[rank], needsSource[rank],
                   usesArgument[rank], returned[rank], messages,
                   sendsAfter[rank], recvsBefore[rank], recvsAtEnd[rank],
                   placement, plan->ranks[rank], slot);
  }

  /// Runs every rank's events with buffered sends and blocking receives;
  /// fails, naming the value, when a receive would wait forever.
  LogicalResult
  checkNoDeadlock(func::FuncOp func,
                  const std::vector<std::vector<Event>> &events,
                  const std::vector<Message> &messages,
                  const llvm::DenseMap<Operation *, Placement> &placement) {
    std::vector<size_t> next(events.size(), 0);
    std::vector<bool> sent(messages.size(), false);
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t r = 0; r < events.size(); ++r)
        while (next[r] < events[r].size()) {
          const Event &event = events[r][next[r]];
          if (!event.send && !sent[event.message])
            break;
          if (event.send)
            sent[event.message] = true;
          ++next[r];
          progress = true;
        }
    }
    for (size_t r = 0; r < events.size(); ++r)
      if (next[r] < events[r].size()) {
        const Message &waiting = messages[events[r][next[r]].message];
        Placement where = placement.lookup(waiting.value.getDefiningOp());
        static const char *phases[] = {"forward", "backward", "update"};
        return func.emitError()
               << "weft-pipeline-cut: rank " << r << " would wait forever for "
               << "a value from rank " << waiting.from << " (chunk "
               << where.chunk << ", micro-batch " << where.microbatch << ", "
               << phases[int(where.phase)] << ", at " << waiting.value.getLoc()
               << ")";
      }
    return success();
  }

  LogicalResult
  rewrite(ModuleOp module, func::FuncOp func, const Mesh &mesh, MeshAxis ppAxis,
          ArrayRef<Operation *> mine,
          const llvm::DenseSet<Operation *> &sources,
          const llvm::DenseSet<unsigned> &arguments,
          ArrayRef<unsigned> returned, const std::vector<Message> &messages,
          const llvm::DenseMap<Operation *, SmallVector<int64_t>> &sendsAfter,
          const llvm::DenseMap<Operation *, SmallVector<int64_t>> &recvsBefore,
          ArrayRef<int64_t> recvsAtEnd,
          const llvm::DenseMap<Operation *, Placement> &placement,
          ArrayRef<Instruction> instructions,
          const llvm::DenseMap<Operation *, int64_t> &slot) {
    MLIRContext *ctx = func.getContext();
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    llvm::DenseSet<Operation *> original;
    for (Operation &op : body.without_terminator())
      original.insert(&op);
    OpBuilder b(ctx);
    auto i64 = b.getI64Type();
    OpBuilder top = OpBuilder::atBlockBegin(module.getBody());
    if (!module.lookupSymbol(kMarkFunction))
      func::FuncOp::create(top, module.getLoc(), kMarkFunction,
                           FunctionType::get(ctx, {i64, i64, i64}, {}))
          .setPrivate();
    if (!module.lookupSymbol(kTracingFunction))
      func::FuncOp::create(top, module.getLoc(), kTracingFunction,
                           FunctionType::get(ctx, {}, {b.getI1Type()}))
          .setPrivate();
    auto grid = FlatSymbolRefAttr::get(ctx, mesh.symbol);
    auto axes = b.getDenseI16ArrayAttr({int16_t(ppAxis)});
    // Messages are tensors of rank >= 1: scalars travel as [1].
    auto asVector = [&](Value v) -> Value {
      RankedTensorType type = tensorTypeOf(v);
      if (type.getRank() > 0)
        return v;
      return ReshapeOp::create(b, v.getLoc(), type.clone({1}), v);
    };
    auto fromVector = [&](Value v, RankedTensorType type) -> Value {
      if (type.getRank() > 0)
        return v;
      return ReshapeOp::create(b, v.getLoc(), type, v);
    };
    auto tagged = [&](Operation *op, int64_t tag) {
      op->setAttr(WeftDialect::kTagAttrName, b.getI64IntegerAttr(tag));
    };
    // Receives replace the value in this rank's uses.
    auto receive = [&](int64_t tag) {
      const Message &message = messages[tag];
      RankedTensorType type = tensorTypeOf(message.value);
      RankedTensorType wire = type.getRank() ? type : type.clone({1});
      Value placeholder = tensor::EmptyOp::create(
          b, message.value.getLoc(), wire.getShape(), wire.getElementType());
      auto recv = shard::RecvOp::create(
          b, message.value.getLoc(), wire, grid, axes, placeholder,
          b.getDenseI64ArrayAttr({message.from}), ValueRange{});
      tagged(recv, tag);
      Value received = fromVector(recv.getResult(), type);
      Value value = message.value;
      value.replaceUsesWithIf(received, [&](OpOperand &use) {
        Operation *user = use.getOwner();
        if (user == ret)
          return true;
        auto it = placement.find(user);
        return it != placement.end() && it->second.rank == rank;
      });
    };

    // Build the new order at the end of the block, then drop the rest.
    b.setInsertionPoint(ret);
    // The mark is called only while tracing. The branch also ends the
    // straight-line code between instructions, which keeps LLVM's loop
    // analyses (they walk up chains of single-predecessor blocks) from
    // growing with the square of the program's length.
    auto mark = [&](int64_t kind, int64_t chunk, int64_t microbatch) {
      Location loc = func.getLoc();
      Value tracing = func::CallOp::create(b, loc, kTracingFunction,
                                           TypeRange{b.getI1Type()},
                                           ValueRange{})
                          .getResult(0);
      scf::IfOp::create(b, loc, tracing, [&](OpBuilder &then, Location loc) {
        auto constant = [&](int64_t value) -> Value {
          return arith::ConstantIntOp::create(then, loc, value, 64);
        };
        func::CallOp::create(
            then, loc, kMarkFunction, TypeRange{},
            ValueRange{constant(kind), constant(chunk), constant(microbatch)});
        scf::YieldOp::create(then, loc);
      });
    };
    llvm::DenseSet<Operation *> kept;
    SmallVector<Operation *> prologue;
    for (Operation &op : body.without_terminator())
      if (sources.count(&op))
        prologue.push_back(&op);
    for (Operation *op : prologue) {
      op->moveBefore(ret);
      kept.insert(op);
    }
    int64_t currentSlot = -1;
    for (Operation *op : mine) {
      int64_t opSlot = slot.lookup(op);
      if (opSlot != currentSlot) {
        currentSlot = opSlot;
        if (opSlot == int64_t(instructions.size()))
          mark(2, 0, 0);
        else
          mark(instructions[opSlot].kind == Instruction::Forward ? 0 : 1,
               instructions[opSlot].chunk, instructions[opSlot].microbatch);
      }
      if (auto it = recvsBefore.find(op); it != recvsBefore.end())
        for (int64_t tag : it->second)
          receive(tag);
      op->moveBefore(ret);
      kept.insert(op);
      if (auto it = sendsAfter.find(op); it != sendsAfter.end())
        for (int64_t tag : it->second) {
          const Message &message = messages[tag];
          Value wire = asVector(message.value);
          auto send = shard::SendOp::create(
              b, message.value.getLoc(), wire.getType(), grid, axes, wire,
              b.getDenseI64ArrayAttr({message.to}), ValueRange{});
          tagged(send, tag);
        }
    }
    for (int64_t tag : recvsAtEnd)
      receive(tag);
    // What other ranks compute is now at the front of the block.
    SmallVector<Operation *> dropped;
    for (Operation &op : body.without_terminator())
      if (original.count(&op) && !kept.count(&op))
        dropped.push_back(&op);
    for (Operation *op : dropped)
      op->dropAllUses();
    for (Operation *op : llvm::reverse(dropped))
      op->erase();

    // This rank's results and arguments.
    auto outputs =
        func->getAttrOfType<ArrayAttr>(WeftDialect::kOutputsAttrName);
    SmallVector<Value> results;
    SmallVector<Attribute> names;
    for (unsigned i : returned) {
      results.push_back(ret.getOperand(i));
      names.push_back(outputs[i]);
    }
    llvm::BitVector unusedResults(ret.getNumOperands(), true);
    for (unsigned i : returned)
      unusedResults.reset(i);
    ret->setOperands(results);
    if (failed(func.eraseResults(unusedResults)))
      return failure();
    func->setAttr(WeftDialect::kOutputsAttrName, b.getArrayAttr(names));
    // Training inputs stay on every rank (the runner feeds them all).
    llvm::BitVector unusedArguments(func.getNumArguments());
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (!arguments.count(i) &&
          !func.getArgAttr(i, WeftDialect::kInputAttrName) &&
          func.getArgument(i).use_empty())
        unusedArguments.set(i);
    if (failed(func.eraseArguments(unusedArguments)))
      return failure();
    return success();
  }
};

} // namespace
