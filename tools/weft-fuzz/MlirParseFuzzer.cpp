//===- MlirParseFuzzer.cpp - Fuzzes weft-opt's .mlir parser path ----------===//
//
// An input is .mlir text, parsed (and so verified) as weft-opt parses it,
// with Weft's dialect and those its IR is written in (func, arith, tensor,
// shard); a module that parses is printed back, generic and custom forms,
// to exercise the printers of Weft's ops. weft-opt also registers the rest
// of upstream MLIR, whose parsers are upstream's to fuzz (one, linalg's
// transpose, crashes on a truncated permutation: docs/reliability.md).
//
//===----------------------------------------------------------------------===//

#include "FuzzContext.h"
#include "FuzzInput.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

namespace {

void registerParsedDialects(mlir::DialectRegistry &registry) {
  registry.insert<weft::WeftDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect,
                  mlir::shard::ShardDialect>();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext &context =
      weft::fuzz::reusedContext(registerParsedDialects);
  std::string firstError;
  mlir::ScopedDiagnosticHandler quiet(&context, [&](mlir::Diagnostic &d) {
    if (firstError.empty())
      firstError = d.str();
    return mlir::success();
  });
  // The lexer needs the NUL after the text that weft-opt's file buffers
  // have (libFuzzer's data has none).
  std::string text(reinterpret_cast<const char *>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text,
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
