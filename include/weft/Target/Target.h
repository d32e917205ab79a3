//===- Target.h - The seam between the compiler and a backend ---*- C++ -*-===//
//
// A target takes a partitioned weft program down to the LLVM dialect of its
// host code and links the objects into an executable with its runtime. The
// executable ABI between them (entry, manifest, weights file) is the same
// for every target: weft/Target/Executable/Executable.h.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_TARGET_H
#define WEFT_TARGET_TARGET_H

#include "weft/Lowering/Pipeline.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace weft {

class Target {
public:
  virtual ~Target() = default;
  /// What `weftc --target` calls it.
  virtual llvm::StringRef name() const = 0;
  /// What runs its executables' kernels: a device name of the manifest
  /// (weft::runtime::kCpuDevice, ...).
  virtual llvm::StringRef device() const = 0;
  /// Why the target cannot compile a program (partitioned over a mesh or
  /// not), or "" when it can.
  virtual std::string cannotCompile(bool partitioned) const { return ""; }
  /// Adds the lowering of weft IR (after the weft-level passes and
  /// partitioning) to the LLVM dialect.
  virtual void buildLowering(mlir::OpPassManager &pm,
                             const LoweringOptions &options) const = 0;
  /// Whether attentions computed in `computeType` (f32, bf16) run as fused
  /// kernels, so that the training step differentiates each into one
  /// weft.attention_grad.
  virtual bool fusesAttention(llvm::StringRef computeType) const {
    return false;
  }
  /// Links the program objects into the executable `output` with the
  /// target's runtime libraries from `runtimeDirectory`; a partitioned
  /// model also links the runtime's multi-rank world. With `sharedLibrary`
  /// (one-rank programs) `output` is a shared library exporting the
  /// runtime's C API instead of an executable.
  virtual bool link(llvm::ArrayRef<std::string> objects, llvm::StringRef output,
                    llvm::StringRef runtimeDirectory, bool partitioned,
                    bool sharedLibrary, std::string &error) const = 0;
};

} // namespace weft

#endif // WEFT_TARGET_TARGET_H
