//===- weft-opt.cpp - The opt-style pass driver for Weft IR ---------------===//

#include "weft/InitAllDialects.h"
#include "weft/InitAllPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  weft::registerAllDialects(registry);
  weft::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Weft optimizer driver\n", registry));
}
