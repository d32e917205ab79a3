//===- AssumeAlignment.cpp - Kernels told how their buffers are aligned ---===//

#include "weft/Lowering/BufferAliases.h"
#include "weft/Lowering/Memrefs.h"
#include "weft/Target/GPU/Passes.h"
#include "weft/runtime/Contract.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace weft {
#define GEN_PASS_DEF_WEFTGPUASSUMEALIGNMENT
#include "weft/Target/GPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// The largest power of two, at most `cap`, that divides `value`.
int64_t powerOfTwoDividing(int64_t value, int64_t cap) {
  return value ? std::min<int64_t>(cap, value & -value) : cap;
}

/// The largest power of two, at most `cap`, known to divide every value of
/// the index `index`: through constants, products and sums.
int64_t knownMultiple(Value index, int64_t cap) {
  if (std::optional<int64_t> constant = getConstantIntValue(index))
    return powerOfTwoDividing(*constant, cap);
  if (auto product = index.getDefiningOp<arith::MulIOp>())
    return std::min(cap, knownMultiple(product.getLhs(), cap) *
                             knownMultiple(product.getRhs(), cap));
  if (auto sum = index.getDefiningOp<arith::AddIOp>())
    return std::min(knownMultiple(sum.getLhs(), cap),
                    knownMultiple(sum.getRhs(), cap));
  return 1;
}

/// The alignment known of the first byte of `view`, a subview a kernel
/// takes of a buffer whose first byte is at a multiple of `alignment`.
int64_t subviewAlignment(memref::SubViewOp view, int64_t alignment) {
  auto source = view.getSource().getType();
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!source.getElementType().isIntOrFloat() ||
      failed(source.getStridesAndOffset(strides, offset)))
    return 1;
  int64_t bytes = weft::elementBytes(source);
  for (auto [at, stride] : llvm::zip(view.getMixedOffsets(), strides)) {
    if (ShapedType::isDynamic(stride))
      return 1;
    int64_t multiple =
        isa<Attribute>(at)
            ? powerOfTwoDividing(*getConstantIntValue(at), alignment)
            : knownMultiple(cast<Value>(at), alignment);
    // A power of two times the stride's bytes: the power of two in them.
    alignment = std::min(
        alignment, powerOfTwoDividing(multiple * stride * bytes, alignment));
  }
  return alignment;
}

/// Replaces the uses of `buffer` in `launch` (after `after`, where given)
/// with `memref.assume_alignment` of it, where `alignment` says more than
/// its element type.
void assume(Value buffer, int64_t alignment, OpBuilder &b,
            gpu::LaunchOp launch) {
  if (alignment <= weft::elementBytes(buffer.getType()))
    return;
  auto assumed =
      memref::AssumeAlignmentOp::create(b, buffer.getLoc(), buffer, alignment);
  buffer.replaceUsesWithIf(assumed, [&](OpOperand &use) {
    return use.getOwner() != assumed &&
           launch->isProperAncestor(use.getOwner());
  });
}

struct WeftGpuAssumeAlignmentPass
    : public weft::impl::WeftGpuAssumeAlignmentBase<
          WeftGpuAssumeAlignmentPass> {
  void runOnOperation() override {
    weft::CallSitesCache cacheCallSites;
    getOperation().walk([&](gpu::LaunchOp launch) {
      llvm::SetVector<Value> captured;
      getUsedValuesDefinedAbove(launch.getBody(), captured);
      OpBuilder b = OpBuilder::atBlockBegin(&launch.getBody().front());
      for (Value buffer : captured)
        if (isa<MemRefType>(buffer.getType()))
          assume(buffer,
                 weft::knownAlignment(buffer,
                                      weft::runtime::kDeviceBufferAlignment),
                 b, launch);
      // The views of them the kernel takes (a thread's neighbours,
      // weft-gpu-launch-loops), in order, each from what is known of its
      // source.
      launch.getBody().walk([&](memref::SubViewOp view) {
        auto stated =
            view.getSource().getDefiningOp<memref::AssumeAlignmentOp>();
        if (!stated)
          return;
        b.setInsertionPointAfter(view);
        assume(view, subviewAlignment(view, stated.getAlignment()), b, launch);
      });
    });
  }
};

} // namespace
