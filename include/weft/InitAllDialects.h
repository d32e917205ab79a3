//===- InitAllDialects.h - Every dialect a Weft tool loads ------*- C++ -*-===//

#ifndef WEFT_INITALLDIALECTS_H
#define WEFT_INITALLDIALECTS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace weft {

/// Registers the weft dialect and the upstream dialects Weft lowers through.
void registerAllDialects(mlir::DialectRegistry &registry);

} // namespace weft

#endif // WEFT_INITALLDIALECTS_H
