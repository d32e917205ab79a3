//===- Layers.h - Which transformer layer a name belongs to -----*- C++ -*-===//
//
// Exporters name a layer's ops and weights with its index ("/h.3/attn/MatMul",
// "h.3.attn.c_attn.weight", "/model/layers.3/mlp/..."). Pipeline stages,
// recomputation and ZeRO-3's gathers all group by that prefix.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_LAYERS_H
#define WEFT_DIALECT_WEFT_IR_LAYERS_H

#include "mlir/IR/Location.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace weft {

/// The prefix of `name` up to its first component ('/' or '.' separated)
/// that is a number: "/h.3/attn/MatMul" -> "/h.3", "h.3.mlp.c_fc.weight"
/// -> "h.3"; std::nullopt when no component is a number.
std::optional<std::string> numberedLayerOf(llvm::StringRef name);

/// The same for the first name in `loc`.
std::optional<std::string> numberedLayerOf(mlir::Location loc);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_LAYERS_H
