//===- FrontEnd.h - Models in, and the plans to train them ------*- C++ -*-===//
//
// The front end every tool shares: a model file (or a synthetic model) to
// weft IR, and the planner's search over it.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_COMPILER_FRONTEND_H
#define WEFT_COMPILER_FRONTEND_H

#include "weft/Planner/Planner.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <optional>
#include <string>
#include <vector>

namespace weft {

/// Imports `path` (.onnx, .onnxtxt, or weft IR in .mlir) with `dims`
/// ("batch=8") bound, then runs weft-fuse-idioms when `fuseIdioms`. On
/// failure `error` holds the first error, "message (at location)".
mlir::OwningOpRef<mlir::ModuleOp>
loadModel(const std::string &path, const std::vector<std::string> &dims,
          bool fuseIdioms, mlir::MLIRContext *context, std::string &error);

/// "message (at location)" on one line; the location is left out when
/// unknown.
std::string formatDiagnostic(mlir::Diagnostic &diagnostic);

struct PlanOptions {
  /// A model file, or a synthetic model ("gpt:layers=96,hidden=12288,...",
  /// see weft-translate --synthetic) when `synthetic` is set.
  std::string model;
  std::vector<std::string> dims;
  std::string synthetic;
  /// A preset or a JSON/YAML cluster file, and a preset's node count.
  std::string cluster;
  int64_t nodes = 1;
  /// Sequences per step; 0: the model's batch.
  int64_t globalBatch = 0;
  bool mixedPrecision = true;
  /// The choices pinned (PlanConstraints::parse reads "dp=2,pp=2"); the
  /// others are searched.
  planner::PlanConstraints constraints;
};

struct PlanResult {
  planner::ModelProfile model;
  planner::Cluster cluster;
  planner::TrainingSetup setup;
  /// May hold no plan that fits: planner::noPlanMessage says why.
  planner::SearchResult search;
};

/// Profiles the model's training step for each tensor-parallel degree worth
/// trying on the cluster (inside a node, or over two) and prices every plan.
/// Errors name the option they come from ("--cluster: ...").
std::optional<PlanResult> planTraining(const PlanOptions &options,
                                       std::string &error);

} // namespace weft

#endif // WEFT_COMPILER_FRONTEND_H
