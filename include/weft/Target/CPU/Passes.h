//===- Passes.h - CPU backend passes ----------------------------*- C++ -*-===//

#ifndef WEFT_TARGET_CPU_PASSES_H
#define WEFT_TARGET_CPU_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

namespace weft {

#define GEN_PASS_DECL
#include "weft/Target/CPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "weft/Target/CPU/Passes.h.inc"

} // namespace weft

#endif // WEFT_TARGET_CPU_PASSES_H
