//===- weft-opt.cpp - The opt-style pass driver for Weft IR ---------------===//

#include "weft/InitAllDialects.h"
#include "weft/InitAllPasses.h"
#include "weft/Support/CrashGuard.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

int main(int argc, char **argv) {
  weft::installCrashGuard("weft-opt");
  llvm::InitLLVM init(argc, argv);
  mlir::DialectRegistry registry;
  weft::registerAllDialects(registry);
  weft::registerAllPasses();
  weft::registerTestPasses();
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "Weft optimizer driver\n", registry);
  // mlir-opt's driver, with every pass manager it builds guarded.
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  // Listings read no input: mlir-opt's own driver prints them.
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputFile, outputFile, registry));
  mlir::MlirOptMainConfig parsed = config;
  config.setPassPipelineSetupFn([parsed](mlir::PassManager &passes) {
    weft::guardPasses(passes);
    return parsed.setupPassPipeline(passes);
  });
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFile, &error);
  std::unique_ptr<llvm::ToolOutputFile> output =
      input ? mlir::openOutputFile(outputFile, &error) : nullptr;
  if (!output) {
    llvm::errs() << "weft-opt: error: " << error << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
