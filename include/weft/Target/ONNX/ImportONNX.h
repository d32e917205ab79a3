//===- ImportONNX.h - ONNX model to weft dialect ----------------*- C++ -*-===//

#ifndef WEFT_TARGET_ONNX_IMPORTONNX_H
#define WEFT_TARGET_ONNX_IMPORTONNX_H

#include "weft/Dialect/Weft/IR/HostTensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"
#include <functional>
#include <string>
#include <vector>

namespace weft {

struct ONNXImportOptions {
  /// Values for symbolic dimensions (`--dim batch=8`).
  llvm::StringMap<int64_t> dims;

  /// Adds `name=value` bindings (the tools' `--dim`); on a malformed one
  /// returns false and describes it in `error`.
  bool bindDims(llvm::ArrayRef<std::string> bindings, std::string &error);
};

/// Imports an ONNX model (binary protobuf, or ONNX text syntax when the path
/// ends in `.onnxtxt`) into a module with one `main` function. Weights
/// become `weft.param` arguments and are not read; their bytes stay in the
/// model file named by the module's `weft.weights` attribute. Reports errors
/// through the context's diagnostic engine and returns null on failure.
mlir::OwningOpRef<mlir::ModuleOp>
importONNXFile(llvm::StringRef path, mlir::MLIRContext *context,
               const ONNXImportOptions &options);

/// Reads an ONNX TensorProto file (the `input_0.pb` files of the ONNX test
/// layout). Errors go to the context's diagnostic engine.
llvm::FailureOr<HostTensor> readONNXTensorFile(llvm::StringRef path,
                                               mlir::MLIRContext *context);

/// Reads every initializer of an ONNX model (external data included),
/// keyed by name: the values of the `weft.param` arguments.
llvm::FailureOr<llvm::StringMap<HostTensor>>
readONNXInitializers(llvm::StringRef modelPath, mlir::MLIRContext *context);

/// Where an initializer goes in a weights file.
struct WeightPlacement {
  std::string name;
  uint64_t offset = 0;
  /// When set, it receives the whole tensor and writes it where it belongs
  /// instead (a partitioned model stores each shard on its own).
  std::function<void(llvm::StringRef bytes, llvm::raw_pwrite_stream &out)>
      write;
};

/// Copies the bytes of the named initializers of an ONNX model into `out`
/// (little-endian, the model's element types). External data is read in
/// chunks when copied as is, so that large models never sit in memory.
mlir::LogicalResult
writeONNXInitializers(llvm::StringRef modelPath,
                      llvm::ArrayRef<WeightPlacement> placement,
                      llvm::raw_pwrite_stream &out, mlir::MLIRContext *context);

/// The default-domain ONNX op types the importer supports, sorted.
std::vector<std::string> supportedONNXOps();

} // namespace weft

#endif // WEFT_TARGET_ONNX_IMPORTONNX_H
