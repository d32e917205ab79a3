//===- RuntimeTypes.h - Element types as the runtime names them -*- C++ -*-===//

#ifndef WEFT_DIALECT_WEFT_IR_RUNTIMETYPES_H
#define WEFT_DIALECT_WEFT_IR_RUNTIMETYPES_H

#include "weft/runtime/CApi.h"

#include "mlir/IR/Types.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace weft {

/// The runtime's dtype of an element type, or std::nullopt for a type the
/// runtime has no buffers of.
std::optional<weft_dtype> runtimeDtype(mlir::Type element);

/// Its name ("f32", "bf16", "i64", "i1"...: weft_dtype_name), as the
/// manifest and the collective entry points spell it.
std::optional<llvm::StringRef> runtimeTypeName(mlir::Type element);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_RUNTIMETYPES_H
