//===- weft-translate.cpp - Translate models into Weft IR -----------------===//
//
// weft-translate --import-onnx model.onnx [--dim name=N]... [-o out.mlir]
// weft-translate --synthetic gpt:layers=96,hidden=12288,... [-o out.mlir]
//
// Diagnostics are one line each: `<file>: error: <message>`. On error the
// exit code is 1 and no output file is written.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/Transforms/Passes.h"
#include "weft/InitAllDialects.h"
#include "weft/InitAllPasses.h"
#include "weft/Support/CrashGuard.h"
#include "weft/Target/ONNX/ImportONNX.h"
#include "weft/Target/Synthetic/SyntheticModel.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("weft-translate options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model>"),
                                      cl::cat(category));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::cat(category));
static cl::opt<bool> importONNX(
    "import-onnx",
    cl::desc("Import an ONNX model (.onnx protobuf or .onnxtxt text)"),
    cl::cat(category));
static cl::list<std::string>
    dims("dim", cl::desc("Bind a symbolic dimension: --dim batch=8"),
         cl::value_desc("name=value"), cl::cat(category));
static cl::opt<bool>
    fuse("fuse", cl::desc("Run the weft-fuse-idioms pipeline after importing"),
         cl::cat(category));
static cl::opt<std::string> synthetic(
    "synthetic",
    cl::desc("Write a model from its shape, without weights: "
             "gpt:layers=N,hidden=N,heads=N,vocab=N,seq=N[,ffn=N][,batch=N] "
             "or llama:...,kv-heads=N,ffn=N; either with "
             "experts=N[,top-k=N][,capacity=N] for mixtures of experts"),
    cl::value_desc("family:key=value,..."), cl::cat(category));
static cl::opt<bool> listOps("list-supported-ops",
                             cl::desc("Print the supported ONNX op types"),
                             cl::cat(category));

/// Prints `<file>: error: <message>` using the innermost file location.
static void printDiagnostic(Diagnostic &diag) {
  std::string file = inputFile;
  diag.getLocation()->walk([&](Location loc) {
    if (auto fileLoc = llvm::dyn_cast<FileLineColLoc>(loc)) {
      file = fileLoc.getFilename().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  StringRef severity = diag.getSeverity() == DiagnosticSeverity::Error ? "error"
                       : diag.getSeverity() == DiagnosticSeverity::Warning
                           ? "warning"
                           : "note";
  std::string message = diag.str();
  std::replace(message.begin(), message.end(), '\n', ' ');
  llvm::errs() << file << ": " << severity << ": " << message << "\n";
}

int main(int argc, char **argv) {
  weft::installCrashGuard("weft-translate");
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Weft model translator\n");

  if (listOps) {
    for (const std::string &op : weft::supportedONNXOps())
      llvm::outs() << op << "\n";
    return 0;
  }
  auto fail = [](const llvm::Twine &message) {
    llvm::errs() << "weft-translate: error: " << message << "\n";
    return 1;
  };
  if (importONNX == !synthetic.empty())
    return fail("choose one translation: --import-onnx or --synthetic");
  if (importONNX && inputFile.empty())
    return fail("no input model given");
  if (!synthetic.empty() && !inputFile.empty())
    return fail("--synthetic takes no input file");

  weft::ONNXImportOptions options;
  std::string dimError;
  if (!options.bindDims(dims, dimError))
    return fail(dimError);
  std::optional<weft::SyntheticModelSpec> spec;
  if (!synthetic.empty()) {
    std::string error;
    spec = weft::SyntheticModelSpec::parse(synthetic, error);
    if (!spec)
      return fail("--synthetic: " + error);
  }

  DialectRegistry registry;
  weft::registerAllDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    printDiagnostic(diag);
    return success();
  });

  OwningOpRef<ModuleOp> module =
      spec ? weft::buildSyntheticModel(*spec, &context)
           : weft::importONNXFile(inputFile, &context, options);
  if (!module)
    return 1;
  if (fuse) {
    PassManager pm(&context);
    weft::buildFuseIdiomsPipeline(pm);
    if (failed(pm.run(*module)))
      return 1;
  }

  std::string errorMessage;
  auto output = openOutputFile(outputFile, &errorMessage);
  if (!output)
    return fail(errorMessage);
  module->print(output->os());
  output->keep();
  return 0;
}
