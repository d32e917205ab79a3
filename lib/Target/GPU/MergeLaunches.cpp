//===- MergeLaunches.cpp - Independent kernels share one launch -----------===//
//
// A launch costs a few microseconds whatever it does; an optimizer step over
// a hundred parameters, or a gradient norm summed tensor by tensor, is a
// hundred small kernels that do not depend on one another. Between two ops
// of other effects, the kernels and the library calls (GEMMs, fused
// attention) are ordered by the bytes they read and write. Kernels of one
// block size of which neither depends on the other, directly or through
// the ops between them, run as one launch whose blocks are the parts'
// blocks one after another: a block finds its part by its id, so each
// block runs one part's code and the parts' barriers stay uniform over the
// block.
//
//===----------------------------------------------------------------------===//

#include "LaunchMemory.h"

#include "weft/Dialect/Weft/IR/TargetAttrNames.h"
#include "weft/Lowering/BufferAliases.h"
#include "weft/Target/GPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

#include <queue>

namespace weft {
#define GEN_PASS_DEF_WEFTGPUMERGELAUNCHES
#include "weft/Target/GPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// A kernel of host code or a library call, the ops a segment orders: what
/// it reads and writes of the buffers defined outside it, and whether it
/// can share a launch (a library call never does).
struct SegmentOp {
  Operation *op; // a gpu.launch or a library call
  llvm::SetVector<Value> reads, writes;
  llvm::DenseMap<Value, Value> rootOf; // of reads and writes (aliasRoot)
  llvm::SetVector<Value> arguments;    // the values a kernel captures
  int64_t blocks = 0, threads = 0;  // of a one-dimensional launch
  bool mergeable = false;

  gpu::LaunchOp launch() const { return cast<gpu::LaunchOp>(op); }
};

/// The bytes a captured value takes among a kernel's parameters (a memref
/// is passed as its descriptor), with the padding that may follow a
/// narrower scalar: every parameter counts a multiple of 8.
int64_t parameterBytes(Value value) {
  if (auto memref = dyn_cast<MemRefType>(value.getType()))
    return 8 * (3 + 2 * memref.getRank());
  return 8;
}

SegmentOp describe(gpu::LaunchOp launch) {
  SegmentOp kernel{launch};
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(launch.getBody(), captured);
  for (Value value : captured)
    if (!matchPattern(value, m_Constant()))
      kernel.arguments.insert(value);
  launch.getBody().walk([&](Operation *op) {
    for (Value operand : op->getOperands()) {
      if (!isa<MemRefType>(operand.getType()))
        continue;
      // The buffer outside the kernel that this use reaches through the
      // kernel's own views.
      Value buffer = weft::bufferOutside(operand, launch);
      if (!captured.contains(buffer))
        continue;
      if (isa<ViewLikeOpInterface>(op) &&
          cast<ViewLikeOpInterface>(op).getViewSource() == operand)
        continue;
      if (isa<memref::LoadOp>(op))
        kernel.reads.insert(buffer);
      else
        kernel.writes.insert(buffer);
    }
  });
  auto constant = [](Value v) { return getConstantIntValue(v); };
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  std::optional<int64_t> gx = constant(grid.x), gy = constant(grid.y),
                         gz = constant(grid.z), bx = constant(block.x),
                         by = constant(block.y), bz = constant(block.z);
  kernel.mergeable = gx && gy == 1 && gz == 1 && bx && by == 1 && bz == 1 &&
                     launch.getBody().hasOneBlock() &&
                     launch.getPrivateAttributions().empty() &&
                     !launch.getDynamicSharedMemorySize() &&
                     launch.getAsyncDependencies().empty() &&
                     !launch.getAsyncToken() && !launch.hasClusterSize();
  if (kernel.mergeable) {
    kernel.blocks = *gx;
    kernel.threads = *bx;
  }
  return kernel;
}

/// A GEMM or fused attention call, by the operands its contract
/// (weft/runtime/Contract.h) says it reads and writes.
SegmentOp describe(func::CallOp call) {
  SegmentOp kernel{call};
  for (auto [index, operand] : llvm::enumerate(call.getOperands())) {
    if (!isa<BaseMemRefType>(operand.getType()))
      continue;
    Value buffer = weft::rankedArgument(operand);
    kernel.reads.insert(buffer);
    if (weft::libraryCallWrites(call, index))
      kernel.writes.insert(buffer);
  }
  return kernel;
}

/// A GEMM or fused attention call whose buffers are known.
bool isLibraryCall(Operation *op) {
  bool backward;
  return (weft::isGemmCall(op) || weft::isFusedAttentionCall(op, backward)) &&
         llvm::all_of(op->getOperands(), [](Value operand) {
           return !isa<UnrankedMemRefType>(operand.getType()) ||
                  isa<MemRefType>(weft::rankedArgument(operand).getType());
         });
}

/// `kernel` with the roots of its buffers.
SegmentOp withRoots(SegmentOp kernel) {
  for (Value buffer : kernel.reads)
    kernel.rootOf[buffer] = weft::aliasRoot(buffer);
  for (Value buffer : kernel.writes)
    kernel.rootOf[buffer] = weft::aliasRoot(buffer);
  return kernel;
}

/// Whether views of two roots may share bytes, asked once per pair: a
/// private function's arguments are answered from its calls.
class RootAliases {
public:
  bool mayAlias(Value a, Value b) {
    auto [it, inserted] = answers.try_emplace({a, b}, false);
    if (inserted)
      it->second = weft::rootsMayAlias(a, b);
    return it->second;
  }

private:
  llvm::DenseMap<std::pair<Value, Value>, bool> answers;
};

bool dependsOn(const SegmentOp &later, const SegmentOp &earlier,
               RootAliases &roots) {
  auto conflict = [&](const SegmentOp &k, const llvm::SetVector<Value> &xs,
                      const SegmentOp &l, const llvm::SetVector<Value> &ys) {
    for (Value x : xs)
      for (Value y : ys) {
        Value rx = k.rootOf.lookup(x), ry = l.rootOf.lookup(y);
        if (rx == ry ? weft::buffersMayAlias(x, y) : roots.mayAlias(rx, ry))
          return true;
      }
    return false;
  };
  return conflict(later, later.reads, earlier, earlier.writes) ||
         conflict(later, later.writes, earlier, earlier.writes) ||
         conflict(later, later.writes, earlier, earlier.reads);
}

class LaunchMerger {
public:
  explicit LaunchMerger(int64_t maxParameterBytes)
      : maxParameterBytes(maxParameterBytes) {}

  void mergeIn(Block &block);

private:
  int64_t maxParameterBytes;

  void schedule(MutableArrayRef<SegmentOp> ops);
  gpu::LaunchOp merge(ArrayRef<SegmentOp *> parts, OpBuilder &b);
};

void LaunchMerger::mergeIn(Block &block) {
  // Kernels and library calls between two ops with other effects on memory
  // (copies, other calls, host control flow); allocations and pure ops may
  // lie between them, and deallocations wait until the kernels are done.
  std::vector<SegmentOp> segment;
  SmallVector<Operation *> deallocations;
  auto flush = [&](Operation *boundary) {
    schedule(segment);
    segment.clear();
    for (Operation *deallocation : deallocations)
      deallocation->moveBefore(boundary);
    deallocations.clear();
  };
  for (Operation &op : llvm::make_early_inc_range(block)) {
    // Ops are ordered by the bytes they touch: one with results (an async
    // token) or async dependencies ends the segment instead.
    auto launch = dyn_cast<gpu::LaunchOp>(op);
    if (launch && !launch.getAsyncToken() &&
        launch.getAsyncDependencies().empty()) {
      segment.push_back(withRoots(describe(launch)));
      continue;
    }
    if (!launch && op.getNumResults() == 0 && isLibraryCall(&op)) {
      segment.push_back(withRoots(describe(cast<func::CallOp>(op))));
      continue;
    }
    if (isa<memref::DeallocOp>(op)) {
      deallocations.push_back(&op);
      continue;
    }
    if (isa<memref::AllocOp>(op) ||
        (op.getNumRegions() == 0 && isMemoryEffectFree(&op) &&
         !op.hasTrait<OpTrait::IsTerminator>()))
      continue;
    flush(&op);
    for (Region &region : op.getRegions())
      for (Block &nested : region)
        mergeIn(nested);
  }
  flush(&block.back());
}

void LaunchMerger::schedule(MutableArrayRef<SegmentOp> ops) {
  unsigned n = ops.size();
  if (n < 2)
    return;
  // successors[i]: the ops that must run after op i, predecessors[i]: those
  // that must run before it (transitively; the members of a group share
  // them).
  SmallVector<llvm::BitVector> successors(n, llvm::BitVector(n)),
      predecessors(n, llvm::BitVector(n));
  {
    weft::CallSitesCache cacheCallSites;
    RootAliases roots;
    for (unsigned i = 0; i < n; ++i)
      for (unsigned j = 0; j < i; ++j)
        if (dependsOn(ops[i], ops[j], roots))
          successors[j].set(i);
  }
  for (unsigned i = n; i-- > 0;)
    for (unsigned later : llvm::to_vector(successors[i].set_bits()))
      successors[i] |= successors[later];
  for (unsigned i = 0; i < n; ++i)
    for (unsigned later : successors[i].set_bits())
      predecessors[later].set(i);

  // Kernels join the first launch of their block size that need not run
  // before or after them and whose parameters still fit; joining keeps the
  // ops' order a partial one (no op lies between two parts).
  SmallVector<SmallVector<unsigned>> groups;
  SmallVector<llvm::DenseSet<Value>> groupArguments;
  SmallVector<int64_t> groupBytes;
  SmallVector<unsigned> groupOf(n);
  bool merges = false;
  for (unsigned i = 0; i < n; ++i) {
    SegmentOp &kernel = ops[i];
    std::optional<unsigned> joined;
    for (auto [g, group] : llvm::enumerate(groups)) {
      const SegmentOp &first = ops[group.front()];
      if (!kernel.mergeable || !first.mergeable ||
          first.threads != kernel.threads ||
          successors[group.front()].test(i) ||
          predecessors[group.front()].test(i))
        continue;
      int64_t bytes = groupBytes[g];
      for (Value argument : kernel.arguments)
        if (!groupArguments[g].contains(argument))
          bytes += parameterBytes(argument);
      if (bytes <= maxParameterBytes) {
        joined = g;
        break;
      }
    }
    if (!joined) {
      joined = groups.size();
      groups.emplace_back();
      groupArguments.emplace_back();
      groupBytes.push_back(0);
    }
    for (Value argument : kernel.arguments)
      if (groupArguments[*joined].insert(argument).second)
        groupBytes[*joined] += parameterBytes(argument);
    groupOf[i] = *joined;
    if (groups[*joined].empty()) {
      groups[*joined].push_back(i);
      continue;
    }
    merges = true;
    SmallVector<unsigned> &group = groups[*joined];
    llvm::BitVector ancestors = predecessors[group.front()];
    ancestors |= predecessors[i];
    llvm::BitVector descendants = successors[group.front()];
    descendants |= successors[i];
    group.push_back(i);
    llvm::BitVector members(n);
    for (unsigned part : group)
      members.set(part);
    for (unsigned ancestor : ancestors.set_bits()) {
      successors[ancestor] |= descendants;
      successors[ancestor] |= members;
    }
    for (unsigned descendant : descendants.set_bits()) {
      predecessors[descendant] |= ancestors;
      predecessors[descendant] |= members;
    }
    for (unsigned part : group) {
      successors[part] = descendants;
      predecessors[part] = ancestors;
    }
  }
  if (!merges)
    return;

  // The launches in an order that keeps every dependence (Kahn's: a group
  // waits for every group holding one of its predecessors), of those ready
  // the one whose last part comes first in the block first. Each goes after
  // its last part and after the launch placed before it: ops only move
  // down, past ops they do not depend on.
  SmallVector<unsigned> waitingFor(groups.size());
  SmallVector<SmallVector<unsigned>> followers(groups.size());
  for (auto [g, group] : llvm::enumerate(groups)) {
    llvm::SmallSetVector<unsigned, 8> earlier;
    for (unsigned op : predecessors[group.front()].set_bits())
      earlier.insert(groupOf[op]);
    waitingFor[g] = earlier.size();
    for (unsigned other : earlier)
      followers[other].push_back(g);
  }
  auto later = [&](unsigned x, unsigned y) {
    return groups[x].back() > groups[y].back();
  };
  std::priority_queue<unsigned, std::vector<unsigned>, decltype(later)> ready(
      later);
  for (unsigned g = 0; g < groups.size(); ++g)
    if (!waitingFor[g])
      ready.push(g);
  Operation *cursor = nullptr;
  while (!ready.empty()) {
    unsigned next = ready.top();
    ready.pop();
    for (unsigned follower : followers[next])
      if (--waitingFor[follower] == 0)
        ready.push(follower);
    SmallVector<SegmentOp *> parts;
    for (unsigned part : groups[next])
      parts.push_back(&ops[part]);
    Operation *last = parts.back()->op;
    if (!cursor || cursor->isBeforeInBlock(last))
      cursor = last;
    if (parts.size() == 1) {
      if (last != cursor)
        last->moveAfter(cursor);
      cursor = last;
      continue;
    }
    OpBuilder b(cursor->getContext());
    b.setInsertionPointAfter(cursor);
    cursor = merge(parts, b);
  }
}

gpu::LaunchOp LaunchMerger::merge(ArrayRef<SegmentOp *> parts, OpBuilder &b) {
  SmallVector<Location> locations;
  SmallVector<int64_t> starts;
  int64_t blocks = 0;
  // A block runs one part: the parts' shared buffers of one type reuse the
  // same attributions.
  SmallVector<Type> shared;
  SmallVector<SmallVector<unsigned>> sharedOfPart;
  for (SegmentOp *part : parts) {
    locations.push_back(part->op->getLoc());
    starts.push_back(blocks);
    blocks += part->blocks;
    llvm::DenseMap<Type, unsigned> used;
    auto &slots = sharedOfPart.emplace_back();
    for (BlockArgument attribution :
         part->launch().getWorkgroupAttributions()) {
      Type type = attribution.getType();
      unsigned nth = used[type]++;
      unsigned slot = 0, seen = 0;
      for (; slot < shared.size(); ++slot)
        if (shared[slot] == type && seen++ == nth)
          break;
      if (slot == shared.size())
        shared.push_back(type);
      slots.push_back(slot);
    }
  }
  Location loc = b.getFusedLoc(locations);
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(b, loc, value);
  };
  Value one = index(1);
  auto launch = gpu::LaunchOp::create(
      b, loc, index(blocks), one, one, index(parts.front()->threads), one, one,
      /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
      /*asyncDependencies=*/{}, shared);
  launch->setAttr(weft::kBlockSegmentsAttrName, b.getDenseI64ArrayAttr(starts));
  OpBuilder::InsertionGuard guard(b);
  Block &body = launch.getBody().front();
  b.setInsertionPointToEnd(&body);
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&body);
  Value blockId = launch.getBlockIds().x;
  // A binary search over the parts' first blocks.
  std::function<void(unsigned, unsigned)> dispatch = [&](unsigned lo,
                                                         unsigned hi) {
    if (hi - lo > 1) {
      unsigned mid = (lo + hi) / 2;
      Value below = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                          blockId, index(starts[mid]));
      auto branch = scf::IfOp::create(b, loc, below, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard inBranch(b);
      b.setInsertionPointToStart(branch.thenBlock());
      dispatch(lo, mid);
      b.setInsertionPointToStart(branch.elseBlock());
      dispatch(mid, hi);
      return;
    }
    gpu::LaunchOp part = parts[lo]->launch();
    IRMapping mapping;
    mapping.map(part.getBlockIds().x,
                starts[lo]
                    ? arith::SubIOp::create(b, loc, blockId, index(starts[lo]))
                    : blockId);
    mapping.map(part.getBlockIds().y, launch.getBlockIds().y);
    mapping.map(part.getBlockIds().z, launch.getBlockIds().z);
    mapping.map(part.getThreadIds().x, launch.getThreadIds().x);
    mapping.map(part.getThreadIds().y, launch.getThreadIds().y);
    mapping.map(part.getThreadIds().z, launch.getThreadIds().z);
    mapping.map(part.getGridSize().x, index(parts[lo]->blocks));
    mapping.map(part.getGridSize().y, launch.getGridSize().y);
    mapping.map(part.getGridSize().z, launch.getGridSize().z);
    mapping.map(part.getBlockSize().x, launch.getBlockSize().x);
    mapping.map(part.getBlockSize().y, launch.getBlockSize().y);
    mapping.map(part.getBlockSize().z, launch.getBlockSize().z);
    for (auto [attribution, slot] :
         llvm::zip(part.getWorkgroupAttributions(), sharedOfPart[lo]))
      mapping.map(attribution, launch.getWorkgroupAttributions()[slot]);
    for (Operation &op : part.getBody().front().without_terminator())
      b.clone(op, mapping);
  };
  dispatch(0, parts.size());
  for (SegmentOp *part : parts)
    part->op->erase();
  return launch;
}

/// Guards of host code whose condition is a constant (a launch only where
/// there is work, of static size) give way to the branch taken, so that
/// the kernels in them are neighbours of the others.
void inlineDecidedGuards(func::FuncOp function) {
  SmallVector<scf::IfOp> guards;
  function.walk([&](scf::IfOp guard) {
    if (guard.getNumResults() == 0 &&
        getConstantIntValue(guard.getCondition()) &&
        !guard->getParentOfType<gpu::LaunchOp>())
      guards.push_back(guard);
  });
  for (scf::IfOp guard : guards) {
    Block *taken = *getConstantIntValue(guard.getCondition())
                       ? guard.thenBlock()
                       : guard.elseBlock();
    if (taken)
      for (Operation &op :
           llvm::make_early_inc_range(taken->without_terminator()))
        op.moveBefore(guard);
    guard.erase();
  }
}

struct WeftGpuMergeLaunchesPass
    : public weft::impl::WeftGpuMergeLaunchesBase<WeftGpuMergeLaunchesPass> {
  using WeftGpuMergeLaunchesBase::WeftGpuMergeLaunchesBase;
  void runOnOperation() override {
    if (maxParameterBytes < 64) {
      getOperation().emitError("weft-gpu-merge-launches: max-parameter-bytes "
                               "must be at least 64");
      return signalPassFailure();
    }
    LaunchMerger merger(maxParameterBytes);
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      inlineDecidedGuards(function);
      for (Block &block : function.getBody())
        merger.mergeIn(block);
    }
  }
};

} // namespace
