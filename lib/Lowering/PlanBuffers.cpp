//===- PlanBuffers.cpp - One arena for temporaries, shared by liveness ----===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Lowering/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

#include <functional>

namespace weft {
#define GEN_PASS_DEF_WEFTPLANBUFFERS
#include "weft/Lowering/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

constexpr int64_t kAlignment = 64;

struct Buffer {
  memref::AllocOp alloc;
  int64_t bytes;
  unsigned start, end; // live range, in positions of the entry block
  int64_t offset = 0;
};

/// The last position (in `order`) of an op of the entry block that uses
/// `value`, a view of it, or a result of a loop or branch it flows into
/// (scf.for carries it, a case yields it), looking into nested regions.
/// None when it escapes: returned, or, with `nested`, yielded out of the
/// region it is allocated in (an iteration's buffer read by the next).
std::optional<unsigned>
lastUse(Value value, const llvm::DenseMap<Operation *, unsigned> &order,
        Block &entry, bool nested) {
  unsigned last = 0;
  SmallVector<Value> worklist{value};
  llvm::DenseSet<Value> seen{value};
  auto follow = [&](ValueRange values) {
    for (Value v : values)
      if (seen.insert(v).second)
        worklist.push_back(v);
  };
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isa<memref::DeallocOp>(user))
        continue;
      Operation *top = entry.findAncestorOpInBlock(*user);
      if (!top || isa<func::ReturnOp>(top))
        return std::nullopt; // escapes: leave it to the allocator
      last = std::max(last, order.lookup(top));
      if (auto view = dyn_cast<ViewLikeOpInterface>(user))
        if (view.getViewSource() == v)
          follow(user->getResults());
      if (user->hasTrait<OpTrait::IsTerminator>() && user != top) {
        if (nested)
          return std::nullopt;
        follow(user->getParentOp()->getResults());
      }
      if (user->getNumRegions() > 0)
        follow(user->getResults());
    }
  }
  return last;
}

int64_t byteSize(MemRefType type) {
  unsigned bits = type.getElementTypeBitWidth();
  return type.getNumElements() * std::max<int64_t>(1, bits / 8);
}

struct WeftPlanBuffersPass
    : public weft::impl::WeftPlanBuffersBase<WeftPlanBuffersPass> {
  using WeftPlanBuffersBase::WeftPlanBuffersBase;

  void runOnOperation() override {
    int64_t totalNaive = 0, totalBuffers = 0;
    llvm::StringMap<int64_t> arenas;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      arenas[func.getSymName()] = 0;
      Block &entry = func.getBody().front();
      llvm::DenseMap<Operation *, unsigned> order;
      unsigned position = 0;
      for (Operation &op : entry)
        order[&op] = position++;
      // A buffer allocated inside a loop or a case lives, for the plan,
      // as long as the op of the entry block that holds it: each iteration
      // reuses the same place.
      std::vector<Buffer> buffers;
      func.walk([&](memref::AllocOp alloc) {
        if (!alloc.getType().hasStaticShape() ||
            !alloc.getType().getLayout().isIdentity() ||
            alloc.getType().getMemorySpace())
          return;
        Operation *top = entry.findAncestorOpInBlock(*alloc);
        bool nested = top != alloc.getOperation();
        std::optional<unsigned> end = lastUse(alloc, order, entry, nested);
        if (!top || !end)
          return;
        buffers.push_back({alloc, byteSize(alloc.getType()), order[top],
                           std::max(*end, order[top])});
      });
      if (buffers.empty())
        continue;
      // Largest first, each at the lowest offset free over its live range.
      std::vector<Buffer *> bySize;
      for (Buffer &b : buffers)
        bySize.push_back(&b);
      llvm::stable_sort(bySize, [](Buffer *a, Buffer *b) {
        return a->bytes > b->bytes;
      });
      std::vector<Buffer *> placed;
      int64_t arena = 0, naive = 0;
      for (Buffer *b : bySize) {
        std::vector<std::pair<int64_t, int64_t>> taken;
        for (Buffer *p : placed)
          if (p->start <= b->end && b->start <= p->end)
            taken.push_back({p->offset, p->offset + p->bytes});
        llvm::sort(taken);
        int64_t offset = 0;
        for (auto [lo, hi] : taken) {
          if (offset + b->bytes <= lo)
            break;
          offset = std::max(offset, (hi + kAlignment - 1) / kAlignment *
                                        kAlignment);
        }
        b->offset = offset;
        placed.push_back(b);
        arena = std::max(arena, offset + b->bytes);
        naive += (b->bytes + kAlignment - 1) / kAlignment * kAlignment;
      }
      // Rewrite: one arena at the top, views into it, one free per return.
      OpBuilder builder(&entry, entry.begin());
      Location loc = func.getLoc();
      auto arenaType = MemRefType::get({std::max<int64_t>(arena, 1)},
                                       builder.getI8Type());
      Value base = memref::AllocOp::create(builder, loc, arenaType,
                                           builder.getI64IntegerAttr(kAlignment));
      for (Buffer &b : buffers) {
        builder.setInsertionPoint(b.alloc);
        Value offset = arith::ConstantIndexOp::create(builder, loc, b.offset);
        Value view = memref::ViewOp::create(builder, b.alloc.getLoc(),
                                            b.alloc.getType(), base, offset,
                                            ValueRange{});
        for (Operation *user : llvm::make_early_inc_range(b.alloc->getUsers()))
          if (isa<memref::DeallocOp>(user))
            user->erase();
        b.alloc.replaceAllUsesWith(view);
        b.alloc.erase();
      }
      if (freeArena)
        func.walk([&](func::ReturnOp ret) {
          builder.setInsertionPoint(ret);
          memref::DeallocOp::create(builder, loc, base);
        });
      arenas[func.getSymName()] = arena;
      totalNaive += naive;
      totalBuffers += buffers.size();
    }
    // A function's arena lives while it runs, and its callees run one at a
    // time inside it (an outlined step's stages): its peak is its arena and
    // its largest callee's peak. The peak is that of the functions nothing
    // calls.
    llvm::StringMap<SmallVector<StringRef>> callees;
    llvm::StringSet<> called;
    for (auto func : getOperation().getOps<func::FuncOp>())
      func.walk([&](func::CallOp call) {
        if (!arenas.count(call.getCallee()))
          return;
        callees[func.getSymName()].push_back(call.getCallee());
        called.insert(call.getCallee());
      });
    llvm::StringMap<int64_t> peaks;
    std::function<int64_t(StringRef, unsigned)> peakOf =
        [&](StringRef name, unsigned depth) -> int64_t {
      if (auto it = peaks.find(name); it != peaks.end())
        return it->second;
      int64_t inner = 0;
      if (depth < 64)
        for (StringRef callee : callees.lookup(name))
          inner = std::max(inner, peakOf(callee, depth + 1));
      return peaks[name] = arenas.lookup(name) + inner;
    };
    int64_t totalPeak = 0;
    for (auto &entry : arenas)
      if (!called.contains(entry.getKey()))
        totalPeak += peakOf(entry.getKey(), 0);
    Builder b(&getContext());
    getOperation()->setAttr(
        weft::WeftDialect::kMemoryPlanAttrName,
        b.getDictionaryAttr(
            {b.getNamedAttr("peak_bytes", b.getI64IntegerAttr(totalPeak)),
             b.getNamedAttr("unplanned_bytes", b.getI64IntegerAttr(totalNaive)),
             b.getNamedAttr("buffers", b.getI64IntegerAttr(totalBuffers))}));
  }
};

} // namespace
