//===- RuntimeLinkedTarget.h - Linking the runtime --------------*- C++ -*-===//
//
// Part of the target seam (weft/Target/Target.h): how a target whose
// programs run under Weft's runtime links them.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_EXECUTABLE_RUNTIMELINKEDTARGET_H
#define WEFT_TARGET_EXECUTABLE_RUNTIMELINKEDTARGET_H

#include "weft/Target/Target.h"

#include "llvm/ADT/SmallVector.h"

namespace weft {

/// A target whose executables link Weft's runtime (runtime/): the core
/// (libweft_runtime.a, libweft_runtime_main.a, libweft_contract.a, libomp),
/// the backend libraries of runtimeBackends() whole (each registers its
/// device), OpenBLAS where the CPU backend is among them, and for a
/// partitioned model the MPI world.
class RuntimeLinkedTarget : public Target {
public:
  bool link(llvm::ArrayRef<std::string> objects, llvm::StringRef output,
            llvm::StringRef runtimeDirectory, bool partitioned,
            bool sharedLibrary, std::string &error) const override;

  /// The runtime backends (runtime/lib/<backend>) the executables link: the
  /// one that serves device() (Contract.h, runtimeBackendOf), and those it
  /// builds on.
  virtual llvm::SmallVector<std::string, 2> runtimeBackends() const;
};

} // namespace weft

#endif // WEFT_TARGET_EXECUTABLE_RUNTIMELINKEDTARGET_H
