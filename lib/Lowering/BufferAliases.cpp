//===- BufferAliases.cpp - Which buffers of host code may share bytes -----===//

#include "weft/Lowering/BufferAliases.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

namespace {

/// The bytes a buffer may touch: the value its views start from and, where
/// the views are static, the bytes from that value's first byte.
struct Extent {
  Value root;
  std::optional<std::pair<int64_t, int64_t>> bytes; // [begin, end)
};

int64_t elementBytes(MemRefType type) {
  Type element = type.getElementType();
  return element.isIntOrFloat() ? (element.getIntOrFloatBitWidth() + 7) / 8 : 8;
}

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
      int64_t size = elementBytes(type);
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
    if (!isa<memref::SubViewOp, memref::CastOp, memref::ExpandShapeOp,
             memref::CollapseShapeOp, memref::ReinterpretCastOp,
             memref::TransposeOp>(def))
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

bool argumentsMayAlias(BlockArgument a, BlockArgument b, unsigned depth) {
  auto function = cast<func::FuncOp>(a.getOwner()->getParentOp());
  if (function.isPublic())
    return false;
  if (depth > 8)
    return true;
  auto module = function->getParentOfType<ModuleOp>();
  std::optional<SymbolTable::UseRange> uses =
      SymbolTable::getSymbolUses(function, module);
  if (!uses)
    return true;
  for (const SymbolTable::SymbolUse &use : *uses) {
    auto call = dyn_cast<func::CallOp>(use.getUser());
    if (!call)
      return true;
    if (mayAlias(call.getOperand(a.getArgNumber()),
                 call.getOperand(b.getArgNumber()), depth + 1))
      return true;
  }
  return false;
}

bool mayAlias(Value a, Value b, unsigned depth) {
  Extent x = extentOf(a), y = extentOf(b);
  if (x.root == y.root)
    return !x.bytes || !y.bytes ||
           (x.bytes->first < y.bytes->second &&
            y.bytes->first < x.bytes->second);
  RootKind kx = kindOf(x.root), ky = kindOf(y.root);
  if (kx == RootKind::Unknown || ky == RootKind::Unknown)
    return true;
  if (kx == RootKind::Allocation || ky == RootKind::Allocation)
    return false;
  if (kx == RootKind::Global && ky == RootKind::Global)
    return x.root.getDefiningOp<memref::GetGlobalOp>().getName() ==
           y.root.getDefiningOp<memref::GetGlobalOp>().getName();
  if (kx == RootKind::Argument && ky == RootKind::Argument)
    return argumentsMayAlias(cast<BlockArgument>(x.root),
                             cast<BlockArgument>(y.root), depth);
  // A global and an argument: distinct unless a private function is passed
  // the global.
  Value arg = kx == RootKind::Argument ? x.root : y.root;
  return !cast<func::FuncOp>(arg.getParentBlock()->getParentOp()).isPublic();
}

} // namespace

bool weft::buffersMayAlias(Value a, Value b) { return mayAlias(a, b, 0); }
