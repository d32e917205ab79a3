//===- CPUTarget.h - Compile weft IR to native CPU code ---------*- C++ -*-===//

#ifndef WEFT_TARGET_CPU_CPUTARGET_H
#define WEFT_TARGET_CPU_CPUTARGET_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace weft {

struct CPUPipelineOptions {
  /// 0 skips the tensor-level fusion of elementwise linalg ops.
  unsigned optLevel = 2;
};

/// Adds the lowering of weft IR (after the weft-level passes) to the LLVM
/// dialect: linalg on tensors, bufferization with results as out-params,
/// deallocation, loops, and the LLVM conversions.
void buildLowerToLLVMPipeline(mlir::OpPassManager &pm,
                              const CPUPipelineOptions &options);

/// Registers `weft-lower-to-llvm` for weft-opt.
void registerCPUPipelines();

/// One buffer of the compiled entry: an argument of `main` or a result.
struct EntryBuffer {
  enum class Role { Input, Param, Output };
  Role role;
  std::string name;
  mlir::RankedTensorType type;
  uint64_t weightsOffset = 0; // params only
};

/// The buffers of `func` in entry order (arguments, then results). Params
/// get offsets in a weights file laid out 64-byte aligned after a 64-byte
/// header; `weightsBytes` is the file's size.
std::vector<EntryBuffer> describeEntry(mlir::func::FuncOp func,
                                       uint64_t &weightsBytes);

/// The manifest text the runtime parses (see runtime/lib/Model.cpp).
std::string buildManifest(const std::vector<EntryBuffer> &buffers);

/// FNV-1a hash of the manifest; the weights file header carries it.
uint64_t manifestHash(const std::string &manifest);

/// Translates the lowered module to LLVM IR, adds `weft_entry` (unpacking an
/// array of buffer pointers into the memref arguments of `entryName`) and
/// the `weft_manifest` string, and optimizes at `optLevel`.
std::unique_ptr<llvm::Module>
translateToLLVMIR(mlir::ModuleOp module, llvm::LLVMContext &context,
                  llvm::StringRef entryName,
                  const std::vector<EntryBuffer> &buffers,
                  const std::string &manifest, unsigned optLevel,
                  std::string &error);

/// Writes a native object file for the host CPU.
bool emitObjectFile(llvm::Module &module, llvm::StringRef path,
                    unsigned optLevel, std::string &error);

} // namespace weft

#endif // WEFT_TARGET_CPU_CPUTARGET_H
