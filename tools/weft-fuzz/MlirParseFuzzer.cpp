//===- MlirParseFuzzer.cpp - Fuzzes weft-opt's .mlir parser path ----------===//
//
// An input is .mlir text, parsed (and so verified) with every dialect
// weft-opt registers; a module that parses is printed back, generic and
// custom forms, to exercise the printers of Weft's ops.
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"
#include "weft/InitAllDialects.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>

namespace {

mlir::MLIRContext &freshEnoughContext() {
  static std::unique_ptr<mlir::MLIRContext> context;
  static int uses = 0;
  if (!context || ++uses % 256 == 0) {
    mlir::DialectRegistry registry;
    weft::registerAllDialects(registry);
    context = std::make_unique<mlir::MLIRContext>(
        registry, mlir::MLIRContext::Threading::DISABLED);
  }
  return *context;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext &context = freshEnoughContext();
  std::string firstError;
  mlir::ScopedDiagnosticHandler quiet(&context, [&](mlir::Diagnostic &d) {
    if (firstError.empty())
      firstError = d.str();
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(
          llvm::StringRef(reinterpret_cast<const char *>(data), size),
          mlir::ParserConfig(&context));
  weft::fuzz::report(module ? "" : firstError);
  if (!module)
    return 0;
  std::string printed;
  llvm::raw_string_ostream out(printed);
  module->print(out);
  module->print(out, mlir::OpPrintingFlags().printGenericOpForm());
  return 0;
}
