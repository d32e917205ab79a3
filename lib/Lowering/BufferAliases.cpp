//===- BufferAliases.cpp - Which buffers of host code may share bytes -----===//

#include "weft/Lowering/BufferAliases.h"
#include "weft/Lowering/Memrefs.h"

#include "weft/Dialect/Weft/IR/TargetAttrNames.h"
#include "weft/runtime/Contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

namespace {

/// The bytes a buffer may touch: the value its views start from and, where
/// the views are static, the bytes from that value's first byte.
struct Extent {
  Value root;
  std::optional<std::pair<int64_t, int64_t>> bytes; // [begin, end)
};

Extent extentOf(Value memref) {
  // The bytes the view's own layout reaches from its aligned pointer.
  auto type = cast<MemRefType>(memref.getType());
  std::optional<std::pair<int64_t, int64_t>> bytes;
  if (type.hasStaticShape()) {
    auto [strides, offset] = type.getStridesAndOffset();
    if (!ShapedType::isDynamic(offset) &&
        llvm::none_of(strides, ShapedType::isDynamic)) {
      int64_t last = offset;
      for (auto [size, stride] : llvm::zip(type.getShape(), strides))
        last += (size - 1) * stride;
      int64_t size = weft::elementBytes(type);
      bytes = type.getNumElements()
                  ? std::pair{offset * size, (last + 1) * size}
                  : std::pair{offset * size, offset * size};
    }
  }
  // Views that keep the aligned pointer, and memref.view that moves it.
  while (Operation *def = memref.getDefiningOp()) {
    if (auto view = dyn_cast<memref::ViewOp>(def)) {
      std::optional<int64_t> shift = getConstantIntValue(view.getByteShift());
      if (!shift)
        bytes.reset();
      else if (bytes)
        bytes = std::pair{bytes->first + *shift, bytes->second + *shift};
      memref = view.getSource();
      continue;
    }
    if (auto transpose = dyn_cast<memref::TransposeOp>(def)) {
      memref = transpose.getIn();
      continue;
    }
    if (!isa<memref::SubViewOp, memref::CastOp, memref::ExpandShapeOp,
             memref::CollapseShapeOp, memref::ReinterpretCastOp>(def))
      break;
    memref = cast<ViewLikeOpInterface>(def).getViewSource();
  }
  return {memref, bytes};
}

enum class RootKind { Allocation, Global, Argument, Unknown };

RootKind kindOf(Value root) {
  if (auto arg = dyn_cast<BlockArgument>(root))
    return isa<func::FuncOp>(arg.getOwner()->getParentOp()) &&
                   arg.getOwner()->isEntryBlock()
               ? RootKind::Argument
               : RootKind::Unknown;
  Operation *def = root.getDefiningOp();
  if (isa<memref::AllocOp, memref::AllocaOp, gpu::AllocOp>(def))
    return RootKind::Allocation;
  if (isa<memref::GetGlobalOp>(def))
    return RootKind::Global;
  return RootKind::Unknown;
}

bool mayAlias(Value a, Value b, unsigned depth);
bool rootsMayAliasAt(Value x, Value y, unsigned depth);

/// The calls of `function`, or none where its symbol has other uses.
using CallSites = std::optional<SmallVector<func::CallOp>>;

CallSites findCallSites(func::FuncOp function) {
  auto module = function->getParentOfType<ModuleOp>();
  std::optional<SymbolTable::UseRange> uses =
      SymbolTable::getSymbolUses(function, module);
  if (!uses)
    return std::nullopt;
  SmallVector<func::CallOp> calls;
  for (const SymbolTable::SymbolUse &use : *uses) {
    auto call = dyn_cast<func::CallOp>(use.getUser());
    if (!call)
      return std::nullopt;
    calls.push_back(call);
  }
  return calls;
}

/// The call sites found while a weft::CallSitesCache lives on this thread.
thread_local llvm::DenseMap<Operation *, CallSites> *callSitesCache = nullptr;

/// The calls of `function`, from the cache where one lives.
CallSites callSitesOf(func::FuncOp function) {
  if (!callSitesCache)
    return findCallSites(function);
  auto [it, inserted] = callSitesCache->try_emplace(function);
  if (inserted)
    it->second = findCallSites(function);
  return it->second;
}

bool argumentsMayAlias(BlockArgument a, BlockArgument b, unsigned depth) {
  auto function = cast<func::FuncOp>(a.getOwner()->getParentOp());
  if (function.isPublic())
    return false;
  if (depth > 8)
    return true;
  // A copy: the questions below may add to the cache, moving its entries.
  CallSites calls = callSitesOf(function);
  if (!calls)
    return true;
  for (func::CallOp call : *calls)
    if (mayAlias(call.getOperand(a.getArgNumber()),
                 call.getOperand(b.getArgNumber()), depth + 1))
      return true;
  return false;
}

/// The bytes of a row-strided view, modulo its row pitch: a view whose
/// innermost dims are contiguous for `width` bytes and whose other dims
/// step by multiples of `pitch` touches, in each pitch, only
/// [start, start + width).
struct Band {
  int64_t pitch, start, width;
};

std::optional<Band> bandOf(Value memref, int64_t firstByte) {
  auto type = cast<MemRefType>(memref.getType());
  auto [strides, offset] = type.getStridesAndOffset();
  if (!type.hasStaticShape() || llvm::any_of(strides, ShapedType::isDynamic))
    return std::nullopt;
  int64_t bytes = weft::elementBytes(type);
  // (stride, size) in bytes of the dims that step, outermost first, with
  // contiguous neighbours merged.
  SmallVector<std::pair<int64_t, int64_t>> dims;
  for (auto [size, stride] : llvm::zip(type.getShape(), strides))
    if (size > 1)
      dims.push_back({stride * bytes, size});
  llvm::sort(dims, [](auto l, auto r) { return l.first > r.first; });
  SmallVector<std::pair<int64_t, int64_t>> merged;
  for (auto dim : dims) {
    if (!merged.empty() && merged.back().first == dim.first * dim.second) {
      merged.back() = {dim.first, merged.back().second * dim.second};
      continue;
    }
    merged.push_back(dim);
  }
  if (merged.size() < 2 || merged.back().first != bytes)
    return std::nullopt;
  int64_t width = merged.back().second * bytes;
  int64_t pitch = merged[merged.size() - 2].first;
  for (auto dim : ArrayRef(merged).drop_back())
    if (dim.first % pitch != 0)
      return std::nullopt;
  int64_t start = ((firstByte % pitch) + pitch) % pitch;
  if (start + width > pitch)
    return std::nullopt;
  return Band{pitch, start, width};
}

bool mayAlias(Value a, Value b, unsigned depth) {
  Extent x = extentOf(a), y = extentOf(b);
  if (x.root == y.root) {
    if (!x.bytes || !y.bytes)
      return true;
    if (x.bytes->first >= y.bytes->second || y.bytes->first >= x.bytes->second)
      return false;
    // Overlapping ranges may still hold disjoint columns of the same rows
    // (the slices of a concatenation).
    std::optional<Band> bx = bandOf(a, x.bytes->first),
                        by = bandOf(b, y.bytes->first);
    return !bx || !by || bx->pitch != by->pitch ||
           (bx->start < by->start + by->width &&
            by->start < bx->start + bx->width);
  }
  return rootsMayAliasAt(x.root, y.root, depth);
}

bool rootsMayAliasAt(Value x, Value y, unsigned depth) {
  if (x == y)
    return true;
  RootKind kx = kindOf(x), ky = kindOf(y);
  if (kx == RootKind::Unknown || ky == RootKind::Unknown)
    return true;
  if (kx == RootKind::Allocation || ky == RootKind::Allocation)
    return false;
  if (kx == RootKind::Global && ky == RootKind::Global)
    return x.getDefiningOp<memref::GetGlobalOp>().getName() ==
           y.getDefiningOp<memref::GetGlobalOp>().getName();
  if (kx == RootKind::Argument && ky == RootKind::Argument)
    return argumentsMayAlias(cast<BlockArgument>(x), cast<BlockArgument>(y),
                             depth);
  // A global and an argument: distinct unless a private function is passed
  // the global.
  Value arg = kx == RootKind::Argument ? x : y;
  return !cast<func::FuncOp>(arg.getParentBlock()->getParentOp()).isPublic();
}

} // namespace

namespace {

/// The largest power of two, at most `cap`, that divides `bytes`.
int64_t powerOfTwoDividing(int64_t bytes, int64_t cap) {
  return bytes ? std::min<int64_t>(cap, bytes & -bytes) : cap;
}

/// The largest power of two the aligned pointer of `memref` is known to be
/// a multiple of.
int64_t pointerAlignment(Value memref, int64_t bufferAlignment,
                         unsigned depth) {
  while (Operation *def = memref.getDefiningOp()) {
    if (auto view = dyn_cast<memref::ViewOp>(def)) {
      // The source of a view is a contiguous byte buffer of offset 0.
      std::optional<int64_t> shift = getConstantIntValue(view.getByteShift());
      return shift ? powerOfTwoDividing(
                         *shift, pointerAlignment(view.getSource(),
                                                  bufferAlignment, depth))
                   : 1;
    }
    if (isa<memref::SubViewOp, memref::CastOp, memref::ExpandShapeOp,
            memref::CollapseShapeOp, memref::ReinterpretCastOp,
            memref::TransposeOp, memref::AssumeAlignmentOp>(def)) {
      memref = cast<ViewLikeOpInterface>(def).getViewSource();
      continue;
    }
    if (auto alloc = dyn_cast<memref::AllocOp>(def))
      return std::max<int64_t>(bufferAlignment,
                               alloc.getAlignment().value_or(1));
    return isa<gpu::AllocOp>(def) ? bufferAlignment : 1;
  }
  auto arg = cast<BlockArgument>(memref);
  auto function = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!function || !arg.getOwner()->isEntryBlock() || depth > 8)
    return 1;
  CallSites calls = callSitesOf(function);
  // The runtime calls a public function (the entry) with buffers of its
  // own; a call in the module passes its operand.
  if (!calls || (calls->empty() && !function.isPublic()))
    return 1;
  int64_t alignment = bufferAlignment;
  for (func::CallOp call : *calls)
    alignment = std::min(alignment,
                         pointerAlignment(call.getOperand(arg.getArgNumber()),
                                          bufferAlignment, depth + 1));
  return alignment;
}

} // namespace

int64_t weft::knownAlignment(Value memref, int64_t bufferAlignment) {
  auto type = cast<MemRefType>(memref.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!type.getElementType().isIntOrFloat() ||
      failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset))
    return 1;
  return powerOfTwoDividing(offset * weft::elementBytes(type),
                            pointerAlignment(memref, bufferAlignment, 0));
}

bool weft::buffersMayAlias(Value a, Value b) { return mayAlias(a, b, 0); }

Value weft::aliasRoot(Value memref) { return extentOf(memref).root; }

struct weft::CallSitesCache::Found {
  llvm::DenseMap<Operation *, CallSites> calls;
};

weft::CallSitesCache::CallSitesCache()
    : found(std::make_unique<Found>()), outer(callSitesCache) {
  callSitesCache = &found->calls;
}

weft::CallSitesCache::~CallSitesCache() {
  callSitesCache = static_cast<llvm::DenseMap<Operation *, CallSites> *>(outer);
}

bool weft::rootsMayAlias(Value a, Value b) { return rootsMayAliasAt(a, b, 0); }

Value weft::rankedArgument(Value memref) {
  if (isa<UnrankedMemRefType>(memref.getType()))
    if (auto cast = memref.getDefiningOp<memref::CastOp>())
      return cast.getSource();
  return memref;
}

bool weft::operandMayAlias(Value operand, Value buffer) {
  Value ranked = rankedArgument(operand);
  return !isa<MemRefType>(ranked.getType()) ||
         weft::buffersMayAlias(ranked, buffer);
}

bool weft::touches(Operation *op, Value buffer) {
  return op
      ->walk([&](Operation *nested) {
        if (isMemoryEffectFree(nested))
          return WalkResult::advance();
        for (Value operand : nested->getOperands())
          if (isa<BaseMemRefType>(operand.getType()) &&
              operandMayAlias(operand, buffer))
            return WalkResult::interrupt();
        return WalkResult::advance();
      })
      .wasInterrupted();
}

/// The function `op` calls, if it is a call of a known one.
static func::FuncOp calleeOf(Operation *op) {
  auto call = dyn_cast<func::CallOp>(op);
  return call ? SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
                    call, call.getCalleeAttr())
              : func::FuncOp();
}

bool weft::isGemmCall(Operation *op) {
  func::FuncOp callee = calleeOf(op);
  return callee && callee->hasAttr(weft::kGemmAttrName);
}

bool weft::isFusedAttentionCall(Operation *op, bool &backward) {
  func::FuncOp callee = calleeOf(op);
  auto kind =
      callee ? callee->getAttrOfType<StringAttr>(weft::kFusedAttentionAttrName)
             : StringAttr();
  if (!kind)
    return false;
  backward = kind.getValue() == "backward";
  return true;
}

bool weft::libraryCallWrites(Operation *call, unsigned index) {
  if (bool backward; isFusedAttentionCall(call, backward))
    return runtime::attentionOverwrites(backward, index);
  // Flags not known: the bias and aux may be written too.
  int64_t flags = runtime::kGemmBiasGradient | runtime::kGemmGelu;
  if (call->getNumOperands() == runtime::kGemmOperands)
    flags = getConstantIntValue(call->getOperand(runtime::kGemmFlagsOperand))
                .value_or(flags);
  return runtime::gemmWrites(flags, index);
}

bool weft::mayWrite(Operation *op, Value buffer) {
  return op
      ->walk([&](Operation *nested) {
        if (bool backward;
            isFusedAttentionCall(nested, backward) || isGemmCall(nested)) {
          for (auto [index, operand] : llvm::enumerate(nested->getOperands()))
            if (isa<BaseMemRefType>(operand.getType()) &&
                libraryCallWrites(nested, index) &&
                operandMayAlias(operand, buffer))
              return WalkResult::interrupt();
          return WalkResult::advance();
        }
        // The walk visits the ops inside an op of recursive effects; a
        // linalg op states its own as well.
        auto effects = dyn_cast<MemoryEffectOpInterface>(nested);
        if (!effects && nested->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
          return WalkResult::advance();
        if (!effects) {
          for (Value operand : nested->getOperands())
            if (isa<BaseMemRefType>(operand.getType()) &&
                operandMayAlias(operand, buffer))
              return WalkResult::interrupt();
          return WalkResult::advance();
        }
        SmallVector<MemoryEffects::EffectInstance> instances;
        effects.getEffects(instances);
        for (auto &instance : instances) {
          if (!isa<MemoryEffects::Write, MemoryEffects::Free>(
                  instance.getEffect()))
            continue;
          Value target = instance.getValue();
          if (!target || !isa<BaseMemRefType>(target.getType()) ||
              operandMayAlias(target, buffer))
            return WalkResult::interrupt();
        }
        return WalkResult::advance();
      })
      .wasInterrupted();
}

bool weft::canHoist(Value value, Operation *before) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != before->getBlock() ||
      def->isBeforeInBlock(before))
    return true;
  return def->getNumRegions() == 0 &&
         (isMemoryEffectFree(def) || isa<memref::AllocOp>(def)) &&
         llvm::all_of(def->getOperands(),
                      [&](Value operand) { return canHoist(operand, before); });
}

void weft::hoist(Value value, Operation *before) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != before->getBlock() ||
      def->isBeforeInBlock(before))
    return;
  for (Value operand : def->getOperands())
    hoist(operand, before);
  def->moveBefore(before);
}
