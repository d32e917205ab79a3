//===- StepPhases.h - The parts of a micro-batched training step -*- C++
//-*-===//
//
// What weft-outline-microbatches and weft-pipeline-cut agree on about a
// training step derived with mark-phases: each op's phase, which ops are
// sources, run wherever and whenever they are needed, and how often an op
// of the loops they build runs.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_TRANSFORMS_STEPPHASES_H
#define WEFT_DIALECT_WEFT_TRANSFORMS_STEPPHASES_H

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"

namespace weft {

/// In the order they run: a backward's weight-gradient part (split off for
/// zero-bubble schedules) after its input-gradient part.
enum class StepPhase {
  Forward = 0,
  Backward = 1,
  BackwardWeight = 2,
  Update = 3
};

/// The phase `weft.phase` names ("forward", "backward", "backward-weight",
/// "update").
inline StepPhase parseStepPhase(llvm::StringRef name) {
  return name == "forward"           ? StepPhase::Forward
         : name == "backward"        ? StepPhase::Backward
         : name == "backward-weight" ? StepPhase::BackwardWeight
                                     : StepPhase::Update;
}

inline const char *stepPhaseName(StepPhase phase) {
  switch (phase) {
  case StepPhase::Forward:
    return "forward";
  case StepPhase::Backward:
    return "backward";
  case StepPhase::BackwardWeight:
    return "backward-weight";
  case StepPhase::Update:
    return "update";
  }
  return "update";
}

/// A source: a constant, or a slice, a view or an op the partitioner added
/// (it has no `weft.phase`: a ZeRO-3 gather) that reads only arguments and
/// sources (`isSource`). Sources belong to no stage.
inline bool isStepSource(mlir::Operation *op, llvm::ArrayRef<mlir::Value> reads,
                         llvm::function_ref<bool(mlir::Operation *)> isSource) {
  if (op->hasTrait<mlir::OpTrait::ConstantLike>())
    return true;
  bool movesData = mlir::isa<SliceOp, ReshapeOp>(op) ||
                   !op->hasAttr(WeftDialect::kPhaseAttrName);
  return movesData && llvm::all_of(reads, [&](mlir::Value v) {
           mlir::Operation *producer = v.getDefiningOp();
           return !producer || isSource(producer);
         });
}

/// How many times `op` runs per run of its function: each enclosing loop
/// with a constant trip count multiplies, and an op in a case of a pipeline
/// rank's schedule switch runs as often as the case (`weft.case_runs`),
/// whatever the length of the schedule loop around it.
int64_t runsPerCall(mlir::Operation *op);

/// How many times each function of `module` runs per run of the functions
/// nobody calls (the entry): the sum over its call sites of the runs of the
/// call (runsPerCall) times the runs of the caller; at least 1.
llvm::StringMap<int64_t> runsPerEntryCall(mlir::ModuleOp module);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_TRANSFORMS_STEPPHASES_H
