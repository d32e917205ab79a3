//===- weft-eval.cpp - Run Weft IR on the reference evaluator -------------===//
//
// Two checks built on the reference semantics of the weft dialect:
//
//   weft-eval file.mlir --compare-pipeline=weft-fuse-idioms [--seed N]
//     evaluates every function on random inputs before and after the
//     pipeline and compares: a rewrite must not change what is computed.
//
//   weft-eval model.mlir --data-dir=test_data_set_0 [--pipeline=P]
//     feeds input_<i>.pb to the `weft.input` arguments in order, the model's
//     initializers to the `weft.param` arguments, and compares the results
//     with output_<i>.pb.
//
// Tolerance: |actual - expected| <= atol + rtol * |expected|.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Reference/Evaluator.h"
#include "weft/InitAllDialects.h"
#include "weft/InitAllPasses.h"
#include "weft/Support/CrashGuard.h"
#include "weft/Target/ONNX/ImportONNX.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Format.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/ToolUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <random>

using namespace mlir;
using weft::HostTensor;
namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<file.mlir>"),
                                      cl::init("-"));
static cl::opt<bool> splitInputFile("split-input-file",
                                    cl::desc("Check each '// -----' chunk"));
static cl::opt<std::string>
    comparePipeline("compare-pipeline",
                    cl::desc("Compare each function before and after this "
                             "pass pipeline on random inputs"));
static cl::opt<std::string>
    dataDir("data-dir", cl::desc("Directory with input_<i>.pb and "
                                 "output_<i>.pb to check `main` against"));
static cl::opt<std::string>
    pipeline("pipeline", cl::desc("Pass pipeline to run before --data-dir"));
static cl::opt<unsigned> seed("seed", cl::desc("Random input seed"),
                              cl::init(1));
static cl::opt<double> relTolerance("rtol", cl::desc("Relative tolerance"),
                            cl::init(1e-5));
static cl::opt<double> absTolerance("atol", cl::desc("Absolute tolerance"),
                            cl::init(1e-6));

namespace {

HostTensor randomTensor(RankedTensorType type, std::mt19937_64 &rng) {
  HostTensor t = HostTensor::zeros(type.getShape(), type.getElementType());
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int64_t> small(0, 7);
  std::uniform_int_distribution<int64_t> coin(0, 1);
  for (double &v : t.floats)
    v = normal(rng);
  bool isBool = type.getElementType().isInteger(1);
  for (int64_t &v : t.ints)
    v = isBool ? coin(rng) : small(rng);
  return t;
}

/// Compares two tensors; prints a report line; returns whether they match.
bool compare(StringRef what, const HostTensor &actual,
             const HostTensor &expected) {
  if (actual.shape != expected.shape) {
    llvm::outs() << what << ": shape mismatch\n";
    return false;
  }
  double maxError = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < expected.size(); ++i) {
    double a = actual.asDouble(i), e = expected.asDouble(i);
    if (std::isnan(a) && std::isnan(e))
      continue;
    double error = std::abs(a - e);
    if (!(error <= absTolerance + relTolerance * std::abs(e)))
      ++bad;
    if (!(error <= maxError))
      maxError = error;
  }
  llvm::outs() << what << ": " << expected.size() << " values, max abs error "
               << llvm::format("%.3g", maxError) << ": "
               << (bad ? "MISMATCH (" + std::to_string(bad) + " values)"
                       : std::string("ok"))
               << "\n";
  return bad == 0;
}

LogicalResult runPipeline(ModuleOp module, StringRef text) {
  PassManager pm(module.getContext());
  std::string error;
  llvm::raw_string_ostream os(error);
  if (failed(parsePassPipeline(text, pm, os))) {
    llvm::errs() << "weft-eval: error: bad pipeline '" << text << "': "
                 << error << "\n";
    return failure();
  }
  return pm.run(module);
}

/// Evaluates each function before and after the pipeline.
LogicalResult checkPipeline(ModuleOp module) {
  OwningOpRef<ModuleOp> rewritten = module.clone();
  if (failed(runPipeline(*rewritten, comparePipeline)))
    return failure();
  bool ok = true;
  std::mt19937_64 rng(seed);
  for (auto func : module.getOps<func::FuncOp>()) {
    SmallVector<HostTensor> args;
    for (Type type : func.getArgumentTypes())
      args.push_back(randomTensor(llvm::cast<RankedTensorType>(type), rng));
    auto after = rewritten->lookupSymbol<func::FuncOp>(func.getSymName());
    FailureOr<SmallVector<HostTensor>> before =
        weft::evaluateFunction(func, args);
    FailureOr<SmallVector<HostTensor>> afterValues =
        weft::evaluateFunction(after, args);
    if (failed(before) || failed(afterValues))
      return failure();
    for (auto [i, pair] : llvm::enumerate(llvm::zip(*afterValues, *before)))
      ok &= compare(("@" + func.getSymName() + " result #" + Twine(i)).str(),
                    std::get<0>(pair), std::get<1>(pair));
  }
  return success(ok);
}

/// Evaluates `main` on an ONNX test data set.
LogicalResult checkDataSet(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  if (!pipeline.empty() && failed(runPipeline(module, pipeline)))
    return failure();
  auto main = module.lookupSymbol<func::FuncOp>("main");
  auto weights = module->getAttrOfType<StringAttr>(
      weft::WeftDialect::kWeightsAttrName);
  bool hasParams = main && llvm::any_of(main.getArguments(), [&](auto arg) {
                     return main.getArgAttr(arg.getArgNumber(),
                                            weft::WeftDialect::kParamAttrName);
                   });
  if (!main || (hasParams && !weights)) {
    llvm::errs() << "weft-eval: error: --data-dir needs func @main, and "
                    "weft.weights on the module when it has parameters\n";
    return failure();
  }
  FailureOr<llvm::StringMap<weft::HostTensor>> params =
      llvm::StringMap<weft::HostTensor>();
  if (hasParams)
    params = weft::readONNXInitializers(weights.getValue(), ctx);
  if (failed(params))
    return failure();
  SmallVector<HostTensor> args;
  int inputIndex = 0;
  for (unsigned i = 0; i < main.getNumArguments(); ++i) {
    if (auto name = main.getArgAttrOfType<StringAttr>(
            i, weft::WeftDialect::kParamAttrName)) {
      auto it = params->find(name.getValue());
      if (it == params->end()) {
        llvm::errs() << "weft-eval: error: weight '" << name.getValue()
                     << "' is not in " << weights.getValue() << "\n";
        return failure();
      }
      args.push_back(it->second);
      continue;
    }
    SmallString<256> file(dataDir);
    llvm::sys::path::append(file, "input_" + Twine(inputIndex++) + ".pb");
    FailureOr<HostTensor> input = weft::readONNXTensorFile(file, ctx);
    if (failed(input))
      return failure();
    args.push_back(*input);
  }
  FailureOr<SmallVector<HostTensor>> results =
      weft::evaluateFunction(main, args);
  if (failed(results))
    return failure();
  auto names = main->getAttrOfType<ArrayAttr>(
      weft::WeftDialect::kOutputsAttrName);
  bool ok = true;
  for (auto [i, result] : llvm::enumerate(*results)) {
    SmallString<256> file(dataDir);
    llvm::sys::path::append(file, "output_" + Twine(i) + ".pb");
    FailureOr<HostTensor> expected = weft::readONNXTensorFile(file, ctx);
    if (failed(expected))
      return failure();
    std::string what = "output '" +
                       llvm::cast<StringAttr>(names[i]).getValue().str() + "'";
    ok &= compare(what, result, *expected);
  }
  return success(ok);
}

LogicalResult processBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer,
                            MLIRContext &context) {
  auto sourceMgr = std::make_shared<llvm::SourceMgr>();
  sourceMgr->AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  SourceMgrDiagnosticHandler handler(*sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return failure();
  return dataDir.empty() ? checkPipeline(*module) : checkDataSet(*module);
}

} // namespace

int main(int argc, char **argv) {
  weft::installCrashGuard("weft-eval");
  llvm::InitLLVM init(argc, argv);
  weft::registerAllPasses();
  cl::ParseCommandLineOptions(argc, argv, "Weft reference evaluator\n");
  if (comparePipeline.empty() == dataDir.empty()) {
    llvm::errs() << "weft-eval: error: give exactly one of "
                    "--compare-pipeline and --data-dir\n";
    return 1;
  }
  DialectRegistry registry;
  weft::registerAllDialects(registry);
  MLIRContext context(registry);
  std::string error;
  auto file = openInputFile(inputFile, &error);
  if (!file) {
    llvm::errs() << "weft-eval: error: " << error << "\n";
    return 1;
  }
  auto process = [&](std::unique_ptr<llvm::MemoryBuffer> chunk,
                     const llvm::MemoryBufferRef &, raw_ostream &) {
    return processBuffer(std::move(chunk), context);
  };
  if (splitInputFile)
    return failed(splitAndProcessBuffer(std::move(file), process, llvm::outs()))
               ? 1
               : 0;
  return failed(process(std::move(file), {}, llvm::outs())) ? 1 : 0;
}
