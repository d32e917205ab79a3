//===- FoldTransposes.cpp - Fused attention reads and writes head views ---===//
//
// The copies that move heads between [B, S, H, D] and [B, H, S, D] around
// fused attention calls become views (see Passes.td). Runs on bufferized
// memrefs before weft-plan-buffers: each temporary is still an allocation
// of its own, so a buffer that becomes a view simply lives longer.
//
//===----------------------------------------------------------------------===//

#include "weft/Lowering/BufferAliases.h"
#include "weft/Lowering/Passes.h"
#include "weft/runtime/Contract.h"

#include "mlir/IR/AffineMap.h"

namespace weft {
#define GEN_PASS_DEF_WEFTFOLDTRANSPOSES
#include "weft/Lowering/Passes.h.inc"
} // namespace weft

using namespace mlir;
using weft::isFusedAttentionCall;

namespace {

/// A copy: target[j] = source[permutation(j)], the permutation mapping
/// target dims to source dims (the identity for memref.copy).
struct Copy {
  Operation *op;
  Value source, target;
  AffineMap permutation;
};

std::optional<Copy> matchCopyOp(Operation *op) {
  if (auto copy = dyn_cast<memref::CopyOp>(op)) {
    auto type = dyn_cast<MemRefType>(copy.getTarget().getType());
    if (!type || !isa<MemRefType>(copy.getSource().getType()))
      return std::nullopt;
    return Copy{
        op, copy.getSource(), copy.getTarget(),
        AffineMap::getMultiDimIdentityMap(type.getRank(), op->getContext())};
  }
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || !generic.hasPureBufferSemantics() ||
      generic.getNumDpsInputs() != 1 || generic.getNumDpsInits() != 1 ||
      generic.getNumLoops() != generic.getNumParallelLoops())
    return std::nullopt;
  Block &body = generic.getRegion().front();
  if (body.getOperations().size() != 1 ||
      body.getTerminator()->getOperand(0) != body.getArgument(0))
    return std::nullopt;
  AffineMap in = generic.getIndexingMapsArray()[0];
  AffineMap out = generic.getIndexingMapsArray()[1];
  if (!in.isPermutation() || !out.isPermutation())
    return std::nullopt;
  // Iteration i writes target[out(i)] from source[in(i)].
  return Copy{op, generic.getDpsInputs()[0], generic.getDpsInits()[0],
              in.compose(inversePermutation(out))};
}

std::optional<Copy> matchCopy(Operation *op) {
  std::optional<Copy> copy = matchCopyOp(op);
  // A copy within one buffer moves nothing between two.
  if (copy && weft::buffersMayAlias(copy->source, copy->target))
    return std::nullopt;
  return copy;
}

/// `source` seen with the dims of `permutation`'s domain: view[j] =
/// source[permutation(j)], so view dim permutation(k) is source dim k.
/// Null where the source's layout is not static.
MemRefType permutedType(Value source, AffineMap permutation) {
  auto type = cast<MemRefType>(source.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      !type.hasStaticShape() || ShapedType::isDynamic(offset) ||
      llvm::any_of(strides, ShapedType::isDynamic))
    return nullptr;
  SmallVector<int64_t> sizes(type.getRank()), viewStrides(type.getRank());
  for (unsigned k = 0; k < type.getRank(); ++k) {
    unsigned m = permutation.getDimPosition(k);
    sizes[m] = type.getDimSize(k);
    viewStrides[m] = strides[k];
  }
  return MemRefType::get(
      sizes, type.getElementType(),
      StridedLayoutAttr::get(type.getContext(), offset, viewStrides),
      type.getMemorySpace());
}

/// The view of permutedType, as a reinterpret_cast: a view every pass
/// follows (ViewLikeOpInterface), as memref.transpose is not.
Value permuted(OpBuilder &b, Location loc, Value source,
               AffineMap permutation) {
  if (permutation.isIdentity())
    return source;
  MemRefType type = permutedType(source, permutation);
  auto [strides, offset] = type.getStridesAndOffset();
  return memref::ReinterpretCastOp::create(b, loc, type, source, offset,
                                           type.getShape(), strides);
}

bool hasUnitLastStride(MemRefType type) {
  if (!type)
    return false;
  auto [strides, offset] = type.getStridesAndOffset();
  return !strides.empty() && strides.back() == 1;
}

/// The uses of a static allocation in `block`, when each is the copy (or
/// `copyChain`, a view only the copy reads), a cast handed to fused
/// attention calls, or with `elementwise` an all-parallel linalg op. Sets
/// the first and last op that touches the buffer, and whether a call
/// reads or writes it.
struct Uses {
  Operation *first = nullptr, *last = nullptr;
  SmallVector<memref::CastOp> casts;
  SmallVector<OpOperand *> elementwise;
  bool attentionWrites = false;
};

std::optional<Uses> usesOf(memref::AllocOp alloc, Operation *copy,
                           Operation *copyChain, bool elementwise) {
  if (!alloc.getDynamicSizes().empty() || !alloc.getSymbolOperands().empty())
    return std::nullopt;
  Block *block = copy->getBlock();
  Uses uses;
  auto see = [&](Operation *op) {
    if (!uses.first || op->isBeforeInBlock(uses.first))
      uses.first = op;
    if (!uses.last || uses.last->isBeforeInBlock(op))
      uses.last = op;
  };
  if (alloc->getBlock() != block)
    return std::nullopt;
  // The copy may read the buffer through `copyChain`, which may have been
  // made before the buffer's first write: the copy counts, not the view.
  see(copy);
  for (OpOperand &use : alloc->getUses()) {
    Operation *user = use.getOwner();
    if (user->getBlock() != block)
      return std::nullopt;
    if (user == copy || user == copyChain)
      continue;
    see(user);
    if (auto cast = dyn_cast<memref::CastOp>(user);
        cast && isa<UnrankedMemRefType>(cast.getType())) {
      for (OpOperand &argument : cast->getUses()) {
        bool backward;
        if (!isFusedAttentionCall(argument.getOwner(), backward) ||
            argument.getOwner()->getBlock() != block)
          return std::nullopt;
        uses.attentionWrites |= weft::runtime::attentionOverwrites(
            backward, argument.getOperandNumber());
        see(argument.getOwner());
      }
      uses.casts.push_back(cast);
      continue;
    }
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (!elementwise || !generic || !generic.hasPureBufferSemantics() ||
        generic.getNumLoops() != generic.getNumParallelLoops())
      return std::nullopt;
    uses.elementwise.push_back(&use);
  }
  return uses;
}

/// Gives the uses of `alloc` other than the copy `view` instead, and
/// erases the copy, `copyChain` and the allocation.
void replaceBuffer(memref::AllocOp alloc, const Uses &uses, Value view,
                   Operation *copy, Operation *copyChain) {
  OpBuilder b(copy);
  for (memref::CastOp cast : uses.casts) {
    b.setInsertionPoint(cast);
    cast.replaceAllUsesWith(
        memref::CastOp::create(b, cast.getLoc(), cast.getType(), view)
            .getResult());
    cast.erase();
  }
  for (OpOperand *use : uses.elementwise)
    use->set(view);
  copy->erase();
  if (copyChain)
    copyChain->erase();
  alloc.erase();
}

/// A copy whose target only fused attention calls read: they read the
/// source through a view, which nothing may write until the last of them.
bool foldIntoReaders(const Copy &copy) {
  auto alloc = copy.target.getDefiningOp<memref::AllocOp>();
  if (!alloc)
    return false;
  std::optional<Uses> uses =
      usesOf(alloc, copy.op, nullptr, /*elementwise=*/false);
  if (!uses || uses->casts.empty() || uses->attentionWrites ||
      uses->first != copy.op ||
      !hasUnitLastStride(permutedType(copy.source, copy.permutation)))
    return false;
  for (Operation *op = copy.op->getNextNode(); op != uses->last->getNextNode();
       op = op->getNextNode())
    if (weft::mayWrite(op, copy.source))
      return false;
  OpBuilder b(copy.op);
  Value view = permuted(b, copy.op->getLoc(), copy.source, copy.permutation);
  replaceBuffer(alloc, *uses, view, copy.op, nullptr);
  return true;
}

/// A copy out of a buffer that only fused attention calls and elementwise
/// ops use: the buffer becomes a view of the copy's target (permuted back,
/// or expanded where the copy reads it collapsed), which nothing else may
/// touch from the buffer's first use to the copy, nor write from the copy
/// to its last use.
bool foldIntoWriters(const Copy &copy) {
  Value buffer = copy.source;
  auto collapse = buffer.getDefiningOp<memref::CollapseShapeOp>();
  if (collapse && collapse->hasOneUse() && copy.permutation.isIdentity())
    buffer = collapse.getSrc();
  else
    collapse = nullptr;
  auto alloc = buffer.getDefiningOp<memref::AllocOp>();
  if (!alloc)
    return false;
  std::optional<Uses> uses =
      usesOf(alloc, copy.op, collapse, /*elementwise=*/true);
  if (!uses || uses->first == copy.op)
    return false;
  // The view's type, and whether the calls can take it.
  auto targetType = cast<MemRefType>(copy.target.getType());
  MemRefType viewType;
  if (collapse) {
    FailureOr<MemRefType> expanded = memref::ExpandShapeOp::computeExpandedType(
        targetType, alloc.getType().getShape(),
        collapse.getReassociationIndices());
    if (failed(expanded))
      return false;
    viewType = *expanded;
  } else {
    viewType = permutedType(copy.target, inversePermutation(copy.permutation));
  }
  if (!viewType || (!uses->casts.empty() && !hasUnitLastStride(viewType)))
    return false;
  // The buffer is written before the copy and only read after it, and
  // nothing else writes the target while it stands for the buffer.
  for (Operation *op = copy.op->getNextNode(); op != uses->last->getNextNode();
       op = op->getNextNode())
    if (weft::mayWrite(op, buffer) || weft::mayWrite(op, copy.target))
      return false;
  for (Operation *op = uses->first; op != copy.op; op = op->getNextNode())
    if (weft::touches(op, copy.target))
      return false;
  if (!weft::canHoist(copy.target, uses->first))
    return false;
  weft::hoist(copy.target, uses->first);
  OpBuilder b(uses->first);
  Location loc = copy.op->getLoc();
  Value view =
      collapse
          ? memref::ExpandShapeOp::create(b, loc, alloc.getType().getShape(),
                                          copy.target,
                                          collapse.getReassociationIndices())
                .getResult()
          : permuted(b, loc, copy.target, inversePermutation(copy.permutation));
  replaceBuffer(alloc, *uses, view, copy.op, collapse);
  return true;
}

struct WeftFoldTransposesPass
    : public weft::impl::WeftFoldTransposesBase<WeftFoldTransposesPass> {
  void runOnOperation() override {
    // Later copies first: a gradient's copy into a concatenation folds
    // before the transpose that fills the buffer it copies. A fold erases
    // only its own copy (and the views, casts and allocation it made
    // redundant), none of them another copy.
    SmallVector<Operation *> candidates;
    getOperation()->walk([&](Operation *op) {
      if (matchCopy(op))
        candidates.push_back(op);
    });
    for (Operation *op : llvm::reverse(candidates))
      if (std::optional<Copy> copy = matchCopy(op))
        (void)(foldIntoReaders(*copy) || foldIntoWriters(*copy));
  }
};

} // namespace
