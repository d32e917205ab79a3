//===- FuzzContext.cpp - The MLIR context of the IR fuzz targets ----------===//

#include "FuzzContext.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <memory>

namespace weft::fuzz {

mlir::MLIRContext &
reusedContext(void (*registerDialects)(mlir::DialectRegistry &)) {
  static std::unique_ptr<mlir::MLIRContext> context;
  static int uses = 0;
  if (!context || ++uses % 256 == 0) {
    mlir::DialectRegistry registry;
    registerDialects(registry);
    context = std::make_unique<mlir::MLIRContext>(
        registry, mlir::MLIRContext::Threading::DISABLED);
  }
  return *context;
}

} // namespace weft::fuzz
