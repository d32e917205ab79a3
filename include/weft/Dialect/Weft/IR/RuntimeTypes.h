//===- RuntimeTypes.h - Element types as the runtime names them -*- C++ -*-===//

#ifndef WEFT_DIALECT_WEFT_IR_RUNTIMETYPES_H
#define WEFT_DIALECT_WEFT_IR_RUNTIMETYPES_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace weft {

/// The runtime's name of an element type ("f32", "bf16", "i64", "i1"...),
/// as its manifest and collective entry points spell it; the runtime's
/// weft_dtype_name (runtime/include/weft/runtime/CApi.h) lists the same names.
/// std::nullopt for a type the runtime has no buffers of.
std::optional<llvm::StringRef> runtimeTypeName(mlir::Type element);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_RUNTIMETYPES_H
