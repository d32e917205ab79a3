//===- OnnxImportFuzzer.cpp - Fuzzes the ONNX importer --------------------===//
//
// An input is an ONNX model: binary protobuf, or the ONNX text syntax when
// it starts with '<' (the header every text model opens with). A model the
// importer accepts must verify; anything else is fine as long as it is a
// diagnostic, not a crash.
//
//===----------------------------------------------------------------------===//

#include "FuzzContext.h"
#include "FuzzInput.h"
#include "weft/InitAllDialects.h"
#include "weft/Target/ONNX/ImportONNX.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bool text = size > 0 && data[0] == '<';
  std::string path = weft::fuzz::writeScratchFile(
      text ? "model.onnxtxt" : "model.onnx", data, size);
  mlir::MLIRContext &context =
      weft::fuzz::reusedContext(weft::registerAllDialects);
  std::string firstError;
  mlir::ScopedDiagnosticHandler quiet(&context, [&](mlir::Diagnostic &d) {
    if (firstError.empty())
      firstError = d.str();
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      weft::importONNXFile(path, &context, weft::ONNXImportOptions());
  weft::fuzz::report(module ? "" : firstError);
  if (module && mlir::failed(mlir::verify(*module))) {
    fprintf(stderr, "weft-fuzz: the importer accepted a model and built IR "
                    "that does not verify\n");
    abort();
  }
  return 0;
}
