//===- Memrefs.h - Facts about buffers the lowering relies on ---*- C++ -*-===//

#ifndef WEFT_LOWERING_MEMREFS_H
#define WEFT_LOWERING_MEMREFS_H

#include "mlir/IR/BuiltinTypes.h"

namespace weft {

/// Whether `type` is a memref laid out row-major without gaps (an identity
/// layout): a copy between two of them is one block copy, not a loop nest.
inline bool isContiguousMemRef(mlir::Type type) {
  auto memref = llvm::dyn_cast<mlir::MemRefType>(type);
  return memref && memref.getLayout().isIdentity();
}

/// The bytes of one element of the shaped type `type` (an index or other
/// non-numeric element: 8).
inline int64_t elementBytes(mlir::Type type) {
  mlir::Type element = llvm::cast<mlir::ShapedType>(type).getElementType();
  return element.isIntOrFloat() ? (element.getIntOrFloatBitWidth() + 7) / 8 : 8;
}

} // namespace weft

#endif // WEFT_LOWERING_MEMREFS_H
