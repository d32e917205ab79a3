//===- InitAll.cpp - The one place that registers everything -------------===//

#include "weft/InitAllDialects.h"
#include "weft/InitAllPasses.h"

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void weft::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<weft::WeftDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect,
                  mlir::shard::ShardDialect>();
}

void weft::registerAllPasses() {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  weft::registerWeftPasses();
  weft::registerWeftPipelines();
}
