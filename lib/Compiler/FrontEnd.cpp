//===- FrontEnd.cpp - Models in, and the plans to train them --------------===//

#include "weft/Compiler/FrontEnd.h"

#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"
#include "weft/InitAllDialects.h"
#include "weft/Support/CrashGuard.h"
#include "weft/Target/ONNX/ImportONNX.h"
#include "weft/Target/Synthetic/SyntheticModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"

using namespace mlir;
using namespace weft;

std::string weft::formatDiagnostic(Diagnostic &diagnostic) {
  std::string message = diagnostic.str();
  std::replace(message.begin(), message.end(), '\n', ' ');
  if (llvm::isa<UnknownLoc>(diagnostic.getLocation()))
    return message;
  std::string where;
  llvm::raw_string_ostream os(where);
  diagnostic.getLocation().print(os);
  return message + " (at " + where + ")";
}

/// Marks each integer input whose values reach a gather's indices (through
/// reshapes and integer casts) with the smallest gathered dim they index,
/// so that the runner can refuse a value that would read past the table.
static void markIndexBounds(ModuleOp module) {
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.isExternal())
      continue;
    for (BlockArgument arg : function.getArguments()) {
      auto type = llvm::dyn_cast<RankedTensorType>(arg.getType());
      if (!type || !llvm::isa<IntegerType>(type.getElementType()) ||
          !function.getArgAttr(arg.getArgNumber(), WeftDialect::kInputAttrName))
        continue;
      int64_t bound = 0;
      SmallVector<Value> worklist{arg};
      while (!worklist.empty()) {
        Value value = worklist.pop_back_val();
        for (OpOperand &use : value.getUses()) {
          Operation *user = use.getOwner();
          if (auto gather = dyn_cast<GatherOp>(user)) {
            if (use.getOperandNumber() != 1)
              continue;
            int64_t size =
                tensorTypeOf(gather.getData())
                    .getDimSize(static_cast<int64_t>(gather.getAxis()));
            bound = bound ? std::min(bound, size) : size;
          } else if (isa<ReshapeOp, SqueezeOp, UnsqueezeOp>(user) ||
                     (isa<CastOp>(user) &&
                      llvm::isa<IntegerType>(
                          tensorTypeOf(user->getResult(0)).getElementType()))) {
            worklist.push_back(user->getResult(0));
          }
        }
      }
      if (bound > 0)
        function.setArgAttr(
            arg.getArgNumber(), WeftDialect::kIndexBoundAttrName,
            IntegerAttr::get(IntegerType::get(module.getContext(), 64), bound));
    }
  }
}

OwningOpRef<ModuleOp> weft::loadModel(const std::string &path,
                                      const std::vector<std::string> &dims,
                                      bool fuseIdioms, MLIRContext *context,
                                      std::string &error) {
  // Errors are captured; warnings go on to the caller's handler.
  std::string firstError;
  ScopedDiagnosticHandler handler(context, [&](Diagnostic &diagnostic) {
    if (diagnostic.getSeverity() != DiagnosticSeverity::Error)
      return failure();
    if (firstError.empty())
      firstError = formatDiagnostic(diagnostic);
    return success();
  });
  auto failed = [&](std::string message) {
    error = message.empty() ? "cannot load '" + path + "'" : std::move(message);
    return OwningOpRef<ModuleOp>();
  };
  OwningOpRef<ModuleOp> module;
  if (llvm::StringRef(path).ends_with(".mlir")) {
    module = parseSourceFile<ModuleOp>(path, context);
  } else {
    ONNXImportOptions options;
    std::string dimError;
    if (!options.bindDims(dims, dimError))
      return failed(dimError);
    module = importONNXFile(path, context, options);
  }
  if (!module)
    return failed(firstError);
  markIndexBounds(*module);
  if (fuseIdioms) {
    PassManager fuse(context);
    weft::guardPasses(fuse);
    buildFuseIdiomsPipeline(fuse);
    if (mlir::failed(fuse.run(*module)))
      return failed(firstError);
  }
  return module;
}

std::optional<weft::PlanResult> weft::planTraining(const PlanOptions &options,
                                                   std::string &error) {
  using namespace planner;
  if (options.nodes < 1) {
    error = "--nodes must be at least 1";
    return std::nullopt;
  }
  std::optional<Cluster> cluster =
      Cluster::load(options.cluster, options.nodes, error);
  if (!cluster) {
    error = "--cluster: " + error;
    return std::nullopt;
  }
  const PlanConstraints &constraints = options.constraints;

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  OwningOpRef<ModuleOp> module;
  int64_t modelLayers = 0;
  if (!options.synthetic.empty()) {
    std::optional<SyntheticModelSpec> spec =
        SyntheticModelSpec::parse(options.synthetic, error);
    if (!spec) {
      error = "--synthetic: " + error;
      return std::nullopt;
    }
    // Layers repeat: two are profiled and the plan is for all of them.
    modelLayers = spec->layers;
    spec->layers = std::min<int64_t>(spec->layers, 2);
    module = buildSyntheticModel(*spec, &context);
    if (!module) {
      error = "--synthetic: cannot build '" + options.synthetic + "'";
      return std::nullopt;
    }
  } else {
    module = loadModel(options.model, options.dims, /*fuseIdioms=*/true,
                       &context, error);
    if (!module) {
      error = options.model + ": " + error;
      return std::nullopt;
    }
  }

  // Tensor parallelism inside a node, or over two at most; tp=1 is always
  // profiled (it gives the model's own FLOPs). A pinned degree that does
  // not divide the cluster is left to the search to refuse.
  std::vector<int64_t> degrees = {1};
  if (constraints.tp && *constraints.tp > 1 &&
      cluster->gpus() % *constraints.tp == 0)
    degrees.push_back(*constraints.tp);
  for (int64_t tp = 2; !constraints.tp && tp <= 2 * cluster->gpusPerNode &&
                       tp <= cluster->gpus();
       tp *= 2)
    if (cluster->gpus() % tp == 0)
      degrees.push_back(tp);
  std::optional<ModelProfile> model =
      profileModel(*module, degrees, modelLayers, error);
  if (!model)
    return std::nullopt;

  TrainingSetup setup;
  setup.globalBatch = options.globalBatch ? options.globalBatch : model->batch;
  setup.mixedPrecision = options.mixedPrecision;
  SearchResult result = search(*model, *cluster, setup, constraints);
  return PlanResult{std::move(*model), std::move(*cluster), setup,
                    std::move(result)};
}
