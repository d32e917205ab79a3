//===- ImportONNX.h - ONNX model to weft dialect ----------------*- C++ -*-===//

#ifndef WEFT_TARGET_ONNX_IMPORTONNX_H
#define WEFT_TARGET_ONNX_IMPORTONNX_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include <string>
#include <vector>

namespace weft {

struct ONNXImportOptions {
  /// Values for symbolic dimensions (`--dim batch=8`).
  llvm::StringMap<int64_t> dims;
};

/// Imports an ONNX model (binary protobuf, or ONNX text syntax when the path
/// ends in `.onnxtxt`) into a module with one `main` function. Weights
/// become `weft.param` arguments and are not read; their bytes stay in the
/// model file named by the module's `weft.weights` attribute. Reports errors
/// through the context's diagnostic engine and returns null on failure.
mlir::OwningOpRef<mlir::ModuleOp>
importONNXFile(llvm::StringRef path, mlir::MLIRContext *context,
               const ONNXImportOptions &options);

/// The default-domain ONNX op types the importer supports, sorted.
std::vector<std::string> supportedONNXOps();

} // namespace weft

#endif // WEFT_TARGET_ONNX_IMPORTONNX_H
