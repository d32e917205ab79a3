//===- WeftInterfaces.h - What every weft op declares -----------*- C++ -*-===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTINTERFACES_H
#define WEFT_DIALECT_WEFT_IR_WEFTINTERFACES_H

#include "weft/Dialect/Weft/IR/HostTensor.h"
#include "weft/Dialect/Weft/IR/ShardingRule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include "weft/Dialect/Weft/IR/WeftInterfaces.h.inc"

#endif // WEFT_DIALECT_WEFT_IR_WEFTINTERFACES_H
