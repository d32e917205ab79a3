//===- Passes.h - CPU backend passes ----------------------------*- C++ -*-===//

#ifndef WEFT_TARGET_CPU_PASSES_H
#define WEFT_TARGET_CPU_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace weft {

#define GEN_PASS_DECL
#include "weft/Target/CPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "weft/Target/CPU/Passes.h.inc"

} // namespace weft

#endif // WEFT_TARGET_CPU_PASSES_H
