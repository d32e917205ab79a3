//===- PipelineCut.cpp - One pipeline rank's program from a training step -===//
//
// The outlined training step (weft-outline-microbatches) is a loop over
// the micro-batches, each iteration calling every stage's forward and
// backward, then the update. For one rank of the `pp` axis this builds
// its program: a loop over the rank's instruction list (PipelineSchedule.h),
// kept as a table, whose iteration runs the call of that instruction's
// chunk and phase. A value another rank reads travels as `shard.send` /
// `shard.recv`; a value a later instruction of the rank reads waits in a
// stash slot, one per micro-batch in flight. The update follows the loop
// with its own messages. The program's size does not grow with the
// micro-batch count.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"
#include "weft/Dialect/Weft/Transforms/PipelineSchedule.h"
#include "weft/Dialect/Weft/Transforms/Sharding.h"
#include "weft/Dialect/Weft/Transforms/StepPhases.h"
#include "weft/runtime/Contract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"

#include <functional>
#include <map>
#include <set>

namespace weft {
#define GEN_PASS_DEF_WEFTPIPELINECUT
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;
using pipeline::Instruction;

namespace {

/// The runtime functions that timestamp the start of an instruction for
/// --trace, and say whether the run traces.
using runtime::kPipelineMarkFunction;
using runtime::kTracingFunction;

/// The parts of a micro-batch a schedule runs: a stage's forward, its
/// backward (under ZB-H1 the input-gradient part) and, split off, its
/// weight-gradient part.
enum class Part { Forward = 0, Backward = 1, Weights = 2 };

/// The part an instruction runs, if it runs one.
std::optional<Part> partOf(Instruction::Kind kind) {
  switch (kind) {
  case Instruction::Forward:
    return Part::Forward;
  case Instruction::Backward:
    return Part::Backward;
  case Instruction::BackwardWeight:
    return Part::Weights;
  default:
    return std::nullopt;
  }
}

/// A call of the micro-batch loop: one stage's forward or backward part.
struct StageCall {
  func::CallOp op;
  int64_t rank = 0;
  int64_t chunk = 0;
  Part part = Part::Forward;
};

/// A value computed on one rank and read on another: once per micro-batch
/// (a loop value, received where `receiver` runs) or once (the update's).
struct Message {
  Value value;
  int64_t from, to;
  int64_t tag;
  std::optional<unsigned> receiver;
};

/// A loop value a rank reads in a later instruction than the one that
/// computes or receives it (`origin`), kept in `slots` per-micro-batch
/// slots (micro-batch k in slot k mod slots).
struct Stash {
  Value value;
  unsigned origin;
  int64_t slots = 1;
};

/// A message sent or received in a rank's order, with its micro-batch
/// (-1 in the update).
struct Event {
  bool send;
  int64_t tag, microbatch;
};

struct WeftPipelineCutPass
    : public weft::impl::WeftPipelineCutBase<WeftPipelineCutPass> {
  using WeftPipelineCutBase::WeftPipelineCutBase;

  // The step.
  func::FuncOp func;
  scf::ForOp loop;
  int64_t ranks = 1;
  std::optional<pipeline::Schedule> plan;
  SmallVector<StageCall> calls;
  llvm::DenseMap<Operation *, unsigned> callIndex;
  /// The loop body's other ops: input slices and views of them.
  llvm::DenseSet<Operation *> roundSources;
  /// For each running sum (loop-carried value), the call that adds to it
  /// and the call's result that is written over it.
  SmallVector<unsigned> sumOwner;
  SmallVector<Value> sumValue;
  /// Ops after the loop that run on one rank, and that rank.
  SmallVector<Operation *> updateOps;
  llvm::DenseMap<Operation *, int64_t> updateRank;
  /// Ops that run on every rank that needs them: constants, the
  /// parameters' views and ZeRO-3 gathers, before or after the loop.
  llvm::DenseSet<Operation *> sources;
  /// Per rank: the position of (chunk, part, micro-batch) in its list.
  std::vector<std::map<std::tuple<int64_t, Part, int64_t>, int64_t>> position;
  std::vector<Message> messages;
  llvm::DenseMap<std::pair<Value, int64_t>, int64_t> messageTo;
  /// Per rank: its stashes, and where a value is found (by value).
  std::vector<SmallVector<Stash>> stashes;
  std::vector<llvm::DenseMap<Value, unsigned>> stashOf;
  /// Per rank: the step's results it returns.
  SmallVector<SmallVector<unsigned>> returned;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // A pass instance may cut several modules.
    loop = nullptr;
    calls.clear();
    callIndex.clear();
    roundSources.clear();
    sumOwner.clear();
    sumValue.clear();
    updateOps.clear();
    updateRank.clear();
    sources.clear();
    messages.clear();
    messageTo.clear();
    func = module.lookupSymbol<func::FuncOp>(function);
    if (!func || func.isExternal()) {
      module.emitError() << "weft-pipeline-cut: no function '"
                         << std::string(function) << "'";
      return signalPassFailure();
    }
    if (failed(cut(module)))
      signalPassFailure();
  }

  int64_t positionOf(int64_t r, const StageCall &call, int64_t k) {
    return position[r].at({call.chunk, call.part, k});
  }

  LogicalResult cut(ModuleOp module) {
    std::optional<Mesh> mesh = Mesh::find(module);
    std::optional<MeshAxis> ppAxis =
        mesh ? mesh->axisNamed("pp") : std::nullopt;
    if (!ppAxis)
      return func.emitError("weft-pipeline-cut: the module needs a mesh with "
                            "a 'pp' axis");
    ranks = mesh->sizes[*ppAxis];
    if (rank < 0 || rank >= ranks)
      return func.emitError() << "weft-pipeline-cut: rank " << int64_t(rank)
                              << " is not on the pp axis of size " << ranks;
    std::optional<pipeline::ScheduleKind> kind =
        pipeline::parseScheduleKind(schedule);
    if (!kind)
      return func.emitError() << "weft-pipeline-cut: unknown schedule '"
                              << std::string(schedule) << "'";
    std::string error;
    plan = pipeline::buildSchedule(*kind, ranks, microbatches, virtualStages,
                                   error);
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
    if (failed(readStep()) || failed(orderInstructions()) ||
        failed(findLoopValues()))
      return failure();
    std::vector<llvm::DenseSet<Operation *>> needed;
    std::vector<llvm::DenseSet<unsigned>> arguments;
    if (failed(findUpdateMessages(needed, arguments)) ||
        failed(checkNoDeadlock()))
      return failure();
    return rewrite(module, *mesh, *ppAxis, needed[rank], arguments[rank],
                   returned[rank]);
  }

  /// The loop, its calls, its running sums and the update.
  LogicalResult readStep() {
    Block &body = func.getBody().front();
    for (Operation &op : body) {
      if (auto found = dyn_cast<scf::ForOp>(op)) {
        if (loop)
          return found.emitError("weft-pipeline-cut: the step has more than "
                                 "one loop");
        loop = found;
      }
    }
    if (!loop)
      return func.emitError("weft-pipeline-cut: the step has no micro-batch "
                            "loop (run weft-outline-microbatches first)");
    std::optional<int64_t> lower = getConstantIntValue(loop.getLowerBound()),
                           upper = getConstantIntValue(loop.getUpperBound()),
                           stride = getConstantIntValue(loop.getStep());
    if (!lower || !upper || *lower != 0 || stride != 1 ||
        *upper != microbatches)
      return loop.emitError() << "weft-pipeline-cut: the step's loop does not "
                                 "run the schedule's "
                              << int64_t(microbatches) << " micro-batches";
    for (Operation &op : loop.getBody()->without_terminator()) {
      auto call = dyn_cast<func::CallOp>(op);
      if (isa<bufferization::MaterializeInDestinationOp>(op))
        continue;
      if (!call) {
        for (Value v : op.getOperands())
          if (callIndex.count(v.getDefiningOp()))
            return op.emitError("weft-pipeline-cut: reads a stage's result "
                                "outside a stage call");
        roundSources.insert(&op);
        continue;
      }
      auto stage =
          call->getAttrOfType<IntegerAttr>(WeftDialect::kStageAttrName);
      auto phase = call->getAttrOfType<StringAttr>(WeftDialect::kPhaseAttrName);
      if (!stage || !phase || phase.getValue() == "update")
        return call.emitError("weft-pipeline-cut: a call of the micro-batch "
                              "loop needs its weft.stage and a forward or "
                              "backward weft.phase");
      StepPhase stepPhase = parseStepPhase(phase.getValue());
      Part part = stepPhase == StepPhase::Forward    ? Part::Forward
                  : stepPhase == StepPhase::Backward ? Part::Backward
                                                     : Part::Weights;
      if (part == Part::Weights && !splitsBackward(plan->kind))
        return call.emitError("weft-pipeline-cut: the ")
               << pipeline::scheduleName(plan->kind)
               << " schedule runs whole backward passes, and stage "
               << stage.getInt() << "'s is split";
      StageCall stageCall{call, stage.getInt() % ranks, stage.getInt() / ranks,
                          part};
      for (const StageCall &other : calls)
        if (other.rank == stageCall.rank && other.chunk == stageCall.chunk &&
            other.part == stageCall.part)
          return call.emitError("weft-pipeline-cut: two calls of stage ")
                 << stage.getInt() << "'s " << phase.getValue();
      callIndex[call] = calls.size();
      calls.push_back(stageCall);
    }
    // Each sum is a call's result written over the carried value.
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    for (auto [i, next] : llvm::enumerate(yield.getOperands())) {
      auto written =
          next.getDefiningOp<bufferization::MaterializeInDestinationOp>();
      Value sum = written ? written.getSource() : Value();
      auto owner = callIndex.find(sum ? sum.getDefiningOp() : nullptr);
      if (!written || written.getDest() != loop.getRegionIterArg(i) ||
          owner == callIndex.end())
        return loop.emitError() << "weft-pipeline-cut: running sum #" << i
                                << " is not a stage call's result";
      sumOwner.push_back(owner->second);
      sumValue.push_back(sum);
      for (Operation *user : loop.getRegionIterArg(i).getUsers())
        if (user != calls[owner->second].op && user != written)
          return user->emitError() << "weft-pipeline-cut: reads running sum #"
                                   << i << ", which another call adds to";
    }

    // Before the loop only sources run (the outlining moved the rest into
    // calls); after it, what is not a source runs on its stage's rank.
    for (Operation &op : body) {
      if (&op == loop.getOperation())
        break;
      sources.insert(&op);
    }
    for (Operation *op = loop->getNextNode(); op != body.getTerminator();
         op = op->getNextNode()) {
      if (isStepSource(op, SmallVector<Value>(op->getOperands()),
                       [&](Operation *p) { return sources.count(p) > 0; })) {
        sources.insert(op);
        continue;
      }
      auto stage = op->getAttrOfType<IntegerAttr>(WeftDialect::kStageAttrName);
      if (!stage)
        return op->emitError("weft-pipeline-cut: op has no weft.stage");
      updateRank[op] = stage.getInt() % ranks;
      updateOps.push_back(op);
    }
    return success();
  }

  /// Where each call runs in its rank's list, for every micro-batch; each
  /// chunk's forwards and backwards run in micro-batch order, which is what
  /// lets one tag and k mod slots serve every micro-batch.
  LogicalResult orderInstructions() {
    position.clear();
    position.resize(ranks);
    for (int64_t r = 0; r < ranks; ++r) {
      std::map<std::pair<int64_t, Part>, int64_t> lastMicrobatch;
      for (auto [i, instruction] : llvm::enumerate(plan->ranks[r])) {
        std::optional<Part> part = partOf(instruction.kind);
        if (!part)
          continue;
        auto [last, fresh] = lastMicrobatch.try_emplace(
            {instruction.chunk, *part}, instruction.microbatch);
        if (!fresh && last->second >= instruction.microbatch)
          return func.emitError()
                 << "weft-pipeline-cut: rank " << r << " runs chunk "
                 << instruction.chunk << "'s micro-batches out of order";
        last->second = instruction.microbatch;
        position[r][{instruction.chunk, *part, instruction.microbatch}] = i;
      }
    }
    for (StageCall &call : calls)
      for (int64_t k = 0; k < microbatches; ++k)
        if (!position[call.rank].count({call.chunk, call.part, k}))
          return call.op.emitError()
                 << "weft-pipeline-cut: no instruction runs chunk "
                 << call.chunk << " of micro-batch " << k << " on rank "
                 << call.rank;
    return success();
  }

  /// The loop's messages and stashes: a call's result read by a call of
  /// another rank is sent after it and received by the reader that runs
  /// first there; one read again later waits in a stash.
  LogicalResult findLoopValues() {
    stashes.clear();
    stashes.resize(ranks);
    stashOf.clear();
    stashOf.resize(ranks);
    llvm::MapVector<std::pair<Value, int64_t>, SmallVector<unsigned>> readers;
    for (auto [x, call] : llvm::enumerate(calls))
      for (Value v : call.op->getOperands())
        if (callIndex.count(v.getDefiningOp())) {
          SmallVector<unsigned> &list = readers[{v, call.rank}];
          if (!llvm::is_contained(list, x))
            list.push_back(x);
        }
    for (auto &[key, list] : readers) {
      auto [value, r] = key;
      unsigned producer = callIndex.lookup(value.getDefiningOp());
      bool local = calls[producer].rank == r;
      unsigned origin = producer;
      if (!local)
        origin = *llvm::min_element(list, [&](unsigned a, unsigned b) {
          return positionOf(r, calls[a], 0) < positionOf(r, calls[b], 0);
        });
      int64_t slots = 0;
      bool later = false;
      // Micro-batches whose value is held, by the last position reading it.
      SmallVector<int64_t> heldUntil;
      for (int64_t k = 0; k < microbatches; ++k) {
        int64_t start = positionOf(r, calls[origin], k), end = start;
        for (unsigned reader : list) {
          if (reader == origin)
            continue;
          int64_t at = positionOf(r, calls[reader], k);
          if (at <= start)
            return calls[reader].op.emitError()
                   << "weft-pipeline-cut: rank " << r << " reads a value of "
                   << "micro-batch " << k << " before it "
                   << (local ? "computes" : "receives") << " it (at "
                   << value.getLoc() << ")";
          end = std::max(end, at);
          later = true;
        }
        llvm::erase_if(heldUntil, [&](int64_t until) { return until < start; });
        heldUntil.push_back(end);
        slots = std::max<int64_t>(slots, heldUntil.size());
      }
      if (!local) {
        messageTo[{value, r}] = messages.size();
        messages.push_back(
            {value, calls[producer].rank, r, int64_t(messages.size()), origin});
      }
      if (later) {
        stashOf[r][value] = stashes[r].size();
        stashes[r].push_back({value, origin, slots});
      }
    }
    return success();
  }

  /// The rank a value of the update is computed on; none for a source or
  /// an argument.
  std::optional<int64_t> rankOf(Value v) {
    if (auto result = llvm::dyn_cast<OpResult>(v)) {
      if (result.getOwner() == loop.getOperation())
        return calls[sumOwner[result.getResultNumber()]].rank;
      if (auto it = updateRank.find(result.getOwner()); it != updateRank.end())
        return it->second;
    }
    return std::nullopt;
  }

  /// What each rank needs of the sources and arguments, what it returns,
  /// and the update's messages (each sent once).
  LogicalResult
  findUpdateMessages(std::vector<llvm::DenseSet<Operation *>> &needed,
                     std::vector<llvm::DenseSet<unsigned>> &arguments) {
    needed.clear();
    needed.resize(ranks);
    arguments.clear();
    arguments.resize(ranks);
    returned.clear();
    returned.resize(ranks);
    auto markSources = [&](int64_t r, Value v) {
      SmallVector<Value> work{v};
      while (!work.empty()) {
        Value value = work.pop_back_val();
        if (auto arg = llvm::dyn_cast<BlockArgument>(value)) {
          if (arg.getOwner() == &func.getBody().front())
            arguments[r].insert(arg.getArgNumber());
          continue;
        }
        Operation *producer = value.getDefiningOp();
        if (roundSources.count(producer)) {
          llvm::append_range(work, producer->getOperands());
          continue;
        }
        if (!sources.count(producer) || !needed[r].insert(producer).second)
          continue;
        llvm::append_range(work, producer->getOperands());
      }
    };
    for (StageCall &call : calls)
      for (Value v : call.op->getOperands())
        markSources(call.rank, v);
    for (auto [i, owner] : llvm::enumerate(sumOwner))
      markSources(calls[owner].rank, loop.getInitArgs()[i]);
    for (Operation *op : updateOps)
      for (Value v : op->getOperands())
        markSources(updateRank[op], v);

    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    auto outputs =
        func->getAttrOfType<ArrayAttr>(WeftDialect::kOutputsAttrName);
    if (!outputs || outputs.size() != ret.getNumOperands())
      return func.emitError("weft-pipeline-cut: the step needs weft.outputs");
    // A parameter where it is read, optimizer state where it is updated,
    // the loss and the norm everywhere.
    for (auto [i, name] :
         llvm::enumerate(outputs.getAsValueRange<StringAttr>())) {
      Value value = ret.getOperand(i);
      for (int64_t r = 0; r < ranks; ++r) {
        bool wanted = true;
        if (name.starts_with("param:")) {
          wanted = llvm::any_of(arguments[r], [&](unsigned arg) {
            auto param = func.getArgAttrOfType<StringAttr>(
                arg, WeftDialect::kParamAttrName);
            return param && param.getValue() == name.drop_front(6);
          });
        } else if (name.starts_with("state:")) {
          wanted = rankOf(value).value_or(0) == r;
        }
        if (!wanted)
          continue;
        returned[r].push_back(i);
        markSources(r, value);
      }
    }

    auto need = [&](Value value, int64_t r) {
      std::optional<int64_t> from = rankOf(value);
      if (!from || *from == r || messageTo.count({value, r}))
        return;
      messageTo[{value, r}] = messages.size();
      messages.push_back(
          {value, *from, r, int64_t(messages.size()), std::nullopt});
    };
    for (Operation *op : updateOps)
      for (Value v : op->getOperands())
        need(v, updateRank[op]);
    for (int64_t r = 0; r < ranks; ++r)
      for (unsigned i : returned[r])
        need(ret.getOperand(i), r);
    return success();
  }

  /// The update's messages of rank r in its order: the sums' sends after
  /// the loop, then a receive before the first use and a send after each
  /// op, then the receives of what it returns.
  struct UpdateEvents {
    SmallVector<int64_t> afterLoop;
    llvm::DenseMap<Operation *, SmallVector<int64_t>> before, after;
    SmallVector<int64_t> atEnd;
  };
  UpdateEvents updateEvents(int64_t r, ArrayRef<unsigned> results) {
    UpdateEvents events;
    llvm::DenseMap<Value, SmallVector<int64_t>> sentFrom;
    for (const Message &message : messages)
      if (!message.receiver)
        sentFrom[message.value].push_back(message.tag);
    for (OpResult sum : loop->getResults())
      if (rankOf(sum) == r)
        llvm::append_range(events.afterLoop, sentFrom.lookup(sum));
    llvm::DenseSet<int64_t> received;
    auto receive = [&](Value v, SmallVector<int64_t> &into) {
      auto it = messageTo.find({v, r});
      if (it != messageTo.end() && !messages[it->second].receiver &&
          received.insert(it->second).second)
        into.push_back(it->second);
    };
    for (Operation *op : updateOps) {
      if (updateRank[op] != r)
        continue;
      for (Value v : op->getOperands())
        receive(v, events.before[op]);
      for (Value result : op->getResults())
        llvm::append_range(events.after[op], sentFrom.lookup(result));
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    for (unsigned i : results)
      receive(ret.getOperand(i), events.atEnd);
    return events;
  }

  /// The calls of rank r that run in an instruction of its list, with the
  /// micro-batch.
  SmallVector<std::pair<unsigned, int64_t>> callsInOrder(int64_t r) {
    SmallVector<std::pair<unsigned, int64_t>> order;
    for (const Instruction &instruction : plan->ranks[r]) {
      std::optional<Part> part = partOf(instruction.kind);
      if (!part)
        continue;
      for (auto [x, call] : llvm::enumerate(calls))
        if (call.rank == r && call.chunk == instruction.chunk &&
            call.part == *part)
          order.push_back({unsigned(x), instruction.microbatch});
    }
    return order;
  }

  /// A loop call's receives (before it) and sends (after it).
  void callMessages(unsigned x, SmallVector<int64_t> &receives,
                    SmallVector<int64_t> &sends) {
    for (const Message &message : messages) {
      if (!message.receiver)
        continue;
      if (*message.receiver == x)
        receives.push_back(message.tag);
      if (message.value.getDefiningOp() == calls[x].op)
        sends.push_back(message.tag);
    }
  }

  /// Runs every rank's messages, sends buffered and receives blocking, and
  /// fails, naming the value, when a receive would wait forever.
  LogicalResult checkNoDeadlock() {
    std::vector<std::vector<Event>> events(ranks);
    for (int64_t r = 0; r < ranks; ++r) {
      for (auto [x, k] : callsInOrder(r)) {
        SmallVector<int64_t> receives, sends;
        callMessages(x, receives, sends);
        for (int64_t tag : receives)
          events[r].push_back({false, tag, k});
        for (int64_t tag : sends)
          events[r].push_back({true, tag, k});
      }
      UpdateEvents update = updateEvents(r, returned[r]);
      for (int64_t tag : update.afterLoop)
        events[r].push_back({true, tag, -1});
      for (Operation *op : updateOps) {
        for (int64_t tag : update.before.lookup(op))
          events[r].push_back({false, tag, -1});
        for (int64_t tag : update.after.lookup(op))
          events[r].push_back({true, tag, -1});
      }
      for (int64_t tag : update.atEnd)
        events[r].push_back({false, tag, -1});
    }
    std::vector<size_t> next(ranks, 0);
    std::set<std::pair<int64_t, int64_t>> sent;
    for (bool progress = true; progress;) {
      progress = false;
      for (int64_t r = 0; r < ranks; ++r)
        while (next[r] < events[r].size()) {
          const Event &event = events[r][next[r]];
          if (!event.send && !sent.count({event.tag, event.microbatch}))
            break;
          if (event.send)
            sent.insert({event.tag, event.microbatch});
          ++next[r];
          progress = true;
        }
    }
    for (int64_t r = 0; r < ranks; ++r)
      if (next[r] < events[r].size()) {
        const Event &event = events[r][next[r]];
        const Message &waiting = messages[event.tag];
        InFlightDiagnostic diagnostic = func.emitError();
        diagnostic << "weft-pipeline-cut: rank " << r
                   << " would wait forever for a value from rank "
                   << waiting.from;
        if (event.microbatch >= 0)
          diagnostic << " (micro-batch " << event.microbatch << ")";
        else
          diagnostic << " (update)";
        diagnostic << " at " << waiting.value.getLoc();
        return diagnostic;
      }
    return success();
  }

  LogicalResult rewrite(ModuleOp module, const Mesh &mesh, MeshAxis ppAxis,
                        const llvm::DenseSet<Operation *> &needed,
                        const llvm::DenseSet<unsigned> &arguments,
                        ArrayRef<unsigned> myResults) {
    MLIRContext *ctx = func.getContext();
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Location loc = func.getLoc();
    llvm::DenseSet<Operation *> original;
    for (Operation &op : body.without_terminator())
      original.insert(&op);
    OpBuilder b(ctx);
    Type i64 = b.getI64Type();
    OpBuilder top = OpBuilder::atBlockBegin(module.getBody());
    if (!module.lookupSymbol(kPipelineMarkFunction))
      func::FuncOp::create(top, module.getLoc(), kPipelineMarkFunction,
                           FunctionType::get(ctx, {i64, i64, i64}, {}))
          .setPrivate();
    if (!module.lookupSymbol(kTracingFunction))
      func::FuncOp::create(top, module.getLoc(), kTracingFunction,
                           FunctionType::get(ctx, {}, {b.getI1Type()}))
          .setPrivate();
    auto grid = FlatSymbolRefAttr::get(ctx, mesh.symbol);
    auto axes = b.getDenseI16ArrayAttr({int16_t(ppAxis)});
    auto tagged = [&](Operation *op, int64_t tag) {
      op->setAttr(WeftDialect::kTagAttrName, b.getI64IntegerAttr(tag));
    };
    // Messages are tensors of rank >= 1: scalars travel as [1].
    auto send = [&](Value value, int64_t tag) {
      const Message &message = messages[tag];
      RankedTensorType type = tensorTypeOf(value);
      if (type.getRank() == 0)
        value = ReshapeOp::create(b, value.getLoc(), type.clone({1}), value);
      auto op = shard::SendOp::create(
          b, message.value.getLoc(), value.getType(), grid, axes, value,
          b.getDenseI64ArrayAttr({message.to}), ValueRange{});
      tagged(op, tag);
    };
    auto receive = [&](int64_t tag) -> Value {
      const Message &message = messages[tag];
      RankedTensorType type = tensorTypeOf(message.value);
      RankedTensorType wire = type.getRank() ? type : type.clone({1});
      Value placeholder = tensor::EmptyOp::create(
          b, message.value.getLoc(), wire.getShape(), wire.getElementType());
      auto recv = shard::RecvOp::create(
          b, message.value.getLoc(), wire, grid, axes, placeholder,
          b.getDenseI64ArrayAttr({message.from}), ValueRange{});
      tagged(recv, tag);
      Value received = recv.getResult();
      if (type.getRank() == 0)
        received = ReshapeOp::create(b, received.getLoc(), type, received);
      return received;
    };
    auto index = [&](int64_t value) -> Value {
      return arith::ConstantIndexOp::create(b, loc, value);
    };
    // The mark is called only while tracing.
    auto mark = [&](int64_t kind, int64_t chunk, Value microbatch) {
      Value tracing = func::CallOp::create(b, loc, kTracingFunction,
                                           TypeRange{b.getI1Type()},
                                           ValueRange{})
                          .getResult(0);
      scf::IfOp::create(b, loc, tracing, [&](OpBuilder &then, Location loc) {
        auto constant = [&](int64_t value) -> Value {
          return arith::ConstantIntOp::create(then, loc, value, 64);
        };
        Value k = microbatch
                      ? arith::IndexCastOp::create(then, loc, i64, microbatch)
                            .getResult()
                      : constant(0);
        func::CallOp::create(then, loc, kPipelineMarkFunction, TypeRange{},
                             ValueRange{constant(kind), constant(chunk), k});
        scf::YieldOp::create(then, loc);
      });
    };

    // The sources this rank needs run first, in their order.
    b.setInsertionPoint(ret);
    SmallVector<Operation *> prologue;
    for (Operation &op : body.without_terminator())
      if (needed.count(&op))
        prologue.push_back(&op);
    for (Operation *op : prologue)
      op->moveBefore(ret);
    llvm::DenseSet<Operation *> kept(prologue.begin(), prologue.end());

    // The instruction table: which call (a case of the switch) and which
    // micro-batch.
    SmallVector<unsigned> mine;
    llvm::DenseMap<unsigned, int64_t> caseOf;
    for (auto [x, call] : llvm::enumerate(calls))
      if (call.rank == rank) {
        caseOf[x] = mine.size();
        mine.push_back(x);
      }
    SmallVector<int64_t> caseTable, microbatchTable;
    SmallVector<int64_t> caseRuns(mine.size(), 0);
    for (auto [x, k] : callsInOrder(rank)) {
      caseTable.push_back(caseOf[x]);
      microbatchTable.push_back(k);
      ++caseRuns[caseOf[x]];
    }
    auto table = [&](ArrayRef<int64_t> values) -> Value {
      auto type = RankedTensorType::get({int64_t(values.size())}, i64);
      return arith::ConstantOp::create(b, loc,
                                       DenseElementsAttr::get(type, values));
    };
    Value cases = table(caseTable), microbatchOf = table(microbatchTable);

    // The loop carries this rank's sums and stash slots.
    SmallVector<Value> inits;
    SmallVector<unsigned> mySums;
    for (auto [i, owner] : llvm::enumerate(sumOwner))
      if (calls[owner].rank == rank) {
        mySums.push_back(i);
        inits.push_back(loop.getInitArgs()[i]);
      }
    for (const Stash &stash : stashes[rank]) {
      RankedTensorType type = tensorTypeOf(stash.value);
      SmallVector<int64_t> shape{stash.slots};
      llvm::append_range(shape, type.getShape());
      // An allocation of its own (stashes of one shape must not share
      // one, as CSE would make of equal tensor.empty ops).
      inits.push_back(bufferization::AllocTensorOp::create(
          b, loc, RankedTensorType::get(shape, type.getElementType()),
          ValueRange{}));
    }
    auto schedule = scf::ForOp::create(
        b, loc, index(0), index(caseTable.size()), index(1), inits);
    b.setInsertionPointToStart(schedule.getBody());
    Value position = schedule.getInductionVar();
    auto entry = [&](Value tableValue) -> Value {
      Value element =
          tensor::ExtractOp::create(b, loc, tableValue, ValueRange{position});
      return arith::IndexCastOp::create(b, loc, b.getIndexType(), element);
    };
    Value caseIndex = entry(cases), k = entry(microbatchOf);
    ValueRange carried = schedule.getRegionIterArgs();
    auto switchOp = scf::IndexSwitchOp::create(
        b, loc, schedule.getResultTypes(), caseIndex,
        llvm::to_vector(llvm::seq<int64_t>(0, mine.size())), mine.size());
    switchOp->setAttr(WeftDialect::kCaseRunsAttrName,
                      b.getDenseI64ArrayAttr(caseRuns));
    scf::YieldOp::create(b, loc, switchOp.getResults());
    {
      Block &defaultBlock = switchOp.getDefaultRegion().emplaceBlock();
      b.setInsertionPointToStart(&defaultBlock);
      scf::YieldOp::create(b, loc, carried);
    }
    for (auto [c, x] : llvm::enumerate(mine)) {
      Block &block = switchOp.getCaseRegions()[c].emplaceBlock();
      b.setInsertionPointToStart(&block);
      buildCase(b, x, k, carried, mySums, mark, send, receive);
    }

    // The update: the sums' sends, then this rank's ops in order.
    b.setInsertionPoint(ret);
    UpdateEvents update = updateEvents(rank, myResults);
    llvm::DenseMap<Value, Value> sumAfterLoop;
    for (auto [j, i] : llvm::enumerate(mySums)) {
      sumAfterLoop[loop.getResult(i)] = schedule.getResult(j);
      loop.getResult(i).replaceAllUsesWith(schedule.getResult(j));
    }
    for (int64_t tag : update.afterLoop)
      send(sumAfterLoop.lookup(messages[tag].value), tag);
    auto receiveInto = [&](ArrayRef<int64_t> tags) {
      for (int64_t tag : tags) {
        Value value = messages[tag].value;
        Value received = receive(tag);
        value.replaceUsesWithIf(received, [&](OpOperand &use) {
          Operation *user = use.getOwner();
          if (user == ret)
            return true;
          auto it = updateRank.find(user);
          return it != updateRank.end() && it->second == rank;
        });
      }
    };
    bool marked = false;
    for (Operation *op : updateOps) {
      if (updateRank[op] != rank)
        continue;
      if (!marked) {
        mark(2, 0, Value());
        marked = true;
      }
      receiveInto(update.before.lookup(op));
      op->moveBefore(ret);
      kept.insert(op);
      for (int64_t tag : update.after.lookup(op))
        send(messages[tag].value, tag);
    }
    receiveInto(update.atEnd);

    // What other ranks compute, and the step's loop, go.
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
    for (unsigned i : myResults) {
      results.push_back(ret.getOperand(i));
      names.push_back(outputs[i]);
    }
    llvm::BitVector unusedResults(ret.getNumOperands(), true);
    for (unsigned i : myResults)
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

  /// One case of the schedule switch: call x on micro-batch k, with its
  /// input slices, receives, stash reads, and afterwards its sends and
  /// stash writes; yields the carried sums and stash slots.
  template <typename Mark, typename Send, typename Receive>
  void buildCase(OpBuilder &b, unsigned x, Value k, ValueRange carried,
                 ArrayRef<unsigned> mySums, Mark &mark, Send &send,
                 Receive &receive) {
    StageCall call = calls[x];
    Location loc = call.op.getLoc();
    // A weight-gradient part is backward work to the trace.
    mark(call.part == Part::Forward ? 0 : 1, call.chunk, k);
    IRMapping mapping;
    mapping.map(loop.getInductionVar(), k);
    for (auto [j, i] : llvm::enumerate(mySums))
      mapping.map(loop.getRegionIterArg(i), carried[j]);
    SmallVector<Value> stash(carried.drop_front(mySums.size()));
    const auto &myStashes = stashes[rank];
    auto slotOf = [&](const Stash &s) -> Value {
      Value slots = arith::ConstantIndexOp::create(b, loc, s.slots);
      return arith::RemUIOp::create(b, loc, k, slots);
    };
    auto slice = [&](const Stash &s, Value slot,
                     SmallVector<OpFoldResult> &offsets,
                     SmallVector<OpFoldResult> &sizes,
                     SmallVector<OpFoldResult> &strides) {
      RankedTensorType type = tensorTypeOf(s.value);
      offsets.assign({slot});
      sizes.assign({b.getIndexAttr(1)});
      strides.assign(type.getRank() + 1, b.getIndexAttr(1));
      for (int64_t size : type.getShape()) {
        offsets.push_back(b.getIndexAttr(0));
        sizes.push_back(b.getIndexAttr(size));
      }
    };
    auto keep = [&](Value original, Value value) {
      auto it = stashOf[rank].find(original);
      if (it == stashOf[rank].end() || myStashes[it->second].origin != x)
        return;
      const Stash &s = myStashes[it->second];
      SmallVector<OpFoldResult> offsets, sizes, strides;
      slice(s, slotOf(s), offsets, sizes, strides);
      stash[it->second] = tensor::InsertSliceOp::create(
          b, loc, value, stash[it->second], offsets, sizes, strides);
    };
    // A round source is cloned with what it reads.
    std::function<void(Operation *)> cloneSource = [&](Operation *op) {
      for (Value v : op->getOperands())
        if (Operation *producer = v.getDefiningOp();
            producer && roundSources.count(producer) && !mapping.contains(v))
          cloneSource(producer);
      b.clone(*op, mapping);
    };
    for (Value v : call.op->getOperands()) {
      if (mapping.contains(v))
        continue;
      Operation *producer = v.getDefiningOp();
      if (producer && roundSources.count(producer)) {
        cloneSource(producer);
        continue;
      }
      if (!producer || !callIndex.count(producer))
        continue;
      auto message = messageTo.find({v, rank});
      if (message != messageTo.end() &&
          messages[message->second].receiver == x) {
        Value received = receive(message->second);
        mapping.map(v, received);
        keep(v, received);
        continue;
      }
      auto it = stashOf[rank].find(v);
      const Stash &s = myStashes[it->second];
      SmallVector<OpFoldResult> offsets, sizes, strides;
      slice(s, slotOf(s), offsets, sizes, strides);
      mapping.map(v, tensor::ExtractSliceOp::create(b, loc, tensorTypeOf(v),
                                                    stash[it->second], offsets,
                                                    sizes, strides));
    }
    Operation *copy = b.clone(*call.op, mapping);
    SmallVector<int64_t> receives, sends;
    callMessages(x, receives, sends);
    for (int64_t tag : sends)
      send(copy->getResult(
               llvm::cast<OpResult>(messages[tag].value).getResultNumber()),
           tag);
    for (auto [original, result] :
         llvm::zip(call.op->getResults(), copy->getResults()))
      keep(original, result);
    SmallVector<Value> yielded;
    // A sum is written over its carried value, so that the loop's buffers
    // stay the same across iterations and cases.
    for (auto [j, i] : llvm::enumerate(mySums))
      yielded.push_back(
          sumOwner[i] == x
              ? bufferization::MaterializeInDestinationOp::create(
                    b, loc, mapping.lookup(sumValue[i]), carried[j])
                    .getResult()
              : Value(carried[j]));
    llvm::append_range(yielded, stash);
    scf::YieldOp::create(b, loc, yielded);
  }
};

} // namespace
