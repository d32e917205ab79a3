//===- MergeLaunches.cpp - Independent kernels share one launch -----------===//
//
// A launch costs a few microseconds whatever it does; an optimizer step over
// a hundred parameters, or a gradient norm summed tensor by tensor, is a
// hundred small kernels that do not depend on one another. Between two
// library calls, each kernel is placed at the first wave after every kernel
// it depends on, and the kernels of a wave with the same block size run as
// one launch whose blocks are the parts' blocks one after another: a block
// finds its part by its id, so each block runs one part's code and the
// parts' barriers stay uniform over the block.
//
//===----------------------------------------------------------------------===//

#include "LaunchMemory.h"

#include "weft/Dialect/Weft/IR/TargetAttrNames.h"
#include "weft/Lowering/BufferAliases.h"
#include "weft/Target/CUDA/Passes.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

namespace weft {
#define GEN_PASS_DEF_WEFTGPUMERGELAUNCHES
#include "weft/Target/CUDA/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// A kernel of host code: what it reads and writes of the buffers defined
/// outside it, and whether it can share a launch.
struct Kernel {
  gpu::LaunchOp launch;
  llvm::SetVector<Value> reads, writes;
  llvm::SetVector<Value> arguments; // the values it captures
  int64_t blocks = 0, threads = 0;  // of a one-dimensional launch
  bool mergeable = false;
  int64_t wave = 0;
};

/// The bytes a captured value takes among a kernel's parameters (a memref
/// is passed as its descriptor).
int64_t parameterBytes(Value value) {
  Type type = value.getType();
  if (auto memref = dyn_cast<MemRefType>(type))
    return 8 * (3 + 2 * memref.getRank());
  return type.isIntOrFloat()
             ? std::max<int64_t>(1, (type.getIntOrFloatBitWidth() + 7) / 8)
             : 8;
}

Kernel describe(gpu::LaunchOp launch) {
  Kernel kernel{launch};
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

bool dependsOn(const Kernel &later, const Kernel &earlier) {
  auto conflict = [&](const llvm::SetVector<Value> &xs,
                      const llvm::SetVector<Value> &ys) {
    for (Value x : xs)
      for (Value y : ys)
        if (weft::buffersMayAlias(x, y))
          return true;
    return false;
  };
  return conflict(later.reads, earlier.writes) ||
         conflict(later.writes, earlier.writes) ||
         conflict(later.writes, earlier.reads);
}

class LaunchMerger {
public:
  explicit LaunchMerger(int64_t maxParameterBytes)
      : maxParameterBytes(maxParameterBytes) {}

  void mergeIn(Block &block);

private:
  int64_t maxParameterBytes;

  void schedule(MutableArrayRef<Kernel> kernels);
  gpu::LaunchOp merge(ArrayRef<Kernel *> parts, OpBuilder &b);
};

void LaunchMerger::mergeIn(Block &block) {
  // Kernels between two ops with other effects on memory (library calls,
  // copies, host control flow); allocations and pure ops may lie between
  // them, and deallocations wait until the kernels are done.
  SmallVector<Kernel> segment;
  SmallVector<Operation *> deallocations;
  auto flush = [&](Operation *boundary) {
    schedule(segment);
    segment.clear();
    for (Operation *deallocation : deallocations)
      deallocation->moveBefore(boundary);
    deallocations.clear();
  };
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (auto launch = dyn_cast<gpu::LaunchOp>(op)) {
      segment.push_back(describe(launch));
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

void LaunchMerger::schedule(MutableArrayRef<Kernel> kernels) {
  if (kernels.size() < 2)
    return;
  int64_t waves = 0;
  for (auto [i, kernel] : llvm::enumerate(kernels)) {
    for (unsigned j = 0; j < i; ++j)
      if (kernels[j].wave >= kernel.wave && dependsOn(kernel, kernels[j]))
        kernel.wave = kernels[j].wave + 1;
    waves = std::max(waves, kernel.wave + 1);
  }
  // The launches of each wave: the kernels of one block size together while
  // their parameters fit.
  SmallVector<SmallVector<SmallVector<Kernel *>>> launches(waves);
  bool merges = false;
  for (Kernel &kernel : kernels) {
    auto &wave = launches[kernel.wave];
    SmallVector<Kernel *> *fits = nullptr;
    for (auto &group : wave) {
      Kernel *first = group.front();
      if (!kernel.mergeable || !first->mergeable ||
          first->threads != kernel.threads)
        continue;
      llvm::SetVector<Value> arguments;
      for (Kernel *part : group)
        arguments.insert(part->arguments.begin(), part->arguments.end());
      arguments.insert(kernel.arguments.begin(), kernel.arguments.end());
      int64_t bytes = 0;
      for (Value argument : arguments)
        bytes += parameterBytes(argument);
      if (bytes <= maxParameterBytes) {
        fits = &group;
        break;
      }
    }
    if (fits) {
      fits->push_back(&kernel);
      merges = true;
    } else {
      wave.push_back({&kernel});
    }
  }
  if (!merges)
    return;
  // Each wave goes after the last kernel it holds and after the wave before.
  Operation *cursor = nullptr;
  for (auto &wave : launches) {
    if (wave.empty())
      continue;
    Operation *last = nullptr;
    for (auto &group : wave)
      for (Kernel *part : group)
        if (!last || last->isBeforeInBlock(part->launch))
          last = part->launch;
    if (!cursor || cursor->isBeforeInBlock(last))
      cursor = last;
    OpBuilder b(cursor->getContext());
    for (auto &group : wave) {
      b.setInsertionPointAfter(cursor);
      if (group.size() == 1) {
        if (group.front()->launch != cursor)
          group.front()->launch->moveAfter(cursor);
        cursor = group.front()->launch;
        continue;
      }
      cursor = merge(group, b);
    }
  }
}

gpu::LaunchOp LaunchMerger::merge(ArrayRef<Kernel *> parts, OpBuilder &b) {
  SmallVector<Location> locations;
  SmallVector<int64_t> starts;
  int64_t blocks = 0;
  // A block runs one part: the parts' shared buffers of one type reuse the
  // same attributions.
  SmallVector<Type> shared;
  SmallVector<SmallVector<unsigned>> sharedOfPart;
  for (Kernel *part : parts) {
    locations.push_back(part->launch.getLoc());
    starts.push_back(blocks);
    blocks += part->blocks;
    llvm::DenseMap<Type, unsigned> used;
    auto &slots = sharedOfPart.emplace_back();
    for (BlockArgument attribution : part->launch.getWorkgroupAttributions()) {
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
    gpu::LaunchOp part = parts[lo]->launch;
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
  for (Kernel *part : parts)
    part->launch.erase();
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
