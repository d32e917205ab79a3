//===- LaunchMemory.h - Which memory a kernel's access reaches --*- C++ -*-===//
//
// What the emulation checks and the kernel report counts agree on: an
// access of a kernel reaches device memory unless its buffer is the
// kernel's own (a stack buffer) or the block's shared memory.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_TARGET_CUDA_LAUNCHMEMORY_H
#define WEFT_LIB_TARGET_CUDA_LAUNCHMEMORY_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace weft {

/// `memref` with the views made of it stripped: the buffer they show.
inline mlir::Value viewedBuffer(mlir::Value memref) {
  while (auto view = memref.getDefiningOp<mlir::ViewLikeOpInterface>())
    memref = view.getViewSource();
  return memref;
}

/// The buffer defined outside `launch` an access inside it reaches: the
/// views the kernel makes of it stripped.
inline mlir::Value bufferOutside(mlir::Value memref,
                                 mlir::gpu::LaunchOp launch) {
  while (auto view = memref.getDefiningOp<mlir::ViewLikeOpInterface>()) {
    if (!launch->isProperAncestor(view))
      break;
    memref = view.getViewSource();
  }
  return memref;
}

/// Whether `memref` is memory of one thread (a stack buffer the kernel
/// made) rather than device memory.
inline bool isThreadPrivate(mlir::Value memref, mlir::gpu::LaunchOp launch) {
  mlir::Operation *def = viewedBuffer(memref).getDefiningOp();
  return def && mlir::isa<mlir::memref::AllocaOp>(def) &&
         launch->isProperAncestor(def);
}

/// Whether `memref` is the block's shared memory (a workgroup attribution).
inline bool isShared(mlir::Value memref, mlir::gpu::LaunchOp launch) {
  return llvm::is_contained(launch.getWorkgroupAttributions(),
                            viewedBuffer(memref));
}

/// The buffer of device memory a load or store (or atomic) of a kernel
/// reaches, nullptr when it reaches the thread's or the block's memory.
inline mlir::Value deviceMemoryAccessed(mlir::Operation *op,
                                        mlir::gpu::LaunchOp launch) {
  mlir::Value memref;
  if (auto load = mlir::dyn_cast<mlir::memref::LoadOp>(op))
    memref = load.getMemRef();
  else if (auto store = mlir::dyn_cast<mlir::memref::StoreOp>(op))
    memref = store.getMemRef();
  else if (auto rmw = mlir::dyn_cast<mlir::memref::AtomicRMWOp>(op))
    memref = rmw.getMemref();
  if (!memref || isThreadPrivate(memref, launch) || isShared(memref, launch))
    return {};
  return memref;
}

} // namespace weft

#endif // WEFT_LIB_TARGET_CUDA_LAUNCHMEMORY_H
