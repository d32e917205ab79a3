//===- Passes.h - Passes on the gpu dialect ---------------------*- C++ -*-===//

#ifndef WEFT_TARGET_GPU_PASSES_H
#define WEFT_TARGET_GPU_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

#include "weft/runtime/Contract.h"

namespace weft {

#define GEN_PASS_DECL
#include "weft/Target/GPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "weft/Target/GPU/Passes.h.inc"

} // namespace weft

#endif // WEFT_TARGET_GPU_PASSES_H
